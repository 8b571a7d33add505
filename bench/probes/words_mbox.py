#!/usr/bin/env python3
"""An mbox of N messages of about 4 KB of random words, for the probes that
need a realistically compressible store (not one repeated byte).

    words_mbox.py PATH N

Each message is 650 words drawn from a 5,000-word vocabulary (fixed seed:
the same file on every run), with a numbered subject; message i also
carries the word "needle<i mod 1000>", so a search for one such word
finds about N/1000 messages, and every second message the word "haystack".
"""
import random
import sys

path, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
         for _ in range(5000)]
with open(path, "wb") as f:
    for i in range(n):
        f.write(b"From a@origin.test Mon Jan  1 10:00:00 2024\n")
        f.write(b"From: Sender %d <s%d@origin.test>\nSubject: fill %d\n\n" % (i % 50, i % 50, i))
        text = " ".join(rng.choice(words) for _ in range(650)) + " needle%d" % (i % 1000) + (" haystack" if i % 2 == 0 else "")
        f.write("\n".join(text[j:j + 76] for j in range(0, len(text), 76)).encode() + b"\n\n")
