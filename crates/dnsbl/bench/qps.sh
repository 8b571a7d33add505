#!/usr/bin/env bash
# Queries per second on loopback: our DNSBL server next to rbldnsd, same
# list, same query files, measured with dnsperf, one after the other.
#
# Needs: apt-get install rbldnsd dnsperf dnsutils
# Usage: bench/qps.sh [SECONDS_PER_RUN] [ROUNDS]   (run from crates/dnsbl)
set -euo pipefail
secs=${1:-4}
rounds=${2:-5}
target=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
dir=$(mktemp -d /tmp/dnsbl-qps.XXXXXX)
chmod 755 "$dir"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

cargo build --release -q -p sluice-dnsbl --example replay
cargo build --release -q -p sluice
"$target/release/examples/replay" --out "$dir" >"$dir/replay.txt"
chmod 644 "$dir"/*

free_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() {
  for _ in $(seq 100); do
    dig +time=1 +tries=1 @127.0.0.1 -p "$1" bl.test SOA >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "server on port $1 did not come up" >&2; return 1
}

ours=$(free_port)
"$target/release/sluice" dnsbl serve --listen "127.0.0.1:$ours" --zone "bl.test=$dir/bl.list" >"$dir/ours.log" 2>&1 &
pids+=($!)
theirs=$(free_port)
rbldnsd -n -u nobody -b "127.0.0.1/$theirs" -c 0 bl.test:ip4set:"$dir/bl.list" >"$dir/rbldnsd.log" 2>&1 &
pids+=($!)
wait_up "$ours"; wait_up "$theirs"

# Alternate the servers round by round and report medians: the machine is
# shared, so a single run of each says little.
qps() { dnsperf -s 127.0.0.1 -p "$1" -d "$2" -l "$secs" -c 4 -q 100 2>&1 | awk '/Queries per second/ {print int($4)}'; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >"$dir/theirs.a"; : >"$dir/ours.a"; : >"$dir/ours.aaaa"
for r in $(seq "$rounds"); do
  qps "$theirs" "$dir/queries-a.txt" >>"$dir/theirs.a"
  qps "$ours" "$dir/queries-a.txt" >>"$dir/ours.a"
  qps "$ours" "$dir/queries-aaaa.txt" >>"$dir/ours.aaaa"
done
echo "queries per second on loopback: dnsperf -l $secs -c 4 -q 100, $rounds rounds, median (all rounds)"
echo "(2 cores, shared with dnsperf; list: $(wc -l <"$dir/bl.list") lines from the replay workload)"
printf '  %-28s %8s   (%s)\n' "rbldnsd, classic A" "$(median <"$dir/theirs.a")" "$(tr '\n' ' ' <"$dir/theirs.a")"
printf '  %-28s %8s   (%s)\n' "sluice dnsbl, classic A" "$(median <"$dir/ours.a")" "$(tr '\n' ' ' <"$dir/ours.a")"
printf '  %-28s %8s   (%s)\n' "sluice dnsbl, bitmap AAAA" "$(median <"$dir/ours.aaaa")" "$(tr '\n' ' ' <"$dir/ours.aaaa")"
rm -rf "$dir"
