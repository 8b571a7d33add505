require ["imap4flags", "fileinto"];
addflag "\\Seen";
fileinto "Read";
removeflag "\\Seen";
fileinto :flags "\\Answered a b" "Other";
