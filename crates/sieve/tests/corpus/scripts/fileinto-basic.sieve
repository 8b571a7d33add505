require "fileinto";
if address :domain :is "from" "lists.example.org" { fileinto "Lists"; }
