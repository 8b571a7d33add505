require "vacation";
discard;
vacation "Away.";
