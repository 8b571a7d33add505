require "body";
if body :raw :contains "=20Friday" { discard; }
