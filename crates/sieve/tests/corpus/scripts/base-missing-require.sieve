fileinto "Junk";
