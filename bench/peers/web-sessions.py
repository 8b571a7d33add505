#!/usr/bin/env python3
"""Memory per logged-in webmail session: the resident size of the Sluice
process PID before and after 1,000 logins that stay logged in (none logs
out). Prints a JSON line.

    web-sessions.py HOST:PORT ADDRESS PASSWORD PID
"""
import http.client
import json
import sys
import urllib.parse

addr, user, password, pid = sys.argv[1:5]
host, port = addr.rsplit(":", 1)


def rss():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise SystemExit("no VmRSS for pid " + pid)


n = 1000
body = urllib.parse.urlencode({"address": user, "password": password})
before = rss()
for _ in range(n):
    c = http.client.HTTPConnection(host, int(port))
    c.request("POST", "/login", body, {"Content-Type": "application/x-www-form-urlencoded"})
    r = c.getresponse()
    r.read()
    c.close()
    if r.status != 303:
        raise SystemExit(f"login answered {r.status}")
after = rss()
print(json.dumps({"sessions": n, "rss_before": before, "rss_after": after,
                  "bytes_per_session": max(0, after - before) / n}))
