if exists "list-id" { discard; }
if exists ["x-priority", "reply-to"] { redirect "p@example.net"; }
