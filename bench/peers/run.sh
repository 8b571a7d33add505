#!/usr/bin/env bash
# Side-by-side benchmark: Sluice against Postfix + Dovecot on this machine,
# in one run, with the same `sluice bench` workloads, printing a ratio table.
#
# Installs Postfix and Dovecot from Debian when missing, runs everything on
# loopback ports from configs in a temp directory (the system's /etc/postfix
# and /etc/dovecot are not touched), and stops every daemon and removes the
# temp directory when it exits, however it exits. Needs root (packages,
# mail owned by the `mail` user).
#
#   bench/peers/run.sh                  # everything, default sizes
#   QUICK=1 bench/peers/run.sh          # short runs, small IMAP mailbox
#
# Environment:
#   SLUICE        the sluice binary                      (default: sluice)
#   BENCH         the bench command                      (default: "$SLUICE bench")
#   DURATION      seconds per SMTP run                   (default: 20; QUICK: 5)
#   POP3_FILL     messages per account before POP3       (default: 200; QUICK: 50)
#   IMAP_MESSAGES messages in the IMAP mailbox           (default: 21282; QUICK: 1046)
#   USERS         SMTP accounts user1..userN@example.org (default: 20), and as
#                 many POP3 accounts pop1..popN; IMAP uses imap1
#   OPEN_RATE     legitimate sessions/s of the open-model goodput sweep (100)
#   SAT_RATE      legitimate sessions/s of the saturated sweep (default: 90%
#                 of what Sluice accepted per second in the closed 1-rcpt run)
#   OUT           directory kept for the JSON reports    (default: none, temp)
#   IMAP_CLIENTS  clients of the long-session IMAP mix    (default: 10)
#   SLUICE_IMAP   1: give Sluice an IMAP listener and run the IMAP requests
#                 on it too, cold by restarting it
#   DOVECOT_FTS   xapian: give Dovecot a full-text index (fts-xapian, every
#                 substring of 3-20 letters of a word), built right after
#                 the IMAP load; the fair peer for SEARCH TEXT and BODY
#   SLUICE_STORE  postgres: Sluice keeps its store in a PostgreSQL server of
#                 its own (initdb in the temp tree, port 25432), not SQLite;
#                 both: SQLite, and right after the IMAP load the store is
#                 copied into that PostgreSQL with `sluice migrate`, the copy
#                 is compared with the original over IMAP, message by
#                 message (imap-compare.py beside this script); then the
#                 IMAP requests and mixes run on PostgreSQL too, served by
#                 a second Sluice (rows marked [PostgreSQL]; the requests
#                 load the mailbox again, as on SQLite)
#   ROWS          which rows to run, of "smtp pop3 imap web outbound"
#                 (default: all; outbound runs outbound.sh beside this
#                 script, relaying to smtp-sink, and prints its own table)
#   WEB           0: skip the webmail rows (Sluice's webmail against
#                 Roundcube 1.6 from Debian on the peers' Dovecot and
#                 Postfix, set up by roundcube.sh beside this script)
#   WEB_USERS     webmail users, each with its own account (default: 10)
#   WEB_FILL      messages of 1-120 KB in each webmail inbox (default: 30)
#   WEB_RATE      requests/s per user of the open-model webmail run (100)
#   WEB_EASY_RATE requests/s per user of a second open-model run that
#                 neither side should saturate, so its p99 is service
#                 time, not queueing (default: 1)
set -euo pipefail

QUICK=${QUICK:-}
SLUICE=${SLUICE:-sluice}
BENCH=${BENCH:-"$SLUICE bench"}
DURATION=${DURATION:-$([ -n "$QUICK" ] && echo 5 || echo 20)}
POP3_FILL=${POP3_FILL:-$([ -n "$QUICK" ] && echo 50 || echo 200)}
IMAP_MESSAGES=${IMAP_MESSAGES:-$([ -n "$QUICK" ] && echo 1046 || echo 21282)}
USERS=${USERS:-20}
OPEN_RATE=${OPEN_RATE:-100}
IMAP_CLIENTS=${IMAP_CLIENTS:-10}
WEB=${WEB:-1}
ROWS=${ROWS:-smtp pop3 imap web outbound}
[ "$WEB" = 1 ] || ROWS=${ROWS//web/}
want() { [[ " $ROWS " == *" $1 "* ]]; }
want web && WEB=1 || WEB=0
WEB_USERS=${WEB_USERS:-10}
WEB_FILL=${WEB_FILL:-30}
WEB_RATE=${WEB_RATE:-100}
WEB_EASY_RATE=${WEB_EASY_RATE:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
DOMAIN=example.org
PASSWORD=password

# Loopback ports, away from the usual ones.
S_SMTP=22525 S_POP3=22110 S_IMAP=22143 S_HTTP=22080 S_IMAP_PG=22144
P_SMTP=23525 D_POP3=23110 D_IMAP=23143 R_HTTP=23080

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'run.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (installs packages, runs daemons)"
command -v "${SLUICE%% *}" >/dev/null 2>&1 || [ -x "${SLUICE%% *}" ] || die "no sluice binary: set SLUICE"

for port in $S_SMTP $S_POP3 $S_IMAP $S_HTTP $S_IMAP_PG $P_SMTP $D_POP3 $D_IMAP $R_HTTP; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "port $port is in use"
    fi
done

# --- packages ---------------------------------------------------------------
need=()
command -v postfix >/dev/null || need+=(postfix)
command -v dovecot >/dev/null || need+=(dovecot-core)
[ -e /usr/lib/dovecot/imap ] || need+=(dovecot-imapd)
[ -e /usr/lib/dovecot/pop3 ] || need+=(dovecot-pop3d)
[ -e /usr/lib/dovecot/lmtp ] || need+=(dovecot-lmtpd)
if [ "${DOVECOT_FTS:-}" = xapian ]; then
    [ -e /usr/lib/dovecot/modules/lib21_fts_xapian_plugin.so ] || need+=(dovecot-fts-xapian)
fi
command -v python3 >/dev/null || need+=(python3)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    echo "postfix postfix/main_mailer_type select Local only" | debconf-set-selections
    echo "postfix postfix/mailname string localhost" | debconf-set-selections
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi

# --- temp tree and cleanup --------------------------------------------------
T=$(mktemp -d /tmp/sluice-peers.XXXXXX)
chmod 755 "$T"
SLUICE_PID=
cleanup() {
    set +e
    [ -f "$T/sluice/pid" ] && SLUICE_PID=$(cat "$T/sluice/pid")
    if [ -n "$SLUICE_PID" ]; then
        kill "$SLUICE_PID" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$SLUICE_PID" 2>/dev/null || break; sleep 0.2; done
    fi
    if [ -f "$T/sluice-pg/pid" ]; then
        kill "$(cat "$T/sluice-pg/pid")" 2>/dev/null
        sleep 1
    fi
    [ -d "$T/rc" ] && "$HERE/roundcube.sh" stop "$T/rc"
    [ -f "$T/pg/data/postmaster.pid" ] && runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$T/pg/data" -m fast stop >/dev/null 2>&1
    local pids=
    pids="$(cat "$T/pf/queue/pid/master.pid" "$T/dovecot-run/master.pid" 2>/dev/null | tr -s ' \n' ' ')"
    [ -f "$T/pf/main.cf" ] && postfix -c "$T/pf" stop >/dev/null 2>&1
    [ -f "$T/dovecot.conf" ] && doveadm -c "$T/dovecot.conf" stop >/dev/null 2>&1
    # Wait for the masters (by their pid files) to finish their shutdown
    # before removing their files.
    for pid in $pids; do
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -9 "$pid" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT INT TERM

# --- PostgreSQL, when Sluice's store is there ------------------------------
STORE_SECTION=
SLUICE_STORE=${SLUICE_STORE:-sqlite}
case $SLUICE_STORE in sqlite|postgres|both) ;; *) die "SLUICE_STORE is sqlite, postgres or both, not $SLUICE_STORE" ;; esac
PG_URL=postgres://sluice@127.0.0.1:25432/sluice
if [ "$SLUICE_STORE" != sqlite ]; then
    PG_BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
    [ -x "$PG_BIN/postgres" ] || die "PostgreSQL is not installed: apt-get install postgresql-15"
    mkdir -p "$T/pg" && chown postgres:postgres "$T/pg"
    runuser -u postgres -- "$PG_BIN/initdb" -D "$T/pg/data" -U sluice --auth=trust -E UTF8 \
        --locale=C.UTF-8 --no-instructions >/dev/null
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$T/pg/data" -l "$T/pg/log" -w \
        -o "-p 25432 -k $T/pg -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null
    "$PG_BIN/psql" -X -q -h 127.0.0.1 -p 25432 -U sluice -d postgres -c "CREATE DATABASE sluice"
    [ "$SLUICE_STORE" = postgres ] && STORE_SECTION=$'[store]\nbackend = "postgres"\nurl = "'"$PG_URL"'"'
    log "postgresql on 25432 for the store of sluice"
fi

# --- Sluice -----------------------------------------------------------------
mkdir -p "$T/sluice"
cat >"$T/sluice/sluice.toml" <<EOF
hostname = "mx.$DOMAIN"
data_dir = "$T/sluice/data"
[listen]
smtp = "127.0.0.1:$S_SMTP"
pop3 = "127.0.0.1:$S_POP3"
$([ "${SLUICE_IMAP:-}" = 1 ] && echo "imap = \"127.0.0.1:$S_IMAP\"" || true)
$([ "$WEB" = 1 ] && echo "http = \"127.0.0.1:$S_HTTP\"" || true)
# Postfix here checks no SPF, DKIM or DMARC either: the same work on both
# sides.
[auth_checks]
spf = "off"
dkim = "off"
dmarc = "off"
[log]
level = "warn"
$STORE_SECTION
EOF
sl() { $SLUICE --config "$T/sluice/sluice.toml" "$@"; }
ACCOUNTS=$(for i in $(seq 1 "$USERS"); do echo "user$i@$DOMAIN pop$i@$DOMAIN"; done; echo "imap1@$DOMAIN"
    [ "$WEB" = 1 ] && for i in $(seq 1 "$WEB_USERS"); do echo "web$i@$DOMAIN"; done || true)
sl domain add "$DOMAIN" >/dev/null
for a in $ACCOUNTS; do
    echo "$PASSWORD" | sl user add "$a" --password-stdin >/dev/null
done
start_sluice() {
    $SLUICE serve --config "$T/sluice/sluice.toml" >>"$T/sluice/serve.log" 2>&1 &
    SLUICE_PID=$!
    wait_port $S_SMTP && wait_port $S_POP3
    echo "$SLUICE_PID" >"$T/sluice/pid"
}
stop_pid_file() { # FILE: stops the process it names and waits for it
    local pid
    pid=$(cat "$1")
    kill "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    rm -f "$1"
}
stop_sluice() { stop_pid_file "$T/sluice/pid"; SLUICE_PID=; }
# SLUICE_STORE=both: a second node, IMAP only, on the PostgreSQL copy.
start_sluice_pg() {
    mkdir -p "$T/sluice-pg"
    cat >"$T/sluice-pg/sluice.toml" <<EOF
hostname = "mx.$DOMAIN"
data_dir = "$T/sluice-pg/data"
[listen]
imap = "127.0.0.1:$S_IMAP_PG"
[log]
level = "warn"
[store]
backend = "postgres"
url = "$PG_URL"
EOF
    $SLUICE serve --config "$T/sluice-pg/sluice.toml" >>"$T/sluice-pg/serve.log" 2>&1 &
    echo $! >"$T/sluice-pg/pid"
    wait_port $S_IMAP_PG
}
stop_sluice_pg() { stop_pid_file "$T/sluice-pg/pid"; }

wait_port() {
    for _ in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    die "nothing listens on port $1"
}
start_sluice
log "sluice on smtp $S_SMTP, pop3 $S_POP3"

# --- Dovecot (IMAP, POP3, LMTP) ---------------------------------------------
mkdir -p "$T/mail"
chown mail:mail "$T/mail"
: >"$T/passwd"
for a in $ACCOUNTS; do
    echo "$a:{PLAIN}$PASSWORD:8:8::$T/mail/$a::" >>"$T/passwd"
done
cat >"$T/dovecot.conf" <<EOF
base_dir = $T/dovecot-run
state_dir = $T/dovecot-state
log_path = $T/dovecot.log
protocols = imap pop3 lmtp
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:$T/mail/%u
mail_uid = mail
mail_gid = mail
first_valid_uid = 8
first_valid_gid = 8
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u $T/passwd
}
userdb {
  driver = passwd-file
  args = username_format=%u $T/passwd
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = $D_IMAP
  }
  inet_listener imaps {
    port = 0
  }
}
service pop3-login {
  inet_listener pop3 {
    address = 127.0.0.1
    port = $D_POP3
  }
  inet_listener pop3s {
    port = 0
  }
}
service lmtp {
  unix_listener $T/lmtp {
    mode = 0666
  }
}
EOF
if [ "${DOVECOT_FTS:-}" = xapian ]; then
    cat >>"$T/dovecot.conf" <<EOF
mail_plugins = \$mail_plugins fts fts_xapian
plugin {
  fts = xapian
  fts_xapian = partial=3 full=20 verbose=0
  fts_autoindex = yes
  fts_enforced = yes
}
EOF
fi
dovecot -c "$T/dovecot.conf" >"$T/dovecot.out" 2>&1
wait_port $D_IMAP && wait_port $D_POP3
log "dovecot on imap $D_IMAP, pop3 $D_POP3, lmtp $T/lmtp"

# --- Postfix -> Dovecot LMTP -> Maildir -------------------------------------
mkdir -p "$T/pf/queue" "$T/pf/data"
chown postfix "$T/pf/data"
: >"$T/pf/vmailbox"
for a in $ACCOUNTS; do echo "$a OK" >>"$T/pf/vmailbox"; done
cat >"$T/pf/main.cf" <<EOF
compatibility_level = 3.6
queue_directory = $T/pf/queue
data_directory = $T/pf/data
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = mx.$DOMAIN
mydestination =
mynetworks = 127.0.0.0/8
local_recipient_maps =
virtual_mailbox_domains = $DOMAIN
virtual_mailbox_maps = texthash:$T/pf/vmailbox
virtual_transport = lmtp:unix:$T/lmtp
default_transport = error
relay_transport = error
disable_dns_lookups = yes
smtpd_recipient_restrictions = permit_mynetworks, reject_unauth_destination
smtpd_client_connection_count_limit = 0
# No DNS here: client names would be looked up for every 127.x source.
smtpd_peername_lookup = no
maillog_file = $T/pf/maillog
maillog_file_prefixes = $T
biff = no
EOF
# Debian's master.cf with chroot off (our queue is not a chroot jail) and
# the SMTP listener on our loopback port.
awk -v port="127.0.0.1:$P_SMTP" '
    /^#/ || /^[ \t]/ || NF < 8 { print; next }
    { if ($1 == "smtp" && $2 == "inet") $1 = port; $5 = "n"; print }
' /etc/postfix/master.cf >"$T/pf/master.cf"
grep -q '^postlog' "$T/pf/master.cf" ||
    echo "postlog   unix-dgram n  -       n       -       1       postlogd" >>"$T/pf/master.cf"
postfix -c "$T/pf" check >/dev/null 2>&1 || true
postfix -c "$T/pf" start >"$T/pf/start.log" 2>&1 || { cat "$T/pf/start.log"; die "postfix did not start"; }
wait_port $P_SMTP
log "postfix on smtp $P_SMTP"

# --- workloads --------------------------------------------------------------
R="${OUT:-$T/reports}"
mkdir -p "$R"
COMMON=(--user-count "$USERS" --domain "$DOMAIN" --password "$PASSWORD")
POP=(--user-count "$USERS" --user-prefix pop --domain "$DOMAIN" --password "$PASSWORD")
bench() { # NAME ARGS...: runs one bench command, JSON to $R/NAME.json
    local name=$1; shift
    log "$name: $BENCH $*"
    $BENCH "$@" --json >"$R/$name.json"
}

for side in sluice peers; do
    if [ $side = sluice ]; then smtp=127.0.0.1:$S_SMTP pop3=127.0.0.1:$S_POP3
    else smtp=127.0.0.1:$P_SMTP pop3=127.0.0.1:$D_POP3; fi
    if want smtp; then
        bench "$side-smtp-1rcpt" smtp --server "$smtp" "${COMMON[@]}" --connections 10 --size 4k \
            --recipients 1 --duration "$DURATION" --verify-pop3 "$pop3" --verify-wait 600
        bench "$side-smtp-15rcpt" smtp --server "$smtp" "${COMMON[@]}" --connections 10 --size 4k \
            --recipients 15 --duration "$DURATION" --verify-pop3 "$pop3" --verify-wait 600
        bench "$side-smtp-bounce" smtp --server "$smtp" "${COMMON[@]}" --connections 10 --size 4k \
            --recipients 1 --bounce-ratio 0,0.3,0.6,0.9 --sources 1024 --per-prefix 16 \
            --duration "$DURATION" --verify-pop3 "$pop3" --verify-wait 600
        # The study's goodput experiment: legitimate sessions arrive at a fixed
        # rate, bounce sessions on top; an ideal server's goodput stays flat.
        bench "$side-smtp-open" smtp --server "$smtp" "${COMMON[@]}" --rate "$OPEN_RATE" --legit-rate \
            --connections 1000 --size 4k --recipients 1 --bounce-ratio 0,0.3,0.6,0.9 \
            --sources 1024 --per-prefix 16 --duration "$DURATION" --verify-pop3 "$pop3" --verify-wait 600
        # The same at saturation: legitimate sessions offered at 90% of what
        # Sluice accepted in the closed 1-recipient run (its capacity here),
        # bounces on top up to 90% of all connections; the same offered
        # load on both sides. A trust gate keeps goodput flat.
        SAT_RATE=${SAT_RATE:-$(python3 -c 'import json,sys; print(max(1, int(0.9 * json.load(open(sys.argv[1]))["runs"][0]["accepted_per_s"])))' "$R/sluice-smtp-1rcpt.json")}
        bench "$side-smtp-saturated" smtp --server "$smtp" "${COMMON[@]}" --rate "$SAT_RATE" --legit-rate \
            --connections 1000 --size 4k --recipients 1 --bounce-ratio 0,0.3,0.6,0.9 \
            --sources 1024 --per-prefix 16 --duration "$DURATION" --verify-pop3 "$pop3" --verify-wait 600
    fi
    # Fill the POP3 accounts (untouched by the SMTP runs), then time 5
    # rabid-like clients draining them (RETR up to 5 and DELE per session).
    if want pop3; then
        bench "$side-pop3" pop3 --server "$pop3" "${POP[@]}" --clients 5 --retrieve 5 \
            --fill "$POP3_FILL" --smtp "$smtp" --fill-size 0-5k --until-empty --duration 600
    fi
done

# IMAP: Dovecot always; Sluice when it listens for IMAP.
if want imap; then
# Disk space a side's mail takes right after the IMAP load, before any
# request expunges: Dovecot's Maildirs with their indexes, Sluice's data
# directory (both hold only the IMAP mailbox when ROWS=imap runs alone).
# Allocated blocks, not apparent sizes: a 4.7 KB message file takes two
# 4 KiB blocks of the administrator's disk.
disk() { printf '{"bytes": %s}\n' "$(du -s -B1 "$1" | cut -f1)" >"$R/disk-$2.json"; }
bench peers-imap-load imap --server "127.0.0.1:$D_IMAP" --user "imap1@$DOMAIN" --password "$PASSWORD" \
    --load "$IMAP_MESSAGES" --mix-only
if [ "${DOVECOT_FTS:-}" = xapian ]; then
    # Indexed before the timed requests, as Sluice's index is.
    t0=$(date +%s%N)
    doveadm -c "$T/dovecot.conf" index -u "imap1@$DOMAIN" INBOX
    log "dovecot fts-xapian index built in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
fi
disk "$T/mail" peers
if [ "${SLUICE_IMAP:-}" = 1 ]; then
    bench sluice-imap-load imap --server "127.0.0.1:$S_IMAP" --user "imap1@$DOMAIN" --password "$PASSWORD" \
        --load "$IMAP_MESSAGES" --mix-only
    sleep 10 # the full-text index writes its rows up to 5 s after delivery
    if [ "$SLUICE_STORE" = postgres ]; then
        "$PG_BIN/psql" -X -q -h 127.0.0.1 -p 25432 -U sluice -d sluice -c "CHECKPOINT"
        disk "$T/pg/data" sluice
    else
        disk "$T/sluice/data" sluice
    fi
    if [ "$SLUICE_STORE" = both ]; then
        # The store as loaded, 21,282 messages by default, copied while
        # this node is stopped (migrate refuses a store in use).
        stop_sluice
        t0=$(date +%s%N)
        sl migrate --to "$PG_URL" >"$T/sluice/migrate.log" 2>&1 || { cat "$T/sluice/migrate.log" >&2; die "sluice migrate failed"; }
        migrate_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
        log "sluice migrate of $IMAP_MESSAGES messages to PostgreSQL: $migrate_ms ms"
        printf '{"ms": %s}\n' "$migrate_ms" >"$R/migrate-time.json"
        start_sluice
        start_sluice_pg
        python3 "$HERE/imap-compare.py" "127.0.0.1:$S_IMAP" "127.0.0.1:$S_IMAP_PG" "imap1@$DOMAIN" "$PASSWORD" \
            >"$R/migrate-compare.json" || log "the PostgreSQL copy differs from the SQLite store: see migrate-compare.json"
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("== compared %d of %d messages over IMAP: %s, %d differences" % (r["compared"], r["messages"], "equal" if r["equal"] else "NOT EQUAL", r["mismatch_count"]), file=sys.stderr)' "$R/migrate-compare.json"
        stop_sluice_pg
        "$PG_BIN/psql" -X -q -h 127.0.0.1 -p 25432 -U sluice -d sluice -c "CHECKPOINT"
        disk "$T/pg/data" sluice-pg
    fi
fi
cat >"$T/cold-dovecot.sh" <<EOF
#!/bin/sh
pid=\$(cat $T/dovecot-run/master.pid)
doveadm -c $T/dovecot.conf stop >/dev/null 2>&1
while kill -0 "\$pid" 2>/dev/null; do sleep 0.1; done
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
dovecot -c $T/dovecot.conf
EOF
chmod +x "$T/cold-dovecot.sh"
# With fts-xapian, Dovecot's first text search after a restart took 229 s
# in one run and over the client's 300 s in another (the plugin works on
# its index again): its requests run warm only.
cold=(--cold-cmd "$T/cold-dovecot.sh")
[ "${DOVECOT_FTS:-}" = xapian ] && cold=()
bench peers-imap imap --server "127.0.0.1:$D_IMAP" --user "imap1@$DOMAIN" --password "$PASSWORD" \
    --load "$IMAP_MESSAGES" --repeat 3 "${cold[@]}"
# Long sessions: clients logged in once for the whole run, a steady mix of
# FETCH, SEARCH, STORE, SELECT, APPEND and EXPUNGE on what the requests
# left in the mailbox.
bench peers-imap-mix imap --server "127.0.0.1:$D_IMAP" --user "imap1@$DOMAIN" --password "$PASSWORD" \
    --mix-only --clients "$IMAP_CLIENTS" --duration "$DURATION"
# The same mix searching a header instead of the text: Dovecot has no
# full-text index here, so this is the fair row for the other commands.
bench peers-imap-mix-header imap --server "127.0.0.1:$D_IMAP" --user "imap1@$DOMAIN" --password "$PASSWORD" \
    --mix-only --clients "$IMAP_CLIENTS" --duration "$DURATION" --mix-search header
if [ "${SLUICE_IMAP:-}" = 1 ]; then
    # Cold for Sluice: stop it, drop the page cache, start it on the same data.
    cat >"$T/cold-sluice.sh" <<EOF
#!/bin/sh
pid=\$(cat $T/sluice/pid)
kill "\$pid"
while kill -0 "\$pid" 2>/dev/null; do sleep 0.1; done
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
$SLUICE serve --config $T/sluice/sluice.toml >>$T/sluice/serve.log 2>&1 &
echo \$! >$T/sluice/pid
EOF
    chmod +x "$T/cold-sluice.sh"
    bench sluice-imap imap --server "127.0.0.1:$S_IMAP" --user "imap1@$DOMAIN" --password "$PASSWORD" \
        --load "$IMAP_MESSAGES" --repeat 3 --cold-cmd "$T/cold-sluice.sh"
    bench sluice-imap-mix imap --server "127.0.0.1:$S_IMAP" --user "imap1@$DOMAIN" --password "$PASSWORD" \
        --mix-only --clients "$IMAP_CLIENTS" --duration "$DURATION"
    bench sluice-imap-mix-header imap --server "127.0.0.1:$S_IMAP" --user "imap1@$DOMAIN" --password "$PASSWORD" \
        --mix-only --clients "$IMAP_CLIENTS" --duration "$DURATION" --mix-search header
    if [ "$SLUICE_STORE" = both ]; then
        # The same requests on the PostgreSQL copy, with the SQLite node
        # stopped. Cold restarts this node and drops the page cache;
        # PostgreSQL's own shared buffers stay warm.
        stop_sluice
        start_sluice_pg
        cat >"$T/cold-sluice-pg.sh" <<EOF
#!/bin/sh
pid=\$(cat $T/sluice-pg/pid)
kill "\$pid"
while kill -0 "\$pid" 2>/dev/null; do sleep 0.1; done
sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
$SLUICE serve --config $T/sluice-pg/sluice.toml >>$T/sluice-pg/serve.log 2>&1 &
echo \$! >$T/sluice-pg/pid
EOF
        chmod +x "$T/cold-sluice-pg.sh"
        bench sluice-pg-imap imap --server "127.0.0.1:$S_IMAP_PG" --user "imap1@$DOMAIN" --password "$PASSWORD" \
            --load "$IMAP_MESSAGES" --repeat 3 --cold-cmd "$T/cold-sluice-pg.sh"
        bench sluice-pg-imap-mix imap --server "127.0.0.1:$S_IMAP_PG" --user "imap1@$DOMAIN" --password "$PASSWORD" \
            --mix-only --clients "$IMAP_CLIENTS" --duration "$DURATION"
        bench sluice-pg-imap-mix-header imap --server "127.0.0.1:$S_IMAP_PG" --user "imap1@$DOMAIN" --password "$PASSWORD" \
            --mix-only --clients "$IMAP_CLIENTS" --duration "$DURATION" --mix-search header
        stop_sluice_pg
        start_sluice
    fi
else
    log "sluice IMAP not asked for (SLUICE_IMAP=1): IMAP rows show Dovecot only"
fi
fi

# --- webmail: Sluice against Roundcube on Dovecot and Postfix --------------
if [ "$WEB" = 1 ]; then
    "$HERE/roundcube.sh" start "$T/rc" "$R_HTTP" "$D_IMAP" "$P_SMTP" "$WEB_USERS"
    wait_port $R_HTTP && wait_port $S_HTTP
    log "roundcube on http $R_HTTP (imap $D_IMAP, smtp $P_SMTP); sluice webmail on http $S_HTTP"
    # The same messages of 1-120 KB into both sides' webmail inboxes.
    python3 "$HERE/fill-webmail.py" "$DOMAIN" "$WEB_USERS" "$WEB_FILL" "$S_SMTP" "$P_SMTP"
    # Postfix delivers in the background: wait for its queue to drain.
    for _ in $(seq 1 600); do
        [ -z "$(find "$T/pf/queue/incoming" "$T/pf/queue/active" "$T/pf/queue/deferred" -type f 2>/dev/null | head -1)" ] && break
        sleep 0.5
    done
    WEBC=(--user-prefix web --domain "$DOMAIN" --password "$PASSWORD" --users "$WEB_USERS")
    bench sluice-web web --server "127.0.0.1:$S_HTTP" --target sluice "${WEBC[@]}" --duration "$DURATION"
    bench peers-web web --server "127.0.0.1:$R_HTTP" --target roundcube "${WEBC[@]}" --duration "$DURATION"
    bench sluice-web-open web --server "127.0.0.1:$S_HTTP" --target sluice "${WEBC[@]}" --rate "$WEB_RATE" --duration "$DURATION"
    bench peers-web-open web --server "127.0.0.1:$R_HTTP" --target roundcube "${WEBC[@]}" --rate "$WEB_RATE" --duration "$DURATION"
    bench sluice-web-easy web --server "127.0.0.1:$S_HTTP" --target sluice "${WEBC[@]}" --rate "$WEB_EASY_RATE" --duration "$DURATION"
    bench peers-web-easy web --server "127.0.0.1:$R_HTTP" --target roundcube "${WEBC[@]}" --rate "$WEB_EASY_RATE" --duration "$DURATION"
    # Page weight and request count of the inbox in Chromium, first and
    # second load (needs node and the browser tests' playwright-core).
    if command -v node >/dev/null && [ -d "$HERE/../../crates/sluice/tests/browser/node_modules/playwright-core" ]; then
        for side in sluice:$S_HTTP roundcube:$R_HTTP; do
            node "$HERE/page-weight.mjs" "${side%%:*}" "http://127.0.0.1:${side##*:}" "web1@$DOMAIN" "$PASSWORD" \
                >"$R/${side%%:*}-page-weight.json" || log "page weight of ${side%%:*} not measured"
        done
    else
        log "page weight not measured: run npm ci in crates/sluice/tests/browser (./test.sh does)"
    fi
    # Memory per logged-in webmail session: Sluice's resident size before
    # and after 1,000 logins that stay logged in.
    python3 "$HERE/web-sessions.py" "127.0.0.1:$S_HTTP" "web1@$DOMAIN" "$PASSWORD" \
        "$(cat "$T/sluice/pid")" >"$R/sluice-web-sessions.json"
fi

# --- the table --------------------------------------------------------------
python3 - "$R" "$DURATION" "$IMAP_MESSAGES" <<'EOF'
import json, os, sys
r, duration, imap_n = sys.argv[1], sys.argv[2], sys.argv[3]
def load(name):
    p = os.path.join(r, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
rows = []
def row(what, s, p, higher_better=True):
    if s is None or p is None or p == 0:
        ratio = "-"
    else:
        ratio = "%.2f" % (s / p if higher_better else p / s if s else float("inf"))
    f = lambda v: "-" if v is None else ("%.1f" % v if abs(v) < 100 else "%.0f" % v)
    rows.append((what, f(s), f(p), ratio))
for rc in ("1rcpt", "15rcpt"):
    s, p = load("sluice-smtp-" + rc), load("peers-smtp-" + rc)
    if not (s and p):
        continue
    n = rc.replace("rcpt", "")
    row(f"SMTP 4KB 10 conn {n} rcpt: accepted msgs/s", s["runs"][0]["accepted_per_s"], p["runs"][0]["accepted_per_s"])
    row(f"SMTP 4KB 10 conn {n} rcpt: delivered/s (incl. queue drain)",
        s["runs"][0]["verified"]["delivered_per_s"], p["runs"][0]["verified"]["delivered_per_s"])
    row(f"SMTP 4KB 10 conn {n} rcpt: p99 latency ms (lower better)",
        s["runs"][0]["message_latency"]["p99_ms"], p["runs"][0]["message_latency"]["p99_ms"], False)
s, p = load("sluice-smtp-bounce"), load("peers-smtp-bounce")
for a, b in zip(s["runs"], p["runs"]) if s and p else ():
    row("closed 10 conn: goodput msgs/s at bounce ratio %.1f" % a["bounce_ratio"], a["goodput_per_s"], b["goodput_per_s"])
s, p = load("sluice-smtp-open"), load("peers-smtp-open")
for a, b in zip(s["runs"], p["runs"]) if s and p else ():
    row("open model %s: goodput/s at bounce %.1f" % (s["model"].split(", ")[1].split(" ")[0] + " legit/s", a["bounce_ratio"]),
        a["goodput_per_s"], b["goodput_per_s"])
s, p = load("sluice-smtp-saturated"), load("peers-smtp-saturated")
for a, b in zip(s["runs"], p["runs"]) if s and p else ():
    row("saturated %s: goodput/s at bounce %.1f" % (s["model"].split(", ")[1].split(" ")[0] + " legit/s", a["bounce_ratio"]),
        a["goodput_per_s"], b["goodput_per_s"])
s, p = load("sluice-pop3"), load("peers-pop3")
if s and p:
    row("POP3 5 clients: transactions/min", s["sessions_per_min"], p["sessions_per_min"])
    row("POP3 5 clients: messages retrieved/min", s["retrieved_per_min"], p["retrieved_per_min"])
# Sluice on SQLite, and with SLUICE_STORE=both on PostgreSQL too, each
# against the same Dovecot run.
pi = load("peers-imap")
for side, mark in (("sluice", ""), ("sluice-pg", " [PostgreSQL]")):
    si = load(side + "-imap")
    if side == "sluice-pg" and not si:
        continue
    for k, q in enumerate(pi["requests"] if pi else ()):
        # Expunges run once (cold when a cold command is given): no warm row.
        if q.get("warm_ms"):
            sv = si["requests"][k]["warm_mean_ms"] if si else None
            row("IMAP %s on %s msgs%s: warm ms (lower better)" % (q["name"], imap_n, mark), sv, q["warm_mean_ms"] or None, False)
        if q.get("cold_ms") is not None:
            sc = si["requests"][k].get("cold_ms") if si else None
            row("IMAP %s on %s msgs%s: cold ms (lower better)" % (q["name"], imap_n, mark), sc, q["cold_ms"], False)
        if q["name"].startswith(("text", "body")):
            # Substring rows have no expected count: each side's answer.
            row("IMAP %s%s: messages found" % (q["name"], mark), si["requests"][k].get("got") if si else None, q.get("got"))
    if si and pi:
        row("IMAP load of %s msgs by APPEND%s: msgs/s" % (imap_n, mark), si["load_per_s"], pi["load_per_s"])
    sd, pd = load("disk-" + side), load("disk-peers")
    if pd:
        row("IMAP mail on disk after loading %s msgs%s: MiB (lower better)" % (imap_n, mark),
            sd["bytes"] / 1048576 if sd else None, pd["bytes"] / 1048576, False)
    for suffix, what in (("", "SEARCH TEXT"), ("-header", "SEARCH FROM")):
        sm, pm = load(side + "-imap-mix" + suffix), load("peers-imap-mix" + suffix)
        if pm:
            sc, pc = (sm or {}).get("concurrent") or {}, pm["concurrent"]
            row("IMAP long sessions (%s)%s, %d clients: commands/s" % (what, mark, pc["clients"]), sc.get("ops_per_s"), pc["ops_per_s"])
            for kind, q in pc["latency"].items():
                row("IMAP long sessions (%s)%s: %s p50 ms (lower better)" % (what, mark, kind),
                    sc.get("latency", {}).get(kind, {}).get("p50_ms"), q["p50_ms"], False)
            row("IMAP long sessions (%s)%s: failed commands (lower better)" % (what, mark),
                sum(sc.get("errors", {}).values()) if sm else None, sum(pc["errors"].values()), False)
mt, mc = load("migrate-time"), load("migrate-compare")
if mt and mc:
    print("sluice migrate of %s msgs to PostgreSQL: %.1f s; compared over IMAP: %d of %d messages, %s (%d differences)"
          % (imap_n, mt["ms"] / 1000, mc["compared"], mc["messages"], "equal" if mc["equal"] else "NOT EQUAL", mc["mismatch_count"]))
sw, pw = load("sluice-web"), load("peers-web")
if sw and pw:
    for a, b in zip(sw["steps"], pw["steps"]):
        row("webmail %d users: %s p50 ms (lower better)" % (sw["users"], a["name"]), a["latency"]["p50_ms"], b["latency"]["p50_ms"], False)
        row("webmail %d users: %s per s" % (sw["users"], a["name"]), a["per_second"], b["per_second"])
    row("webmail: inbox transaction bytes, uncompressed (lower better)", sw["inbox_bytes"], pw["inbox_bytes"], False)
for kind in ("open", "easy"):
    so, po = load("sluice-web-" + kind), load("peers-web-" + kind)
    if so and po:
        for a, b in zip(so["steps"], po["steps"]):
            row("webmail %d users x %g req/s: %s p99 ms (lower better)" % (so["users"], so["rate"], a["name"]), a["latency"]["p99_ms"], b["latency"]["p99_ms"], False)
        row("webmail %d users x %g req/s: errors (lower better)" % (so["users"], so["rate"]),
            sum(x["errors"] for x in so["steps"]), sum(x["errors"] for x in po["steps"]), False)
sp, pp = load("sluice-page-weight"), load("roundcube-page-weight")
if sp and pp:
    for k in ("first", "second"):
        row("webmail inbox in Chromium, %s load: KB over the wire (lower better)" % k, sp[k]["bytes"] / 1024, pp[k]["bytes"] / 1024, False)
        row("webmail inbox in Chromium, %s load: requests (lower better)" % k, sp[k]["requests"], pp[k]["requests"], False)
ss = load("sluice-web-sessions")
if ss:
    row("webmail: Sluice bytes of memory per logged-in session (1,000)", ss["bytes_per_session"], None)
w = max(len(x[0]) for x in rows)
print()
print("%-*s  %12s  %16s  %7s" % (w, "workload (SMTP runs %s s)" % duration, "sluice", "postfix+dovecot", "ratio"))
print("-" * (w + 43))
for what, a, b, c in rows:
    print("%-*s  %12s  %16s  %7s" % (w, what, a, b, c))
print("\nratio > 1: Sluice better (higher rate, or lower time). Webmail rows: the peer is Roundcube on Dovecot and Postfix.")
EOF
# --- outbound: relaying to smtp-sink, Sluice against Postfix ---------------
if want outbound; then
    log "outbound rows (outbound.sh)"
    SLUICE="$SLUICE" QUICK="$QUICK" OUT="${OUT:+$OUT/outbound}" "$HERE/outbound.sh"
fi
if [ -n "${OUT:-}" ]; then log "JSON reports kept in $OUT"; fi
