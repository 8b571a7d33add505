require ["fileinto", "variables"];
set :quotewildcard "q" "*green*";
if header :matches "subject" "*${q}" { fileinto "quoted"; }
