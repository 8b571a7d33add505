require "body";
if body :content "text/plain" :contains "green" { discard; }
