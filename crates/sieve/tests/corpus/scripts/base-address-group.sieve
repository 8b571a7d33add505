if address :is "to" "undisclosed-recipients" { discard; }
if address :contains "bcc" "bob" { redirect "bcc@example.net"; }
