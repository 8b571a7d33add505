require ["date", "fileinto", "variables"];
if date :originalzone :matches "date" "zone" "*" { fileinto "z${1}"; }
