require "fileinto";
fileinto "${hex:41}";
