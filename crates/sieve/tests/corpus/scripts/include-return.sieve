require ["include", "fileinto"];
include "returns-early";
fileinto "main";
