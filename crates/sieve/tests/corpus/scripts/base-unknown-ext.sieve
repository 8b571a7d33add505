require "x-nonesuch";
keep;
