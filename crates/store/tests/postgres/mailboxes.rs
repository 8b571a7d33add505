//! PostgreSQL: the mailbox tree (names, create, delete, rename, INBOX's
//! rename), subscriptions, and the figures sessions read of a mailbox
//! (status, \Recent, UID runs, first unseen, keywords, quota). The same
//! promises as the SQLite back end's tests (tests/imap.rs), plus what
//! several nodes sharing the database add: concurrent changes of one tree
//! and concurrent claims of \Recent.
//!
//! Accounts and messages are written with SQL here, as `add_account` and
//! a delivery leave them, so these checks need nothing of other areas.

use std::time::Duration;

use sluice_testkit::Postgres;
use store::{
    MailboxId, PgOptions, PgStore, Quota, Store, StoreError, Uid, FLAG_DELETED, FLAG_FLAGGED,
    FLAG_SEEN,
};

use super::{open, Fixture};

/// The mailboxes every account starts with (the SQLite back end's
/// `DEFAULT_MAILBOXES`).
const DEFAULTS: [(&str, Option<&str>); 6] = [
    ("INBOX", None),
    ("Sent", Some("\\Sent")),
    ("Drafts", Some("\\Drafts")),
    ("Trash", Some("\\Trash")),
    ("Junk", Some("\\Junk")),
    ("Archive", Some("\\Archive")),
];

/// Adds `address` under `example.org` as `add_account` leaves it: its
/// default mailboxes, subscribed. Returns its id.
async fn add_account(f: &Fixture, address: &str) -> i64 {
    f.sql(&format!(
        "INSERT INTO domains (name) VALUES ('example.org') ON CONFLICT DO NOTHING;
         INSERT INTO accounts (address, domain_id, password_hash, created)
         SELECT '{address}', id, 'x', 0 FROM domains WHERE name = 'example.org'"
    ));
    let account: i64 = f
        .sql(&format!(
            "SELECT id FROM accounts WHERE address = '{address}'"
        ))
        .parse()
        .unwrap();
    for (name, special_use) in DEFAULTS {
        f.store
            .create_mailbox(account, name, special_use)
            .await
            .unwrap();
    }
    f.sql(&format!(
        "UPDATE mailboxes SET subscribed = true WHERE account_id = {account}"
    ));
    account
}

/// A fresh store with the account `a@example.org`: the account's id and
/// its INBOX's.
async fn with_account() -> (Fixture, i64, MailboxId) {
    let f = open().await;
    let account = add_account(&f, "a@example.org").await;
    let inbox = id(&f, account, "INBOX").await;
    (f, account, inbox)
}

async fn id(f: &Fixture, account: i64, name: &str) -> MailboxId {
    f.store
        .mailbox(account, name)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no mailbox {name}"))
        .id
}

async fn names(f: &Fixture, account: i64) -> Vec<String> {
    f.store
        .list_mailboxes(account)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.name)
        .collect()
}

fn count(f: &Fixture, sql: &str) -> i64 {
    f.sql(sql).parse().unwrap()
}

/// Files a message of `size` bytes as a delivery does: a blob of its own,
/// the mailbox's next UID and modseq. Returns the UID.
fn deliver(f: &Fixture, mailbox: MailboxId, size: i64, flags: u32, keywords: &str) -> Uid {
    f.sql(&format!(
        "WITH a AS (UPDATE accounts SET modseq = modseq + 1 WHERE id = (SELECT account_id FROM mailboxes WHERE id = {mailbox}) RETURNING modseq), b AS (INSERT INTO blobs (created, complete, size) VALUES (0, true, {size})
                    RETURNING id),
              u AS (UPDATE mailboxes SET uid_next = uid_next + 1,
                           highest_modseq = (SELECT modseq FROM a)
                    WHERE id = {mailbox} RETURNING uid_next - 1 AS uid, highest_modseq)
         INSERT INTO messages (mailbox_id, uid, blob_id, size, flags, keywords, internal_date, modseq)
         SELECT {mailbox}, u.uid, b.id, {size}, {flags}, '{keywords}', 0, u.highest_modseq
         FROM b, u RETURNING uid"
    ))
    .parse()
    .unwrap()
}

fn deliver_n(f: &Fixture, mailbox: MailboxId, n: usize) -> Vec<Uid> {
    (0..n).map(|_| deliver(f, mailbox, 100, 0, "")).collect()
}

/// Expunges as the store does: one new modseq, a tombstone per message.
fn expunge(f: &Fixture, mailbox: MailboxId, uids: &[Uid]) {
    let list = uids
        .iter()
        .map(|u| u.to_string())
        .collect::<Vec<_>>()
        .join(",");
    f.sql(&format!(
        "WITH a AS (UPDATE accounts SET modseq = modseq + 1 WHERE id = (SELECT account_id FROM mailboxes WHERE id = {mailbox}) RETURNING modseq), s AS (UPDATE mailboxes SET highest_modseq = (SELECT modseq FROM a) WHERE id = {mailbox}
                    RETURNING highest_modseq),
              g AS (DELETE FROM messages WHERE mailbox_id = {mailbox} AND uid IN ({list})
                    RETURNING *)
         INSERT INTO expunged (mailbox_id, uid, modseq, blob_id, size, flags, internal_date, keywords)
         SELECT g.mailbox_id, g.uid, s.highest_modseq, g.blob_id, g.size, g.flags,
                g.internal_date, g.keywords
         FROM g, s"
    ));
}

/// Adds system flags to messages, as a flag change does.
fn add_flags(f: &Fixture, mailbox: MailboxId, uids: &[Uid], flags: u32) {
    let list = uids
        .iter()
        .map(|u| u.to_string())
        .collect::<Vec<_>>()
        .join(",");
    f.sql(&format!(
        "WITH a AS (UPDATE accounts SET modseq = modseq + 1 WHERE id = (SELECT account_id FROM mailboxes WHERE id = {mailbox}) RETURNING modseq), s AS (UPDATE mailboxes SET highest_modseq = (SELECT modseq FROM a) WHERE id = {mailbox}
                    RETURNING highest_modseq)
         UPDATE messages SET flags = flags | {flags}, modseq = s.highest_modseq FROM s
         WHERE mailbox_id = {mailbox} AND uid IN ({list})"
    ));
}

/// What `mailbox_status` should say, counted from the messages themselves:
/// messages, unseen, deleted, bytes.
fn counted(f: &Fixture, mailbox: MailboxId) -> (u32, u32, u32, u64) {
    let row = f.sql(&format!(
        "SELECT count(*), count(*) FILTER (WHERE (flags & {FLAG_SEEN}) = 0),
                count(*) FILTER (WHERE (flags & {FLAG_DELETED}) != 0), coalesce(sum(size), 0)
         FROM messages WHERE mailbox_id = {mailbox}"
    ));
    let v: Vec<u64> = row.split('|').map(|x| x.parse().unwrap()).collect();
    (v[0] as u32, v[1] as u32, v[2] as u32, v[3])
}

fn is_not_found<T: std::fmt::Debug>(r: store::Result<T>) -> bool {
    matches!(r, Err(StoreError::NotFound(_)))
}

fn is_exists<T: std::fmt::Debug>(r: store::Result<T>) -> bool {
    matches!(r, Err(StoreError::Exists(_)))
}

fn is_invalid<T: std::fmt::Debug>(r: store::Result<T>) -> bool {
    matches!(r, Err(StoreError::Invalid(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_mailboxes_are_listed_with_special_use_and_subscription() {
    let (f, account, inbox) = with_account().await;
    let all = f.store.list_mailboxes(account).await.unwrap();
    let view: Vec<(&str, Option<&str>, bool)> = all
        .iter()
        .map(|m| (m.name.as_str(), m.special_use.as_deref(), m.subscribed))
        .collect();
    assert_eq!(
        view,
        [
            ("Archive", Some("\\Archive"), true),
            ("Drafts", Some("\\Drafts"), true),
            ("INBOX", None, true),
            ("Junk", Some("\\Junk"), true),
            ("Sent", Some("\\Sent"), true),
            ("Trash", Some("\\Trash"), true),
        ]
    );
    assert!(all.iter().all(|m| m.account == account
        && m.uid_next == 1
        && m.highest_modseq >= 1
        && (m.messages, m.unseen) == (0, 0)));
    // INBOX is found in any case, as a first level too; other names only
    // as written.
    assert_eq!(id(&f, account, "inBox").await, inbox);
    assert!(f.store.mailbox(account, "sent").await.unwrap().is_none());
    assert!(f
        .store
        .mailbox(account + 1, "INBOX")
        .await
        .unwrap()
        .is_none());
    let sent = f.store.mailbox(account, "Sent").await.unwrap().unwrap();
    assert_eq!(sent.special_use.as_deref(), Some("\\Sent"));
    assert_eq!(
        f.store.list_mailboxes(account).await.unwrap()[4],
        sent,
        "mailbox and list_mailboxes agree"
    );

    f.store
        .set_subscribed(account, "Sent", false)
        .await
        .unwrap();
    assert!(
        !f.store
            .mailbox(account, "Sent")
            .await
            .unwrap()
            .unwrap()
            .subscribed
    );
    f.store
        .set_subscribed(account, "inbox", false)
        .await
        .unwrap();
    assert_eq!(
        f.sql(&format!(
            "SELECT subscribed FROM mailboxes WHERE id = {inbox}"
        )),
        "f"
    );
    f.store
        .set_subscribed(account, "INBOX", true)
        .await
        .unwrap();
    assert!(
        f.store
            .mailbox(account, "INBOX")
            .await
            .unwrap()
            .unwrap()
            .subscribed
    );
    assert!(is_not_found(
        f.store.set_subscribed(account, "Nope", true).await
    ));
    assert!(is_not_found(
        f.store.set_subscribed(account, "Nope", false).await
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_checks_names_and_makes_parents() {
    let (f, account, _) = with_account().await;
    let long = "x".repeat(1001);
    for bad in [
        "",
        "/lead",
        "trail/",
        "a//b",
        "cr\rlf",
        "nl\n",
        "nul\0",
        long.as_str(),
    ] {
        assert!(
            is_invalid(f.store.create_mailbox(account, bad, None).await),
            "{bad:?}"
        );
    }
    for taken in ["INBOX", "inbox", "InBoX", "Sent"] {
        assert!(
            is_exists(f.store.create_mailbox(account, taken, None).await),
            "{taken:?}"
        );
    }
    assert!(is_invalid(
        f.store
            .create_mailbox(account, "Odd", Some("\\Bogus"))
            .await
    ));
    assert!(is_not_found(
        f.store.create_mailbox(account + 1, "Else", None).await
    ));
    let before = names(&f, account).await;

    let made = f
        .store
        .create_mailbox(account, "Projects/2025/Q1", Some("\\flagged"))
        .await
        .unwrap();
    assert_eq!(made.name, "Projects/2025/Q1");
    assert_eq!(made.account, account);
    assert_eq!(made.special_use.as_deref(), Some("\\Flagged"));
    assert_eq!(made.uid_next, 1);
    assert_eq!(
        made.highest_modseq,
        f.store.account_modseq(account).await.unwrap(),
        "a new mailbox takes the account's next modseq"
    );
    // CREATE does not subscribe (RFC 3501 §6.3.6).
    assert!(!made.subscribed);
    assert_eq!(
        f.store.mailbox(account, "Projects/2025/Q1").await.unwrap(),
        Some(made.clone())
    );
    let parents: Vec<_> = {
        let mut v = Vec::new();
        for n in ["Projects", "Projects/2025"] {
            v.push(f.store.mailbox(account, n).await.unwrap().unwrap());
        }
        v
    };
    assert!(parents
        .iter()
        .all(|p| !p.subscribed && p.special_use.is_none()));
    // Each made mailbox has a UIDVALIDITY of its own, above all before,
    // and the account remembers the highest.
    assert!(parents[0].uid_validity < parents[1].uid_validity);
    assert!(parents[1].uid_validity < made.uid_validity);
    assert_eq!(
        count(
            &f,
            &format!("SELECT uid_validity_last FROM accounts WHERE id = {account}")
        ),
        i64::from(made.uid_validity)
    );
    assert_eq!(names(&f, account).await.len(), before.len() + 3);
    assert!(is_exists(
        f.store
            .create_mailbox(account, "Projects/2025/Q1", None)
            .await
    ));
    assert!(is_exists(
        f.store.create_mailbox(account, "Projects", None).await
    ));

    // Names are case-sensitive except INBOX; children of INBOX are fine.
    f.store
        .create_mailbox(account, "projects", None)
        .await
        .unwrap();
    let child = f
        .store
        .create_mailbox(account, "inbox/Lists", None)
        .await
        .unwrap();
    assert_eq!(child.name, "INBOX/Lists");
    assert_eq!(id(&f, account, "Inbox/Lists").await, child.id);
    // Unicode names are stored as given.
    f.store
        .create_mailbox(account, "Zürich/Café", None)
        .await
        .unwrap();
    assert!(names(&f, account)
        .await
        .contains(&"Zürich/Café".to_string()));
    assert_eq!(id(&f, account, "Zürich").await, {
        let all = f.store.list_mailboxes(account).await.unwrap();
        all.iter().find(|m| m.name == "Zürich").unwrap().id
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_refuses_inbox_and_parents_and_never_reuses_uidvalidity() {
    let (f, account, _) = with_account().await;
    for inbox in ["INBOX", "inbox"] {
        assert!(is_invalid(f.store.delete_mailbox(account, inbox).await));
    }
    assert!(is_not_found(f.store.delete_mailbox(account, "Nope").await));
    let first = f
        .store
        .create_mailbox(account, "Work/Old", None)
        .await
        .unwrap();
    assert!(is_invalid(f.store.delete_mailbox(account, "Work").await));
    deliver_n(&f, first.id, 3);
    expunge(&f, first.id, &[1]);
    assert_eq!(count(&f, "SELECT count(*) FROM expunged"), 1);
    assert_eq!(
        count(&f, "SELECT count(*) FROM blobs WHERE refcount = 1"),
        2
    );

    f.store.delete_mailbox(account, "Work/Old").await.unwrap();
    assert!(f
        .store
        .mailbox(account, "Work/Old")
        .await
        .unwrap()
        .is_none());
    // Its messages and tombstones went with it; its blobs lost their last
    // reference (the sweep's to delete).
    assert_eq!(
        count(
            &f,
            &format!(
                "SELECT count(*) FROM messages WHERE mailbox_id = {}",
                first.id
            )
        ),
        0
    );
    assert_eq!(count(&f, "SELECT count(*) FROM expunged"), 0);
    assert_eq!(
        count(&f, "SELECT count(*) FROM blobs WHERE refcount != 0"),
        0
    );
    assert!(is_not_found(f.store.mailbox_status(first.id).await));
    assert!(
        f.store
            .lost_subscriptions(account)
            .await
            .unwrap()
            .is_empty(),
        "an unsubscribed mailbox leaves no subscription"
    );
    f.store.delete_mailbox(account, "Work").await.unwrap();

    // Created again within the same second: a greater UIDVALIDITY, and
    // never the old id (a session may still hold it).
    let again = f
        .store
        .create_mailbox(account, "Work/Old", None)
        .await
        .unwrap();
    assert!(again.uid_validity > first.uid_validity);
    assert_ne!(again.id, first.id);
    let all = f.store.list_mailboxes(account).await.unwrap();
    assert!(all
        .iter()
        .all(|m| m.id == again.id || m.uid_validity < again.uid_validity));
    // Even when the highest mailbox is gone, the account remembers it.
    f.store.delete_mailbox(account, "Work/Old").await.unwrap();
    let third = f
        .store
        .create_mailbox(account, "Other", None)
        .await
        .unwrap();
    assert!(third.uid_validity > again.uid_validity);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_takes_children_along_and_keeps_uids() {
    let (f, account, _) = with_account().await;
    let a = f.store.create_mailbox(account, "a", None).await.unwrap();
    let ab = f.store.create_mailbox(account, "a/b", None).await.unwrap();
    let abc = f
        .store
        .create_mailbox(account, "a/b/c", None)
        .await
        .unwrap();
    f.store.create_mailbox(account, "ab", None).await.unwrap();
    f.store.create_mailbox(account, "a-z", None).await.unwrap();
    deliver_n(&f, ab.id, 2);
    f.store
        .create_mailbox(account, "taken", None)
        .await
        .unwrap();
    f.store
        .create_mailbox(account, "busy/x", None)
        .await
        .unwrap();
    f.sql("DELETE FROM mailboxes WHERE name = 'busy'");

    assert!(is_exists(
        f.store.rename_mailbox(account, "a", "taken").await
    ));
    assert!(is_exists(
        f.store.rename_mailbox(account, "a", "INBOX").await
    ));
    assert!(is_exists(
        f.store.rename_mailbox(account, "a", "inbox").await
    ));
    assert!(
        is_exists(f.store.rename_mailbox(account, "a", "busy").await),
        "a child would land on a name taken"
    );
    assert!(
        is_exists(f.store.rename_mailbox(account, "a", "a/b/c").await),
        "a name taken is told first"
    );
    assert!(is_invalid(
        f.store.rename_mailbox(account, "a", "a/b/d").await
    ));
    assert!(is_invalid(
        f.store.rename_mailbox(account, "a", "a/new").await
    ));
    assert!(is_invalid(
        f.store.rename_mailbox(account, "a", "bad//name").await
    ));
    assert!(is_not_found(
        f.store.rename_mailbox(account, "nope", "x").await
    ));
    assert!(is_not_found(
        f.store.rename_mailbox(account, "A", "x").await
    ));

    let mut rx = f.store.watch_mailbox(abc.id);
    f.store
        .rename_mailbox(account, "a", "new/place")
        .await
        .unwrap();
    let names = names(&f, account).await;
    assert!(names.contains(&"new".to_string()), "parent made: {names:?}");
    for n in ["new/place", "new/place/b", "new/place/b/c", "ab", "a-z"] {
        assert!(names.contains(&n.to_string()), "{n} in {names:?}");
    }
    assert!(!names.iter().any(|n| n == "a" || n.starts_with("a/")));
    let moved = f
        .store
        .mailbox(account, "new/place/b")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(moved.id, ab.id);
    assert_eq!(moved.uid_validity, ab.uid_validity);
    assert_eq!((moved.uid_next, moved.messages), (3, 2));
    assert_eq!(
        f.sql(&format!(
            "SELECT string_agg(uid::text, ',' ORDER BY uid) FROM messages WHERE mailbox_id = {}",
            ab.id
        )),
        "1,2"
    );
    assert_eq!(id(&f, account, "new/place/b/c").await, abc.id);
    let parent = f
        .store
        .mailbox(account, "new/place")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((parent.id, parent.uid_validity), (a.id, a.uid_validity));
    // A child's watcher hears of it.
    tokio::time::timeout(Duration::from_secs(10), rx.changed())
        .await
        .expect("no notice after a rename of the parent")
        .unwrap();
    // The old name is free and gets a fresh UIDVALIDITY.
    let fresh = f.store.create_mailbox(account, "a", None).await.unwrap();
    assert!(fresh.uid_validity > abc.uid_validity);
    // Non-ASCII names keep their suffixes whole.
    f.store
        .create_mailbox(account, "Größe/Ärger", None)
        .await
        .unwrap();
    f.store
        .rename_mailbox(account, "Größe", "Maß")
        .await
        .unwrap();
    assert!(f
        .store
        .mailbox(account, "Maß/Ärger")
        .await
        .unwrap()
        .is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renaming_inbox_moves_its_messages_and_leaves_it_empty() {
    let (f, account, inbox) = with_account().await;
    f.store
        .create_mailbox(account, "INBOX/Child", None)
        .await
        .unwrap();
    deliver(&f, inbox, 100, 0, "");
    deliver(&f, inbox, 200, FLAG_FLAGGED, "Work");
    deliver(&f, inbox, 300, FLAG_SEEN, "");
    expunge(&f, inbox, &[1]);
    let before = f.store.mailbox(account, "INBOX").await.unwrap().unwrap();
    let refs = count(&f, "SELECT sum(refcount) FROM blobs");
    let mut rx = f.store.watch_mailbox(inbox);

    f.store
        .rename_mailbox(account, "inbox", "Old Mail")
        .await
        .unwrap();
    let after = f.store.mailbox(account, "INBOX").await.unwrap().unwrap();
    assert_eq!(after.id, before.id);
    assert_eq!(after.uid_validity, before.uid_validity);
    assert_eq!(after.uid_next, before.uid_next, "INBOX UIDs go on");
    assert_eq!((after.messages, after.unseen), (0, 0));
    assert!(after.highest_modseq > before.highest_modseq);
    assert!(
        f.store
            .mailbox(account, "INBOX/Child")
            .await
            .unwrap()
            .is_some(),
        "children of INBOX are not renamed"
    );
    let old = f.store.mailbox(account, "Old Mail").await.unwrap().unwrap();
    assert!(old.uid_validity > before.uid_validity);
    assert!(!old.subscribed);
    assert_eq!(old.uid_next, 3);
    assert_eq!((old.messages, old.unseen), (2, 1));
    assert_eq!(
        f.sql(&format!(
            "SELECT uid, flags, keywords, size, modseq FROM messages
             WHERE mailbox_id = {} ORDER BY uid",
            old.id
        )),
        format!(
            "1|{FLAG_FLAGGED}|Work|200|{c}\n2|{FLAG_SEEN}||300|{c}",
            c = old.highest_modseq
        ),
        "new UIDs in the target, in the old UID order, flags and keywords kept"
    );
    // Tombstones in INBOX at one new modseq; the first expunge's stays.
    assert_eq!(
        f.sql(&format!(
            "SELECT uid, modseq, size FROM expunged WHERE mailbox_id = {inbox} ORDER BY uid"
        )),
        format!(
            "1|{}|100\n2|{m}|200\n3|{m}|300",
            before.highest_modseq,
            m = after.highest_modseq
        )
    );
    assert_eq!(count(&f, "SELECT sum(refcount) FROM blobs"), refs);
    assert_eq!(f.store.mailbox_status(old.id).await.unwrap().size, 500);
    tokio::time::timeout(Duration::from_secs(10), rx.changed())
        .await
        .expect("no notice to INBOX's watchers")
        .unwrap();

    // An empty INBOX renamed: an empty mailbox, INBOX untouched.
    f.store
        .rename_mailbox(account, "INBOX", "Older")
        .await
        .unwrap();
    let older = f.store.mailbox(account, "Older").await.unwrap().unwrap();
    assert_eq!((older.uid_next, older.messages), (1, 0));
    assert_eq!(
        older.highest_modseq,
        f.store.account_modseq(account).await.unwrap()
    );
    assert_eq!(
        f.store.mailbox(account, "INBOX").await.unwrap().unwrap(),
        after
    );
    assert!(is_exists(
        f.store.rename_mailbox(account, "INBOX", "Old Mail").await
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_outlive_their_mailboxes_until_dropped() {
    let (f, account, _) = with_account().await;
    f.store
        .create_mailbox(account, "Lists/rust", None)
        .await
        .unwrap();
    f.store
        .create_mailbox(account, "Lists/go", None)
        .await
        .unwrap();
    f.store
        .set_subscribed(account, "Lists/rust", true)
        .await
        .unwrap();
    f.store
        .set_subscribed(account, "Lists/go", true)
        .await
        .unwrap();
    f.store.delete_mailbox(account, "Lists/rust").await.unwrap();
    f.store.delete_mailbox(account, "Lists/go").await.unwrap();
    // The default Trash was subscribed too.
    f.store.delete_mailbox(account, "Trash").await.unwrap();
    assert_eq!(
        f.store.lost_subscriptions(account).await.unwrap(),
        ["Lists/go", "Lists/rust", "Trash"]
    );
    assert!(f
        .store
        .lost_subscriptions(account + 1)
        .await
        .unwrap()
        .is_empty());

    // Subscribing a name with no mailbox fails; unsubscribing a lost one
    // drops it.
    assert!(is_not_found(
        f.store.set_subscribed(account, "Lists/go", true).await
    ));
    f.store
        .set_subscribed(account, "Lists/go", false)
        .await
        .unwrap();
    assert_eq!(
        f.store.lost_subscriptions(account).await.unwrap(),
        ["Lists/rust", "Trash"]
    );
    // A mailbox made again under a lost name is subscribed again, and the
    // name is no longer lost; other new mailboxes are not subscribed.
    let back = f
        .store
        .create_mailbox(account, "Lists/rust", None)
        .await
        .unwrap();
    assert!(back.subscribed);
    assert!(
        !f.store
            .mailbox(account, "Lists")
            .await
            .unwrap()
            .unwrap()
            .subscribed
    );
    let go = f
        .store
        .create_mailbox(account, "Lists/go", None)
        .await
        .unwrap();
    assert!(!go.subscribed);
    assert_eq!(
        f.store.lost_subscriptions(account).await.unwrap(),
        ["Trash"]
    );
    // Deleting a subscribed mailbox twice over keeps one lost name.
    f.store.delete_mailbox(account, "Lists/rust").await.unwrap();
    f.store
        .create_mailbox(account, "Lists/rust", None)
        .await
        .unwrap();
    f.store.delete_mailbox(account, "Lists/rust").await.unwrap();
    assert_eq!(
        f.store.lost_subscriptions(account).await.unwrap(),
        ["Lists/rust", "Trash"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn special_use_is_found_per_account_or_the_mailbox_itself() {
    let (f, a, a_inbox) = with_account().await;
    let b = add_account(&f, "b@example.org").await;
    let b_inbox = id(&f, b, "INBOX").await;
    let a_junk = id(&f, a, "Junk").await;
    let b_junk = id(&f, b, "Junk").await;
    let a_sent = id(&f, a, "Sent").await;
    assert_eq!(
        f.store
            .special_use_of(&[b_inbox, a_inbox, a_sent, 987_654], "\\Junk")
            .await
            .unwrap(),
        [b_junk, a_junk, a_junk, 987_654],
        "in the order asked; an unknown mailbox answers itself"
    );
    assert!(f
        .store
        .special_use_of(&[], "\\Junk")
        .await
        .unwrap()
        .is_empty());
    // Special uses are compared as stored.
    assert_eq!(
        f.store.special_use_of(&[a_inbox], "\\junk").await.unwrap(),
        [a_inbox]
    );
    // Several with the use: the oldest.
    let second = f
        .store
        .create_mailbox(a, "Spam", Some("\\Junk"))
        .await
        .unwrap();
    assert_eq!(
        f.store
            .special_use_of(&[second.id], "\\Junk")
            .await
            .unwrap(),
        [a_junk]
    );
    // Its user deleted it: the next one, then the mailbox itself.
    f.store.delete_mailbox(a, "Junk").await.unwrap();
    assert_eq!(
        f.store.special_use_of(&[a_inbox], "\\Junk").await.unwrap(),
        [second.id]
    );
    f.store.delete_mailbox(a, "Spam").await.unwrap();
    assert_eq!(
        f.store
            .special_use_of(&[a_inbox, b_inbox], "\\Junk")
            .await
            .unwrap(),
        [a_inbox, b_junk]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_quota_figures() {
    let (f, account, inbox) = with_account().await;
    assert_eq!(
        f.store.quota(account).await.unwrap(),
        Quota::default(),
        "a new account: unlimited, empty"
    );
    let sizes = [100i64, 250, 400, 3_000_000_000];
    for size in sizes {
        deliver(&f, inbox, size, 0, "");
    }
    add_flags(&f, inbox, &[1, 2], FLAG_SEEN);
    add_flags(&f, inbox, &[2, 3], FLAG_DELETED);
    let total: u64 = sizes.iter().map(|&s| s as u64).sum();
    let s = f.store.mailbox_status(inbox).await.unwrap();
    assert_eq!(
        (s.messages, s.unseen, s.deleted, s.size, s.uid_next),
        (4, 2, 2, total, 5)
    );
    assert_eq!(
        (s.messages, s.unseen, s.deleted, s.size),
        counted(&f, inbox)
    );
    let info = f.store.mailbox(account, "INBOX").await.unwrap().unwrap();
    assert_eq!(
        (s.uid_validity, s.highest_modseq),
        (info.uid_validity, info.highest_modseq)
    );
    assert_eq!(
        s.highest_modseq, 12,
        "six mailboxes made, then four deliveries and two flag changes"
    );
    assert_eq!((info.messages, info.unseen), (4, 2));
    let junk = id(&f, account, "Junk").await;
    let empty = f.store.mailbox_status(junk).await.unwrap();
    assert_eq!(
        (empty.messages, empty.size, empty.uid_next, empty.recent),
        (0, 0, 1, 0)
    );
    assert!(is_not_found(f.store.mailbox_status(987_654).await));

    // Every mailbox of the account counts; a copy counts again.
    let archive = id(&f, account, "Archive").await;
    deliver(&f, archive, 400, FLAG_SEEN, "");
    f.sql(&format!(
        "UPDATE accounts SET quota_bytes = 1000000 WHERE id = {account}"
    ));
    let q = f.store.quota(account).await.unwrap();
    assert_eq!(q.messages, 5);
    assert_eq!(q.used_bytes, total + 400);
    assert_eq!(q.limit_bytes, Some(1_000_000));
    assert!(is_not_found(f.store.quota(987_654).await));
    // Another account starts unlimited and empty.
    let b = add_account(&f, "b@example.org").await;
    assert_eq!(f.store.quota(b).await.unwrap(), Quota::default());
    // Deleting a mailbox takes its messages out of the figures.
    f.store.delete_mailbox(account, "Archive").await.unwrap();
    let q = f.store.quota(account).await.unwrap();
    assert_eq!((q.messages, q.used_bytes), (4, total));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uid_runs_and_first_unseen() {
    let (f, _, inbox) = with_account().await;
    assert!(f.store.uid_runs(inbox).await.unwrap().is_empty());
    assert_eq!(f.store.first_unseen(inbox).await.unwrap(), None);
    deliver_n(&f, inbox, 10);
    assert_eq!(f.store.uid_runs(inbox).await.unwrap(), vec![(1, 10)]);
    assert_eq!(f.store.first_unseen(inbox).await.unwrap(), Some(1));
    expunge(&f, inbox, &[1, 4, 5, 10]);
    assert_eq!(f.store.uid_runs(inbox).await.unwrap(), vec![(2, 2), (6, 4)]);
    add_flags(&f, inbox, &[2, 3, 6], FLAG_SEEN);
    // Other flags do not make a message seen.
    add_flags(&f, inbox, &[7], FLAG_FLAGGED | FLAG_DELETED);
    assert_eq!(f.store.first_unseen(inbox).await.unwrap(), Some(7));
    add_flags(&f, inbox, &[7, 8, 9], FLAG_SEEN);
    assert_eq!(f.store.first_unseen(inbox).await.unwrap(), None);
    assert!(f.store.uid_runs(987_654).await.unwrap().is_empty());
    assert_eq!(f.store.first_unseen(987_654).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mailbox_keywords_are_each_set_once_sorted_ignoring_case() {
    let (f, account, inbox) = with_account().await;
    assert!(f.store.mailbox_keywords(inbox).await.unwrap().is_empty());
    deliver(&f, inbox, 10, 0, "$Forwarded Work");
    deliver(&f, inbox, 10, 0, "work Home");
    deliver(&f, inbox, 10, 0, "");
    deliver(&f, inbox, 10, 0, "zeta HOME");
    deliver(&f, inbox, 10, 0, "$Forwarded Work");
    assert_eq!(
        f.store.mailbox_keywords(inbox).await.unwrap(),
        ["$Forwarded", "Home", "Work", "zeta"],
        "first spelling met, in UID order"
    );
    // Another mailbox's keywords are its own.
    let archive = id(&f, account, "Archive").await;
    deliver(&f, archive, 10, 0, "Other");
    assert_eq!(f.store.mailbox_keywords(archive).await.unwrap(), ["Other"]);
    f.sql(&format!(
        "UPDATE messages SET keywords = '' WHERE mailbox_id = {inbox}"
    ));
    assert!(f.store.mailbox_keywords(inbox).await.unwrap().is_empty());
    assert!(f.store.mailbox_keywords(987_654).await.unwrap().is_empty());
}

/// The recent count, counted from the messages themselves.
fn counted_recent(f: &Fixture, mailbox: MailboxId) -> u32 {
    count(
        f,
        &format!(
            "SELECT count(*) FROM messages m JOIN mailboxes x ON x.id = m.mailbox_id
             WHERE x.id = {mailbox} AND m.uid >= x.recent_from"
        ),
    ) as u32
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recent_counts_agree_whether_the_range_is_all_none_or_some() {
    let (f, _, inbox) = with_account().await;
    let expect = |want: u32, step: &'static str| {
        let f = &f;
        async move {
            let s = f.store.mailbox_status(inbox).await.unwrap();
            assert_eq!(s.recent, want, "{step}");
            assert_eq!(s.recent, counted_recent(f, inbox), "{step}");
        }
    };
    expect(0, "empty").await;
    deliver_n(&f, inbox, 6);
    expect(6, "never claimed: every message").await;
    f.store.claim_recent(inbox).await.unwrap();
    expect(0, "claimed").await;
    deliver_n(&f, inbox, 3);
    expect(3, "new after the claim").await;
    // The old messages go: the range now starts before the first UID left.
    expunge(&f, inbox, &[1, 2, 3, 4, 5, 6]);
    expect(3, "only recent ones left").await;
    deliver_n(&f, inbox, 2);
    expect(5, "and more").await;
    expunge(&f, inbox, &[7, 9]);
    expect(3, "some of them gone").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_new_message_is_claimed_recent_once() {
    let (f, _, inbox) = with_account().await;
    assert_eq!(f.store.claim_recent(inbox).await.unwrap(), (0, 1));
    assert_eq!(f.store.claim_recent(inbox).await.unwrap(), (1, 1));
    deliver_n(&f, inbox, 3);
    assert_eq!(f.store.claim_recent(inbox).await.unwrap(), (1, 4));
    assert_eq!(f.store.claim_recent(inbox).await.unwrap(), (4, 4));
    let s = f.store.mailbox_status(inbox).await.unwrap();
    assert_eq!((s.recent, s.recent_from), (0, 4));
    deliver_n(&f, inbox, 2);
    assert_eq!(f.store.mailbox_status(inbox).await.unwrap().recent, 2);
    assert_eq!(f.store.claim_recent(inbox).await.unwrap(), (4, 6));
    assert!(is_not_found(f.store.claim_recent(987_654).await));

    // Sessions on several nodes claim at once: one takes the new mail.
    let other = PgStore::connect(PgOptions::new(&f.pg.url(&f.db)))
        .await
        .unwrap();
    for round in 0..4u32 {
        deliver_n(&f, inbox, 5);
        let (from, to) = (6 + 5 * round, 11 + 5 * round);
        let claims: Vec<_> = (0..12usize)
            .map(|i| {
                let store = if i.is_multiple_of(2) {
                    f.store.clone()
                } else {
                    other.clone()
                };
                tokio::spawn(async move { store.claim_recent(inbox).await.unwrap() })
            })
            .collect();
        let mut got = Vec::new();
        for c in claims {
            got.push(c.await.unwrap());
        }
        let taken: Vec<_> = got.iter().filter(|(a, b)| a < b).collect();
        assert_eq!(taken, [&(from, to)], "{got:?}");
        assert!(
            got.iter().all(|&r| r == (from, to) || r == (to, to)),
            "{got:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_changes_of_one_tree_keep_it_whole() {
    let (f, account, _) = with_account().await;
    let other = PgStore::connect(PgOptions::new(&f.pg.url(&f.db)))
        .await
        .unwrap();
    let store = |i: usize| {
        if i.is_multiple_of(2) {
            f.store.clone()
        } else {
            other.clone()
        }
    };
    // Children of one new parent, from two nodes at once: all made, the
    // parent once, every UIDVALIDITY different.
    let jobs: Vec<_> = (0..10)
        .map(|i| {
            let s = store(i);
            tokio::spawn(
                async move { s.create_mailbox(account, &format!("Team/c{i}"), None).await },
            )
        })
        .collect();
    for j in jobs {
        j.await.unwrap().unwrap();
    }
    let all = f.store.list_mailboxes(account).await.unwrap();
    assert_eq!(all.iter().filter(|m| m.name == "Team").count(), 1);
    assert_eq!(
        all.iter().filter(|m| m.name.starts_with("Team/")).count(),
        10
    );
    let mut validities: Vec<u32> = all.iter().map(|m| m.uid_validity).collect();
    validities.sort_unstable();
    validities.dedup();
    assert_eq!(validities.len(), all.len());

    // One name asked for by many: made once, the rest told it exists.
    let jobs: Vec<_> = (0..6)
        .map(|i| {
            let s = store(i);
            tokio::spawn(async move { s.create_mailbox(account, "Same", None).await })
        })
        .collect();
    let mut made = 0;
    for j in jobs {
        match j.await.unwrap() {
            Ok(_) => made += 1,
            Err(StoreError::Exists(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(made, 1);

    // A parent deleted while children are made under it: either the
    // delete is refused, or the child's create made the parent again.
    let s = store(1);
    let child = tokio::spawn(async move { s.create_mailbox(account, "Same/kid", None).await });
    let deleted = f.store.delete_mailbox(account, "Same").await;
    child.await.unwrap().unwrap();
    assert!(
        matches!(deleted, Ok(()) | Err(StoreError::Invalid(_))),
        "{deleted:?}"
    );
    let names = names(&f, account).await;
    assert!(names.contains(&"Same".to_string()), "{names:?}");
    assert!(names.contains(&"Same/kid".to_string()), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_wake_when_their_mailbox_is_renamed_or_deleted() {
    let (f, account, _) = with_account().await;
    let made = f.store.create_mailbox(account, "w/x", None).await.unwrap();
    let mut rx = f.store.watch_mailbox(made.id);
    let wait = Duration::from_secs(10);
    f.store.rename_mailbox(account, "w", "v").await.unwrap();
    tokio::time::timeout(wait, rx.changed())
        .await
        .expect("no notice after a rename of the parent")
        .unwrap();
    rx.borrow_and_update();
    f.store.delete_mailbox(account, "v/x").await.unwrap();
    tokio::time::timeout(wait, rx.changed())
        .await
        .expect("no notice after a delete")
        .unwrap();
    assert!(is_not_found(f.store.mailbox_status(made.id).await));
    assert!(is_not_found(f.store.claim_recent(made.id).await));
}

/// A database whose own collation is not byte order (ICU's root locale:
/// `a` < `B`, case second).
async fn open_icu() -> Fixture {
    let pg = Postgres::start();
    pg.psql(
        "postgres",
        "CREATE DATABASE icu TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'und'",
    );
    assert_eq!(pg.psql("icu", "SELECT 'a' < 'B' AND 'A/x' < 'a0'"), "t");
    let store = PgStore::connect(PgOptions::new(&pg.url("icu")))
        .await
        .unwrap();
    Fixture {
        pg,
        db: "icu".into(),
        store,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_ordered_and_nested_by_bytes_whatever_the_locale() {
    let f = open_icu().await;
    let account = add_account(&f, "a@example.org").await;
    for name in ["a", "B", "_x", "Z", "A/x"] {
        f.store.create_mailbox(account, name, None).await.unwrap();
    }
    assert_eq!(
        names(&f, account).await,
        ["A", "A/x", "Archive", "B", "Drafts", "INBOX", "Junk", "Sent", "Trash", "Z", "_x", "a"],
        "SQLite's order: bytes"
    );
    // `A/x` is no child of `a`: it neither stops a delete nor follows a
    // rename.
    f.store.create_mailbox(account, "b", None).await.unwrap();
    f.store.rename_mailbox(account, "a", "c").await.unwrap();
    assert!(f.store.mailbox(account, "A/x").await.unwrap().is_some());
    f.store.delete_mailbox(account, "c").await.unwrap();
    f.store.delete_mailbox(account, "b").await.unwrap();
    assert!(is_invalid(f.store.delete_mailbox(account, "A").await));
    for name in ["B", "_x"] {
        f.store.set_subscribed(account, name, true).await.unwrap();
        f.store.delete_mailbox(account, name).await.unwrap();
    }
    assert_eq!(
        f.store.lost_subscriptions(account).await.unwrap(),
        ["B", "_x"]
    );
}
