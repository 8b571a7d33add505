require "reject";
if header :contains "subject" "digest" {
  reject text:
No digests, please.
..leading dot
.
;
}
