require ["include", "variables", "fileinto"];
global "folder";
fileinto "${folder}";
