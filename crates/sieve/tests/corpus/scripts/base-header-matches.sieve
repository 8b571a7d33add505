if header :matches "subject" "*down" { redirect "oncall@example.net"; }
