require "relational";
if header :value "lt" "subject" "N" { discard; }
