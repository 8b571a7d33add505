require ["fileinto", "copy"];
fileinto :copy "Archive";
redirect :copy "backup@example.net";
