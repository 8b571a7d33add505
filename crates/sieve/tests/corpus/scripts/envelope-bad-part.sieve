require "envelope";
if envelope :is "x-part" "a" { discard; }
