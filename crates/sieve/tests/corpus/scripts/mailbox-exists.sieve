require ["mailbox", "fileinto"];
if mailboxexists "INBOX" { fileinto "yes"; }
if mailboxexists ["INBOX", "Nope"] { fileinto "no"; }
