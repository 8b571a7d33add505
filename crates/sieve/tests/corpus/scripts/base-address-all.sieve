if address :is "from" "alice@example.org" { discard; }
