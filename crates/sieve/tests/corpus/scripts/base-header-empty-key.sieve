if header :contains "subject" "" { discard; }
