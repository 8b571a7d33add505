require ["include", "fileinto"];
include "lists";
fileinto "after";
