#!/usr/bin/env bash
# Outbound side by side: Sluice against Postfix relaying the same mail to
# Postfix's `smtp-sink` on loopback, in one run, printing a ratio table.
#
# Both take mail on port 25 for aliases fwd1..fwd15@example.org whose
# targets are spread over three remote domains (d1.test, d2.test, d3.test)
# routed to the sink, and send it on as shipped (default concurrency, no
# TLS to the sink, no DNS). The figure is the time from the first message
# submitted to an empty queue. Then mail for a dead destination piles up
# in both queues: resident memory and disk per queued message, and the
# time to restart with that queue. Sluice's forwarded mail is rewritten
# with SRS on the way (its default); Postfix does no SRS.
#
# Then the same relaying, submitted with AUTH: ten accounts
# sender1..sender10@example.org log in over STARTTLS on each side's
# submission port (Postfix with Dovecot's SASL from a passwd file, and
# the same sender check Sluice makes: reject_sender_login_mismatch) and
# send as themselves to addresses at the three remote domains. Both
# present one certificate the script makes (a throwaway CA), which the
# bench checks.
#
# Installs Postfix when missing, runs everything from a temp directory
# (the system's /etc/postfix is not touched) and stops it all on exit.
# Needs root.
#
#   bench/peers/outbound.sh
#   QUICK=1 bench/peers/outbound.sh
#
# Environment:
#   SLUICE     the sluice binary                         (default: sluice)
#   MESSAGES   messages per relay run                    (default: 5000; QUICK: 1000)
#   QUEUED     messages left queued for a dead domain    (default: 10000; QUICK: 2000)
#   SUBMIT     0: skip the runs submitted with AUTH
#   OUT        directory kept for the JSON reports       (default: none, temp)
set -euo pipefail

QUICK=${QUICK:-}
SLUICE=${SLUICE:-sluice}
MESSAGES=${MESSAGES:-$([ -n "$QUICK" ] && echo 1000 || echo 5000)}
QUEUED=${QUEUED:-$([ -n "$QUICK" ] && echo 2000 || echo 10000)}
SUBMIT=${SUBMIT:-1}
DOMAIN=example.org
PASSWORD=password

S_SMTP=24525 P_SMTP=24526 SINK=24027 DEAD=24028 S_SUB=24587 P_SUB=24588 D_AUTH=24589

log() { printf '== %s\n' "$*" >&2; }
die() { printf 'outbound.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (installs packages, runs daemons)"
command -v "${SLUICE%% *}" >/dev/null 2>&1 || [ -x "${SLUICE%% *}" ] || die "no sluice binary: set SLUICE"
for port in $S_SMTP $P_SMTP $SINK $DEAD $S_SUB $P_SUB $D_AUTH; do
    (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && die "port $port is in use"
done

need=()
command -v postfix >/dev/null || need+=(postfix)
command -v dovecot >/dev/null || need+=(dovecot-core)
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    echo "postfix postfix/main_mailer_type select Local only" | debconf-set-selections
    echo "postfix postfix/mailname string localhost" | debconf-set-selections
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

T=$(mktemp -d /tmp/sluice-outbound.XXXXXX)
chmod 755 "$T"
SINK_PID=
cleanup() {
    set +e
    [ -n "${SLUICE_PID:-}" ] && kill "$SLUICE_PID" 2>/dev/null
    [ -f "$T/pf/main.cf" ] && postfix -c "$T/pf" stop >/dev/null 2>&1
    [ -f "$T/dovecot.conf" ] && doveadm -c "$T/dovecot.conf" stop >/dev/null 2>&1
    [ -n "$SINK_PID" ] && kill "$SINK_PID" 2>/dev/null
    wait 2>/dev/null
    if [ -n "${OUT:-}" ]; then mkdir -p "$OUT" && cp "$T"/*.json "$OUT"/ 2>/dev/null; fi
    rm -rf "$T"
}
trap cleanup EXIT

# --- the sink: takes everything, keeps nothing -------------------------------
/usr/sbin/smtp-sink -u nobody -h sink.test "127.0.0.1:$SINK" 512 &
SINK_PID=$!

# The aliases, their targets over three domains, and the bench's recipients.
for i in $(seq 1 15); do
    echo "fwd$i@$DOMAIN user$i@d$((i % 3 + 1)).test"
done >"$T/aliases"
for i in $(seq 1 15); do echo "fwd$i@$DOMAIN"; done >"$T/recipients"
for i in $(seq 1 15); do echo "dead$i@$DOMAIN"; done >"$T/dead"
for i in $(seq 1 10); do echo "sender$i@$DOMAIN $PASSWORD"; done >"$T/senders"

# --- one certificate for both submission listeners, from a throwaway CA ----
mkdir -p "$T/tls"
(
    cd "$T/tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj /CN=bench-ca -keyout ca.key -out ca.pem
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj /CN=localhost -keyout key.pem -out leaf.csr
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >leaf.ext
    openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
        -extfile leaf.ext -out cert.pem
    chmod 644 key.pem
) >/dev/null 2>&1 || die "openssl could not make the certificates"

# --- Sluice -----------------------------------------------------------------
mkdir -p "$T/sluice"
cat >"$T/sluice/sluice.toml" <<EOF
hostname = "mx.$DOMAIN"
data_dir = "$T/sluice/data"
[listen]
smtp = "127.0.0.1:$S_SMTP"
submission = "127.0.0.1:$S_SUB"
[tls]
cert = "$T/tls/cert.pem"
key = "$T/tls/key.pem"
[smtp]
max_connections_per_ip = 500
# The hourly limits per account would stop a load test; Postfix has none.
[submission]
max_messages_per_hour = 100000000
max_recipients_per_hour = 100000000
[auth_checks]
spf = "off"
dkim = "off"
dmarc = "off"
[outbound]
retry_schedule = [3600]
[outbound.routes]
"d1.test" = "127.0.0.1:$SINK"
"d2.test" = "127.0.0.1:$SINK"
"d3.test" = "127.0.0.1:$SINK"
"dead.test" = "127.0.0.1:$DEAD"
[outbound.tls]
mta_sts = false
dane = "off"
[log]
level = "warn"
EOF
sl() { $SLUICE --config "$T/sluice/sluice.toml" "$@"; }
# A fresh data directory with the domain and the aliases.
init_sluice() {
    rm -rf "$T/sluice/data"
    sl domain add "$DOMAIN" >/dev/null
    while read -r alias target; do sl alias add "$alias" "$target" >/dev/null; done <"$T/aliases"
    for i in $(seq 1 15); do sl alias add "dead$i@$DOMAIN" "user$i@dead.test" >/dev/null; done
    while read -r address password; do
        echo "$password" | sl user add "$address" --password-stdin >/dev/null
    done <"$T/senders"
}
init_sluice
start_sluice() {
    $SLUICE --config "$T/sluice/sluice.toml" serve >>"$T/sluice/log" 2>&1 &
    SLUICE_PID=$!
}
start_sluice

# --- Dovecot, only as Postfix's SASL server --------------------------------
while read -r address password; do echo "$address:{PLAIN}$password"; done <"$T/senders" >"$T/passwd"
cat >"$T/dovecot.conf" <<EOF
base_dir = $T/dovecot-run
state_dir = $T/dovecot-state
log_path = $T/dovecot.log
protocols = none
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u $T/passwd
}
userdb {
  driver = static
  args = uid=nobody gid=nogroup home=/nonexistent
}
service auth {
  inet_listener {
    address = 127.0.0.1
    port = $D_AUTH
  }
}
EOF
dovecot -c "$T/dovecot.conf" >"$T/dovecot.out" 2>&1 || { cat "$T/dovecot.out" >&2; die "dovecot did not start"; }

# --- Postfix ----------------------------------------------------------------
# The queue lives outside the config directory: \`postfix start\` checks
# the ownership of every file under the config directory, which would
# make its start time grow with the queue for a reason no real
# installation has.
mkdir -p "$T/pf" "$T/pfq" "$T/pf/data"
chown postfix "$T/pf/data"
cat >"$T/pf/main.cf" <<EOF
compatibility_level = 3.6
queue_directory = $T/pfq
data_directory = $T/pf/data
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = mx.$DOMAIN
mydestination =
mynetworks = 127.0.0.0/8
virtual_alias_domains = $DOMAIN
virtual_alias_maps = texthash:$T/pf/virtual
transport_maps = texthash:$T/pf/transport
relay_domains = d1.test d2.test d3.test dead.test
smtpd_recipient_restrictions = permit_mynetworks, reject
disable_dns_lookups = yes
smtpd_peername_lookup = no
smtpd_client_connection_count_limit = 500
smtp_tls_security_level = none
maillog_file = $T/pf/maillog
maillog_file_prefixes = $T
biff = no
EOF
{
    cat "$T/aliases"
    for i in $(seq 1 15); do echo "dead$i@$DOMAIN user$i@dead.test"; done
} >"$T/pf/virtual"
cat >"$T/pf/transport" <<EOF
d1.test smtp:[127.0.0.1]:$SINK
d2.test smtp:[127.0.0.1]:$SINK
d3.test smtp:[127.0.0.1]:$SINK
dead.test smtp:[127.0.0.1]:$DEAD
EOF
# Debian's master.cf with chroot off and the SMTP listener on our port
# (as run.sh does).
awk -v port="127.0.0.1:$P_SMTP" '
    /^#/ || /^[ \t]/ || NF < 8 { print; next }
    { if ($1 == "smtp" && $2 == "inet") $1 = port; $5 = "n"; print }
' /etc/postfix/master.cf >"$T/pf/master.cf"
# Submission: STARTTLS before AUTH, Dovecot's SASL, and a sender that
# must be the login (as Sluice's sender check).
while read -r address _; do echo "$address $address"; done <"$T/senders" >"$T/pf/senders"
cat >>"$T/pf/master.cf" <<EOF
127.0.0.1:$P_SUB inet n - n - - smtpd
  -o syslog_name=postfix/submission
  -o smtpd_tls_security_level=encrypt
  -o smtpd_tls_cert_file=$T/tls/cert.pem
  -o smtpd_tls_key_file=$T/tls/key.pem
  -o smtpd_sasl_auth_enable=yes
  -o smtpd_sasl_type=dovecot
  -o smtpd_sasl_path=inet:127.0.0.1:$D_AUTH
  -o smtpd_sender_login_maps=texthash:$T/pf/senders
  -o smtpd_sender_restrictions=reject_sender_login_mismatch
  -o smtpd_recipient_restrictions=permit_sasl_authenticated,reject
EOF
grep -q '^postlog' "$T/pf/master.cf" ||
    echo "postlog   unix-dgram n  -       n       -       1       postlogd" >>"$T/pf/master.cf"
postfix -c "$T/pf" check >/dev/null 2>&1 || true
postfix -c "$T/pf" start >"$T/pf/start.log" 2>&1 || { cat "$T/pf/start.log" "$T/pf/maillog" >&2; die "postfix did not start"; }

wait_port() {
    for _ in $(seq 1 1200); do
        (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    die "nothing listens on $1"
}
wait_port $S_SMTP
wait_port $P_SMTP
log "sluice on $S_SMTP, postfix on $P_SMTP, smtp-sink on $SINK"

sluice_empty() { sl queue list | head -n 1 | grep -q "the queue is empty"; }
postfix_empty() { postqueue -c "$T/pf" -p | tail -n 1 | grep -q "Mail queue is empty"; }
sluice_queued() { sl queue list | grep -c . || true; }
postfix_queued() { postqueue -c "$T/pf" -p | grep -c '^[0-9A-F]' || true; }

# Seconds from the first message submitted to an empty queue.
relay_run() { # NAME PORT EMPTY-CHECK RECIPIENTS
    local name=$1 port=$2 empty=$3 rcpts=$4 t0 t1
    t0=$(date +%s.%N)
    $SLUICE bench smtp --server "127.0.0.1:$port" --users "$T/recipients" \
        --recipients "$rcpts" --messages "$MESSAGES" --duration 600 \
        --connections 10 --size 4k --json >"$T/relay-$name-$rcpts.json"
    until $empty; do sleep 0.2; done
    t1=$(date +%s.%N)
    echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}'
}

# The same, submitted with AUTH over STARTTLS by the ten senders.
submit_run() { # NAME PORT EMPTY-CHECK RECIPIENTS
    local name=$1 port=$2 empty=$3 rcpts=$4 t0 t1
    t0=$(date +%s.%N)
    $SLUICE bench smtp --server "127.0.0.1:$port" --users "$T/senders" --auth --starttls \
        --ca "$T/tls/ca.pem" --remote-domains d1.test,d2.test,d3.test \
        --recipients "$rcpts" --messages "$MESSAGES" --duration 600 \
        --connections 10 --size 4k --json >"$T/submit-$name-$rcpts.json"
    until $empty; do sleep 0.2; done
    t1=$(date +%s.%N)
    echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}'
}

declare -A secs
for rcpts in 1 15; do
    log "relaying $MESSAGES messages x $rcpts recipients: sluice"
    secs[sluice-$rcpts]=$(relay_run sluice $S_SMTP sluice_empty "$rcpts")
    log "relaying $MESSAGES messages x $rcpts recipients: postfix"
    secs[postfix-$rcpts]=$(relay_run postfix $P_SMTP postfix_empty "$rcpts")
    if [ "$SUBMIT" = 1 ]; then
        wait_port $S_SUB && wait_port $P_SUB
        log "submitting $MESSAGES messages x $rcpts recipients with AUTH: sluice"
        secs[sluice-sub-$rcpts]=$(submit_run sluice $S_SUB sluice_empty "$rcpts")
        log "submitting $MESSAGES messages x $rcpts recipients with AUTH: postfix"
        secs[postfix-sub-$rcpts]=$(submit_run postfix $P_SUB postfix_empty "$rcpts")
    fi
done

# --- a queue for a dead destination -----------------------------------------
rss_of() { # total resident KB of the processes whose pids are given
    local total=0 pid
    for pid in "$@"; do
        total=$((total + $(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)))
    done
    echo "$total"
}
# Postfix's queue manager: the process that holds its queue in memory
# (the rest of it is on disk, as Sluice's is).
postfix_qmgr() {
    local master
    master=$(tr -d ' ' <"$T/pfq/pid/master.pid")
    pgrep -P "$master" -x qmgr
}
stop_sluice() { kill "$SLUICE_PID"; wait "$SLUICE_PID" 2>/dev/null || true; }
stop_postfix() {
    postfix -c "$T/pf" stop >/dev/null 2>&1
    while postfix -c "$T/pf" status >/dev/null 2>&1; do sleep 0.1; done
}
# Both start afresh, so that memory and disk left from the relay runs do
# not count.
stop_sluice
init_sluice
start_sluice
wait_port $S_SMTP
stop_postfix
postfix -c "$T/pf" start >/dev/null 2>&1
wait_port $P_SMTP
queue_dead() { # COUNT
    local name port
    for name in sluice postfix; do
        port=$([ $name = sluice ] && echo $S_SMTP || echo $P_SMTP)
        $SLUICE bench smtp --server "127.0.0.1:$port" --users "$T/dead" --messages "$1" \
            --duration 900 --connections 10 --size 4k --json >"$T/queue-$name-$1.json"
    done
    sleep 5
}
# A first few hundred, so that what every run allocates once is there
# before the baselines. Disk is measured with Sluice stopped, its
# write-ahead log checkpointed into the database.
queue_dead 300
stop_sluice
s_disk0=$(du -sk "$T/sluice/data" | cut -f1); p_disk0=$(du -sk "$T/pfq" | cut -f1)
start_sluice
wait_port $S_SMTP
queue_dead 300
s_n0=$(sluice_queued); p_n0=$(postfix_queued)
s_rss0=$(rss_of "$SLUICE_PID"); p_rss0=$(rss_of "$(postfix_qmgr)")
log "queueing $QUEUED messages for a dead destination"
queue_dead "$QUEUED"
s_n1=$(sluice_queued); p_n1=$(postfix_queued)
s_rss1=$(rss_of "$SLUICE_PID"); p_rss1=$(rss_of "$(postfix_qmgr)")

# Restart: stop, start, time until the SMTP port answers again (in this
# shell, not a subshell: start_sluice sets SLUICE_PID).
restart() { # STOP START PORT; sets RESTART_SECS
    local t0 t1
    $1
    t0=$(date +%s.%N)
    $2
    wait_port "$3"
    t1=$(date +%s.%N)
    RESTART_SECS=$(echo "$t0 $t1" | awk '{printf "%.3f", $2 - $1}')
}
start_postfix() { postfix -c "$T/pf" start >/dev/null 2>&1; }
stop_sluice_and_measure() { stop_sluice; s_disk1=$(du -sk "$T/sluice/data" | cut -f1); }
log "restarting with $s_n1 queued: sluice"
restart stop_sluice_and_measure start_sluice $S_SMTP
s_restart=$RESTART_SECS
p_disk1=$(du -sk "$T/pfq" | cut -f1)
log "restarting with $p_n1 queued: postfix"
restart stop_postfix start_postfix $P_SMTP
p_restart=$RESTART_SECS

# --- the table --------------------------------------------------------------
python3 - <<PYEOF
messages = $MESSAGES
s_n, p_n = $s_n1 - $s_n0, $p_n1 - $p_n0
s_disk_n, p_disk_n = $s_n1 - 300, $p_n1 - 300
rows = []
def row(what, s, p, higher_better=True, fmt="{:.1f}"):
    ratio = (s / p if higher_better else p / s) if s and p else float("nan")
    rows.append((what, fmt.format(s), fmt.format(p), f"{ratio:.2f}x"))
secs = {$(for k in "${!secs[@]}"; do printf '"%s": %s, ' "$k" "${secs[$k]}"; done)}
for rcpts in (1, 15):
    s, p = secs[f"sluice-{rcpts}"], secs[f"postfix-{rcpts}"]
    row(f"relay 4KB, {rcpts} rcpt over 3 domains: msgs/s to an empty queue", messages / s, messages / p)
    if f"sluice-sub-{rcpts}" in secs:
        s, p = secs[f"sluice-sub-{rcpts}"], secs[f"postfix-sub-{rcpts}"]
        row(f"submitted with AUTH (STARTTLS), {rcpts} rcpt over 3 domains: msgs/s to an empty queue", messages / s, messages / p)
# Resident memory does not shrink per message; a drop (the allocator
# giving back what the warm-up used) counts as no growth.
row("resident KB growth per queued message (Postfix: qmgr)", max($s_rss1 - $s_rss0, 0) / max(s_n, 1), max($p_rss1 - $p_rss0, 0) / max(p_n, 1), False, "{:.3f}")
row("disk KB per queued message", ($s_disk1 - $s_disk0) / max(s_disk_n, 1), ($p_disk1 - $p_disk0) / max(p_disk_n, 1), False, "{:.2f}")
row(f"restart with {$s_n1}/{$p_n1} queued: s to listening", $s_restart, $p_restart, False, "{:.2f}")
w = max(len(r[0]) for r in rows)
print(f"{'':{w}}  {'sluice':>10}  {'postfix':>10}  {'sluice vs postfix':>17}")
for what, s, p, ratio in rows:
    print(f"{what:{w}}  {s:>10}  {p:>10}  {ratio:>17}")
print("(ratio > 1: Sluice is better)")
print(f"resident KB before/after queueing {s_n}/{p_n}: sluice $s_rss0/$s_rss1, postfix qmgr $p_rss0/$p_rss1")
PYEOF
