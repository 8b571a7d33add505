require ["regex", "fileinto"];
if header :regex "subject" "^\\[[a-z]+\\]" { fileinto "Tagged"; }
