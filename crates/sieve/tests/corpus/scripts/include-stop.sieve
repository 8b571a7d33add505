require ["include", "fileinto"];
include "stops";
fileinto "never";
