require "vacation";
vacation :handle "h1" :subject "Re: your mail" "Away.";
