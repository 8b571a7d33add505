#!/usr/bin/env bash
# Several Sluice nodes on one PostgreSQL, in one run: SMTP deliveries per
# second (4 KB, 1 recipient) on one node with SQLite, on one node with
# PostgreSQL and on two nodes sharing that PostgreSQL, the load split
# evenly between them; then how long a change takes to reach an IDLE
# session on the other node (idle-latency.py beside this script), and on
# the same node for comparison.
#
# Both nodes and the database run on this machine, so the two-node rows
# show the shape of scaling out (what the database allows), not what two
# machines would do. Needs root (PostgreSQL runs as its own user).
#
#   SLUICE=target/release/sluice bench/peers/nodes.sh
#
# Environment:
#   SLUICE       the sluice binary                   (default: sluice)
#   DURATION     seconds per SMTP run                (default: 20)
#   CONNECTIONS  SMTP connections of each row, in all (default: "10 50")
#   IDLE_COUNT   messages of the IDLE latency run    (default: 200)
#   OUT          directory kept for the JSON reports (default: none, temp)
set -euo pipefail

SLUICE=${SLUICE:-sluice}
DURATION=${DURATION:-20}
CONNECTIONS=${CONNECTIONS:-10 50}
IDLE_COUNT=${IDLE_COUNT:-200}
HERE=$(cd "$(dirname "$0")" && pwd)
DOMAIN=example.org
PASSWORD=password
USERS=20
PG_PORT=25433
PG_URL=postgres://sluice@127.0.0.1:$PG_PORT/sluice

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'nodes.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (PostgreSQL runs as its own user)"
PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$PG_BIN/postgres" ] || die "PostgreSQL is not installed: apt-get install postgresql-15"

T=$(mktemp -d /tmp/sluice-nodes.XXXXXX)
chmod 755 "$T"
cleanup() {
    set +e
    for n in sqlite a b; do
        [ -f "$T/$n/pid" ] && kill "$(cat "$T/$n/pid")" 2>/dev/null
    done
    sleep 1
    [ -f "$T/pg/data/postmaster.pid" ] && runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$T/pg/data" -m fast stop >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT INT TERM

wait_port() {
    for _ in $(seq 1 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    die "nothing listens on port $1"
}

# --- PostgreSQL ---------------------------------------------------------------
mkdir -p "$T/pg" && chown postgres:postgres "$T/pg"
runuser -u postgres -- "$PG_BIN/initdb" -D "$T/pg/data" -U sluice --auth=trust -E UTF8 \
    --locale=C.UTF-8 --no-instructions >/dev/null
runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$T/pg/data" -l "$T/pg/log" -w \
    -o "-p $PG_PORT -k $T/pg -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
"$PG_BIN/psql" -X -q -h 127.0.0.1 -p $PG_PORT -U sluice -d postgres -c "CREATE DATABASE sluice"

# --- nodes: sqlite (its own store), a and b (one PostgreSQL) -------------------
# NAME SMTP IMAP STORE_SECTION
node() {
    mkdir -p "$T/$1"
    cat >"$T/$1/sluice.toml" <<EOF
hostname = "$1.$DOMAIN"
data_dir = "$T/$1/data"
[listen]
smtp = "127.0.0.1:$2"
imap = "127.0.0.1:$3"
[auth_checks]
spf = "off"
dkim = "off"
dmarc = "off"
[log]
level = "warn"
$4
EOF
}
PG_SECTION=$'[store]\nbackend = "postgres"\nurl = "'"$PG_URL"'"'
node sqlite 24525 24143 ""
node a 24526 24144 "$PG_SECTION"
node b 24527 24145 "$PG_SECTION"
for n in sqlite a; do
    "$SLUICE" --config "$T/$n/sluice.toml" domain add "$DOMAIN" >/dev/null
    for i in $(seq 1 $USERS); do
        echo "$PASSWORD" | "$SLUICE" --config "$T/$n/sluice.toml" user add "user$i@$DOMAIN" --password-stdin >/dev/null
    done
done
start() { # NAME PORT
    "$SLUICE" serve --config "$T/$1/sluice.toml" >>"$T/$1/serve.log" 2>&1 &
    echo $! >"$T/$1/pid"
    wait_port "$2"
}
start sqlite 24525
start a 24526
start b 24527
log "sluice nodes: sqlite on 24525, a and b on PostgreSQL $PG_PORT"

# --- SMTP -----------------------------------------------------------------------
R="${OUT:-$T/reports}"
mkdir -p "$R"
smtp() { # NAME SERVER CONNECTIONS
    "$SLUICE" bench smtp --server "$2" --user-count $USERS --domain "$DOMAIN" --password "$PASSWORD" \
        --connections "$3" --size 4k --recipients 1 --duration "$DURATION" --json >"$R/$1.json"
}
for c in $CONNECTIONS; do
    log "SMTP, $c connections: one node on SQLite"
    smtp "sqlite-$c" 127.0.0.1:24525 "$c"
    log "SMTP, $c connections: one node on PostgreSQL"
    smtp "one-$c" 127.0.0.1:24526 "$c"
    log "SMTP, $c connections: two nodes on PostgreSQL, $((c / 2)) each"
    smtp "two-a-$c" 127.0.0.1:24526 "$((c / 2))" &
    first=$!
    smtp "two-b-$c" 127.0.0.1:24527 "$((c - c / 2))"
    wait "$first"
done

# --- IDLE -----------------------------------------------------------------------
log "IDLE latency: mail into node a, IDLE on node b"
python3 "$HERE/idle-latency.py" 127.0.0.1:24526 127.0.0.1:24145 "user1@$DOMAIN" "$PASSWORD" "$IDLE_COUNT" >"$R/idle-across.json"
log "IDLE latency: mail into node a, IDLE on node a"
python3 "$HERE/idle-latency.py" 127.0.0.1:24526 127.0.0.1:24144 "user2@$DOMAIN" "$PASSWORD" "$IDLE_COUNT" >"$R/idle-same.json"

python3 - "$R" "$CONNECTIONS" <<'EOF'
import json, os, sys
r, conns = sys.argv[1], sys.argv[2].split()
load = lambda n: json.load(open(os.path.join(r, n + ".json")))
rate = lambda n: load(n)["runs"][0]["accepted_per_s"]
print()
print("%-44s %10s %10s %10s" % ("SMTP 4 KB, 1 rcpt: accepted msgs/s", "sqlite", "pg 1 node", "pg 2 nodes"))
for c in conns:
    print("%-44s %10.0f %10.0f %10.0f" % ("%s connections" % c, rate("sqlite-" + c), rate("one-" + c),
                                          rate("two-a-" + c) + rate("two-b-" + c)))
print()
print("%-44s %8s %8s %8s %8s %7s" % ("IDLE: 250 to EXISTS, ms", "p50", "p90", "p99", "max", "missed"))
for name, what in (("idle-across", "other node (a -> b)"), ("idle-same", "same node (a -> a)")):
    x = load(name)
    print("%-44s %8.1f %8.1f %8.1f %8.1f %7d" % (what, x["p50_ms"], x["p90_ms"], x["p99_ms"], x["max_ms"], x["missed"]))
EOF
