#!/usr/bin/env python3
"""Peak resident memory of a server while it receives one large message.

Sends a message of --size bytes over SMTP (DATA, streamed in 1 MB blocks)
while sampling the server's VmRSS every 20 ms, then prints the baseline, the
peak during the transfer, and the seconds it took until the 250.

    big_message_memory.py --server 127.0.0.1:2525 --pid $(pgrep -f 'sluice serve') \
        --rcpt alice@example.org --size 50000000
"""
import argparse
import socket
import threading
import time


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="127.0.0.1:2525")
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--rcpt", required=True)
    ap.add_argument("--size", type=int, default=50_000_000)
    args = ap.parse_args()
    host, port = args.server.rsplit(":", 1)
    baseline = rss_kb(args.pid)
    peak = [baseline]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kb(args.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    s = socket.create_connection((host, int(port)))
    f = s.makefile("rb")

    def reply():
        while True:
            line = f.readline().decode()
            if line[3:4] == " ":
                return line.strip()

    reply()
    s.sendall(f"EHLO probe\r\nMAIL FROM:<a@remote.test>\r\nRCPT TO:<{args.rcpt}>\r\nDATA\r\n".encode())
    for _ in range(4):
        r = reply()
    assert r.startswith("354"), r
    started = time.monotonic()
    s.sendall(b"Subject: large message probe\r\n\r\n")
    line = b"x" * 998 + b"\r\n"
    block = line * 1000
    sent = 0
    while sent < args.size:
        s.sendall(block)
        sent += len(block)
    s.sendall(b".\r\n")
    final = reply()
    elapsed = time.monotonic() - started
    done.set()
    sampler.join()
    s.sendall(b"QUIT\r\n")
    print(f"size={sent} reply={final[:3]} seconds={elapsed:.2f} rss_baseline_kb={baseline} "
          f"rss_peak_kb={peak[0]} added_peak_kb={peak[0] - baseline}")


if __name__ == "__main__":
    main()
