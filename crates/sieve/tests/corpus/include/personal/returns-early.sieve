require ["include", "fileinto"];
if true { fileinto "inc"; return; }
fileinto "not-reached";
