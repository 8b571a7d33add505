require ["encoded-character", "fileinto"];
fileinto "${hex:4c 69 73 74 73}";
