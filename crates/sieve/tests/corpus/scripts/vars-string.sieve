require ["variables", "relational"];
set "x" "";
if string :count "eq" ["${x}", "a", "b"] "2" { discard; }
