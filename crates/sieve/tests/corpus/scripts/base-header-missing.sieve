if header :matches "x-nonesuch" "*" { discard; }
