/* a bracketed
   comment */ if true # hash comment
{ discard; }
