require "vacation-seconds";
vacation :seconds 600 "Back in ten minutes.";
