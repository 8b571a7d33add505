require "body";
if body :text :contains "invoice" { discard; }
