require ["include"];
include "nonesuch";
