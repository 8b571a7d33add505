#!/usr/bin/env python3
"""Compares one mailbox as two IMAP servers show it, message by message.

    imap-compare.py HOST:PORT HOST:PORT USER PASSWORD [MAILBOX] > report.json

Used after `sluice migrate`: the SQLite store and its PostgreSQL copy,
each served by a node of its own, must show the same UIDVALIDITY and
UIDNEXT, and for every UID the same flags, size, internal date and bytes,
so that a client sees nothing change and does not resync. Messages are
read in batches by UID with BODY.PEEK[] (no \\Seen is set) and compared
by SHA-256, so memory stays small whatever the mailbox holds. Prints a
JSON report; exits 1 when anything differs.
"""
import hashlib
import imaplib
import json
import re
import sys
import time

BATCH = 500


def connect(where, user, password, mailbox):
    host, port = where.rsplit(":", 1)
    imap = imaplib.IMAP4(host, int(port), timeout=300)
    imap.login(user, password)
    typ, _ = imap.select(mailbox, readonly=True)
    if typ != "OK":
        raise SystemExit(f"{where}: cannot select {mailbox}")
    return imap


def status(imap, mailbox):
    typ, data = imap.status(mailbox, "(MESSAGES UIDNEXT UIDVALIDITY)")
    text = data[0].decode()
    return {k: int(v) for k, v in re.findall(r"(MESSAGES|UIDNEXT|UIDVALIDITY) (\d+)", text)}


def uids(imap):
    typ, data = imap.uid("SEARCH", None, "ALL")
    return [int(u) for u in data[0].split()]


FIELDS = re.compile(rb"UID (\d+)|FLAGS \(([^)]*)\)|RFC822\.SIZE (\d+)|INTERNALDATE \"([^\"]+)\"")


def describe(imap, batch):
    """UID -> its flags, size, internal date and the SHA-256 of its bytes."""
    spec = ",".join(str(u) for u in batch)
    typ, data = imap.uid("FETCH", spec, "(FLAGS RFC822.SIZE INTERNALDATE BODY.PEEK[])")
    if typ != "OK":
        raise SystemExit(f"FETCH failed: {data}")
    # imaplib gives (text before the literal, literal) and then the text
    # after it as plain bytes: fields may sit on either side.
    out, last = {}, None
    for item in data:
        if isinstance(item, tuple):
            head, body = item
            last = {"body": hashlib.sha256(body).hexdigest()}
        elif last is not None and item:
            head = item
        else:
            continue
        for m in FIELDS.finditer(head):
            if m.group(1):
                last["uid"] = int(m.group(1))
            if m.group(2) is not None:
                # \Recent belongs to a session, not to the message: left out.
                last["flags"] = sorted(f.decode() for f in m.group(2).split() if f.lower() != b"\\recent")
            if m.group(3):
                last["size"] = int(m.group(3))
            if m.group(4):
                last["date"] = m.group(4).decode()
        if "uid" in last:
            out[last["uid"]] = last
    return out


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    a_addr, b_addr, user, password = sys.argv[1:5]
    mailbox = sys.argv[5] if len(sys.argv) > 5 else "INBOX"
    t0 = time.monotonic()
    a, b = connect(a_addr, user, password, mailbox), connect(b_addr, user, password, mailbox)
    report = {"a": a_addr, "b": b_addr, "mailbox": mailbox}
    report["status_a"], report["status_b"] = status(a, mailbox), status(b, mailbox)
    ua, ub = uids(a), uids(b)
    report["messages"] = len(ua)
    mismatches = []
    if ua != ub:
        only_a, only_b = sorted(set(ua) - set(ub)), sorted(set(ub) - set(ua))
        mismatches.append({"uids": {"only_a": only_a[:20], "only_b": only_b[:20],
                                    "count_only_a": len(only_a), "count_only_b": len(only_b)}})
    in_b = set(ub)
    common = [u for u in ua if u in in_b]
    compared = 0
    for i in range(0, len(common), BATCH):
        batch = common[i:i + BATCH]
        da, db = describe(a, batch), describe(b, batch)
        for uid in batch:
            compared += 1
            if da.get(uid) != db.get(uid):
                mismatches.append({"uid": uid, "a": da.get(uid), "b": db.get(uid)})
    report["compared"] = compared
    report["mismatches"] = mismatches[:50]
    report["mismatch_count"] = len(mismatches)
    report["equal"] = not mismatches and report["status_a"] == report["status_b"]
    report["seconds"] = round(time.monotonic() - t0, 1)
    for imap in (a, b):
        imap.logout()
    json.dump(report, sys.stdout, indent=1)
    print()
    sys.exit(0 if report["equal"] else 1)


if __name__ == "__main__":
    main()
