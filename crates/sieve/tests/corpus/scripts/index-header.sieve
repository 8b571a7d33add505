require ["index", "fileinto"];
if header :index 2 :is "x-num" "9" { fileinto "second"; }
if header :index 1 :last :is "received" "x" { discard; }
