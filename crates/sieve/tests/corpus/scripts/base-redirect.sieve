redirect "archive@example.net";
