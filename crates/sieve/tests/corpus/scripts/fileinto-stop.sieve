require "fileinto";
if header :contains "subject" "meeting" { fileinto "Work"; stop; }
fileinto "Other";
