require ["date", "relational"];
if currentdate :value "ge" "year" "2020" { discard; }
