//! PostgreSQL: the messages of a mailbox: flags and keywords, CONDSTORE,
//! copies, moves, expunges and their tombstones, what changed since a
//! modseq, FETCH data and newest-first pages. The same promises as the
//! SQLite back end's (tests/imap.rs, tests/sqlite.rs).
//!
//! Accounts, mailboxes and messages are set up straight through SQL, as
//! a delivery leaves them, so these tests need only this area's methods.

use mime_tree::StructureBuilder;
use store::{
    FlagChange, MailboxId, MessageEntry, Store, StoreError, Uid, FLAG_ANSWERED, FLAG_DELETED,
    FLAG_FLAGGED, FLAG_SEEN,
};

use super::{open, Fixture};

/// A store with one account and its INBOX, Archive, Trash and Junk.
struct Mail {
    f: Fixture,
    inbox: MailboxId,
    archive: MailboxId,
    trash: MailboxId,
    junk: MailboxId,
}

/// How a test message is stored.
#[derive(Clone, Copy)]
struct Stored {
    date: i64,
    /// With a `blob_parsed` row, as the message writer leaves it; without,
    /// as the oldest blobs are (worked out from the chunks when read).
    parsed: bool,
}

const PLAIN: Stored = Stored {
    date: 1_700_000_000,
    parsed: true,
};

async fn mail() -> Mail {
    let f = open().await;
    f.sql(
        "INSERT INTO domains (name) VALUES ('example.org');
         INSERT INTO accounts (address, domain_id, password_hash, created)
             SELECT 'a@example.org', id, 'x', 0 FROM domains",
    );
    let mailbox = |name: &str, validity: i64, special_use: &str| -> MailboxId {
        f.sql(&format!(
            "INSERT INTO mailboxes (account_id, name, uid_validity, special_use)
             SELECT id, '{name}', {validity}, {special_use} FROM accounts RETURNING id"
        ))
        .parse()
        .unwrap()
    };
    let inbox = mailbox("INBOX", 1, "NULL");
    let archive = mailbox("Archive", 2, "'\\Archive'");
    let trash = mailbox("Trash", 3, "'\\Trash'");
    let junk = mailbox("Junk", 4, "'\\Junk'");
    Mail {
        f,
        inbox,
        archive,
        trash,
        junk,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text_of(subject: &str) -> String {
    format!("From: b@example.net\r\nSubject: {subject}\r\n\r\nbody of {subject}\r\n")
}

impl Mail {
    /// Stores a message in `mailbox` as a delivery does (a complete blob,
    /// its chunk, the next UID and modseq) and returns its UID.
    fn deliver(&self, mailbox: MailboxId, subject: &str, how: Stored) -> Uid {
        let text = text_of(subject);
        let blob = self.f.sql(&format!(
            "INSERT INTO blobs (size, complete, created, hdr_from, hdr_subject, hdr_date)
             VALUES ({}, true, 0, 'b@example.net', '{subject}', 42) RETURNING id",
            text.len()
        ));
        self.f.sql(&format!(
            "INSERT INTO blob_chunks (blob_id, seq, data) VALUES ({blob}, 0, decode('{}', 'hex'))",
            hex(text.as_bytes())
        ));
        if how.parsed {
            let mut builder = StructureBuilder::new();
            builder.feed(text.as_bytes());
            let structure = builder.finish().to_bytes();
            let header = &text.as_bytes()[..text.find("\r\n\r\n").unwrap() + 4];
            self.f.sql(&format!(
                "INSERT INTO blob_parsed (blob_id, structure, header)
                 VALUES ({blob}, decode('{}', 'hex'), decode('{}', 'hex'))",
                hex(&structure),
                hex(header)
            ));
        }
        self.f
            .sql(&format!(
                "WITH a AS (UPDATE accounts SET modseq = modseq + 1 WHERE id = (SELECT account_id FROM mailboxes WHERE id = {mailbox}) RETURNING modseq), m AS (
                     UPDATE mailboxes SET uid_next = uid_next + 1,
                         highest_modseq = (SELECT modseq FROM a)
                     WHERE id = {mailbox} RETURNING uid_next - 1 AS uid, highest_modseq)
                 INSERT INTO messages (mailbox_id, uid, blob_id, size, internal_date, modseq)
                 SELECT {mailbox}, uid, {blob}, {}, {}, highest_modseq FROM m RETURNING uid",
                text.len(),
                how.date
            ))
            .parse()
            .unwrap()
    }

    fn deliver_n(&self, mailbox: MailboxId, n: usize) -> Vec<Uid> {
        (0..n)
            .map(|i| self.deliver(mailbox, &format!("m{i}"), PLAIN))
            .collect()
    }

    fn highest_modseq(&self, mailbox: MailboxId) -> u64 {
        self.f
            .sql(&format!(
                "SELECT highest_modseq FROM mailboxes WHERE id = {mailbox}"
            ))
            .parse()
            .unwrap()
    }

    /// messages, unseen, deleted, bytes as the triggers keep them, and as
    /// counted from the messages themselves.
    fn counters(&self, mailbox: MailboxId) -> (String, String) {
        let kept = self.f.sql(&format!(
            "SELECT n_messages, n_unseen, n_deleted, n_bytes FROM mailboxes WHERE id = {mailbox}"
        ));
        let counted = self.f.sql(&format!(
            "SELECT count(*), count(*) FILTER (WHERE flags & 1 = 0),
                    count(*) FILTER (WHERE flags & 8 != 0), coalesce(sum(size), 0)
             FROM messages WHERE mailbox_id = {mailbox}"
        ));
        (kept, counted)
    }

    fn assert_counters_kept(&self, mailbox: MailboxId) {
        let (kept, counted) = self.counters(mailbox);
        assert_eq!(kept, counted, "counters of mailbox {mailbox}");
    }

    async fn uids_of(&self, mailbox: MailboxId) -> Vec<Uid> {
        uids(&self.f.store.list_messages(mailbox).await.unwrap())
    }
}

fn uids(entries: &[MessageEntry]) -> Vec<Uid> {
    entries.iter().map(|m| m.uid).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flag_updates_touch_only_what_changes_and_expunge_takes_the_deleted() {
    let m = mail().await;
    m.deliver_n(m.inbox, 5);
    let store = &m.f.store;
    let changed = store
        .update_flags(m.inbox, &[1, 2], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    assert_eq!(uids(&changed), [1, 2]);
    let modseq = changed[0].modseq;
    assert_eq!(changed[1].modseq, modseq, "one modseq per command");
    assert_eq!(m.highest_modseq(m.inbox), modseq);
    // Already \Seen: nothing changes, so no new modseq for it.
    let changed = store
        .update_flags(m.inbox, &[2, 3], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    assert_eq!(uids(&changed), [3]);
    assert_eq!(changed[0].modseq, modseq + 1);
    let listed = store.list_messages(m.inbox).await.unwrap();
    assert_eq!(
        listed[1].modseq, modseq,
        "an unchanged message keeps its modseq"
    );
    store
        .update_flags(
            m.inbox,
            &[1],
            FlagChange::Replace,
            FLAG_FLAGGED | FLAG_DELETED,
            &[],
            None,
        )
        .await
        .unwrap();
    store
        .update_flags(m.inbox, &[3, 4], FlagChange::Add, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    let changed = store
        .update_flags(m.inbox, &[4], FlagChange::Remove, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    assert_eq!(changed[0].flags, 0);
    let flags: Vec<(Uid, u32)> = store
        .list_messages(m.inbox)
        .await
        .unwrap()
        .iter()
        .map(|e| (e.uid, e.flags))
        .collect();
    assert_eq!(
        flags,
        [
            (1, FLAG_FLAGGED | FLAG_DELETED),
            (2, FLAG_SEEN),
            (3, FLAG_SEEN | FLAG_DELETED),
            (4, 0),
            (5, 0)
        ]
    );
    assert_eq!(
        m.f.sql(&format!(
            "SELECT n_unseen || ' ' || n_deleted FROM mailboxes WHERE id = {}",
            m.inbox
        )),
        "3 2"
    );
    m.assert_counters_kept(m.inbox);

    assert_eq!(store.expunge_deleted(m.inbox, None).await.unwrap(), [1, 3]);
    assert_eq!(m.uids_of(m.inbox).await, [2, 4, 5]);
    m.assert_counters_kept(m.inbox);
    assert_eq!(
        m.f.sql("SELECT count(*) FROM blobs WHERE refcount = 0"),
        "2",
        "the expunged messages' blobs are released"
    );
    let before = m.highest_modseq(m.inbox);
    assert!(store
        .expunge_deleted(m.inbox, None)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        m.highest_modseq(m.inbox),
        before,
        "nothing expunged, no modseq"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keywords_are_added_removed_and_replaced_case_insensitively() {
    let m = mail().await;
    m.deliver_n(m.inbox, 3);
    let store = &m.f.store;
    let changed = store
        .update_flags(
            m.inbox,
            &[1, 2],
            FlagChange::Add,
            0,
            &["$Forwarded".into(), "Work".into()],
            None,
        )
        .await
        .unwrap();
    assert_eq!(uids(&changed), [1, 2]);
    assert_eq!(changed[0].keywords, ["$Forwarded", "Work"]);
    // Same keywords in other case: nothing changes, nothing returned.
    let before = m.highest_modseq(m.inbox);
    let changed = store
        .update_flags(m.inbox, &[1], FlagChange::Add, 0, &["WORK".into()], None)
        .await
        .unwrap();
    assert!(changed.is_empty());
    assert_eq!(m.highest_modseq(m.inbox), before);
    let changed = store
        .update_flags(m.inbox, &[1], FlagChange::Remove, 0, &["work".into()], None)
        .await
        .unwrap();
    assert_eq!(changed[0].keywords, ["$Forwarded"]);
    // Replace sets system flags and keywords together.
    let changed = store
        .update_flags(
            m.inbox,
            &[2, 3],
            FlagChange::Replace,
            FLAG_SEEN,
            &["work".into(), "Home".into(), "HOME".into()],
            None,
        )
        .await
        .unwrap();
    assert_eq!(changed[0].keywords, ["Work", "Home"], "first spelling kept");
    assert_eq!(changed[1].keywords, ["work", "Home"]);
    assert!(changed.iter().all(|e| e.flags == FLAG_SEEN));
    let listed = store.list_messages(m.inbox).await.unwrap();
    assert_eq!(listed[0].keywords, ["$Forwarded"]);
    assert_eq!(listed[1].keywords, ["Work", "Home"]);
    assert_eq!(
        m.f.sql(&format!(
            "SELECT string_agg(keywords, '|' ORDER BY uid) FROM messages WHERE mailbox_id = {}",
            m.inbox
        )),
        "$Forwarded|Work Home|work Home",
        "stored space-separated, as the SQLite back end stores them"
    );
    let changed = store
        .update_flags(m.inbox, &[1, 2, 3], FlagChange::Replace, 0, &[], None)
        .await
        .unwrap();
    assert_eq!(uids(&changed), [1, 2, 3]);
    assert!(changed
        .iter()
        .all(|e| e.keywords.is_empty() && e.flags == 0));

    for bad in ["two words", "", "\\Seen", "paren("] {
        assert!(matches!(
            store
                .update_flags(m.inbox, &[1], FlagChange::Add, 0, &[bad.into()], None)
                .await,
            Err(StoreError::Invalid(_))
        ));
    }
    // No UIDs: nothing to check, nothing to do.
    assert!(store
        .update_flags(m.inbox, &[], FlagChange::Add, 0, &["not ok".into()], None)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_wake_after_flag_changes_and_expunges_once_committed() {
    let m = mail().await;
    m.deliver_n(m.inbox, 3);
    let store = &m.f.store;
    let mut rx = store.watch_mailbox(m.inbox);
    let mut second = store.watch_mailbox(m.inbox);
    let other = store.watch_mailbox(m.archive);
    let woken = |rx: &mut tokio::sync::watch::Receiver<u64>| {
        let changed = rx.has_changed().unwrap();
        rx.borrow_and_update();
        changed
    };

    store
        .update_flags(m.inbox, &[1], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    assert!(woken(&mut rx) && woken(&mut second), "a flag change");
    // A no-op change wakes nobody; an expunge does.
    store
        .update_flags(m.inbox, &[1], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    assert!(!woken(&mut rx));
    store.expunge(m.inbox, &[1]).await.unwrap();
    assert!(woken(&mut rx), "an expunge");
    store.expunge(m.inbox, &[1]).await.unwrap();
    assert!(!woken(&mut rx), "nothing left to expunge");
    assert!(store
        .expunge_deleted(m.inbox, None)
        .await
        .unwrap()
        .is_empty());
    assert!(!woken(&mut rx));
    store
        .update_flags(m.inbox, &[2], FlagChange::Add, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    woken(&mut rx);
    assert_eq!(store.expunge_deleted(m.inbox, None).await.unwrap(), [2]);
    assert!(woken(&mut rx), "an EXPUNGE");
    assert!(!other.has_changed().unwrap(), "other mailboxes stay quiet");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unchanged_since_leaves_newer_messages_alone() {
    let m = mail().await;
    m.deliver_n(m.inbox, 3);
    let store = &m.f.store;
    let base = m.highest_modseq(m.inbox);
    store
        .update_flags(m.inbox, &[2], FlagChange::Add, FLAG_ANSWERED, &[], None)
        .await
        .unwrap();
    let changed = store
        .update_flags(
            m.inbox,
            &[1, 2, 3],
            FlagChange::Add,
            FLAG_SEEN,
            &[],
            Some(base),
        )
        .await
        .unwrap();
    assert_eq!(uids(&changed), [1, 3], "2 changed after {base}");
    let listed = store.list_messages(m.inbox).await.unwrap();
    assert_eq!(listed[1].flags, FLAG_ANSWERED);
    // A failed conditional store with nothing else to do changes nothing.
    let before = m.highest_modseq(m.inbox);
    let changed = store
        .update_flags(m.inbox, &[2], FlagChange::Add, FLAG_SEEN, &[], Some(1))
        .await
        .unwrap();
    assert!(changed.is_empty());
    assert_eq!(
        m.highest_modseq(m.inbox),
        before,
        "no change, no new modseq"
    );
    // A modseq past what the database holds means "no condition".
    let changed = store
        .update_flags(
            m.inbox,
            &[2],
            FlagChange::Add,
            FLAG_SEEN,
            &[],
            Some(u64::MAX),
        )
        .await
        .unwrap();
    assert_eq!(uids(&changed), [2]);
    assert_eq!(changed[0].modseq, before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_mailbox_is_not_found_where_the_sqlite_back_end_says_so() {
    let m = mail().await;
    m.deliver_n(m.inbox, 1);
    let store = &m.f.store;
    assert!(matches!(
        store
            .update_flags(987_654, &[1], FlagChange::Add, FLAG_SEEN, &[], None)
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.changes_since(987_654, 0).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.copy_messages(m.inbox, &[1], 987_654).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.move_messages(m.inbox, &[1], 987_654).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        m.uids_of(m.inbox).await,
        [1],
        "a failed move keeps the message"
    );
    // Nothing to copy, expunge or read: nothing to complain about.
    assert!(store
        .copy_messages(987_654, &[1], m.archive)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .copy_messages(m.inbox, &[7], 987_654)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .expunge_deleted(987_654, None)
        .await
        .unwrap()
        .is_empty());
    store.expunge(987_654, &[1]).await.unwrap();
    assert!(store.list_messages(987_654).await.unwrap().is_empty());
    assert!(store.message_data(987_654, &[1]).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_since_reports_new_changed_and_expunged() {
    let m = mail().await;
    m.deliver_n(m.inbox, 5);
    let store = &m.f.store;
    let all = store.changes_since(m.inbox, 0).await.unwrap();
    assert_eq!(uids(&all.changed), [1, 2, 3, 4, 5]);
    assert!(all.expunged.is_empty());
    assert_eq!(all.uid_next, 6);
    let mark = all.highest_modseq;
    assert_eq!(mark, m.highest_modseq(m.inbox));
    assert_eq!(
        store.changes_since(m.inbox, mark).await.unwrap().changed,
        []
    );

    store
        .update_flags(m.inbox, &[2], FlagChange::Add, 0, &["Later".into()], None)
        .await
        .unwrap();
    store.expunge(m.inbox, &[4]).await.unwrap();
    store
        .update_flags(m.inbox, &[5], FlagChange::Add, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    store.expunge_deleted(m.inbox, None).await.unwrap();
    store.move_messages(m.inbox, &[1], m.trash).await.unwrap();
    m.deliver_n(m.inbox, 1);

    let c = store.changes_since(m.inbox, mark).await.unwrap();
    assert_eq!(uids(&c.changed), [2, 6]);
    assert_eq!(c.changed[0].keywords, ["Later"]);
    assert_eq!(c.expunged, [1, 4, 5]);
    assert_eq!(c.uid_next, 7);
    assert_eq!(c.highest_modseq, m.highest_modseq(m.inbox));
    assert!(c.changed.iter().all(|e| e.modseq > mark));
    // Caught up: nothing more.
    let none = store
        .changes_since(m.inbox, c.highest_modseq)
        .await
        .unwrap();
    assert!(none.changed.is_empty() && none.expunged.is_empty());
    // The expunges after the flag change only.
    let flag_modseq = c.changed[0].modseq;
    let later = store.changes_since(m.inbox, flag_modseq).await.unwrap();
    assert_eq!(later.expunged, [1, 4, 5]);
    assert_eq!(uids(&later.changed), [6]);
    // A client's modseq past what the database holds is simply ahead.
    let ahead = store.changes_since(m.inbox, u64::MAX).await.unwrap();
    assert!(ahead.changed.is_empty() && ahead.expunged.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expunges_leave_tombstones_fetch_can_still_read() {
    let m = mail().await;
    m.deliver_n(m.inbox, 3);
    let store = &m.f.store;
    store
        .update_flags(
            m.inbox,
            &[2],
            FlagChange::Add,
            FLAG_SEEN | FLAG_FLAGGED,
            &["Kept".into(), "Too".into()],
            None,
        )
        .await
        .unwrap();
    let before = m.highest_modseq(m.inbox);
    let entry = store.list_messages(m.inbox).await.unwrap()[1].clone();
    store.expunge(m.inbox, &[2, 3, 99]).await.unwrap();
    assert_eq!(m.uids_of(m.inbox).await, [1]);
    assert_eq!(
        m.highest_modseq(m.inbox),
        before + 1,
        "one modseq for the expunge"
    );
    assert_eq!(
        m.f.sql(&format!(
            "SELECT uid, modseq, blob_id, size, flags, internal_date, keywords FROM expunged
             WHERE mailbox_id = {} ORDER BY uid",
            m.inbox
        )),
        format!(
            "2|{0}|{1}|{2}|{3}|{4}|Kept Too\n3|{0}|{5}|{2}|0|{4}|",
            before + 1,
            entry.blob,
            entry.size,
            FLAG_SEEN | FLAG_FLAGGED,
            entry.internal_date,
            entry.blob + 1
        )
    );
    m.assert_counters_kept(m.inbox);

    // A session that has not yet seen the EXPUNGE still fetches the
    // message as it was, while its blob is kept.
    let data = store.message_data(m.inbox, &[1, 2]).await.unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(
        data[1].entry,
        MessageEntry {
            modseq: before + 1,
            ..entry.clone()
        }
    );
    assert_eq!(data[1].headers.subject, "m1");
    // Once the blob is swept, the tombstone only says it is gone.
    m.f.sql(&format!("DELETE FROM blobs WHERE id = {}", entry.blob));
    assert_eq!(
        uids(
            &store
                .message_data(m.inbox, &[1, 2])
                .await
                .unwrap()
                .into_iter()
                .map(|d| d.entry)
                .collect::<Vec<_>>()
        ),
        [1]
    );
    assert_eq!(
        store.changes_since(m.inbox, before).await.unwrap().expunged,
        [2, 3]
    );
    // Expunging what is not there takes no modseq.
    store.expunge(m.inbox, &[2, 3]).await.unwrap();
    store.expunge(m.inbox, &[]).await.unwrap();
    assert_eq!(m.highest_modseq(m.inbox), before + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uid_expunge_takes_only_the_named_deleted_messages() {
    let m = mail().await;
    m.deliver_n(m.inbox, 5);
    let store = &m.f.store;
    store
        .update_flags(
            m.inbox,
            &[1, 2, 3, 4],
            FlagChange::Add,
            FLAG_DELETED,
            &[],
            None,
        )
        .await
        .unwrap();
    let gone = store
        .expunge_deleted(m.inbox, Some(&[2, 4, 5]))
        .await
        .unwrap();
    assert_eq!(gone, [2, 4]);
    assert_eq!(m.uids_of(m.inbox).await, [1, 3, 5]);
    assert!(store
        .expunge_deleted(m.inbox, Some(&[]))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(store.expunge_deleted(m.inbox, None).await.unwrap(), [1, 3]);
    m.assert_counters_kept(m.inbox);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_share_blobs_and_take_new_uids_in_source_order() {
    let m = mail().await;
    m.deliver_n(m.inbox, 3);
    m.deliver_n(m.archive, 2);
    let store = &m.f.store;
    store
        .update_flags(
            m.inbox,
            &[3],
            FlagChange::Add,
            FLAG_SEEN,
            &["Kept".into()],
            None,
        )
        .await
        .unwrap();
    let source_before = store.list_messages(m.inbox).await.unwrap();
    let inbox_modseq = m.highest_modseq(m.inbox);
    let archive_modseq = m.highest_modseq(m.archive);
    let mut watch = store.watch_mailbox(m.archive);
    let map = store
        .copy_messages(m.inbox, &[3, 1, 99], m.archive)
        .await
        .unwrap();
    assert_eq!(map, [(1, 3), (3, 4)]);
    assert!(
        watch.has_changed().unwrap(),
        "the target's watchers are told"
    );
    watch.borrow_and_update();
    assert_eq!(store.list_messages(m.inbox).await.unwrap(), source_before);
    assert_eq!(
        m.highest_modseq(m.inbox),
        inbox_modseq,
        "the source is untouched"
    );
    assert!(m.highest_modseq(m.archive) > archive_modseq);
    let archive_after = m.highest_modseq(m.archive);
    let target = store.list_messages(m.archive).await.unwrap();
    assert_eq!(uids(&target), [1, 2, 3, 4]);
    for (copy, original) in target[2..]
        .iter()
        .zip([&source_before[0], &source_before[2]])
    {
        assert_eq!(
            copy,
            &MessageEntry {
                uid: copy.uid,
                modseq: archive_after,
                ..original.clone()
            }
        );
    }
    assert_eq!(
        m.f.sql(&format!(
            "SELECT refcount FROM blobs WHERE id IN ({}, {}) ORDER BY id",
            source_before[0].blob, source_before[1].blob
        )),
        "2\n1"
    );
    assert_eq!(
        m.f.sql(&format!(
            "SELECT uid_next FROM mailboxes WHERE id = {}",
            m.archive
        )),
        "5"
    );
    m.assert_counters_kept(m.archive);

    // Nothing to copy: nothing happens, nobody is told.
    assert!(store
        .copy_messages(m.inbox, &[42], m.archive)
        .await
        .unwrap()
        .is_empty());
    assert!(!watch.has_changed().unwrap());
    assert_eq!(m.highest_modseq(m.archive), archive_after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_copies_entries_and_expunges_the_originals_in_one_go() {
    let m = mail().await;
    m.deliver_n(m.inbox, 4);
    let store = &m.f.store;
    store
        .update_flags(
            m.inbox,
            &[3],
            FlagChange::Add,
            FLAG_SEEN,
            &["Kept".into()],
            None,
        )
        .await
        .unwrap();
    m.deliver_n(m.archive, 1);
    let before = m.highest_modseq(m.inbox);
    let blobs = m.f.sql("SELECT count(*) FROM blobs");
    let moved = store.list_messages(m.inbox).await.unwrap()[2..].to_vec();
    let mut inbox_watch = store.watch_mailbox(m.inbox);
    let mut archive_watch = store.watch_mailbox(m.archive);
    let map = store
        .move_messages(m.inbox, &[4, 3, 99], m.archive)
        .await
        .unwrap();
    assert_eq!(map, [(3, 2), (4, 3)]);
    assert!(inbox_watch.has_changed().unwrap() && archive_watch.has_changed().unwrap());
    inbox_watch.borrow_and_update();
    archive_watch.borrow_and_update();
    assert_eq!(m.uids_of(m.inbox).await, [1, 2]);
    let target = store.list_messages(m.archive).await.unwrap();
    assert_eq!(uids(&target), [1, 2, 3]);
    assert_eq!(
        (target[1].flags, target[1].keywords.clone()),
        (FLAG_SEEN, vec!["Kept".to_string()])
    );
    assert_eq!(m.f.sql("SELECT count(*) FROM blobs"), blobs);
    assert_eq!(
        m.f.sql("SELECT min(refcount) || ' ' || max(refcount) FROM blobs"),
        "1 1"
    );
    let changes = store.changes_since(m.inbox, before).await.unwrap();
    assert_eq!(changes.expunged, [3, 4]);
    // The copy's modseq, then the expunge's: later numbers of the account.
    assert!(changes.highest_modseq > before + 1);
    let after_move = changes.highest_modseq;
    // The tombstones in the source keep what the messages were.
    assert_eq!(
        m.f.sql(&format!(
            "SELECT uid, blob_id, flags, keywords FROM expunged WHERE mailbox_id = {}
             ORDER BY uid",
            m.inbox
        )),
        format!(
            "3|{}|{}|Kept\n4|{}|0|",
            moved[0].blob, FLAG_SEEN, moved[1].blob
        )
    );
    m.assert_counters_kept(m.inbox);
    m.assert_counters_kept(m.archive);
    // Nothing to move: nothing happens.
    assert!(store
        .move_messages(m.inbox, &[42], m.archive)
        .await
        .unwrap()
        .is_empty());
    assert!(!inbox_watch.has_changed().unwrap() && !archive_watch.has_changed().unwrap());
    assert_eq!(m.highest_modseq(m.inbox), after_move);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_within_a_mailbox_renumbers() {
    let m = mail().await;
    m.deliver_n(m.inbox, 2);
    let store = &m.f.store;
    let map = store
        .move_messages(m.inbox, &[1, 2], m.inbox)
        .await
        .unwrap();
    assert_eq!(map, [(1, 3), (2, 4)]);
    assert_eq!(m.uids_of(m.inbox).await, [3, 4]);
    assert_eq!(
        store.changes_since(m.inbox, 0).await.unwrap().expunged,
        [1, 2]
    );
    assert_eq!(
        m.f.sql("SELECT min(refcount) || ' ' || max(refcount) FROM blobs"),
        "1 1"
    );
    m.assert_counters_kept(m.inbox);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_into_and_out_of_junk_queue_spam_training() {
    let m = mail().await;
    m.deliver_n(m.inbox, 3);
    let store = &m.f.store;
    let blob_of = |uid: Uid| -> String {
        m.f.sql(&format!(
            "SELECT blob_id FROM messages WHERE mailbox_id = {} AND uid = {uid}",
            m.inbox
        ))
    };
    let (b1, b2, b3) = (blob_of(1), blob_of(2), blob_of(3));
    let training = || {
        m.f.sql("SELECT blob_id || ':' || spam FROM spam_training ORDER BY id")
    };
    store.move_messages(m.inbox, &[1, 2], m.junk).await.unwrap();
    assert_eq!(
        training(),
        format!("{b1}:true\n{b2}:true"),
        "into Junk is spam"
    );
    store.copy_messages(m.junk, &[1], m.trash).await.unwrap();
    store.move_messages(m.junk, &[2], m.trash).await.unwrap();
    assert_eq!(training().lines().count(), 2, "to Trash says nothing");
    store.copy_messages(m.trash, &[1], m.archive).await.unwrap();
    assert_eq!(training().lines().count(), 2, "Junk is not involved");
    store.copy_messages(m.junk, &[1], m.inbox).await.unwrap();
    assert_eq!(
        training(),
        format!("{b1}:true\n{b2}:true\n{b1}:false"),
        "out of Junk is ham"
    );
    store.copy_messages(m.inbox, &[3], m.junk).await.unwrap();
    assert_eq!(
        training().lines().last(),
        Some(format!("{b3}:true").as_str())
    );
    assert_eq!(
        m.f.sql("SELECT DISTINCT account_id FROM spam_training"),
        m.f.sql("SELECT id FROM accounts")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_data_reads_stored_structures_and_works_out_old_ones() {
    let m = mail().await;
    m.deliver(m.inbox, "parsed", PLAIN);
    m.deliver(
        m.inbox,
        "unparsed",
        Stored {
            parsed: false,
            ..PLAIN
        },
    );
    let store = &m.f.store;
    let data = store.message_data(m.inbox, &[2, 7, 1]).await.unwrap();
    assert_eq!(data.iter().map(|d| d.entry.uid).collect::<Vec<_>>(), [1, 2]);
    for (d, subject) in data.iter().zip(["parsed", "unparsed"]) {
        let text = text_of(subject);
        let mut builder = StructureBuilder::new();
        builder.feed(text.as_bytes());
        assert_eq!(d.structure, builder.finish(), "{subject}");
        assert_eq!(
            d.header,
            format!("From: b@example.net\r\nSubject: {subject}\r\n\r\n").into_bytes()
        );
        assert_eq!(d.headers.subject, subject);
        assert_eq!(d.headers.from, "b@example.net");
        assert_eq!(d.headers.date, Some(42));
        assert_eq!(d.entry.size, text.len() as u64);
    }
    assert_eq!(
        data.iter().map(|d| d.entry.clone()).collect::<Vec<_>>(),
        store.list_messages(m.inbox).await.unwrap()
    );
    assert!(store.message_data(m.inbox, &[]).await.unwrap().is_empty());

    // Worked out from several chunks, in order, whatever their codec.
    let text = text_of("unparsed");
    let (head, tail) = text.as_bytes().split_at(20);
    let packed = zstd::bulk::compress(tail, 1).unwrap();
    m.f.sql(&format!(
        "DELETE FROM blob_chunks WHERE blob_id = {blob};
         INSERT INTO blob_chunks (blob_id, seq, data, codec) VALUES
             ({blob}, 1, decode('{}', 'hex'), 1), ({blob}, 0, decode('{}', 'hex'), 0)",
        hex(&packed),
        hex(head),
        blob = data[1].entry.blob
    ));
    let again = store.message_data(m.inbox, &[2]).await.unwrap();
    assert_eq!(again, data[1..]);

    // A damaged stored structure is an error, not a panic.
    m.f.sql("UPDATE blob_parsed SET structure = '\\x00ff'");
    assert!(matches!(
        store.message_data(m.inbox, &[1]).await,
        Err(StoreError::Corrupt(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newest_first_pages_follow_the_date_then_the_uid() {
    let m = mail().await;
    // Dates out of UID order, and two messages of one second.
    for date in [300, 100, 200, 200, 50] {
        m.deliver(m.inbox, &date.to_string(), Stored { date, parsed: true });
    }
    let page = |skip, take| {
        let store = &m.f.store;
        let inbox = m.inbox;
        async move {
            let page = store.list_newest(inbox, skip, take).await.unwrap();
            page.iter()
                .map(|d| (d.entry.uid, d.headers.subject.clone()))
                .collect::<Vec<_>>()
        }
    };
    let uids_of = |page: Vec<(Uid, String)>| page.into_iter().map(|(u, _)| u).collect::<Vec<_>>();
    let all = page(0, 10).await;
    assert_eq!(all[0], (1, "300".to_string()), "with its data");
    assert_eq!(uids_of(all), [1, 4, 3, 2, 5]);
    assert_eq!(uids_of(page(1, 2).await), [4, 3]);
    assert_eq!(uids_of(page(4, 2).await), [5]);
    assert!(page(5, 2).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_of_one_mailbox_each_get_their_own_modseq() {
    let m = mail().await;
    m.deliver_n(m.inbox, 8);
    let base = m.highest_modseq(m.inbox);
    let tasks: Vec<_> = (1..=8)
        .map(|uid| {
            let store = m.f.store.clone();
            let inbox = m.inbox;
            tokio::spawn(async move {
                store
                    .update_flags(inbox, &[uid], FlagChange::Add, FLAG_SEEN, &[], None)
                    .await
            })
        })
        .collect();
    let mut modseqs = Vec::new();
    for task in tasks {
        let changed = task.await.unwrap().unwrap();
        assert_eq!(changed.len(), 1);
        modseqs.push(changed[0].modseq);
    }
    modseqs.sort_unstable();
    assert_eq!(modseqs, (base + 1..=base + 8).collect::<Vec<_>>());
    assert_eq!(m.highest_modseq(m.inbox), base + 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_in_opposite_directions_at_once_do_not_deadlock() {
    let m = mail().await;
    m.deliver_n(m.inbox, 10);
    m.deliver_n(m.archive, 10);
    let mover = |from: MailboxId, to: MailboxId| {
        let store = m.f.store.clone();
        tokio::spawn(async move {
            for _ in 0..10 {
                let first = store.list_messages(from).await?[0].uid;
                store.move_messages(from, &[first], to).await?;
            }
            Ok::<_, StoreError>(())
        })
    };
    // And copies out of both, each of whatever the mailbox holds then.
    let copier = |from: MailboxId| {
        let store = m.f.store.clone();
        let trash = m.trash;
        tokio::spawn(async move {
            let mut copied = 0;
            for _ in 0..5 {
                let all = uids(&store.list_messages(from).await?);
                copied += store.copy_messages(from, &all, trash).await?.len();
            }
            Ok::<_, StoreError>(copied)
        })
    };
    let a = mover(m.inbox, m.archive);
    let b = mover(m.archive, m.inbox);
    let c = copier(m.inbox);
    let d = copier(m.archive);
    a.await.unwrap().unwrap();
    b.await.unwrap().unwrap();
    let copied = c.await.unwrap().unwrap() + d.await.unwrap().unwrap();
    let total = m.uids_of(m.inbox).await.len() + m.uids_of(m.archive).await.len();
    assert_eq!(total, 20, "every message is somewhere, once");
    assert_eq!(
        m.uids_of(m.trash).await.len(),
        copied,
        "every copy reported is there"
    );
    assert_eq!(
        m.f.sql("SELECT sum(refcount) = (SELECT count(*) FROM messages) FROM blobs"),
        "t"
    );
    m.assert_counters_kept(m.trash);
    m.assert_counters_kept(m.inbox);
    m.assert_counters_kept(m.archive);
}
