require ["fileinto", "variables"];
if header :matches "subject" "[*] *" { fileinto "List-${1}"; }
