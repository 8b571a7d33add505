require ["reject", "fileinto"];
fileinto "A";
reject "no";
