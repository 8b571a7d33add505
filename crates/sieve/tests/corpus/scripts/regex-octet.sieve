require ["regex"];
if header :regex :comparator "i;octet" "subject" "urgent" { discard; }
