require "vacation";
vacation "I am away until Monday.";
