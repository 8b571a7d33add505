#!/usr/bin/env python3
"""Fills the webmail accounts web1..webN@DOMAIN with the same messages of
1-120 KB on each SMTP port given (Sluice's and the peers'), so both
webmails show the same inboxes.

    fill-webmail.py DOMAIN USERS MESSAGES_PER_USER SMTP_PORT...
"""
import random
import smtplib
import sys

domain, users, fill = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
line = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.\r\n"
for port in sys.argv[4:]:
    rng = random.Random(1)  # the same sizes on every side
    s = smtplib.SMTP("127.0.0.1", int(port))
    for u in range(1, users + 1):
        for n in range(fill):
            size = rng.randint(1024, 120 * 1024)
            head = (
                f"From: Sender {n} <sender{n}@remote.test>\r\n"
                f"To: web{u}@{domain}\r\n"
                f"Subject: message {n} of {fill}\r\n"
                f"Message-ID: <fill-{u}-{n}@remote.test>\r\n"
                "Date: Tue, 24 Nov 2026 10:00:00 +0000\r\n\r\n"
            )
            s.sendmail("sender@remote.test", [f"web{u}@{domain}"], (head + line * (size // len(line))).encode())
    s.quit()
