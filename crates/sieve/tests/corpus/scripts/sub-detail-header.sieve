require ["subaddress"];
if address :detail :is "reply-to" "replies" { redirect "r@example.net"; }
