#!/usr/bin/env bash
# Deliveries per second into a fresh Sluice, measured with Postfix's
# smtp-source (apt-get install postfix): 10 sessions, 4 KB messages.
#
# Usage: delivery_rate.sh GROUP_COMMIT(true|false) RECIPIENTS MESSAGES
#   SLUICE=path/to/sluice (default: target/release/sluice)
#   FILTERS=off|on|trained (default on): `off` turns Sieve and the spam
#   classifier off; `on` leaves the defaults (classifier on, no model
#   trained); `trained` trains the global model with 200 spam and 200 good
#   messages first and gives every recipient a Sieve script, so each
#   delivery is scored and filtered.
set -euo pipefail
gc=$1; rcpts=$2; messages=$3
sluice=${SLUICE:-target/release/sluice}
filters=${FILTERS:-on}
port=${PORT:-2626}
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
cat >"$dir/sluice.toml" <<EOT
hostname = "mx.test"
data_dir = "$dir/data"
[listen]
smtp = "127.0.0.1:$port"
[store]
group_commit = $gc
[smtp]
max_connections_per_ip = 100
[log]
level = "warn"
EOT
if [ "$filters" = off ]; then
  printf '[sieve]\nenabled = false\n[spam]\nenabled = false\n' >>"$dir/sluice.toml"
fi
s() { "$sluice" --config "$dir/sluice.toml" "$@"; }
s domain add example.org
# smtp-source -r N sends to 1u@, 2u@, ... Nu@ (and u@ for one recipient).
for u in u $(seq 0 "$rcpts" | sed 's/$/u/'); do echo pw | s user add "$u@example.org" --password-stdin; done
if [ "$filters" = trained ]; then
  python3 - "$dir" <<'PY'
import os, random, sys
spam = "viagra cheap pills winner lottery claim prize casino bonus discount pharmacy million urgent wire".split()
ham = "meeting agenda project report schedule review quarterly budget team lunch deadline draft minutes notes".split()
r = random.Random(1)
for name, words in (("spam", spam), ("ham", ham)):
    os.makedirs(f"{sys.argv[1]}/{name}")
    for i in range(200):
        body = " ".join(r.choice(words) for _ in range(200))
        open(f"{sys.argv[1]}/{name}/{i}.eml", "w").write(f"Subject: {r.choice(words)}\n\n{body}\n")
PY
  s spam train --spam --global "$dir/spam" >/dev/null
  s spam train --ham --global "$dir/ham" >/dev/null
  printf 'require ["fileinto", "imap4flags"];\nif header :contains "subject" "lottery" { fileinto "Junk"; }\nelsif size :over 1M { addflag "\\\\Flagged"; }\n' >"$dir/script.sieve"
  for u in u $(seq 0 "$rcpts" | sed 's/$/u/'); do
    s sieve put "$u@example.org" main "$dir/script.sieve" >/dev/null
    s sieve activate "$u@example.org" main >/dev/null
  done
fi
"$sluice" --config "$dir/sluice.toml" serve 2>"$dir/log" & pid=$!
for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
start=$(date +%s.%N)
smtp-source -s 10 -l 4096 -m "$messages" -r "$rcpts" -t u@example.org "127.0.0.1:$port"
end=$(date +%s.%N)
kill -TERM $pid; wait $pid || true
python3 - "$dir/data/sluice.db" "$start" "$end" "$gc" "$rcpts" <<'PY'
import sqlite3, sys
db, start, end, gc, rcpts = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
c = sqlite3.connect(db)
blobs = c.execute("select count(*) from blobs").fetchone()[0]
entries = c.execute("select count(*) from messages").fetchone()[0]
secs = end - start
print(f"group_commit={gc} rcpts={rcpts} messages={blobs} entries={entries} secs={secs:.2f} "
      f"msgs_per_sec={blobs / secs:.0f} deliveries_per_sec={entries / secs:.0f}")
PY
