if allof (exists "from", anyof (header :contains "subject" "invoice", header :contains "subject" "digest")) { discard; }
