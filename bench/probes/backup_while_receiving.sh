#!/usr/bin/env bash
# Backup of a filled store while SMTP mail keeps arriving: N messages of
# 4 KB are imported first, then `sluice serve` runs with four SMTP senders
# going on while `sluice backup` takes its snapshot. Prints the backup's
# time and size, the store's size, and how many messages the snapshot holds
# against how many were acknowledged before it started and by its end.
#
#   SLUICE=target/release/sluice bench/probes/backup_while_receiving.sh [N]
#
# Messages are 650 random words from a 5,000-word vocabulary (words_mbox.py:
# compresses about as well as mail text), so sizes are not those of one
# repeated byte.
set -euo pipefail
SLUICE=${SLUICE:-sluice}
N=${1:-21282}
PORT=${PORT:-2791}
. "$(dirname "$0")/probe_lib.sh"
probe_setup backup "smtp=127.0.0.1:$PORT"
probe_fill "$N"
probe_serve
sleep 2
python3 - "$PORT" "$T" "$SLUICE" "$N" <<'PYEOF'
import smtplib, sqlite3, subprocess, sys, threading, time, os
port, root, sluice, filled = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
acked = [0]
stop = threading.Event()
lock = threading.Lock()
def sender():
    s = smtplib.SMTP("127.0.0.1", port)
    while not stop.is_set():
        s.sendmail("b@origin.test", ["alice@example.org"], b"Subject: live\r\n\r\n" + b"w" * 4000 + b"\r\n")
        with lock:
            acked[0] += 1
    s.quit()
threads = [threading.Thread(target=sender) for _ in range(4)]
for t in threads:
    t.start()
time.sleep(2)
with lock:
    before = acked[0]
start = time.monotonic()
subprocess.run([sluice, "backup", root + "/snap", "--config", root + "/sluice.toml"], check=True, capture_output=True)
seconds = time.monotonic() - start
with lock:
    after = acked[0]
time.sleep(1)
stop.set()
for t in threads:
    t.join()
def du(p):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(p) for f in fs)
snap = [os.path.join(d, f) for d, _, fs in os.walk(root + "/snap") for f in fs if f.endswith(".db")]
held = sqlite3.connect(snap[0]).execute("SELECT count(*) FROM messages").fetchone()[0]
print("backup_seconds=%.2f backup_mb=%.1f store_mb=%.1f messages_in_snapshot=%d filled=%d live_acked_before=%d live_acked_by_end=%d"
      % (seconds, du(root + "/snap") / 1e6, du(root + "/data") / 1e6, held, filled, before, after))
PYEOF
