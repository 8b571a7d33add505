#!/usr/bin/env bash
# Memory of a large import: an mbox of GB gigabytes (messages of 1 MiB of
# text) brought into a fresh store with `sluice import`; prints the import's
# own rate line and its peak resident memory (from /usr/bin/time), against
# a 1-message import as the baseline.
#
#   SLUICE=target/release/sluice bench/probes/import_memory.sh [GB]
set -euo pipefail
SLUICE=${SLUICE:-sluice}
GB=${1:-2}
T=$(mktemp -d /tmp/sluice-import-memory.XXXXXX)
trap 'rm -rf "$T"' EXIT
python3 - "$T" "$GB" <<'PYEOF'
import sys
root, gb = sys.argv[1], float(sys.argv[2])
line = b"y" * 76 + b"\n"
body = line * (1024 * 1024 // len(line))
n = int(gb * 1024)
for name, count in (("big.mbox", n), ("one.mbox", 1)):
    with open("%s/%s" % (root, name), "wb") as f:
        for i in range(count):
            f.write(b"From a@origin.test Mon Jan  1 10:00:00 2024\n")
            f.write(b"From: a@origin.test\nSubject: part %d\nMessage-ID: <%d@origin.test>\n\n" % (i, i))
            f.write(body)
            f.write(b"\n")
PYEOF
for run in one big; do
    rm -rf "$T/data"
    "$SLUICE" domain add example.org --data "$T/data" >/dev/null
    echo pw | "$SLUICE" user add alice@example.org --password-stdin --data "$T/data" >/dev/null
    echo "$run.mbox: $(du -h "$T/$run.mbox" | cut -f1)"
    /usr/bin/time -f "peak_rss_kb=%M seconds=%e" "$SLUICE" import alice@example.org mbox "$T/$run.mbox" --data "$T/data" 2>&1 | tail -2
done
