//! The SQLite back end against its promises: single-copy blobs with
//! reference counts, indexes filled at delivery, streaming large messages,
//! crash leftovers cleaned, directory edits.

use std::sync::Arc;

use rusqlite::Connection;
use store::{Delivery, SearchKey, SqliteOptions, SqliteStore, Store, StoreError, CHUNK_SIZE};

async fn open() -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    store.add_domain("Example.ORG").await.unwrap();
    (dir, store)
}

/// The database, with the full-text index file attached: its tables
/// (`fts`, `fts_docsize`) are found by their plain names.
fn count(store: &SqliteStore, sql: &str) -> i64 {
    let c = Connection::open(store.path()).unwrap();
    c.execute(
        "ATTACH ?1 AS fts_index",
        [store.index_path().to_str().unwrap()],
    )
    .unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// The full-text index file of the store in `dir`, with the database
/// attached as `store`, as a stopped store leaves them.
fn index_file(dir: &std::path::Path) -> Connection {
    let c = Connection::open(dir.join("fts.db")).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    c.execute(
        "ATTACH ?1 AS store",
        [dir.join("sluice.db").to_str().unwrap()],
    )
    .unwrap();
    c
}

async fn inbox(store: &SqliteStore, address: &str) -> i64 {
    let d = store.load_directory().await.unwrap();
    d.account(address).unwrap().inbox
}

/// A new store with the account `a@example.org`, and its INBOX.
async fn open_with_account() -> (tempfile::TempDir, SqliteStore, i64) {
    let (dir, store) = open().await;
    store.add_account("a@example.org", "pw").await.unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    (dir, store, mbox)
}

const MAIL: &[u8] = b"From: Alice <alice@example.org>\r\nTo: team@example.org\r\n\
Subject: quarterly zebra report\r\nMessage-ID: <q1@example.org>\r\n\r\nThe zebra numbers are in.\r\n";

#[tokio::test]
async fn one_blob_for_many_recipients_freed_with_the_last_reference() {
    let (_dir, store) = open().await;
    let mut boxes = Vec::new();
    for i in 0..15 {
        let a = format!("user{i}@example.org");
        store.add_account(&a, "pw").await.unwrap();
        boxes.push(inbox(&store, &a).await);
    }
    let mut w = store.message_writer();
    w.write(MAIL).await.unwrap();
    let receipt = w
        .deliver(Delivery {
            mailboxes: boxes.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(receipt.entries.len(), 15);
    assert_eq!(count(&store, "SELECT count(*) FROM blobs"), 1);
    assert_eq!(count(&store, "SELECT count(*) FROM messages"), 15);
    assert_eq!(count(&store, "SELECT refcount FROM blobs"), 15);

    // Indexed header columns and the full-text index were filled once
    // (the index row by the time a search looks).
    let h = store.headers(receipt.blob).await.unwrap().unwrap();
    assert_eq!(h.subject, "quarterly zebra report");
    assert_eq!(h.message_id, "q1@example.org");
    let found = store
        .search(boxes[0], &SearchKey::Body("zebra".into()))
        .await
        .unwrap();
    assert_eq!(found, vec![1]);
    assert_eq!(
        count(&store, "SELECT count(*) FROM fts WHERE fts MATCH 'zebra'"),
        1
    );

    // Deleting from one mailbox leaves the others intact.
    store.expunge(boxes[0], &[1]).await.unwrap();
    assert!(store.list_messages(boxes[0]).await.unwrap().is_empty());
    let other = store.list_messages(boxes[1]).await.unwrap();
    assert_eq!(other.len(), 1);
    let chunk = store.read_chunk(other[0].blob, 0).await.unwrap().unwrap();
    assert_eq!(chunk, MAIL);
    assert_eq!(count(&store, "SELECT refcount FROM blobs"), 14);

    // The last reference takes the blob, its chunks and its index entry.
    for b in &boxes[1..] {
        store.expunge(*b, &[1]).await.unwrap();
    }
    store.sweep_now().await.unwrap();
    assert_eq!(count(&store, "SELECT count(*) FROM blobs"), 0);
    assert_eq!(count(&store, "SELECT count(*) FROM blob_chunks"), 0);
    // The background sweeper may have swept the blob first, leaving
    // `sweep_now` nothing to do: it waits for that sweep's turn to end,
    // index row included.
    assert_eq!(
        count(&store, "SELECT count(*) FROM fts WHERE fts MATCH 'zebra'"),
        0
    );
}

/// An expunge wakes the background sweeper, which races `sweep_now` for
/// the blob: whichever takes it, the blob's index row is gone when
/// `sweep_now` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_now_returns_after_the_background_sweeps_index_deletes() {
    let (_dir, store, mbox) = open_with_account().await;
    for round in 1..=40u32 {
        let mut w = store.message_writer();
        w.write(MAIL).await.unwrap();
        w.deliver(Delivery {
            mailboxes: vec![mbox],
            ..Default::default()
        })
        .await
        .unwrap();
        let found = store
            .search(mbox, &SearchKey::Body("zebra".into()))
            .await
            .unwrap();
        assert_eq!(found, [round], "round {round}");
        store.expunge(mbox, &[round]).await.unwrap();
        store.sweep_now().await.unwrap();
        assert_eq!(
            count(&store, "SELECT count(*) FROM fts WHERE fts MATCH 'zebra'"),
            0,
            "round {round}"
        );
    }
}

#[tokio::test]
async fn large_messages_stream_in_chunks_and_read_back_whole() {
    let (_dir, store) = open().await;
    store.add_account("a@example.org", "pw").await.unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    let mut w = store.message_writer();
    w.write(b"Subject: big\r\n\r\n").await.unwrap();
    let line = [b'x'; 998];
    let mut expected = b"Subject: big\r\n\r\n".to_vec();
    for _ in 0..3000 {
        w.write(&line).await.unwrap();
        w.write(b"\r\n").await.unwrap();
        expected.extend_from_slice(&line);
        expected.extend_from_slice(b"\r\n");
    }
    let receipt = w
        .deliver(Delivery {
            mailboxes: vec![mbox],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(receipt.size, expected.len() as u64);
    // Indexed from its start, which was let go of long before delivery.
    let h = store.headers(receipt.blob).await.unwrap().unwrap();
    assert_eq!(h.subject, "big");
    let mut back = Vec::new();
    let mut seq = 0;
    while let Some(chunk) = store.read_chunk(receipt.blob, seq).await.unwrap() {
        assert!(chunk.len() <= CHUNK_SIZE);
        back.extend_from_slice(&chunk);
        seq += 1;
    }
    assert!(seq > 1);
    assert_eq!(back, expected);
    // Stored compressed, each chunk a small part of its size.
    let stored = count(
        &store,
        "SELECT sum(length(data)) FROM blob_chunks WHERE codec = 1",
    );
    assert!(
        stored > 0 && stored < expected.len() as i64 / 20,
        "{stored}"
    );
}

#[tokio::test]
async fn aborted_and_crashed_writes_leave_nothing() {
    let (dir, store) = open().await;
    let mut w = store.message_writer();
    w.write(&vec![b'a'; CHUNK_SIZE * 2 + 10]).await.unwrap();
    w.abort().await;
    assert_eq!(count(&store, "SELECT count(*) FROM blob_chunks"), 0);

    // A writer dropped mid-message (the process dying is the same as far
    // as the database is concerned) leaves an incomplete blob at worst;
    // recovery removes it.
    let mut w = store.message_writer();
    w.write(&vec![b'a'; CHUNK_SIZE + 10]).await.unwrap();
    std::mem::forget(w);
    assert_eq!(
        count(&store, "SELECT count(*) FROM blobs WHERE complete = 0"),
        1
    );
    let reopened = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    assert_eq!(reopened.recover().await.unwrap(), 1);
    assert_eq!(count(&store, "SELECT count(*) FROM blob_chunks"), 0);
}

#[tokio::test]
async fn removing_an_account_releases_its_references() {
    let (_dir, store) = open().await;
    store.add_account("a@example.org", "pw").await.unwrap();
    store.add_account("b@example.org", "pw").await.unwrap();
    let (a, b) = (
        inbox(&store, "a@example.org").await,
        inbox(&store, "b@example.org").await,
    );
    let mut w = store.message_writer();
    w.write(MAIL).await.unwrap();
    w.deliver(Delivery {
        mailboxes: vec![a, b],
        ..Default::default()
    })
    .await
    .unwrap();
    store.remove_account("a@example.org").await.unwrap();
    assert_eq!(count(&store, "SELECT refcount FROM blobs"), 1);
    store.remove_account("B@example.org").await.unwrap();
    store.sweep_now().await.unwrap();
    assert_eq!(count(&store, "SELECT count(*) FROM blobs"), 0);
}

#[tokio::test]
async fn directory_edits_are_checked_and_bump_the_serial() {
    let (_dir, store) = open().await;
    let s0 = store.directory_serial().await.unwrap();
    assert!(matches!(
        store.add_account("x@nowhere.test", "pw").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.add_domain("example.org").await,
        Err(StoreError::Exists(_))
    ));
    assert!(matches!(
        store.add_domain("bad domain").await,
        Err(StoreError::Invalid(_))
    ));
    store.add_account("x@example.org", "pw").await.unwrap();
    assert!(matches!(
        store.add_account("X@example.org", "pw").await,
        Err(StoreError::Exists(_))
    ));
    assert!(matches!(
        store.remove_domain("example.org").await,
        Err(StoreError::Invalid(_))
    ));
    store
        .add_alias(
            "team@example.org",
            &["x@example.org".into(), "far@remote.test".into()],
        )
        .await
        .unwrap();
    assert!(store.directory_serial().await.unwrap() > s0);
    assert_eq!(store.list_accounts().await.unwrap(), vec!["x@example.org"]);
    assert_eq!(store.list_aliases().await.unwrap()[0].targets.len(), 2);
    let mailboxes: Vec<String> = {
        let c = Connection::open(store.path()).unwrap();
        let mut st = c.prepare("SELECT name FROM mailboxes ORDER BY id").unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(
        mailboxes,
        ["INBOX", "Sent", "Drafts", "Trash", "Junk", "Archive"]
    );
}

#[tokio::test]
async fn concurrent_deliveries_all_land_with_distinct_uids() {
    let (_dir, store) = open().await;
    store.add_account("a@example.org", "pw").await.unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    let store = Arc::new(store);
    let before = store.writer_stats();
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let mut w = store.message_writer();
            w.write(MAIL).await.unwrap();
            w.deliver(Delivery {
                mailboxes: vec![mbox],
                remote: vec!["far@remote.test".into()],
                ..Default::default()
            })
            .await
            .unwrap()
            .entries[0]
                .1
        }));
    }
    let mut uids = Vec::new();
    for t in tasks {
        uids.push(t.await.unwrap());
    }
    uids.sort();
    assert_eq!(uids, (1..=50).collect::<Vec<u32>>());
    assert_eq!(store.queued().await.unwrap().len(), 50);
    assert_eq!(count(&store, "SELECT min(refcount) FROM blobs"), 2);
    // Group commit: the 50 deliveries, submitted at once, needed fewer
    // durable commits than deliveries.
    let after = store.writer_stats();
    assert_eq!(after.jobs - before.jobs, 50);
    assert!(
        after.durable_commits - before.durable_commits < 50,
        "{before:?} -> {after:?}"
    );
}

#[tokio::test]
async fn the_log_is_checkpointed_into_the_database_in_the_background() {
    let (dir, store) = open().await;
    store.add_account("a@example.org", "pw").await.unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    let db_file = dir.path().join("sluice.db");
    let before = std::fs::metadata(&db_file).unwrap().len();
    let mut w = store.message_writer();
    w.write(b"Subject: bulky\r\n\r\n").await.unwrap();
    // Bytes that do not compress, so the database grows by their size.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let noise: Vec<u8> = (0..4 * CHUNK_SIZE)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    w.write(&noise).await.unwrap();
    w.deliver(Delivery {
        mailboxes: vec![mbox],
        ..Default::default()
    })
    .await
    .unwrap();
    // Commits never checkpoint (wal_autocheckpoint is off); the checkpoint
    // thread moves the pages into the database file on its own.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::metadata(&db_file).unwrap().len() < before + 4 * CHUNK_SIZE as u64 {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint within 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn deliver_n(store: &SqliteStore, mailbox: i64, n: usize) {
    for i in 0..n {
        let mut w = store.message_writer();
        w.write(format!("Subject: m{i}\r\n\r\nbody {i}\r\n").as_bytes())
            .await
            .unwrap();
        w.deliver(Delivery {
            mailboxes: vec![mailbox],
            ..Default::default()
        })
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn copies_share_blobs_and_get_new_uids_in_order() {
    let (_dir, store) = open().await;
    store.add_account("a@example.org", "pw").await.unwrap();
    let inbox_id = inbox(&store, "a@example.org").await;
    let archive = store
        .mailbox(
            store
                .load_directory()
                .await
                .unwrap()
                .account("a@example.org")
                .unwrap()
                .id,
            "Archive",
        )
        .await
        .unwrap()
        .unwrap();
    deliver_n(&store, inbox_id, 4).await;
    let chunks = count(&store, "SELECT count(*) FROM blob_chunks");
    let map = store
        .copy_messages(inbox_id, &[4, 2, 3, 99], archive.id)
        .await
        .unwrap();
    assert_eq!(map, vec![(2, 1), (3, 2), (4, 3)]);
    assert_eq!(
        count(&store, "SELECT count(*) FROM blob_chunks"),
        chunks,
        "no text copied"
    );
    assert_eq!(
        count(&store, "SELECT count(*) FROM blobs WHERE refcount = 2"),
        3
    );
    let copies = store.list_messages(archive.id).await.unwrap();
    let originals = store.list_messages(inbox_id).await.unwrap();
    assert_eq!(copies[0].blob, originals[1].blob);
    // The source can go; the copies stay readable.
    store.expunge(inbox_id, &[1, 2, 3, 4]).await.unwrap();
    store.sweep_now().await.unwrap();
    assert_eq!(count(&store, "SELECT count(*) FROM blobs"), 3);
    assert!(store.read_chunk(copies[2].blob, 0).await.unwrap().is_some());
    let next = store
        .mailbox(archive.account, "Archive")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.uid_next, 4);
}

#[tokio::test]
async fn flag_updates_touch_only_what_changes_and_expunge_takes_the_deleted() {
    use store::{FlagChange, FLAG_DELETED, FLAG_FLAGGED, FLAG_SEEN};
    let (_dir, store) = open().await;
    store.add_account("a@example.org", "pw").await.unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    deliver_n(&store, mbox, 5).await;
    let changed = store
        .update_flags(mbox, &[1, 2], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    assert_eq!(changed.iter().map(|m| m.uid).collect::<Vec<_>>(), [1, 2]);
    let modseq = changed[0].modseq;
    // Already \Seen: nothing changes, so no new modseq for it.
    let changed = store
        .update_flags(mbox, &[2, 3], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    assert_eq!(changed.iter().map(|m| m.uid).collect::<Vec<_>>(), [3]);
    assert!(changed[0].modseq > modseq);
    store
        .update_flags(
            mbox,
            &[1],
            FlagChange::Replace,
            FLAG_FLAGGED | FLAG_DELETED,
            &[],
            None,
        )
        .await
        .unwrap();
    store
        .update_flags(mbox, &[3, 4], FlagChange::Add, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    store
        .update_flags(mbox, &[4], FlagChange::Remove, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    let flags: Vec<(u32, u32)> = store
        .list_messages(mbox)
        .await
        .unwrap()
        .iter()
        .map(|m| (m.uid, m.flags))
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
    assert_eq!(store.expunge_deleted(mbox, None).await.unwrap(), [1, 3]);
    assert_eq!(store.list_messages(mbox).await.unwrap().len(), 3);
    store.sweep_now().await.unwrap();
    assert_eq!(count(&store, "SELECT count(*) FROM blobs"), 3);
    assert!(store.expunge_deleted(mbox, None).await.unwrap().is_empty());
}

/// Delivers `text` to `mailbox` and returns its blob.
async fn deliver_text(store: &SqliteStore, mailbox: i64, text: &[u8]) -> i64 {
    let mut w = store.message_writer();
    w.write(text).await.unwrap();
    w.deliver(Delivery {
        mailboxes: vec![mailbox],
        ..Default::default()
    })
    .await
    .unwrap()
    .blob
}

#[tokio::test]
async fn expunged_blobs_are_swept_with_their_chunks_and_index_entries_unless_copied() {
    let (_dir, store) = open().await;
    let account = store.add_account("a@example.org", "pw").await.unwrap();
    let inbox_id = inbox(&store, "a@example.org").await;
    let archive = store.mailbox(account, "Archive").await.unwrap().unwrap().id;
    // Two chunks, so the sweep has more than one to delete.
    let mut big = b"Subject: walrus census\r\n\r\nThe walrus count.\r\n".to_vec();
    big.resize(CHUNK_SIZE + 100, b'w');
    let gone = deliver_text(&store, inbox_id, &big).await;
    let kept = deliver_text(&store, inbox_id, MAIL).await;
    store.copy_messages(inbox_id, &[2], archive).await.unwrap();
    let swept_before = store.writer_stats().blobs_swept;

    store.expunge(inbox_id, &[1, 2]).await.unwrap();
    store.sweep_now().await.unwrap();
    // Swept: unreadable.
    assert_eq!(store.read_chunk(gone, 0).await.unwrap(), None);
    assert_eq!(store.headers(gone).await.unwrap(), None);
    // The background sweep may have taken it first; either way, once.
    assert_eq!(store.writer_stats().blobs_swept - swept_before, 1);
    let sql = |q: &str| count(&store, &q.replace("?", &gone.to_string()));
    assert_eq!(sql("SELECT count(*) FROM blobs WHERE id = ?"), 0);
    assert_eq!(sql("SELECT count(*) FROM blob_chunks WHERE blob_id = ?"), 0);
    assert_eq!(
        count(&store, "SELECT count(*) FROM fts WHERE fts MATCH 'walrus'"),
        0
    );

    // The copy in the archive keeps its blob, text and index entry.
    assert_eq!(
        count(
            &store,
            &format!("SELECT refcount FROM blobs WHERE id = {kept}")
        ),
        1
    );
    assert_eq!(store.read_chunk(kept, 0).await.unwrap().unwrap(), MAIL);
    assert_eq!(
        store
            .search(archive, &store::SearchKey::Body("zebra".into()))
            .await
            .unwrap(),
        [1]
    );
    assert_eq!(store.sweep_now().await.unwrap(), 0);
    assert_eq!(store.writer_stats().blobs_swept - swept_before, 1);
}

#[tokio::test]
async fn blobs_released_but_not_swept_by_a_previous_run_are_swept_at_open() {
    let (dir, store) = open().await;
    store.add_account("a@example.org", "pw").await.unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    deliver_n(&store, mbox, 3).await;
    drop(store);
    // The last references go in a run that never sweeps: the triggers
    // alone count them down, as for a server stopped before its sweep.
    let c = Connection::open(dir.path().join("sluice.db")).unwrap();
    c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
    c.execute("DELETE FROM messages", []).unwrap();
    assert_eq!(
        c.query_row("SELECT count(*) FROM blobs WHERE refcount = 0", [], |r| r
            .get::<_, i64>(
            0
        ))
        .unwrap(),
        3
    );

    let reopened = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while reopened.writer_stats().blobs_swept < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "not swept within 60 s of opening"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(reopened.writer_stats().blobs_swept, 3);
    assert_eq!(count(&reopened, "SELECT count(*) FROM blobs"), 0);
    assert_eq!(count(&reopened, "SELECT count(*) FROM blob_chunks"), 0);
    // The index rows go in the index file's own job, after the sweep.
    while count(&reopened, "SELECT count(*) FROM fts_docsize") > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "index rows of swept blobs stayed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // Housekeeping is not counted as changes anyone asked for.
    assert_eq!(reopened.writer_stats().jobs, 0);
}

#[tokio::test]
async fn parsed_rows_follow_complete_blobs_through_expunges_sweeps_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    store.add_domain("example.org").await.unwrap();
    store.add_account("a@example.org", "pw").await.unwrap();
    let mailbox = inbox(&store, "a@example.org").await;
    deliver_n(&store, mailbox, 10).await;
    // A large message, written in several chunks before its delivery.
    let mut big = MAIL.to_vec();
    big.resize(3 * CHUNK_SIZE, b'x');
    deliver_text(&store, mailbox, &big).await;
    // An aborted one leaves no parsed row.
    let mut w = store.message_writer();
    w.write(&big).await.unwrap();
    w.abort().await;
    let one_each = "SELECT (SELECT count(*) FROM blob_parsed) = (SELECT count(*) FROM blobs WHERE complete = 1)
         AND NOT EXISTS (SELECT 1 FROM blob_parsed p LEFT JOIN blobs b ON b.id = p.blob_id
                         WHERE b.id IS NULL OR b.complete = 0)";
    assert_eq!(count(&store, "SELECT count(*) FROM blob_parsed"), 11);
    assert_eq!(count(&store, one_each), 1);

    let uids: Vec<u32> = store
        .list_messages(mailbox)
        .await
        .unwrap()
        .iter()
        .map(|m| m.uid)
        .collect();
    let before = store.message_data(mailbox, &uids).await.unwrap();
    store.expunge(mailbox, &uids[..4]).await.unwrap();
    store.sweep_now().await.unwrap();
    assert_eq!(count(&store, "SELECT count(*) FROM blob_parsed"), 7);
    assert_eq!(count(&store, one_each), 1);

    drop(store);
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let after = store.message_data(mailbox, &uids).await.unwrap();
    assert_eq!(after.len(), 7);
    for (a, b) in after.iter().zip(&before[4..]) {
        assert_eq!(a.entry.uid, b.entry.uid);
        assert_eq!(a.header, b.header);
        assert_eq!(a.structure, b.structure);
    }
    assert_eq!(count(&store, one_each), 1);
}

/// A view pinned before an expunge keeps the expunged message readable,
/// as it was, until the pin advances past the expunge or goes; then the
/// sweep takes its blob.
#[tokio::test]
async fn a_pinned_view_keeps_expunged_messages_readable_until_it_lets_go() {
    let (_dir, store) = open().await;
    store.add_account("a@example.org", "pw").await.unwrap();
    let inbox_id = inbox(&store, "a@example.org").await;
    let blob = deliver_text(&store, inbox_id, MAIL).await;
    store
        .update_flags(
            inbox_id,
            &[1],
            store::FlagChange::Add,
            store::FLAG_SEEN,
            &[],
            None,
        )
        .await
        .unwrap();
    let before = store.mailbox_status(inbox_id).await.unwrap().highest_modseq;
    let pin = store.pin_view(inbox_id, before);

    store.expunge(inbox_id, &[1]).await.unwrap();
    store.sweep_now().await.unwrap();
    let data = store.message_data(inbox_id, &[1]).await.unwrap();
    assert_eq!(data.len(), 1, "the view still shows it");
    assert_eq!(data[0].entry.blob, blob);
    assert_eq!(data[0].entry.size, MAIL.len() as u64);
    assert_eq!(data[0].entry.flags & store::FLAG_SEEN, store::FLAG_SEEN);
    assert_eq!(
        store.read_chunk(blob, 0).await.unwrap().as_deref(),
        Some(MAIL)
    );
    assert!(store.list_messages(inbox_id).await.unwrap().is_empty());

    let after = store.mailbox_status(inbox_id).await.unwrap().highest_modseq;
    pin.advance(after);
    store.sweep_now().await.unwrap();
    assert_eq!(store.read_chunk(blob, 0).await.unwrap(), None);
    assert!(store.message_data(inbox_id, &[1]).await.unwrap().is_empty());
    drop(pin);
}

fn dkim_key(domain: &str, selector: &str, algorithm: &str, signing: bool) -> store::DkimKey {
    store::DkimKey {
        domain: domain.into(),
        selector: selector.into(),
        algorithm: algorithm.into(),
        private_der: vec![1, 2, 3],
        public_key: "AAAA".into(),
        created: 1,
        signing,
    }
}

#[tokio::test]
async fn dkim_keys_rotate_by_algorithm_and_go_with_their_domain() {
    let (_dir, store) = open().await;
    let before = store.directory_serial().await.unwrap();
    assert!(matches!(
        store
            .add_dkim_key(dkim_key("example.net", "a", "rsa-sha256", true))
            .await,
        Err(StoreError::NotFound(_))
    ));
    for bad in ["", "a..b", "-a", "a b", "a/b"] {
        assert!(
            matches!(
                store
                    .add_dkim_key(dkim_key("example.org", bad, "rsa-sha256", true))
                    .await,
                Err(StoreError::Invalid(_))
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        store
            .add_dkim_key(dkim_key("example.org", "a", "dsa-sha1", true))
            .await,
        Err(StoreError::Invalid(_))
    ));
    store
        .add_dkim_key(dkim_key("Example.ORG", "r1", "rsa-sha256", true))
        .await
        .unwrap();
    store
        .add_dkim_key(dkim_key("example.org", "e1", "ed25519-sha256", true))
        .await
        .unwrap();
    assert!(matches!(
        store
            .add_dkim_key(dkim_key("example.org", "r1", "rsa-sha256", false))
            .await,
        Err(StoreError::Exists(_))
    ));
    // A second RSA key is published first, then takes over.
    store
        .add_dkim_key(dkim_key("example.org", "r2", "rsa-sha256", false))
        .await
        .unwrap();
    let signing = |keys: Vec<store::DkimKey>| {
        keys.into_iter()
            .filter(|k| k.signing)
            .map(|k| k.selector)
            .collect::<Vec<_>>()
    };
    assert_eq!(signing(store.dkim_keys().await.unwrap()), ["e1", "r1"]);
    store
        .set_dkim_signing("example.org", "r2", true)
        .await
        .unwrap();
    assert_eq!(signing(store.dkim_keys().await.unwrap()), ["e1", "r2"]);
    assert!(store.directory_serial().await.unwrap() > before);
    assert!(matches!(
        store.set_dkim_signing("example.org", "nope", true).await,
        Err(StoreError::NotFound(_))
    ));
    store.remove_dkim_key("example.org", "r1").await.unwrap();
    assert!(matches!(
        store.remove_dkim_key("example.org", "r1").await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.dkim_keys().await.unwrap().len(), 2);
    store.remove_domain("example.org").await.unwrap();
    assert!(store.dkim_keys().await.unwrap().is_empty());
}

/// Reads a blob back through `read_chunk`, checking every chunk but the
/// last is full.
async fn read_back(store: &SqliteStore, blob: i64) -> Vec<u8> {
    let mut back = Vec::new();
    let mut seq = 0;
    while let Some(chunk) = store.read_chunk(blob, seq).await.unwrap() {
        assert!(
            back.len() % CHUNK_SIZE == 0,
            "chunk {seq} follows a short one"
        );
        assert!(chunk.len() <= CHUNK_SIZE);
        back.extend_from_slice(&chunk);
        seq += 1;
    }
    back
}

#[tokio::test]
async fn a_lead_comes_first_in_small_and_large_messages() {
    let (_dir, store) = open().await;
    store.add_account("lead@example.org", "pw").await.unwrap();
    let mbox = inbox(&store, "lead@example.org").await;
    let lead = b"Authentication-Results: mx.example.org;\r\n\tdkim=pass header.d=example.org\r\n";
    let boundary = "b1";
    let mut large = format!(
        "From: a@example.org\r\nSubject: big\r\nContent-Type: multipart/mixed; boundary={boundary}\r\n\r\n--{boundary}\r\n\r\nfirst\r\n--{boundary}\r\n\r\n"
    )
    .into_bytes();
    large.extend(std::iter::repeat_n(b'x', 3 * CHUNK_SIZE + 77));
    large.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    // Sizes around the chunk size too: the lead pushes a full chunk over.
    let near = [MAIL.to_vec(), {
        let mut m = MAIL.to_vec();
        m.resize(CHUNK_SIZE - 5, b'y');
        m
    }];
    for (n, message) in near.iter().chain([&large]).enumerate() {
        let mut w = store.message_writer();
        for piece in message.chunks(1000 + n) {
            w.write(piece).await.unwrap();
        }
        let receipt = w
            .deliver(Delivery {
                mailboxes: vec![mbox],
                lead: lead.to_vec(),
                ..Default::default()
            })
            .await
            .unwrap();
        let expected = [lead.as_slice(), message].concat();
        assert_eq!(receipt.size, expected.len() as u64);
        assert!(
            read_back(&store, receipt.blob).await == expected,
            "message {n}"
        );
        let uid = receipt.entries[0].1;
        let data = store.message_data(mbox, &[uid]).await.unwrap().remove(0);
        assert!(data.header.starts_with(lead), "message {n}");
        assert_eq!(data.entry.size, expected.len() as u64);
        // The structure is the one of the message as stored.
        let mut parsed = mime_tree::StructureBuilder::new();
        parsed.feed(&expected);
        assert_eq!(data.structure, parsed.finish(), "message {n}");
    }
    // The two larger than a stored piece kept their pieces and got the
    // lead as a piece of its own.
    assert_eq!(
        count(&store, "SELECT count(*) FROM blob_chunks WHERE seq = -1"),
        2
    );

    // A lead of a chunk or more is refused, and nothing is stored.
    let mut w = store.message_writer();
    w.write(MAIL).await.unwrap();
    let refused = w
        .deliver(Delivery {
            mailboxes: vec![mbox],
            lead: vec![b'x'; CHUNK_SIZE],
            ..Default::default()
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Invalid(_))),
        "{refused:?}"
    );
}

/// Bytes that differ from piece to piece and chunk to chunk, so a piece
/// read in the wrong place shows.
fn numbered(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / 4099) as u8)
        .collect()
}

#[tokio::test]
async fn pieces_read_back_as_whole_chunks_with_or_without_a_lead() {
    let (_dir, store) = open().await;
    store.add_account("pieces@example.org", "pw").await.unwrap();
    let mbox = inbox(&store, "pieces@example.org").await;
    let lead = b"Received: from a by b; Tue, 1 Jan 2030 00:00:00 +0000\r\n".to_vec();
    let piece = 32 * 1024;
    for len in [
        piece - 1,
        piece,
        piece + 1,
        CHUNK_SIZE - 1,
        CHUNK_SIZE,
        CHUNK_SIZE + piece + 3,
        3 * CHUNK_SIZE + 7,
    ] {
        for lead in [Vec::new(), lead.clone()] {
            let mut message = b"Subject: pieces\r\n\r\n".to_vec();
            message.extend(numbered(len));
            let mut w = store.message_writer();
            for part in message.chunks(7_001) {
                w.write(part).await.unwrap();
            }
            let receipt = w
                .deliver(Delivery {
                    mailboxes: vec![mbox],
                    lead: lead.clone(),
                    ..Default::default()
                })
                .await
                .unwrap();
            let expected = [lead.as_slice(), &message].concat();
            assert!(
                read_back(&store, receipt.blob).await == expected,
                "{len} bytes, lead {}",
                lead.len()
            );
        }
    }
}

#[tokio::test]
async fn blobs_stored_in_chunk_sized_pieces_before_still_read() {
    let (_dir, store) = open().await;
    // A blob as the store wrote them before pieces were smaller: pieces of
    // CHUNK_SIZE (the column's default) and a lead of its own.
    let body = numbered(2 * CHUNK_SIZE + 500);
    let lead = b"X-Lead: yes\r\n".to_vec();
    {
        let c = Connection::open(store.path()).unwrap();
        c.execute(
            "INSERT INTO blobs (id, complete, created) VALUES (900000, 1, 0)",
            [],
        )
        .unwrap();
        let mut rows: Vec<(i64, &[u8])> = vec![(-1, &lead)];
        rows.extend(
            body.chunks(CHUNK_SIZE)
                .enumerate()
                .map(|(n, p)| (n as i64, p)),
        );
        for (seq, data) in rows {
            c.execute(
                "INSERT INTO blob_chunks (blob_id, seq, codec, data) VALUES (900000, ?1, 0, ?2)",
                rusqlite::params![seq, data],
            )
            .unwrap();
        }
    }
    assert!(read_back(&store, 900000).await == [lead, body].concat());
}

/// Delivers `text` to `mailbox` and returns the blob.
async fn deliver_one(store: &SqliteStore, mailbox: i64, text: &[u8]) -> i64 {
    let mut w = store.message_writer();
    w.write(text).await.unwrap();
    w.deliver(Delivery {
        mailboxes: vec![mailbox],
        ..Default::default()
    })
    .await
    .unwrap()
    .blob
}

fn mail_about(word: &str, n: usize) -> Vec<u8> {
    format!("Subject: note {n}\r\nMessage-ID: <{word}{n}@example.org>\r\n\r\nAll about {word}.\r\n")
        .into_bytes()
}

#[tokio::test]
async fn full_text_rows_written_in_batches_are_searchable_at_once_and_go_with_their_blob() {
    let (_dir, store) = open().await;
    store.add_account("a@example.org", "pw").await.unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    for n in 0..5 {
        deliver_one(&store, mbox, &mail_about("walrus", n)).await;
    }
    // A search right after delivery finds all of them: it writes the rows
    // still waiting first.
    let walrus = SearchKey::Text("walrus".into());
    assert_eq!(
        store.search(mbox, &walrus).await.unwrap(),
        vec![1, 2, 3, 4, 5]
    );
    assert_eq!(count(&store, "SELECT count(*) FROM fts_docsize"), 5);

    // A message expunged and swept before its row was written leaves no
    // row behind, and a blob delivered later gets an id never used before,
    // so never an old row.
    let blob = deliver_one(&store, mbox, &mail_about("narwhal", 6)).await;
    store.expunge(mbox, &[6]).await.unwrap();
    store.sweep_now().await.unwrap();
    assert_eq!(
        count(
            &store,
            &format!("SELECT count(*) FROM fts_docsize WHERE id = {blob}")
        ),
        0
    );
    let again = deliver_one(&store, mbox, &mail_about("beluga", 7)).await;
    assert!(again > blob, "blob id {blob} given again");
    // The mark of ids given moved when the highest blob went, not at each
    // delivery (a page of log per transaction).
    let mark = || count(&store, "SELECT value FROM meta WHERE key = 'blob_id_last'");
    assert_eq!(mark(), blob);
    deliver_one(&store, mbox, &mail_about("orca", 8)).await;
    assert_eq!(mark(), blob);
    let narwhal = SearchKey::Body("narwhal".into());
    assert!(store.search(mbox, &narwhal).await.unwrap().is_empty());
    let beluga = SearchKey::Body("beluga".into());
    assert_eq!(store.search(mbox, &beluga).await.unwrap(), vec![7]);
}

#[tokio::test]
async fn index_rows_a_crash_left_for_swept_blobs_are_deleted_at_open_and_match_nothing() {
    let (dir, store, mbox) = open_with_account().await;
    let blob = deliver_one(&store, mbox, &mail_about("narwhal", 1)).await;
    let narwhal = SearchKey::Body("narwhal".into());
    assert_eq!(store.search(mbox, &narwhal).await.unwrap(), vec![1]);
    drop(store);
    // The sweep committed in the database, and the kill took the index
    // job that would have deleted the row: the index still holds it.
    let c = Connection::open(dir.path().join("sluice.db")).unwrap();
    c.execute_batch(&format!(
        "DELETE FROM messages; DELETE FROM blob_chunks; DELETE FROM blob_parsed;
         DELETE FROM blobs WHERE id = {blob};"
    ))
    .unwrap();
    drop(c);
    let held = |c: &Connection| -> i64 {
        c.query_row(
            &format!("SELECT count(*) FROM fts_docsize WHERE id = {blob}"),
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(held(&index_file(dir.path())), 1);

    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    let next = deliver_one(&store, mbox, &mail_about("beluga", 2)).await;
    assert!(next > blob, "blob id {blob} given again");
    // A text search waits for the index to be brought in line.
    assert!(store.search(mbox, &narwhal).await.unwrap().is_empty());
    let beluga = SearchKey::Body("beluga".into());
    assert_eq!(store.search(mbox, &beluga).await.unwrap(), vec![2]);
    assert_eq!(
        count(
            &store,
            &format!("SELECT count(*) FROM fts_docsize WHERE id = {blob}")
        ),
        0
    );
}

#[tokio::test]
async fn an_index_file_deleted_while_stopped_is_built_again_at_open() {
    let (dir, store, mbox) = open_with_account().await;
    for n in 0..30 {
        deliver_one(&store, mbox, &mail_about("puffin", n)).await;
    }
    drop(store);
    for name in ["fts.db", "fts.db-wal", "fts.db-shm"] {
        let _ = std::fs::remove_file(dir.path().join(name));
    }
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    let puffin = SearchKey::Text("puffin".into());
    assert_eq!(store.search(mbox, &puffin).await.unwrap().len(), 30);
    let one = SearchKey::Text("puffin17".into());
    assert_eq!(store.search(mbox, &one).await.unwrap(), vec![18]);
    assert_eq!(count(&store, "SELECT count(*) FROM fts_docsize"), 30);
}

#[tokio::test]
async fn an_index_file_from_a_later_state_of_the_store_is_built_again() {
    let (dir, store, mbox) = open_with_account().await;
    for n in 0..3 {
        deliver_one(&store, mbox, &mail_about("heron", n)).await;
    }
    for n in 3..6 {
        deliver_one(&store, mbox, &mail_about("later", n)).await;
    }
    drop(store);
    // The database goes back to the state after the first three, as a
    // restored backup would (restore removes the index file, a copy by
    // hand does not): the index holds rows for blob ids it will give again.
    let c = Connection::open(dir.path().join("sluice.db")).unwrap();
    c.execute_batch(
        "DELETE FROM messages WHERE blob_id > 3; DELETE FROM blob_chunks WHERE blob_id > 3;
         DELETE FROM blob_parsed WHERE blob_id > 3; DELETE FROM blobs WHERE id > 3;
         UPDATE meta SET value = 3 WHERE key = 'blob_id_last';",
    )
    .unwrap();
    drop(c);
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    for n in 3..6 {
        deliver_one(&store, mbox, &mail_about("fresh", n)).await;
    }
    let later = SearchKey::Body("later".into());
    assert!(store.search(mbox, &later).await.unwrap().is_empty());
    let fresh = SearchKey::Body("fresh".into());
    assert_eq!(store.search(mbox, &fresh).await.unwrap().len(), 3);
    let heron = SearchKey::Body("heron".into());
    assert_eq!(store.search(mbox, &heron).await.unwrap(), vec![1, 2, 3]);
}

#[tokio::test]
async fn an_index_file_of_another_store_is_built_again() {
    let (dir, store, mbox) = open_with_account().await;
    for n in 0..3 {
        deliver_one(&store, mbox, &mail_about("heron", n)).await;
    }
    drop(store);
    // The index says it belongs to another store, and holds for blob 2 a
    // row that store wrote: kept, it would answer for this store's blob 2.
    let c = index_file(dir.path());
    c.execute_batch(
        "UPDATE index_meta SET value = value + 1 WHERE key = 'store_id';
         DELETE FROM fts WHERE rowid = 2;
         INSERT INTO fts (rowid, body) VALUES (2, 'bogus');",
    )
    .unwrap();
    drop(c);
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    let bogus = SearchKey::Body("bogus".into());
    assert!(store.search(mbox, &bogus).await.unwrap().is_empty());
    let heron = SearchKey::Body("heron".into());
    assert_eq!(store.search(mbox, &heron).await.unwrap(), vec![1, 2, 3]);
}

#[tokio::test]
async fn an_index_of_an_older_text_version_is_built_again() {
    let (dir, store, mbox) = open_with_account().await;
    let attached = b"Subject: scans\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
--b\r\nContent-Type: text/plain\r\n\r\nsee the file\r\n\
--b\r\nContent-Type: application/pdf; name=\"kestrel-survey.pdf\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\nAAAA\r\n--b--\r\n";
    deliver_one(&store, mbox, attached).await;
    deliver_one(&store, mbox, &mail_about("heron", 1)).await;
    drop(store);
    // As an index written before part headers were text: its rows lack
    // the attachment's name, which a search must find all the same.
    let c = index_file(dir.path());
    c.execute_batch(
        "UPDATE index_meta SET value = 1 WHERE key = 'text_version';
         DELETE FROM fts WHERE rowid = 1;
         INSERT INTO fts (rowid, body) VALUES (1, 'see the file');",
    )
    .unwrap();
    drop(c);
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    for needle in ["kestrel-survey.pdf", "application/pdf", "estrel"] {
        let key = SearchKey::Body(needle.into());
        assert_eq!(store.search(mbox, &key).await.unwrap(), vec![1], "{needle}");
    }
    let heron = SearchKey::Text("heron".into());
    assert_eq!(store.search(mbox, &heron).await.unwrap(), vec![2]);
}

#[tokio::test]
async fn waiting_full_text_rows_are_written_at_close_or_recovered_at_open() {
    let (dir, store, mbox) = open_with_account().await;
    for n in 0..20 {
        deliver_one(&store, mbox, &mail_about("otter", n)).await;
    }
    // Closing writes the rows still waiting.
    drop(store);
    let c = index_file(dir.path());
    let indexed = |c: &Connection| -> i64 {
        c.query_row("SELECT count(*) FROM fts_docsize", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(indexed(&c), 20);

    // Rows a kill took before their batch was written (as if deleted) come
    // back from the stored messages when the store opens, before any
    // search can miss them.
    c.execute_batch("DELETE FROM fts WHERE rowid IN (SELECT id FROM store.blobs WHERE id % 3 = 0)")
        .unwrap();
    assert!(indexed(&c) < 20);
    drop(c);
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    let otter = SearchKey::Text("otter".into());
    assert_eq!(store.search(mbox, &otter).await.unwrap().len(), 20);
    // The recovered rows hold the header too: TEXT finds a Message-ID.
    let id = SearchKey::Text("otter3".into());
    assert_eq!(store.search(mbox, &id).await.unwrap(), vec![4]);
    assert_eq!(count(&store, "SELECT count(*) FROM fts_docsize"), 20);
}

#[tokio::test]
async fn a_store_with_the_index_inside_its_database_moves_it_out_at_open() {
    let (dir, store, mbox) = open_with_account().await;
    deliver_one(
        &store,
        mbox,
        "Subject: =?UTF-8?B?5Lya6K2w?=\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n\
         会議は日本語のテキストで書きます。\r\n"
            .as_bytes(),
    )
    .await;
    let path = store.path().to_owned();
    drop(store);
    // The store as the version before left it: the index a table of the
    // database (holding a row that says something else), blob ids given
    // as SQLite gives rowids, and no index file.
    let c = Connection::open(&path).unwrap();
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    c.execute_batch(&format!(
        r#"DROP TRIGGER blobs_id_kept;
        DELETE FROM meta WHERE key IN ('blob_id_last', 'store_id');
        CREATE VIRTUAL TABLE fts USING fts5(
            subject, addresses, body,
            content = '', contentless_delete = 1,
            tokenize = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"
        );
        INSERT INTO fts (rowid, body) VALUES (1, 'stale words only');
        ALTER TABLE blob_parsed DROP COLUMN header_codec;
        ALTER TABLE blobs DROP COLUMN piece_size;
        DROP TABLE zstd_dictionaries;
        DROP TABLE uploads;
        DROP TABLE emails;
        DROP TABLE emails_gone;
        DROP TABLE mailboxes_gone;
        ALTER TABLE accounts DROP COLUMN modseq;
        ALTER TABLE mailboxes DROP COLUMN created_modseq;
        ALTER TABLE mailboxes DROP COLUMN meta_modseq;
        DROP TABLE account_records;
        PRAGMA user_version = {};"#,
        // The index moved out ten versions before the newest; the ones
        // after it (indexes dropped, header blocks packed, piece sizes
        // named, dictionaries kept, blob ids marked on deletion, JMAP
        // uploads, the account-wide view, per-account records) run again
        // as well, from the state before them.
        version - 10
    ))
    .unwrap();
    drop(c);
    for name in ["fts.db", "fts.db-wal", "fts.db-shm"] {
        let _ = std::fs::remove_file(dir.path().join(name));
    }
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    for needle in ["日本語", "本語のテ", "テキスト"] {
        let key = SearchKey::Body(needle.into());
        assert_eq!(store.search(mbox, &key).await.unwrap(), vec![1], "{needle}");
    }
    let subject = SearchKey::Text("議".into());
    assert_eq!(store.search(mbox, &subject).await.unwrap(), vec![1]);
    assert!(store
        .search(mbox, &SearchKey::Body("語日本".into()))
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .search(mbox, &SearchKey::Body("stale".into()))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        count(
            &store,
            "SELECT count(*) FROM main.sqlite_master WHERE name LIKE 'fts%'"
        ),
        0,
        "no index tables left in the database"
    );
    assert_eq!(count(&store, "SELECT count(*) FROM fts_docsize"), 1);
    // Blob ids go on from the highest given.
    let next = deliver_one(&store, mbox, &mail_about("after", 2)).await;
    assert_eq!(next, 2);
}

/// Delivers `message` to `mbox` written in pieces of 64 KiB, as SMTP and
/// IMAP write.
async fn deliver_in_pieces(store: &SqliteStore, mbox: store::MailboxId, message: &[u8]) {
    let mut w = store.message_writer();
    for piece in message.chunks(65_536) {
        w.write(piece).await.unwrap();
    }
    w.deliver(Delivery {
        mailboxes: vec![mbox],
        ..Default::default()
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn text_after_a_large_attachment_is_indexed_at_delivery_and_recovery() {
    let (dir, store, mbox) = open_with_account().await;
    let mut message = b"Subject: scan\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
        --b\r\nContent-Type: application/zip\r\nContent-Transfer-Encoding: base64\r\n\r\n"
        .to_vec();
    for _ in 0..20_000 {
        message
            .extend_from_slice(b"UEsDBBQAAAAIAAAAIQBzZWNyZXQgZGF0YSBpbiBhIHppcCBmaWxlIGJ5dGVz\r\n");
    }
    message.extend_from_slice(
        b"--b\r\nContent-Type: text/plain\r\n\r\nthe narwhal is after the attachment\r\n--b--\r\n",
    );
    assert!(message.len() > 4 * store::INDEX_WINDOW);
    deliver_in_pieces(&store, mbox, &message).await;
    let narwhal = SearchKey::Body("narwhal".into());
    assert_eq!(store.search(mbox, &narwhal).await.unwrap(), vec![1]);
    drop(store);
    // The same text when the row is rebuilt from the stored chunks.
    let c = index_file(dir.path());
    c.execute_batch("INSERT INTO fts(fts) VALUES('delete-all')")
        .unwrap();
    drop(c);
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    let narwhal = SearchKey::Body("narwhal".into());
    assert_eq!(store.search(mbox, &narwhal).await.unwrap(), vec![1]);
}

#[tokio::test]
async fn a_long_messages_whole_text_comes_back_when_the_index_is_rebuilt() {
    let (dir, store, mbox) = open_with_account().await;
    let message = format!(
        "Subject: long\r\n\r\n{}the heron-tailword\r\n",
        "text of a long message\r\n".repeat(40_000)
    );
    deliver_in_pieces(&store, mbox, message.as_bytes()).await;
    let tail = SearchKey::Body("heron-tailword".into());
    assert_eq!(store.search(mbox, &tail).await.unwrap(), vec![1]);
    drop(store);
    let sections = |c: &rusqlite::Connection| -> i64 {
        c.query_row("SELECT count(*) FROM fts_docsize WHERE id < 0", [], |r| {
            r.get(0)
        })
        .unwrap()
    };
    let c = index_file(dir.path());
    assert!(sections(&c) >= 7, "{} sections", sections(&c));
    c.execute_batch("INSERT INTO fts(fts) VALUES('delete-all')")
        .unwrap();
    assert_eq!(sections(&c), 0);
    drop(c);
    // Made again from the stored chunks when the store opens.
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    assert_eq!(store.search(mbox, &tail).await.unwrap(), vec![1]);
    assert!(sections(&index_file(dir.path())) >= 7);
}

#[tokio::test]
async fn header_blocks_are_stored_packed_and_read_as_they_came() {
    let (_dir, store, mbox) = open_with_account().await;
    let header = "Return-Path: <list-bounces@lists.example.net>\r\n\
        Received: from mx1.example.net (mx1.example.net [192.0.2.1])\r\n\
        \tby mail.example.org with ESMTPS id 4f2a9c1e\r\n\
        \tfor <a@example.org>; Mon, 3 Jun 2024 10:00:00 +0000\r\n\
        Received: from mx2.example.net (mx2.example.net [192.0.2.2])\r\n\
        \tby mx1.example.net with ESMTPS id 77ab12cd\r\n\
        \tfor <a@example.org>; Mon, 3 Jun 2024 09:59:58 +0000\r\n\
        From: Alice <alice@example.net>\r\nTo: a@example.org\r\n\
        Subject: packed headers\r\nX-Walrus: tusk\r\n\
        List-Id: <talk.lists.example.net>\r\n\r\n";
    let text = format!("{header}Body text.\r\n");
    let blob = deliver_text(&store, mbox, text.as_bytes()).await;
    let (codec, stored): (i64, i64) = {
        let c = Connection::open(store.path()).unwrap();
        c.query_row(
            "SELECT header_codec, length(header) FROM blob_parsed WHERE blob_id = ?1",
            [blob],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    assert_eq!(codec, 1, "compressed");
    assert!(
        (stored as usize) < header.len(),
        "{stored} of {}",
        header.len()
    );
    let data = store.message_data(mbox, &[1]).await.unwrap();
    assert_eq!(data[0].header, header.as_bytes());
    let walrus = SearchKey::Header("X-Walrus".into(), "TUSK".into());
    assert_eq!(store.search(mbox, &walrus).await.unwrap(), vec![1]);
    let none = SearchKey::Header("X-Walrus".into(), "horn".into());
    assert!(store.search(mbox, &none).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_searches_see_every_delivery_before_them_and_all_finish() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let (_dir, store, mbox) = open_with_account().await;
    let delivered = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let deliveries = {
        let (store, delivered, done) = (store.clone(), delivered.clone(), done.clone());
        tokio::spawn(async move {
            for i in 0..200 {
                let text = format!("Subject: m{i}\r\n\r\nneedleword body {i}\r\n");
                deliver_one(&store, mbox, text.as_bytes()).await;
                delivered.store(i + 1, Ordering::SeqCst);
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let searchers: Vec<_> = (0..6)
        .map(|_| {
            let (store, delivered, done) = (store.clone(), delivered.clone(), done.clone());
            tokio::spawn(async move {
                let key = SearchKey::Body("needleword".into());
                let mut searches = 0;
                while !done.load(Ordering::SeqCst) || searches == 0 {
                    let before = delivered.load(Ordering::SeqCst);
                    let hits = store.search(mbox, &key).await.unwrap();
                    assert!(
                        hits.len() >= before,
                        "{} hits after {before} deliveries",
                        hits.len()
                    );
                    searches += 1;
                }
            })
        })
        .collect();
    // Searches that wait on each other for ever would never get here.
    let all = async {
        deliveries.await.unwrap();
        for s in searchers {
            s.await.unwrap();
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(300), all)
        .await
        .expect("every search finished");
}

/// A message of a few kilobytes: header fields and words that a mailbox's
/// messages share, as real ones do.
fn office_mail(n: usize) -> Vec<u8> {
    let words: Vec<String> = (0..300)
        .map(|i| format!("w{}rd{}", i * 7 % 13, i))
        .collect();
    let mut x = (n as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut body = String::new();
    for i in 0..500 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        body.push_str(&words[(x % words.len() as u64) as usize]);
        body.push_str(if i % 12 == 11 { "\r\n" } else { " " });
    }
    format!(
        "Received: from mx{n}.example.net by mail.example.org; Tue, 3 Mar 2026 10:00:00 +0000\r\n\
         From: Colleague {n} <c{n}@example.net>\r\nTo: a@example.org\r\n\
         Subject: figures {n}\r\nX-Ticket: T{n}\r\nMessage-ID: <{x:x}.{n}@example.net>\r\n\
         Content-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_messages_are_packed_with_a_dictionary_trained_on_the_store() {
    let (dir, store, mbox) = open_with_account().await;
    let store = Arc::new(store);
    // The store trains once it has a thousand blobs (dictionary.rs).
    let deliver = |range: std::ops::Range<usize>| {
        let tasks: Vec<_> = (0..10)
            .map(|t| {
                let store = Arc::clone(&store);
                let range = range.clone();
                tokio::spawn(async move {
                    let mut blobs = Vec::new();
                    for n in range.filter(|n| n % 10 == t) {
                        blobs.push((deliver_one(&store, mbox, &office_mail(n)).await, n));
                    }
                    blobs
                })
            })
            .collect();
        async move {
            let mut all = Vec::new();
            for t in tasks {
                all.extend(t.await.unwrap());
            }
            all
        }
    };
    let mut blobs = deliver(0..1000).await;
    let mut trained = false;
    for _ in 0..600 {
        if count(&store, "SELECT count(*) FROM zstd_dictionaries") == 1 {
            trained = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(trained, "no dictionary after a thousand messages");
    assert_eq!(
        count(&store, "SELECT count(*) FROM blob_chunks WHERE codec = 2"),
        0
    );
    blobs.extend(deliver(1000..1300).await);

    // The new messages are packed with it, smaller than before.
    assert!(count(&store, "SELECT count(*) FROM blob_chunks WHERE codec = 2") >= 290);
    assert!(
        count(
            &store,
            "SELECT count(*) FROM blob_parsed WHERE header_codec = 2"
        ) >= 290
    );
    let with = count(
        &store,
        "SELECT CAST(avg(length(data)) AS INTEGER) FROM blob_chunks WHERE codec = 2",
    );
    let without = count(
        &store,
        "SELECT CAST(avg(length(data)) AS INTEGER) FROM blob_chunks WHERE codec = 1",
    );
    assert!(with * 10 < without * 8, "{with} bytes against {without}");

    // Everything reads back as delivered, packed either way, and header
    // searches read the packed header blocks.
    for &(blob, n) in &blobs {
        assert_eq!(read_back(&store, blob).await, office_mail(n), "message {n}");
    }
    let tickets = store
        .search(mbox, &SearchKey::Header("X-Ticket".into(), "T1234".into()))
        .await
        .unwrap();
    assert_eq!(tickets.len(), 1);

    // After a restart too, and for a tool reading the file.
    drop(store);
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    for &(blob, n) in blobs.iter().rev().take(50) {
        assert_eq!(read_back(&store, blob).await, office_mail(n), "message {n}");
    }
    let c = Connection::open(store.path()).unwrap();
    store::load_dictionaries(&c).unwrap();
    let (codec, data): (i64, Vec<u8>) = c
        .query_row(
            "SELECT codec, data FROM blob_chunks WHERE codec = 2 LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let text = store::decode_chunk(codec, &data).unwrap();
    assert!(text.starts_with(b"Received: from mx"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_opened_without_training_packs_with_the_dictionary_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let tool = SqliteOptions {
        train_dictionary: false,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(dir.path(), tool.clone()).unwrap();
    store.add_domain("example.org").await.unwrap();
    store.add_account("a@example.org", "pw").await.unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    for n in 0..1100 {
        deliver_one(&store, mbox, &office_mail(n)).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(count(&store, "SELECT count(*) FROM zstd_dictionaries"), 0);
    drop(store);

    // A server trains one; a tool opened after packs with it.
    let server = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    deliver_one(&server, mbox, &office_mail(1100)).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while count(&server, "SELECT count(*) FROM zstd_dictionaries") == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no dictionary trained"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    drop(server);
    let store = SqliteStore::open(dir.path(), tool).unwrap();
    let blob = deliver_one(&store, mbox, &office_mail(1101)).await;
    assert_eq!(
        count(
            &store,
            &format!("SELECT codec FROM blob_chunks WHERE blob_id = {blob}")
        ),
        2
    );
    assert_eq!(read_back(&store, blob).await, office_mail(1101));
}

/// The UIDs a search finds.
async fn found(store: &SqliteStore, mbox: i64, key: SearchKey) -> Vec<u32> {
    store.search(mbox, &key).await.unwrap()
}

#[tokio::test]
async fn text_and_body_find_any_substring_of_the_text() {
    let (_dir, store, mbox) = open_with_account().await;
    let mails: [&[u8]; 4] = [
        b"Subject: The haystack\r\nX-Note: Zurich\r\n\r\nA needle, in the hay-stack.\r\nHello\r\n  world\r\n",
        b"Subject: =?UTF-8?Q?Z=C3=BCrich?=\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n\
          \xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94\xe0\xb8\xb5 haystacks\r\n",
        b"Subject: other\r\n\r\nNothing here but stacks of hay.\r\n",
        b"Subject: --\r\n\r\n-- \r\nsignature\r\n",
    ];
    for mail in mails {
        deliver_one(&store, mbox, mail).await;
    }
    let body = |s: &str| SearchKey::Body(s.into());
    let text = |s: &str| SearchKey::Text(s.into());
    // Inside a word, at its ends, in any case.
    assert_eq!(found(&store, mbox, body("AYST")).await, [2]);
    assert_eq!(found(&store, mbox, text("ayst")).await, [1, 2]);
    assert_eq!(found(&store, mbox, text("haystack")).await, [1, 2]);
    assert_eq!(found(&store, mbox, text("haystacks")).await, [2]);
    assert_eq!(found(&store, mbox, body("tack")).await, [1, 2, 3]);
    assert_eq!(found(&store, mbox, body("eedl")).await, [1]);
    // Across words and punctuation, exactly as written: white space runs
    // count as one space, punctuation must be there.
    assert_eq!(found(&store, mbox, body("hay-stack.")).await, [1]);
    assert_eq!(found(&store, mbox, body("ay-sta")).await, [1]);
    assert_eq!(found(&store, mbox, body("dle, in t")).await, [1]);
    assert!(found(&store, mbox, body("dle in t")).await.is_empty());
    assert_eq!(found(&store, mbox, body("hello world")).await, [1]);
    assert_eq!(found(&store, mbox, body("stacks of")).await, [3]);
    assert!(found(&store, mbox, body("stacks, of")).await.is_empty());
    // Diacritics fold as the index folds them; the header counts for TEXT.
    assert_eq!(found(&store, mbox, text("zurich")).await, [1, 2]);
    assert_eq!(found(&store, mbox, text("ZÜRICH")).await, [1, 2]);
    assert!(found(&store, mbox, body("zurich")).await.is_empty());
    // Thai, written without spaces: any run of its characters, in order.
    assert_eq!(
        found(&store, mbox, body("\u{e27}\u{e31}\u{e2a}")).await,
        [2]
    );
    assert!(found(&store, mbox, body("\u{e14}\u{e35}\u{e2a}"))
        .await
        .is_empty());
    // No word in the needle at all: punctuation is looked for as such.
    assert_eq!(found(&store, mbox, body("--")).await, [4]);
    assert_eq!(found(&store, mbox, text(" ")).await, [1, 2, 3, 4]);
    // A letter or two is in many terms: still exact.
    assert_eq!(found(&store, mbox, body("y")).await, [1, 2, 3]);
    assert_eq!(found(&store, mbox, body("ig")).await, [4]);
}

#[tokio::test]
async fn a_needle_in_thousands_of_terms_is_found_exactly() {
    let (_dir, store, mbox) = open_with_account().await;
    // Message 1 holds 3,000 words with "qz" inside, more than one query
    // asks for and more than a search reads term by term; message 2
    // holds one such word, message 3 none, message 4 "qz" split by a line.
    let mut many = String::from("Subject: words\r\n\r\n");
    for n in 0..3000 {
        many.push_str(&format!("w{n}qz{} ", n * 7));
        if n % 10 == 9 {
            many.push_str("\r\n");
        }
    }
    deliver_one(&store, mbox, many.as_bytes()).await;
    deliver_one(&store, mbox, b"Subject: one\r\n\r\nxqzx\r\n").await;
    deliver_one(&store, mbox, b"Subject: none\r\n\r\nq z\r\n").await;
    deliver_one(&store, mbox, b"Subject: none\r\n\r\nxq\r\nzx\r\n").await;
    let key = SearchKey::Body("QZ".into());
    assert_eq!(found(&store, mbox, key).await, [1, 2]);
    let key = SearchKey::Body("w2999qz20993".into());
    assert_eq!(found(&store, mbox, key).await, [1]);
    let key = SearchKey::Text("9qz6".into());
    assert_eq!(found(&store, mbox, key).await, [1]);
}

#[tokio::test]
async fn an_index_file_made_before_the_terms_finds_substrings_after_reopening() {
    let (dir, store, mbox) = open_with_account().await;
    deliver_one(&store, mbox, b"Subject: old\r\n\r\nThe haystack\r\n").await;
    drop(store);
    // The index file as the version before left it: no terms.
    let c = Connection::open(dir.path().join("fts.db")).unwrap();
    c.execute_batch(
        "DROP TABLE term_grams; DROP TABLE terms;
         DELETE FROM index_meta WHERE key = 'terms_complete';",
    )
    .unwrap();
    drop(c);
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let mbox = inbox(&store, "a@example.org").await;
    assert_eq!(
        found(&store, mbox, SearchKey::Body("ayst".into())).await,
        [1]
    );
    assert!(found(&store, mbox, SearchKey::Body("aystacks".into()))
        .await
        .is_empty());
}

#[tokio::test]
async fn many_matches_are_found_by_a_pass_over_the_mailbox_few_by_uid() {
    let (_dir, store, mbox) = open_with_account().await;
    // "body" is in all 1,200 (more than are looked up one by one), a
    // 7 in a few hundred.
    deliver_n(&store, mbox, 1200).await;
    let other = store.create_mailbox(1, "Other", None).await.unwrap().id;
    deliver_n(&store, other, 30).await;
    let all: Vec<u32> = (1..=1200).collect();
    assert_eq!(
        found(&store, mbox, SearchKey::Body("ODY".into())).await,
        all
    );
    // Numbers with a 7 in them, less those of subjects starting "m7".
    let key = SearchKey::And(vec![
        SearchKey::Body("7".into()),
        SearchKey::Not(Box::new(SearchKey::Text("m7".into()))),
    ]);
    let got = found(&store, mbox, key).await;
    let want: Vec<u32> = (1..=1200u32)
        .filter(|u| {
            let i = (u - 1).to_string();
            i.contains('7') && !i.starts_with('7')
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        found(&store, other, SearchKey::Body("ody 2".into()))
            .await
            .len(),
        11
    );
}
