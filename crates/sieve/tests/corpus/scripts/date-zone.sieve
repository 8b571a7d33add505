require ["date", "fileinto", "variables"];
if date :zone "+0000" :matches "date" "iso8601" "*" { fileinto "${1}"; }
