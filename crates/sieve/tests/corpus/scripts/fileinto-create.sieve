require ["fileinto", "mailbox"];
fileinto :create "New/Sub";
