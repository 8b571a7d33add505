require ["fileinto", "variables"];
if header :matches "from" "*<*>" { set "addr" "${2}"; }
if header :is "subject" "nonesuch" { set "addr" "no"; }
fileinto "from-${addr}";
