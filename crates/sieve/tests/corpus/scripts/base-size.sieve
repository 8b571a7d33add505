if size :over 1K { discard; }
if size :under 400 { redirect "small@example.net"; }
