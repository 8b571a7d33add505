require ["relational", "comparator-i;ascii-numeric"];
if header :value "gt" :comparator "i;ascii-numeric" "subject" "1000" { discard; }
