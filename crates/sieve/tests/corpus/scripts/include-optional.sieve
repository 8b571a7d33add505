require ["include"];
include :optional "nonesuch";
discard;
