#!/usr/bin/env bash
# The delivery rate as one mailbox and the store grow: STEPS batches of
# STEP messages (default 10 x 100,000: a million) sent with Postfix's
# smtp-source (10 sessions, 4 KB messages, one recipient) into one running
# Sluice, a line per batch with its rate, the bytes of write-ahead log
# written per byte of mail (the server's metrics), and the files' sizes.
#
# Usage: growth_rate.sh [STEP] [STEPS]
#   SLUICE=path/to/sluice (default: target/release/sluice)
#   KEEP=dir keeps the data directory there (it must not exist).
set -euo pipefail
step=${1:-100000}; steps=${2:-10}
sluice=${SLUICE:-target/release/sluice}
port=${PORT:-2627}; metrics=${METRICS_PORT:-9627}
dir=${KEEP:-$(mktemp -d)}
mkdir -p "$dir"
trap 'kill $pid 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
cat >"$dir/sluice.toml" <<EOT
hostname = "mx.test"
data_dir = "$dir/data"
[listen]
smtp = "127.0.0.1:$port"
metrics = "127.0.0.1:$metrics"
[smtp]
max_connections_per_ip = 100
[sieve]
enabled = false
[spam]
enabled = false
[log]
level = "warn"
EOT
s() { "$sluice" --config "$dir/sluice.toml" "$@"; }
s domain add example.org >/dev/null
echo pw | s user add u@example.org --password-stdin >/dev/null
"$sluice" --config "$dir/sluice.toml" serve 2>"$dir/log" & pid=$!
for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done

# A counter from the metrics page as an integer (0 before its first
# sample; large ones are printed with an exponent).
metric() {
  curl -s "http://127.0.0.1:$metrics/metrics" | awk -v m="$1" '$1 == m { v = $2 } END { printf "%.0f\n", v }'
}
mb() { [ -e "$1" ] && echo "scale=1; $(stat -c %s "$1") / 1000000" | bc || echo 0; }

# smtp-source -l 4096 sends 4,096 bytes of body plus its header fields.
mail_bytes=$(( 4096 + 200 ))
printf '%9s %8s %10s %12s %9s %8s %8s %9s %10s\n' messages msgs/s "WAL B/B" "index WAL B/B" "DB MB" "WAL MB" "fts MB" "dir MiB" "dir B/msg"
total=0
for i in $(seq "$steps"); do
  wal0=$(metric sluice_store_wal_bytes_total); iwal0=$(metric sluice_store_index_wal_bytes_total)
  start=$(date +%s.%N)
  smtp-source -s 10 -l 4096 -m "$step" -t u@example.org "127.0.0.1:$port"
  end=$(date +%s.%N)
  total=$(( total + step ))
  wal1=$(metric sluice_store_wal_bytes_total); iwal1=$(metric sluice_store_index_wal_bytes_total)
  dir_bytes=$(du -sb "$dir/data" | cut -f1)
  printf '%9d %8.0f %10.2f %12.2f %9s %8s %8s %9.1f %10.0f\n' "$total" \
    "$(echo "$step / ($end - $start)" | bc -l)" \
    "$(echo "($wal1 - $wal0) / ($step * $mail_bytes)" | bc -l)" \
    "$(echo "($iwal1 - $iwal0) / ($step * $mail_bytes)" | bc -l)" \
    "$(mb "$dir/data/sluice.db")" "$(mb "$dir/data/sluice.db-wal")" "$(mb "$dir/data/fts.db")" \
    "$(echo "$dir_bytes / 1048576" | bc -l)" "$(echo "$dir_bytes / $total" | bc -l)"
done
