if header :contains :comparator "i;octet" "subject" "urgent" { discard; }
if header :contains :comparator "i;octet" "subject" "URGENT" { redirect "x@example.net"; }
