require "fileinto";
fileinto "A";
fileinto "A";
fileinto "INBOX";
keep;
