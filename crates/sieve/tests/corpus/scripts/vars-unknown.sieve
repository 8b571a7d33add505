require ["fileinto", "variables"];
fileinto "box${nonesuch}";
