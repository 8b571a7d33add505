require ["fileinto", "variables"];
set :upperfirst :lower "a" "hELLO";
set :length "n" "${a}";
set :upper "b" "${a}${n}";
fileinto "${b}";
