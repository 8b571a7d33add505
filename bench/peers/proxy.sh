#!/usr/bin/env bash
# SMTP throughput straight to Postfix, through `sluice proxy` in front of
# the same Postfix, and through Postfix + amavisd-new + clamd (the content
# filter set-up the proxy replaces), side by side in one run, with
# Postfix's own load generator (smtp-source); then POP3 RETR straight from
# Dovecot against through the proxy, and memory per session. Both scanners
# load the same generated signature database. Postfix runs from a config
# in a temp directory on loopback and discards what it accepts; the
# system's /etc/postfix is not touched. Needs root (Postfix, Dovecot and
# amavisd drop to their users).
#
#   bench/peers/proxy.sh
#
# A run counts from the first message sent until Postfix's queue is empty
# again, so the after-queue amavis path is timed to the end of its scan
# and second queue pass, not only to Postfix's 250.
#
# Environment:
#   SLUICE     the sluice binary                 (default: sluice)
#   SIZES      message sizes in bytes            (default: 4096 1048576)
#   VOLUME     bytes per run and size: a run sends VOLUME/size messages,
#              at least 100 and at most MESSAGES (default: 200000000)
#   MESSAGES   most messages per run             (default: 4000)
#   SESSIONS   parallel SMTP sessions            (default: 10)
#   ROUNDS     measured rounds of each SMTP row  (default: 3)
#   SIGS       generated .ndb signatures both scanners load (default: 20000)
#   AMAVIS     1: add the Postfix + amavisd-new + clamd rows (default: 1)
#   RELAY      1: add rows through HAProxy in plain TCP mode on the
#              proxy's cores: no scanning, no parsing, a connection
#              upstream per client, so what an extra hop costs with no
#              work in it (default: 1)
#   POP3_MSGS  messages per POP3 account for the RETR comparison, 10
#              accounts fetched in parallel straight from Dovecot and
#              through the proxy                 (default: 300; 0: skip)
#   HOLD       then this many sessions each send HOLD_MB of DATA and wait
#              before the end, and the proxy's resident memory per session
#              is printed                        (default: 200; 0: skip)
#   HOLD_MB    megabytes each held session sends (default: 10)
#   PIN        1: the mail server and the clients on CPU 0, the scanners
#              (the proxy; amavisd and clamd) on CPU 1, as if each ran on
#              a machine of its own, the way the proxy is deployed in front
#              of a server; default 0: everything shares every core
set -euo pipefail

SLUICE=${SLUICE:-sluice}
SIZES=${SIZES:-4096 1048576}
VOLUME=${VOLUME:-200000000}
MESSAGES=${MESSAGES:-4000}
SESSIONS=${SESSIONS:-10}
ROUNDS=${ROUNDS:-3}
SIGS=${SIGS:-20000}
AMAVIS=${AMAVIS:-1}
RELAY=${RELAY:-1}
HOLD=${HOLD:-200}
HOLD_MB=${HOLD_MB:-10}
POP3_MSGS=${POP3_MSGS:-300}
PIN=${PIN:-0}
# Who runs where: "${server[@]}" CMD and "${scanner[@]}" CMD (taskset
# execs CMD, so $! stays the command's own pid).
server=() scanner=()
if [ "$PIN" = 1 ]; then
  server=(taskset -c 0) scanner=(taskset -c 1)
fi
P_SMTP=24525 X_SMTP=24526 D_POP3=24110 X_POP3=24111
A_SMTP=24527 AM_IN=24524 AM_OUT=24528 U_SMTP=24529 R_SMTP=24530
H_SMTP=24531 H_POP3=24112

die() { printf 'proxy.sh: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root"
command -v smtp-source >/dev/null || die "smtp-source missing: apt-get install postfix"
if [ "$AMAVIS" = 1 ]; then
  command -v amavisd >/dev/null || die "amavisd missing: apt-get install amavisd-new (or AMAVIS=0)"
  command -v clamd >/dev/null || die "clamd missing: apt-get install clamav-daemon (or AMAVIS=0)"
fi
if [ "$RELAY" = 1 ]; then
  command -v haproxy >/dev/null || die "haproxy missing: apt-get install haproxy (or RELAY=0)"
fi

dir=$(mktemp -d)
cleanup() {
  # Every step runs, whatever the one before returned (a stopped process's
  # exit status would end the function under set -e).
  set +e
  [ -n "${proxy_pid:-}" ] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
  [ -n "${unscanned_pid:-}" ] && kill "$unscanned_pid" 2>/dev/null && wait "$unscanned_pid" 2>/dev/null
  [ -n "${noreuse_pid:-}" ] && kill "$noreuse_pid" 2>/dev/null && wait "$noreuse_pid" 2>/dev/null
  [ -n "${relay_pid:-}" ] && kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
  postfix -c "$dir/postfix" stop >/dev/null 2>&1 || true
  [ -n "${dovecot_pid:-}" ] && kill "$dovecot_pid" 2>/dev/null && wait "$dovecot_pid" 2>/dev/null
  [ -f "$dir/amavis/amavisd.pid" ] && kill "$(cat "$dir/amavis/amavisd.pid")" 2>/dev/null
  [ -n "${clamd_pid:-}" ] && kill "$clamd_pid" 2>/dev/null && wait "$clamd_pid" 2>/dev/null
  sleep 1
  rm -rf "$dir"
}
trap cleanup EXIT

# Postfix: accept everything from loopback, discard it.
mkdir -p "$dir/postfix/queue" "$dir/postfix/data"
chmod 755 "$dir" "$dir/postfix"
chown postfix "$dir/postfix/data"
cat > "$dir/postfix/main.cf" <<CF
compatibility_level = 3.6
queue_directory = $dir/postfix/queue
data_directory = $dir/postfix/data
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = upstream.example.net
mydestination =
mynetworks = 127.0.0.0/8
relay_domains = static:ALL
relay_transport = discard
default_transport = discard
local_recipient_maps =
disable_dns_lookups = yes
smtpd_peername_lookup = no
smtpd_recipient_restrictions = permit
maillog_file = $dir/postfix/maillog
maillog_file_prefixes = $dir
default_process_limit = 400
message_size_limit = 0
CF
awk -v port="127.0.0.1:$P_SMTP" '
  /^#/ || /^[ \t]/ || NF < 8 { print; next }
  { if ($1 == "smtp" && $2 == "inet") $1 = port; $5 = "n"; print }
' /etc/postfix/master.cf > "$dir/postfix/master.cf"
if [ "$AMAVIS" = 1 ]; then
  # The classic after-queue content filter: Postfix hands each message to
  # amavisd, which asks clamd and sends it back to a second smtpd.
  cat >> "$dir/postfix/master.cf" <<CF
127.0.0.1:$A_SMTP inet n - n - - smtpd
  -o content_filter=smtp-amavis:[127.0.0.1]:$AM_IN
smtp-amavis unix - - n - $SESSIONS smtp
  -o smtp_data_done_timeout=1200
  -o smtp_send_xforward_command=yes
  -o disable_dns_lookups=yes
127.0.0.1:$AM_OUT inet n - n - - smtpd
  -o content_filter=
  -o receive_override_options=no_unknown_recipient_checks,no_header_body_checks,no_milters
CF
fi
"${server[@]}" postfix -c "$dir/postfix" start >/dev/null 2>&1 || die "postfix did not start"

# One signature database for both scanners: random .ndb body signatures
# and one for the EICAR test string.
mkdir -p "$dir/db"
python3 - "$dir/db/bench.ndb" "$SIGS" <<'PY'
import random, sys
rng = random.Random(1)
with open(sys.argv[1], 'w') as f:
    for i in range(int(sys.argv[2])):
        n = rng.randint(12, 40)
        f.write('Bench.Sig-%d:0:*:%s\n' % (i, bytes(rng.getrandbits(8) for _ in range(n)).hex()))
PY
printf 'Bench.EICAR:0:*:%s\n' "$(printf '%s' 'X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*' | od -An -tx1 | tr -d ' \n')" >> "$dir/db/bench.ndb"
chmod -R a+rX "$dir/db"

# The head of a config that scans with the bench database, and an SMTP
# entry in front of Postfix listening on a port.
scanning() {
  printf 'hostname = "proxy.example.org"\ndata_dir = "%s"\n[log]\nlevel = "warn"\n[scan]\ndatabases = ["%s/db"]\n' "$1" "$dir"
}
smtp_entry() {
  printf '[[proxy]]\nprotocol = "smtp"\nlisten = "127.0.0.1:%s"\nupstream = "127.0.0.1:%s"\ntls = "none"\nmax_connections_per_ip = 1000\n' "$1" "$P_SMTP"
}
{
  scanning "$dir/data"
  smtp_entry "$X_SMTP"
  cat <<CF
[[proxy]]
protocol = "pop3"
listen = "127.0.0.1:$X_POP3"
upstream = "127.0.0.1:$D_POP3"
tls = "none"
max_connections_per_ip = 1000
CF
} > "$dir/sluice.toml"
"${scanner[@]}" "$SLUICE" proxy --config "$dir/sluice.toml" 2> "$dir/proxy.log" &
proxy_pid=$!
# The same proxy with scanning off: what the extra hop alone costs.
{
  printf 'hostname = "proxy.example.org"\ndata_dir = "%s"\n[log]\nlevel = "error"\n[scan]\nenabled = false\n' "$dir/data-unscanned"
  smtp_entry "$U_SMTP"
} > "$dir/unscanned.toml"
"${scanner[@]}" "$SLUICE" proxy --config "$dir/unscanned.toml" 2> "$dir/unscanned.log" &
unscanned_pid=$!
# The scanning proxy again, with a new upstream connection for every
# client session (upstream_reuse off): what keeping them open saves.
{
  scanning "$dir/data-noreuse"
  smtp_entry "$R_SMTP"
  echo 'upstream_reuse = false'
} > "$dir/noreuse.toml"
"${scanner[@]}" "$SLUICE" proxy --config "$dir/noreuse.toml" 2> "$dir/noreuse.log" &
noreuse_pid=$!

wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  die "nothing listens on port $1"
}
wait_port "$P_SMTP"
wait_port "$X_SMTP"
wait_port "$U_SMTP"
wait_port "$R_SMTP"
if [ "$RELAY" = 1 ]; then
  # HAProxy relays bytes only: what an extra hop costs with no work in it.
  cat > "$dir/haproxy.cfg" <<CF
global
  maxconn 4000
defaults
  mode tcp
  timeout connect 5s
  timeout client 120s
  timeout server 120s
listen smtp
  bind 127.0.0.1:$H_SMTP
  server postfix 127.0.0.1:$P_SMTP
listen pop3
  bind 127.0.0.1:$H_POP3
  server dovecot 127.0.0.1:$D_POP3
CF
  "${scanner[@]}" haproxy -db -f "$dir/haproxy.cfg" > "$dir/haproxy.log" 2>&1 &
  relay_pid=$!
  wait_port "$H_SMTP"
fi

if [ "$AMAVIS" = 1 ]; then
  mkdir -p "$dir/clamd" "$dir/amavis/tmp" "$dir/amavis/db" "$dir/amavis/var"
  cat > "$dir/clamd/clamd.conf" <<CF
Foreground yes
LocalSocket $dir/clamd/clamd.sock
DatabaseDirectory $dir/db
TemporaryDirectory $dir/clamd
LogFile $dir/clamd/clamd.log
MaxThreads $SESSIONS
CF
  "${scanner[@]}" clamd -c "$dir/clamd/clamd.conf" > /dev/null 2>&1 &
  clamd_pid=$!
  chown -R amavis:amavis "$dir/amavis"
  mkdir -p "$dir/amavis-conf"  # amavisd refuses a config it could write to
  cat > "$dir/amavis-conf/amavisd.conf" <<CF
use strict;
\$MYHOME = '$dir/amavis';
\$TEMPBASE = "\$MYHOME/tmp";
\$db_home = "\$MYHOME/db";
\$helpers_home = "\$MYHOME/var";
\$pid_file = "\$MYHOME/amavisd.pid";
\$lock_file = "\$MYHOME/amavisd.lock";
\$daemon_user = 'amavis';
\$daemon_group = 'amavis';
\$myhostname = 'amavis.example.net';
\$mydomain = 'example.net';
\$inet_socket_bind = '127.0.0.1';
\$inet_socket_port = $AM_IN;
@inet_acl = qw(127.0.0.1);
\$forward_method = 'smtp:[127.0.0.1]:$AM_OUT';
\$notify_method = \$forward_method;
\$max_servers = $SESSIONS;
\$max_requests = 100000;
\$DO_SYSLOG = 0;
\$LOGFILE = "\$MYHOME/amavis.log";
\$log_level = 0;
\$enable_db = 0;
\$enable_global_cache = 0;
\$enable_dkim_verification = 0;
\$enable_dkim_signing = 0;
@bypass_spam_checks_maps = (1);
@bypass_banned_checks_maps = (1);
@bypass_header_checks_maps = (1);
\$final_virus_destiny = D_REJECT;
\$virus_admin = undef;
\$warnvirussender = 0;
@local_domains_maps = (1);
@av_scanners = (['ClamAV-clamd', \&ask_daemon, ["CONTSCAN {}\n", '$dir/clamd/clamd.sock'],
  qr/\bOK\$/m, qr/\bFOUND\$/m, qr/^.*?: (?!Infected Archive)(.*) FOUND\$/m ]);
@av_scanners_backup = ();
1;
CF
  for _ in $(seq 600); do [ -S "$dir/clamd/clamd.sock" ] && break; sleep 0.1; done
  [ -S "$dir/clamd/clamd.sock" ] || die "clamd did not start: $(tail -5 "$dir/clamd/clamd.log")"
  "${scanner[@]}" amavisd -c "$dir/amavis-conf/amavisd.conf" start > "$dir/amavis/start.log" 2>&1 || die "amavisd did not start: $(cat "$dir/amavis/start.log")"
  for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$AM_IN") 2>/dev/null && break; sleep 0.1; done
  (exec 3<>"/dev/tcp/127.0.0.1/$AM_IN") 2>/dev/null ||
    die "amavisd does not listen: $(cat "$dir/amavis/start.log" "$dir/amavis/amavis.log" 2>&1 | tail -n 8)"
  wait_port "$A_SMTP"
  # The chain really scans: EICAR sent through it is found by clamd.
  python3 - "$A_SMTP" <<'PY'
import smtplib, sys
eicar = b'X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*'
s = smtplib.SMTP('127.0.0.1', int(sys.argv[1]), timeout=30)
s.sendmail('sender@example.com', ['rcpt@example.net'], b'Subject: eicar\r\n\r\n' + eicar + b'\r\n')
s.quit()
PY
  for _ in $(seq 300); do grep -q 'Bench.EICAR' "$dir/amavis/amavis.log" 2>/dev/null && break; sleep 0.1; done
  grep -q 'Bench.EICAR' "$dir/amavis/amavis.log" || die "amavisd did not find EICAR: $(tail -n 5 "$dir/amavis/amavis.log")"
fi

# CPU time a process has used so far, in milliseconds.
cpu_ms() {
  awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"
}

# Messages in Postfix's queue, not yet delivered (discarded).
queued() {
  find "$dir/postfix/queue/maildrop" "$dir/postfix/queue/incoming" \
    "$dir/postfix/queue/active" "$dir/postfix/queue/deferred" -type f 2>/dev/null | wc -l
}

# The median of numbers, one per line.
median() {
  sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# rows RATES NAME...: a line per name: its rate in each round, then the
# median over the rounds of its rate over the first row's in the same
# round (RATES[row,round]), which cancels the machine's slower drifts.
rows() {
  local -n rates_=$1
  shift
  local names_=("$@") i r line ratios
  for i in "${!names_[@]}"; do
    line="" ratios=""
    for r in $(seq "$ROUNDS"); do
      line+=$(printf ' %8.1f' "${rates_[$i,$r]}")
      ratios+="$(echo "${rates_[$i,$r]} / ${rates_[0,$r]}" | bc -l)"$'\n'
    done
    printf '  %-24s%s   %6.3f\n' "${names_[i]}" "$line" "$(printf '%s' "$ratios" | median)"
  done
}

# run PORT SIZE COUNT: messages/s from the first sent until the queue is empty.
run() {
  local start end
  start=$(date +%s.%N)
  "${server[@]}" smtp-source -c -l "$2" -m "$3" -s "$SESSIONS" \
    -f sender@example.com -t rcpt@example.net "127.0.0.1:$1" > /dev/null
  for _ in $(seq 12000); do [ "$(queued)" = 0 ] && break; sleep 0.05; done
  [ "$(queued)" = 0 ] || die "Postfix's queue did not drain: $(tail -3 "$dir/postfix/maillog")"
  end=$(date +%s.%N)
  echo "$3 / ($end - $start)" | bc -l
}

ports=("$P_SMTP" "$X_SMTP" "$U_SMTP" "$R_SMTP")
names=("direct to Postfix" "through sluice proxy" "  the same, scan off" "  the same, no reuse")
if [ "$RELAY" = 1 ]; then
  ports+=("$H_SMTP")
  names+=("HAProxy, TCP relay only")
fi
if [ "$AMAVIS" = 1 ]; then
  ports+=("$A_SMTP")
  names+=("Postfix+amavisd+clamd")
fi
for size in $SIZES; do
  n=$((VOLUME / size))
  [ "$n" -gt "$MESSAGES" ] && n=$MESSAGES
  [ "$n" -lt 100 ] && n=100
  # A warm-up of each, then ROUNDS measured rounds, alternating.
  for port in "${ports[@]}"; do run "$port" "$size" 50 > /dev/null; done
  declare -A rate
  cpu0=$(cpu_ms "$proxy_pid")
  for r in $(seq "$ROUNDS"); do
    for i in "${!ports[@]}"; do rate[$i,$r]=$(run "${ports[i]}" "$size" "$n"); done
  done
  proxy_cpu=$(( $(cpu_ms "$proxy_pid") - cpu0 ))
  printf 'smtp-source -c -l %s -m %s -s %s, messages/s until the queue is empty, %s rounds (median ratio to direct)\n' \
    "$size" "$n" "$SESSIONS" "$ROUNDS"
  rows rate "${names[@]}"
  printf '  the scanning proxy used %.2f ms of CPU per message (%.1f ms per MB)\n' \
    "$(echo "$proxy_cpu / ($ROUNDS * $n)" | bc -l)" "$(echo "$proxy_cpu * 1048576 / ($ROUNDS * $n * $size)" | bc -l)"
done
if [ "$AMAVIS" = 1 ]; then
  # What each message in flight costs the amavis set-up: an amavisd child
  # (proportional set size: forked children share Perl's pages) and
  # clamd's resident memory, shared by all.
  pss=0 children=0
  for p in $(pgrep -f 'amavisd \((ch[0-9]|virgin)'); do
    pss=$((pss + $(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup"))); children=$((children + 1))
  done
  printf 'amavisd: %d children, %d KiB PSS each; clamd RSS %d KiB\n' "$children" \
    "$((pss / (children > 0 ? children : 1)))" "$(awk '/^VmRSS:/ { print $2 }' "/proc/$clamd_pid/status")"
fi

if [ "$POP3_MSGS" -gt 0 ]; then
  command -v dovecot >/dev/null && [ -x /usr/lib/dovecot/pop3 ] || die "apt-get install dovecot-pop3d"
  mkdir -p "$dir/dovecot/mail"
  : > "$dir/dovecot/passwd"
  for i in $(seq 10); do echo "pop$i@example.org:{PLAIN}secret" >> "$dir/dovecot/passwd"; done
  python3 - "$dir/dovecot/mail" "$POP3_MSGS" <<'PY'
import os, sys
base, n = sys.argv[1], int(sys.argv[2])
body = ''.join('line %04d of a message of about four kilobytes, padded to length....\r\n' % i for i in range(56))
for u in range(1, 11):
    for sub in ('cur', 'new', 'tmp'):
        os.makedirs(os.path.join(base, 'pop%d@example.org' % u, sub), exist_ok=True)
    for m in range(n):
        text = 'From: a@example.com\r\nTo: pop%d@example.org\r\nSubject: %d\r\n\r\n%s' % (u, m, body)
        open(os.path.join(base, 'pop%d@example.org' % u, 'new', '%d.M%d.bench' % (1700000000 + m, m)), 'w').write(text)
PY
  chown -R mail:mail "$dir/dovecot/mail"
  chmod 755 "$dir/dovecot"
  cat > "$dir/dovecot/dovecot.conf" <<CF
base_dir = $dir/dovecot/run
state_dir = $dir/dovecot/state
log_path = $dir/dovecot/dovecot.log
protocols = pop3
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
mail_location = maildir:$dir/dovecot/mail/%u
mail_uid = mail
mail_gid = mail
first_valid_uid = 8
first_valid_gid = 8
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u $dir/dovecot/passwd
}
userdb {
  driver = static
  args = home=$dir/dovecot/mail/%u
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
CF
  "${server[@]}" dovecot -F -c "$dir/dovecot/dovecot.conf" > /dev/null 2>&1 &
  dovecot_pid=$!
  wait_port "$D_POP3"
  wait_port "$X_POP3"
  fetch() {
    "${server[@]}" python3 - "$1" <<'PY'
import poplib, sys, threading, time
port = int(sys.argv[1])
def run(u):
    p = poplib.POP3('127.0.0.1', port, timeout=60)
    p.user('pop%d@example.org' % u)
    p.pass_('secret')
    n, _ = p.stat()
    for i in range(1, n + 1):
        p.retr(i)
    p.quit()
    counts.append(n)
counts = []
start = time.time()
threads = [threading.Thread(target=run, args=(u,)) for u in range(1, 11)]
for t in threads: t.start()
for t in threads: t.join()
print('%.1f' % (sum(counts) / (time.time() - start)))
PY
  }
  fetch "$D_POP3" > /dev/null
  # Rounds alternate the paths; each ratio is the median over the rounds.
  pop_ports=("$D_POP3" "$X_POP3") pop_names=("direct to Dovecot" "through sluice proxy")
  if [ "$RELAY" = 1 ]; then
    pop_ports+=("$H_POP3") pop_names+=("HAProxy, TCP relay only")
  fi
  declare -A pop
  for r in $(seq "$ROUNDS"); do
    for i in "${!pop_ports[@]}"; do pop[$i,$r]=$(fetch "${pop_ports[i]}"); done
  done
  printf 'POP3 RETR, 10 accounts x %s messages of 4 KB in parallel (Python poplib), messages/s, %s rounds (median ratio to direct)\n' \
    "$POP3_MSGS" "$ROUNDS"
  rows pop "${pop_names[@]}"
fi

[ "$HOLD" -gt 0 ] || exit 0
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$proxy_pid/status"; }
before=$(rss)
python3 - "$X_SMTP" "$HOLD" "$proxy_pid" "$before" "$HOLD_MB" <<'PY'
import socket, sys, time
port, n, pid, before = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def rss():
    for line in open('/proc/%s/status' % pid):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
socks = []
for i in range(n):
    s = socket.create_connection(('127.0.0.1', port))
    f = s.makefile('rb')
    f.readline()
    s.sendall(b'HELO bench\r\nMAIL FROM:<a@example.com>\r\nRCPT TO:<b@example.net>\r\nDATA\r\n')
    for _ in range(4):
        f.readline()
    socks.append((s, f))
mb = int(sys.argv[5])
line = b'x' * 998 + b'\r\n'
for s, _ in socks:
    s.sendall(b'Subject: hold\r\n\r\n')
    for _ in range(mb):
        s.sendall(line * 1024)
time.sleep(3)
during = rss()
print('%d sessions each %d MB into DATA: proxy RSS %d KiB before, %d KiB during: %.1f KiB per session'
      % (n, mb, before, during, (during - before) / n))
for s, f in socks:
    s.sendall(b'.\r\n')
    f.readline()
    s.close()
PY
