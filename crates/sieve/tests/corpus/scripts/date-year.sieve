require ["date", "fileinto", "variables"];
if date :matches "date" "year" "*" { fileinto "Y${1}"; }
