if header :matches "subject" "*\\*green\\*" { discard; }
