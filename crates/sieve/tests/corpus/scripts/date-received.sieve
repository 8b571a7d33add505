require ["date", "fileinto", "variables", "index"];
if date :index 1 :last :zone "+0000" :matches "received" "time" "*" { fileinto "t${1}"; }
