#!/usr/bin/env bash
# Import speed: the same N messages brought into a fresh Sluice store from
# an mbox file and from a live Dovecot over IMAP (`sluice import`), each
# timed with its own rate line (messages/s, MB/s, peak memory).
#
# Runs as root (Dovecot's mail belongs to the `mail` user); everything in
# a temp directory, removed on exit.
#
#   SLUICE=target/release/sluice bench/probes/import_speed.sh [N] [SIZE]
#
# N messages (default 10000) of SIZE bytes (default 4096).
set -euo pipefail
SLUICE=${SLUICE:-sluice}
N=${1:-10000}
SIZE=${2:-4096}
T=$(mktemp -d /tmp/sluice-import.XXXXXX)
chmod 755 "$T"
DOVECOT_PID=
cleanup() {
    set +e
    [ -n "$DOVECOT_PID" ] && kill "$DOVECOT_PID" && wait "$DOVECOT_PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

# The messages, as Dovecot's Maildir and as one mbox.
mkdir -p "$T/mail/alice@example.org/cur" "$T/mail/alice@example.org/new" "$T/mail/alice@example.org/tmp"
python3 - "$T" "$N" "$SIZE" <<'PYEOF'
import os, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cur = os.path.join(root, "mail", "alice@example.org", "cur")
line = "x" * 76 + "\r\n"
with open(os.path.join(root, "all.mbox"), "wb") as mbox:
    for i in range(n):
        head = "From: a@origin.test\r\nTo: alice@example.org\r\nSubject: message %d\r\nMessage-ID: <%d@origin.test>\r\n\r\n" % (i, i)
        body = line * max(1, (size - len(head)) // len(line))
        msg = (head + body).encode()
        with open(os.path.join(cur, "%d.M%dP1.bench,S=%d:2,S" % (1700000000 + i, i, len(msg))), "wb") as f:
            f.write(msg)
        mbox.write(b"From a@origin.test Mon Jan  1 10:00:00 2024\n")
        mbox.write(msg.replace(b"\r\n", b"\n"))
        mbox.write(b"\n")
PYEOF
chown -R mail:mail "$T/mail"
echo "alice@example.org:{PLAIN}secret" >"$T/passwd"
port=24143
cat >"$T/dovecot.conf" <<EOF
base_dir = $T/run
state_dir = $T/state
log_path = $T/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
mail_location = maildir:$T/mail/%u
mail_uid = mail
mail_gid = mail
first_valid_uid = 8
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u $T/passwd
}
userdb {
  driver = static
  args = home=$T/mail/%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = $port
  }
  inet_listener imaps {
    port = 0
  }
}
EOF
dovecot -F -c "$T/dovecot.conf" &
DOVECOT_PID=$!
for _ in $(seq 1 100); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
echo secret >"$T/password"
# Dovecot indexes the Maildir at its first SELECT: done before the timing,
# as on a server that has been running.
python3 - "$port" <<'PYEOF2'
import imaplib, sys
m = imaplib.IMAP4("127.0.0.1", int(sys.argv[1])); m.login("alice@example.org", "secret")
m.select("INBOX", readonly=True); m.fetch("1:*", "(FLAGS)"); m.logout()
PYEOF2

run() { # NAME SOURCE-ARGS...
    local name=$1
    shift
    mkdir -p "$T/$name"
    printf 'hostname = "mx.example.org"\ndata_dir = "%s/%s/data"\n[log]\nlevel = "warn"\n' "$T" "$name" >"$T/$name/sluice.toml"
    $SLUICE --config "$T/$name/sluice.toml" domain add example.org >/dev/null
    echo secret | $SLUICE --config "$T/$name/sluice.toml" user add alice@example.org --password-stdin >/dev/null
    echo "== $name"
    $SLUICE --config "$T/$name/sluice.toml" import alice@example.org "$@" 2>&1 | tail -n 1
}
run mbox mbox "$T/all.mbox"
run imap imap "imap://alice%40example.org@127.0.0.1:$port" --password-file "$T/password"
