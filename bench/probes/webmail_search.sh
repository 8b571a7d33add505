#!/usr/bin/env bash
# Webmail search and inbox time on a large mailbox: N messages of 4 KB of
# random words (words_mbox.py) imported into one account, then the
# webmail's inbox page and its search box are timed over HTTP on loopback
# (one kept-alive connection, each request repeated; median and p90 in ms).
#
#   SLUICE=target/release/sluice bench/probes/webmail_search.sh [N]
set -euo pipefail
SLUICE=${SLUICE:-sluice}
N=${1:-21282}
PORT=${PORT:-2792}
. "$(dirname "$0")/probe_lib.sh"
probe_setup web-search "http=127.0.0.1:$PORT"
probe_fill "$N"
probe_serve
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
python3 - "$PORT" <<'PYEOF'
import http.client, statistics, sys, time, urllib.parse
port = int(sys.argv[1])
c = http.client.HTTPConnection("127.0.0.1", port)
c.request("POST", "/login", urllib.parse.urlencode({"address": "alice@example.org", "password": "pw"}),
          {"Content-Type": "application/x-www-form-urlencoded"})
r = c.getresponse(); r.read()
assert r.status == 303, r.status
cookie = "; ".join(v.split(";")[0] for k, v in r.getheaders() if k.lower() == "set-cookie")
def get(path):
    c.request("GET", path, headers={"Cookie": cookie})
    r = c.getresponse()
    body = r.read()
    return r, body
r, _ = get("/")
inbox = r.getheader("Location")
assert r.status in (302, 303) and inbox.startswith("/mail/"), (r.status, inbox)
def timed(label, path, runs=30):
    get(path)  # the first answer warms the caches; the rest are timed
    ms = []
    for _ in range(runs):
        start = time.perf_counter()
        r, body = get(path)
        ms.append((time.perf_counter() - start) * 1000)
        assert r.status == 200, (path, r.status)
    ms.sort()
    rows = body.count(b"data-uid=")
    print("%-44s median %7.2f ms  p90 %7.2f ms  %7d bytes  %3d rows" %
          (label, statistics.median(ms), ms[int(len(ms) * 0.9)], len(body), rows))
timed("inbox, first page", inbox)
timed("inbox, page 100", inbox + "?page=100")
for q, what in (("needle7", "rare word (1 message in 1,000)"), ("haystack", "common word (1 in 2)"),
                ("Sender 3", "sender name"), ("fill 12345", "subject substring"),
                ("zzzabsent", "no match")):
    timed("search, " + what, inbox + "?q=" + urllib.parse.quote(q))
PYEOF
