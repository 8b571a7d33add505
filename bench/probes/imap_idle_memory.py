#!/usr/bin/env python3
"""Resident memory a server spends per logged-in IMAP connection in IDLE.

Opens N connections, logs each in, SELECTs INBOX and starts IDLE, keeps
them all open, and reads the server's resident memory (VmRSS, from /proc)
before and after. Then delivers nothing and checks every connection is
still idling. Works against any IMAP server whose process id(s) you give
(for Dovecot, every imap and imap-login process); run it on the server's
machine. Raise the open-file limit (ulimit -n) first for large N.

    imap_idle_memory.py --server 127.0.0.1:1143 --pid $(pgrep -f 'sluice serve') \
        --connections 1000 --user user1@example.org --password secret
"""
import argparse
import socket
import time


def rss_kb(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def read_tagged(f, tag):
    while True:
        line = f.readline()
        if not line:
            raise SystemExit(f"connection closed waiting for {tag.decode()}")
        if line.startswith(tag + b" "):
            if not line.startswith(tag + b" OK"):
                raise SystemExit(f"server said: {line!r}")
            return


def idle_session(host, port, args, i, prefix):
    """A connection logged in, with INBOX selected, in IDLE."""
    # One client address per 20 connections keeps per-address limits out of the way.
    src = f"{prefix}.{i // 20 // 250}.{i // 20 % 250 + 1}"
    s = socket.create_connection((host, int(port)), source_address=(src, 0))
    f = s.makefile("rb")
    f.readline()  # greeting
    s.sendall(f'a LOGIN "{args.user}" "{args.password}"\r\n'.encode())
    read_tagged(f, b"a")
    s.sendall(b"b SELECT INBOX\r\n")
    read_tagged(f, b"b")
    s.sendall(b"c IDLE\r\n")
    if not f.readline().startswith(b"+"):
        raise SystemExit("IDLE was not accepted")
    return s, f


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="127.0.0.1:1143")
    ap.add_argument("--pid", required=True, help="server process id(s), comma-separated")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--user", default="user1@example.org")
    ap.add_argument("--password", default="password")
    ap.add_argument("--source-prefix", default="127.2", help="spread clients over PREFIX.x.y")
    ap.add_argument("--warmup", type=int, default=0,
                    help="first open and close this many sessions, so one-time growth "
                         "(database page caches, allocator arenas) is not counted per connection")
    args = ap.parse_args()
    host, port = args.server.rsplit(":", 1)
    pids = [int(p) for p in args.pid.split(",")]
    if args.warmup:
        warm = [idle_session(host, port, args, i, "127.9") for i in range(args.warmup)]
        for s, f in warm:
            s.sendall(b"DONE\r\nd LOGOUT\r\n")
            s.close()
    time.sleep(0.5)
    before = rss_kb(pids)
    conns = [idle_session(host, port, args, i, args.source_prefix) for i in range(args.connections)]
    time.sleep(2.0)
    after = rss_kb(pids)
    added = after - before
    print(f"connections={args.connections} rss_before_kb={before} rss_after_kb={after} "
          f"added_kb={added} per_connection_kb={added / args.connections:.2f}")
    for s, f in conns:
        s.sendall(b"DONE\r\n")
    ended = 0
    for s, f in conns:
        while True:
            line = f.readline()
            if not line or line.startswith(b"c "):
                ended += line.startswith(b"c OK")
                break
        s.close()
    print(f"idle_done_ok={ended}")


if __name__ == "__main__":
    main()
