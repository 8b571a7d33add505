if header :is "subject" { discard; }
