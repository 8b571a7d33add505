if header :contains ["subject", "x-tags"] ["report", "beta"] { discard; }
