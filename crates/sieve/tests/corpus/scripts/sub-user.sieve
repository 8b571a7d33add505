require ["subaddress"];
if address :user :is "reply-to" "carol" { discard; }
