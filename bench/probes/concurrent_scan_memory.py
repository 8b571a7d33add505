#!/usr/bin/env python3
"""Resident memory per connection while many clients stream large mails.

N connections each send one message with a zipped attachment of --size-mb
(random content, so the zip is about that size; base64 on the wire). All of
them stop half-way through DATA together; the server's resident memory is
read then, with every connection in its data stage, and compared with the
idle baseline. Then they finish, and the replies are counted.

    concurrent_scan_memory.py --server 127.0.0.1:2525 --pid $(pgrep -f 'sluice serve') \
        --rcpt alice@example.org --connections 200 --size-mb 10
"""
import argparse
import base64
import io
import os
import socket
import threading
import time
import zipfile


def rss_kb(pid, field="VmRSS:"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def message(rcpt, size_mb):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("data.bin", os.urandom(size_mb * 1024 * 1024))
    b64 = base64.encodebytes(buf.getvalue()).replace(b"\n", b"\r\n")
    head = (f"From: probe@remote.test\r\nTo: {rcpt}\r\nSubject: zipped attachment\r\n"
            "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n"
            "--b\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n"
            "--b\r\nContent-Type: application/zip; name=data.zip\r\n"
            "Content-Transfer-Encoding: base64\r\n\r\n").encode()
    return head + b64 + b"--b--\r\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="127.0.0.1:2525")
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--rcpt", required=True)
    ap.add_argument("--connections", type=int, default=200)
    ap.add_argument("--size-mb", type=int, default=10)
    args = ap.parse_args()
    host, port = args.server.rsplit(":", 1)
    body = message(args.rcpt, args.size_mb)
    half = len(body) // 2
    baseline = rss_kb(args.pid)
    halfway = threading.Barrier(args.connections + 1)
    resume = threading.Event()
    replies = []

    def client(i):
        src = f"127.2.{i // 250}.{i % 250 + 1}"
        s = socket.create_connection((host, int(port)), source_address=(src, 0))
        f = s.makefile("rb")

        def reply():
            while True:
                line = f.readline().decode()
                if not line or line[3:4] == " ":
                    return line.strip()

        reply()
        s.sendall(f"EHLO probe\r\nMAIL FROM:<probe@remote.test>\r\nRCPT TO:<{args.rcpt}>\r\nDATA\r\n".encode())
        for _ in range(4):
            reply()
        s.sendall(body[:half])
        halfway.wait()
        resume.wait()
        s.sendall(body[half:] + b".\r\n")
        replies.append(reply()[:3])
        s.sendall(b"QUIT\r\n")
        s.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.connections)]
    started = time.monotonic()
    for t in threads:
        t.start()
    halfway.wait()
    time.sleep(1.0)  # let the server drain what is in flight
    mid = rss_kb(args.pid)
    resume.set()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    codes = {c: replies.count(c) for c in sorted(set(replies))}
    print(f"connections={args.connections} message_bytes={len(body)} replies={codes} seconds={elapsed:.1f} "
          f"rss_idle_kb={baseline} rss_halfway_kb={mid} per_connection_kb={(mid - baseline) / args.connections:.0f} "
          f"peak_kb={rss_kb(args.pid, 'VmHWM:')} mb_per_sec={len(body) * args.connections / elapsed / 1e6:.1f}")


if __name__ == "__main__":
    main()
