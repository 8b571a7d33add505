require ["index", "fileinto", "variables"];
if address :index 1 :matches "to" "*" { fileinto "first-${1}"; }
