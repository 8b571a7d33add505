if header :matches "x-priority" "?" { discard; }
