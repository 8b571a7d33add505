require "reject";
discard;
reject "go away";
