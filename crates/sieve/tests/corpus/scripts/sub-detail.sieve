require ["subaddress", "fileinto", "variables", "envelope"];
if envelope :detail :matches "to" "*" { fileinto "plus-${1}"; }
