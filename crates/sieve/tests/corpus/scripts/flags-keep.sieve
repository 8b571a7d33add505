require "imap4flags";
if header :contains "subject" "urgent" { addflag "\\Flagged"; }
keep :flags "\\Seen";
