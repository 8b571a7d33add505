if header :contains "subject" "urgent" {
  redirect "a@example.net";
} elsif header :contains "subject" "report" {
  redirect "b@example.net";
} else {
  redirect "c@example.net";
}
