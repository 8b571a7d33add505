keep;
discard;
