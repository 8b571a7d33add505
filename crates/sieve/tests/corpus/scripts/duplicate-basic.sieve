require ["duplicate", "fileinto"];
if duplicate { fileinto "Dup"; }
