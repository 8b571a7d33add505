require ["date", "fileinto", "variables"];
if date :originalzone :matches "date" "julian" "*" { fileinto "mjd${1}"; }
