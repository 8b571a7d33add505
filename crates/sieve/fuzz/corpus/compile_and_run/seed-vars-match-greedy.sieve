require ["fileinto", "variables"];
if address :matches "from" "*@*.*" { fileinto "${2}-${3}-${1}"; }
