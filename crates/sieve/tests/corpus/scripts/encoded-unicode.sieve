require ["encoded-character"];
if header :contains "subject" "${unicode:0052}eport" { discard; }
