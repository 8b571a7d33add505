require ["date", "fileinto", "variables"];
if date :zone "+0100" :matches "date" "weekday" "*" { fileinto "wd${1}"; }
