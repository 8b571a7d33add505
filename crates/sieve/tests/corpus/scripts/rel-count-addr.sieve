require ["relational", "comparator-i;ascii-numeric"];
if address :count "eq" :comparator "i;ascii-numeric" ["to", "cc"] "3" { discard; }
