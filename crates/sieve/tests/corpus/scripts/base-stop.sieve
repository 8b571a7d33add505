if true { stop; }
discard;
