require ["include"];
include :once "redirect-once";
include :once "redirect-once";
