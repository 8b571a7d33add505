require ["relational", "comparator-i;ascii-numeric"];
if header :value "ne" :comparator "i;ascii-numeric" "x-priority" "1" { discard; }
