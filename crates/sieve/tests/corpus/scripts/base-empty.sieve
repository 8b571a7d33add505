# Nothing: implicit keep.
