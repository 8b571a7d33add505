require "vacation";
vacation :addresses ["dev@lists.example.org", "carol@example.net"] "Away.";
