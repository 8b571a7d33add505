if header :is "subject" "Meeting tomorrow" { discard; }
