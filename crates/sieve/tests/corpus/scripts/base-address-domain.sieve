if address :domain :is ["to", "cc"] "example.net" { redirect "net@example.net"; }
