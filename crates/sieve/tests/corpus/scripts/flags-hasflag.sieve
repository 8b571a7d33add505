require "imap4flags";
addflag "urgent";
if hasflag :contains "urg" { addflag "seen-urgent"; }
if hasflag :is "nope" { discard; }
