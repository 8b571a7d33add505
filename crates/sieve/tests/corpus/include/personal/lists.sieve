require ["fileinto"];
if exists "list-id" { fileinto "Lists"; }
