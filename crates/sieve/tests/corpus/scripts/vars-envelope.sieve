require ["fileinto", "variables", "envelope"];
if envelope :matches "from" "*@*" { fileinto "env-${2}"; }
