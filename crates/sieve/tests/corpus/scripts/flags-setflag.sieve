require "imap4flags";
setflag "\\Seen";
addflag ["\\Flagged", "$Work"];
removeflag "\\seen";
