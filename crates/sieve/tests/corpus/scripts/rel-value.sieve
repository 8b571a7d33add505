require ["relational", "comparator-i;ascii-numeric"];
if header :value "gt" :comparator "i;ascii-numeric" "x-num" "9" { discard; }
