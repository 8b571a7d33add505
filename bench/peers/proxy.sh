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
#   HOLD       then this many sessions each send 1 MB of DATA and wait
#              before the end, and the proxy's resident memory per session
#              is printed                        (default: 200; 0: skip)
set -euo pipefail

SLUICE=${SLUICE:-sluice}
MESSAGES=${MESSAGES:-4000}
SIZE=${SIZE:-4096}
SESSIONS=${SESSIONS:-10}
HOLD=${HOLD:-200}
P_SMTP=24525 X_SMTP=24526

die() { printf 'proxy.sh: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root"
command -v smtp-source >/dev/null || die "smtp-source missing: apt-get install postfix"

dir=$(mktemp -d)
cleanup() {
  [ -n "${proxy_pid:-}" ] && kill "$proxy_pid" 2>/dev/null && wait "$proxy_pid" 2>/dev/null
  postfix -c "$dir/postfix" stop >/dev/null 2>&1 || true
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
