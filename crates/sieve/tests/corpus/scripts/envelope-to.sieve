require "envelope";
if envelope :localpart :contains "to" "work" { redirect "work@example.net"; }
