require ["fileinto", "variables"];
set "Name" "value";
fileinto "${NAME}";
