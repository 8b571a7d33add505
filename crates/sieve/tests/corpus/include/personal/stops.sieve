require ["fileinto"];
fileinto "inc-stop";
stop;
