require ["date", "relational"];
if date :value "ge" :originalzone "date" "date" "2024-03-01" { discard; }
