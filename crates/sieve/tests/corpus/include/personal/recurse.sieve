require ["include"];
include "recurse";
