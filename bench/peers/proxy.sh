#!/usr/bin/env bash
# SMTP throughput straight to Postfix against through `sluice proxy` in
# front of the same Postfix, side by side in one run, with Postfix's own
# load generator (smtp-source). Postfix runs from a config in a temp
# directory on loopback and discards what it accepts; the system's
# /etc/postfix is not touched. Needs root (Postfix drops to its user).
#
#   bench/peers/proxy.sh
#
# Environment:
#   SLUICE     the sluice binary                 (default: sluice)
#   MESSAGES   messages per run                  (default: 4000)
#   SIZE       message size in bytes             (default: 4096)
#   SESSIONS   parallel SMTP sessions            (default: 10)
#   POP3_MSGS  messages per POP3 account for the RETR comparison, 10
#              accounts fetched in parallel straight from Dovecot and
#              through the proxy                 (default: 300; 0: skip)
#   HOLD       then this many sessions each send 1 MB of DATA and wait
#              before the end, and the proxy's resident memory per session
#              is printed                        (default: 200; 0: skip)
set -euo pipefail

SLUICE=${SLUICE:-sluice}
MESSAGES=${MESSAGES:-4000}
SIZE=${SIZE:-4096}
SESSIONS=${SESSIONS:-10}
HOLD=${HOLD:-200}
POP3_MSGS=${POP3_MSGS:-300}
P_SMTP=24525 X_SMTP=24526 D_POP3=24110 X_POP3=24111

die() { printf 'proxy.sh: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root"
command -v smtp-source >/dev/null || die "smtp-source missing: apt-get install postfix"

dir=$(mktemp -d)
cleanup() {
  [ -n "${proxy_pid:-}" ] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
  postfix -c "$dir/postfix" stop >/dev/null 2>&1 || true
  [ -n "${dovecot_pid:-}" ] && kill "$dovecot_pid" 2>/dev/null && wait "$dovecot_pid" 2>/dev/null
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
CF
awk -v port="127.0.0.1:$P_SMTP" '
  /^#/ || /^[ \t]/ || NF < 8 { print; next }
  { if ($1 == "smtp" && $2 == "inet") $1 = port; $5 = "n"; print }
' /etc/postfix/master.cf > "$dir/postfix/master.cf"
postfix -c "$dir/postfix" start >/dev/null 2>&1 || die "postfix did not start"

cat > "$dir/sluice.toml" <<CF
hostname = "proxy.example.org"
data_dir = "$dir/data"
[log]
level = "warn"
[[proxy]]
protocol = "smtp"
listen = "127.0.0.1:$X_SMTP"
upstream = "127.0.0.1:$P_SMTP"
tls = "none"
max_connections_per_ip = 1000
[[proxy]]
protocol = "pop3"
listen = "127.0.0.1:$X_POP3"
upstream = "127.0.0.1:$D_POP3"
tls = "none"
max_connections_per_ip = 1000
CF
"$SLUICE" proxy --config "$dir/sluice.toml" 2> "$dir/proxy.log" &
proxy_pid=$!

wait_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  die "nothing listens on port $1"
}
wait_port "$P_SMTP"
wait_port "$X_SMTP"

run() {
  local start end
  start=$(date +%s.%N)
  smtp-source -c -l "$SIZE" -m "$MESSAGES" -s "$SESSIONS" \
    -f sender@example.com -t rcpt@example.net "127.0.0.1:$1" > /dev/null
  end=$(date +%s.%N)
  echo "$MESSAGES / ($end - $start)" | bc -l
}

# A warm-up of each, then the measured runs, alternating.
MESSAGES=200 run "$P_SMTP" >/dev/null
MESSAGES=200 run "$X_SMTP" >/dev/null
direct=$(run "$P_SMTP")
proxied=$(run "$X_SMTP")
direct2=$(run "$P_SMTP")
proxied2=$(run "$X_SMTP")
printf 'smtp-source -c -l %s -m %s -s %s, messages/s\n' "$SIZE" "$MESSAGES" "$SESSIONS"
printf '  direct to Postfix      %8.1f  %8.1f\n' "$direct" "$direct2"
printf '  through sluice proxy   %8.1f  %8.1f\n' "$proxied" "$proxied2"
printf '  ratio                  %8.3f\n' "$(echo "($proxied + $proxied2) / ($direct + $direct2)" | bc -l)"

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
  dovecot -F -c "$dir/dovecot/dovecot.conf" > /dev/null 2>&1 &
  dovecot_pid=$!
  wait_port "$D_POP3"
  wait_port "$X_POP3"
  fetch() {
    python3 - "$1" <<'PY'
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
  pd=$(fetch "$D_POP3"); px=$(fetch "$X_POP3"); pd2=$(fetch "$D_POP3"); px2=$(fetch "$X_POP3")
  printf 'POP3 RETR, 10 accounts x %s messages of 4 KB in parallel (Python poplib), messages/s\n' "$POP3_MSGS"
  printf '  direct to Dovecot      %8.1f  %8.1f\n' "$pd" "$pd2"
  printf '  through sluice proxy   %8.1f  %8.1f\n' "$px" "$px2"
  printf '  ratio                  %8.3f\n' "$(echo "($px + $px2) / ($pd + $pd2)" | bc -l)"
fi

[ "$HOLD" -gt 0 ] || exit 0
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$proxy_pid/status"; }
before=$(rss)
python3 - "$X_SMTP" "$HOLD" "$proxy_pid" "$before" <<'PY'
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
chunk = b'Subject: hold\r\n\r\n' + (b'x' * 998 + b'\r\n') * 1024
for s, _ in socks:
    s.sendall(chunk)
time.sleep(3)
during = rss()
print('%d sessions each 1 MB into DATA: proxy RSS %d KiB before, %d KiB during: %.1f KiB per session'
      % (n, before, during, (during - before) / n))
for s, f in socks:
    s.sendall(b'.\r\n')
    f.readline()
    s.close()
PY
