require "body";
if body :matches "*server*down*" { redirect "ops@example.net"; }
