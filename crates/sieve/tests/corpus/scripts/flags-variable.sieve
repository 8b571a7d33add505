require ["imap4flags", "variables"];
setflag "mine" "a b";
addflag "mine" "c";
removeflag "mine" "a";
if hasflag "mine" "c" { keep :flags "${mine}"; }
