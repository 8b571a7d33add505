#!/usr/bin/env python3
"""Resident memory a server spends per pre-trust SMTP connection.

Opens N connections, has each say EHLO, MAIL and RCPT to an unknown user
(answered 550), keeps them all open, and reads the server's resident memory
(VmRSS, from /proc) before and after. Works against any SMTP server whose
process id you give; run it on the server's machine.

    pretrust_memory.py --server 127.0.0.1:2525 --pid $(pgrep -f 'sluice serve') \
        --connections 2000 --rcpt nobody@example.org
"""
import argparse
import socket
import time


def rss_kb(pids):
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="127.0.0.1:2525")
    ap.add_argument("--pid", required=True, help="server process id(s), comma-separated")
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--rcpt", default="nobody@example.org")
    ap.add_argument("--source-prefix", default="127.1", help="spread clients over PREFIX.x.y")
    args = ap.parse_args()
    host, port = args.server.rsplit(":", 1)
    pids = [int(p) for p in args.pid.split(",")]
    time.sleep(0.5)
    before = rss_kb(pids)
    conns = []
    for i in range(args.connections):
        # One client address per 50 connections keeps per-address limits out of the way.
        src = f"{args.source_prefix}.{i // 50 // 250}.{i // 50 % 250 + 1}"
        s = socket.create_connection((host, int(port)), source_address=(src, 0))
        s.sendall(f"EHLO probe\r\nMAIL FROM:<a@remote.test>\r\nRCPT TO:<{args.rcpt}>\r\n".encode())
        conns.append((s, s.makefile("rb")))
    refused = 0
    for s, f in conns:
        while True:
            line = f.readline()
            if not line:
                break
            if line[:3] in (b"550", b"554", b"450", b"421"):
                refused += 1
                break
    time.sleep(1.0)
    after = rss_kb(pids)
    added = after - before
    print(f"connections={args.connections} refused_rcpt={refused} rss_before_kb={before} "
          f"rss_after_kb={after} added_kb={added} per_connection_kb={added / args.connections:.2f}")
    for s, _ in conns:
        s.close()


if __name__ == "__main__":
    main()
