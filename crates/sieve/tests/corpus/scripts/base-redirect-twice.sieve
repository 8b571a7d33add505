redirect "archive@example.net";
redirect "ARCHIVE@example.net";
