require "relational";
if header :count "ge" :comparator "i;ascii-numeric" "received" "2" { discard; }
