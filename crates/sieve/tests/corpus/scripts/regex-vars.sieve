require ["regex", "fileinto", "variables"];
if header :regex "subject" "^([A-Z]+): (.*)$" { fileinto "${1}"; }
