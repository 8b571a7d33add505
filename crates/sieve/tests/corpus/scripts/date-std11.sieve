require ["date", "fileinto", "variables"];
if date :zone "-0500" :matches "date" "std11" "*" { set :lower "d" "${1}"; fileinto "${d}"; }
