require "vacation";
vacation :days 0 "Away.";
