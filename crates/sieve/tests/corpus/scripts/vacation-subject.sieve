require "vacation";
vacation :days 3 :subject "Out of office" :from "bob@example.com" "Back soon.";
