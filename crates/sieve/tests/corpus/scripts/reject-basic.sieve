require "reject";
if address :localpart :is "from" "mailer-daemon" { reject "no bounces"; }
