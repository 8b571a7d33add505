require "vacation";
vacation "one";
vacation "two";
