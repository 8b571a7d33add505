require ["regex"];
if address :regex :domain "from" "example\\.(org|net)$" { discard; }
