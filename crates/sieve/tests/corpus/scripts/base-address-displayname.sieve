if address :contains "from" "Billing" { discard; }
