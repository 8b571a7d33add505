#!/usr/bin/env python3
"""Resident memory a server spends per logged-in IMAP connection in IDLE.

Opens N connections, logs each in, SELECTs INBOX and starts IDLE, keeps
them all open, and reads the server's memory (proportional set size, from
/proc) before and after; then ends every IDLE with DONE. Works against any
IMAP server on this machine: give its process id, or for a server with a
process per connection (Dovecot) a command that lists them all.

    imap_idle_memory.py --server 127.0.0.1:1143 --pid $(pgrep -f 'sluice serve') \
        --connections 1000 --user user1@example.org --password secret
    imap_idle_memory.py --server 127.0.0.1:143 --pids-cmd 'pgrep -f "^dovecot|dovecot/"' ...
"""
import argparse
import socket
import subprocess
import time


def memory_kb(pids):
    """Proportional set size (Pss) summed over the processes: pages shared
    between processes (a per-connection server's code and libraries) are
    counted once, not once per process. For one process it equals VmRSS."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def server_pids(args):
    if args.pids_cmd:
        out = subprocess.run(args.pids_cmd, shell=True, capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]
    return [int(p) for p in args.pid.split(",")]


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
    ap.add_argument("--pid", help="server process id(s), comma-separated")
    ap.add_argument("--pids-cmd", help="shell command printing the server's process ids, "
                    "run before and after the connections open (per-connection servers)")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--user", default="user1@example.org")
    ap.add_argument("--password", default="password")
    ap.add_argument("--source-prefix", default="127.2", help="spread clients over PREFIX.x.y")
    ap.add_argument("--warmup", type=int, default=0,
                    help="first open and close this many sessions, so one-time growth "
                         "(database page caches, allocator arenas) is not counted per connection")
    args = ap.parse_args()
    host, port = args.server.rsplit(":", 1)
    if not args.pid and not args.pids_cmd:
        ap.error("give --pid or --pids-cmd")
    if args.warmup:
        warm = [idle_session(host, port, args, i, "127.9") for i in range(args.warmup)]
        for s, f in warm:
            s.sendall(b"DONE\r\nd LOGOUT\r\n")
            s.close()
    # Let the allocator give back what the warm-up freed before measuring.
    time.sleep(3.0)
    before = memory_kb(server_pids(args))
    conns = [idle_session(host, port, args, i, args.source_prefix) for i in range(args.connections)]
    time.sleep(2.0)
    after = memory_kb(server_pids(args))
    added = after - before
    print(f"connections={args.connections} pss_before_kb={before} pss_after_kb={after} "
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
