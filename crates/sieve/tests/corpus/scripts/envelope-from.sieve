require "envelope";
if envelope :domain :is "from" "example.org" { discard; }
