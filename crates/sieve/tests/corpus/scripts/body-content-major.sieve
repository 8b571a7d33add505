require ["body", "fileinto"];
if body :content "text" :contains "42 EUR" { fileinto "Money"; }
