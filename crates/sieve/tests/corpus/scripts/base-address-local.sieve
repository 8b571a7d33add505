if address :localpart :is "from" "mailer-daemon" { discard; }
