#!/usr/bin/env python3
"""IDLE notification latency: mail in over SMTP on one server, EXISTS out
of an IDLE on another (or the same).

    idle-latency.py SMTP_HOST:PORT IMAP_HOST:PORT USER PASSWORD [COUNT] > report.json

For each of COUNT messages (default 200), one at a time: the message is
sent to USER over SMTP, and the time from the end of its transaction (the
`250` to the final dot, when the store has committed it) to the untagged
`EXISTS` the IDLE session receives is taken. A reader thread stamps each
line as it arrives, so the wait is not rounded to the sender's steps; a
notice that arrives before the sender has read its `250` counts as 0.
Prints p50, p90, p99 and the largest wait in milliseconds.
"""
import json
import smtplib
import socket
import sys
import threading
import time


def pct(sorted_values, p):
    if not sorted_values:
        return None
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


class Idler:
    """One IMAP session in IDLE on INBOX; stamps every EXISTS it reads."""

    def __init__(self, where, user, password):
        host, port = where.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.file = self.sock.makefile("rb")
        self.line()  # greeting
        self.command(b"a LOGIN %s %s" % (user.encode(), password.encode()), b"a ")
        self.command(b"b SELECT INBOX", b"b ")
        self.sock.sendall(b"c IDLE\r\n")
        while not self.line().startswith(b"+"):
            pass
        self.exists = []
        self.cond = threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()

    def line(self):
        data = self.file.readline()
        if not data:
            raise SystemExit("the IMAP server closed the connection")
        return data

    def command(self, text, tag):
        self.sock.sendall(text + b"\r\n")
        while True:
            data = self.line()
            if data.startswith(tag):
                if not data[len(tag):].startswith(b"OK"):
                    raise SystemExit("IMAP: %r" % data)
                return

    def read(self):
        while True:
            data = self.line()
            if data.startswith(b"* ") and data.rstrip().endswith(b"EXISTS"):
                with self.cond:
                    self.exists.append(time.monotonic())
                    self.cond.notify_all()

    def wait(self, count, deadline):
        with self.cond:
            while len(self.exists) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)
            return self.exists[count - 1]


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    smtp_at, imap_at, user, password = sys.argv[1:5]
    count = int(sys.argv[5]) if len(sys.argv) > 5 else 200
    idler = Idler(imap_at, user, password)
    host, port = smtp_at.rsplit(":", 1)
    smtp = smtplib.SMTP(host, int(port), timeout=60)
    smtp.ehlo("latency.example")
    waits, missed = [], 0
    for i in range(count):
        body = ("From: probe@latency.example\r\nTo: %s\r\nSubject: idle %d\r\n"
                "Message-ID: <idle-%d-%f@latency.example>\r\n\r\nprobe %d\r\n" % (user, i, i, time.time(), i))
        smtp.sendmail("probe@latency.example", [user], body)
        done = time.monotonic()
        seen = idler.wait(i + 1 - missed, time.monotonic() + 10)
        if seen is None:
            missed += 1
            continue
        waits.append(max(0.0, seen - done) * 1000)
    smtp.quit()
    waits.sort()
    report = {"smtp": smtp_at, "imap": imap_at, "messages": count, "missed": missed,
              "p50_ms": pct(waits, 50), "p90_ms": pct(waits, 90), "p99_ms": pct(waits, 99),
              "max_ms": waits[-1] if waits else None}
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
