if not exists "x-num" { discard; }
