redirect "once@example.net";
