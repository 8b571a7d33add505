//! How long an IMAP EXPUNGE waits for the store: fills one mailbox with N
//! messages (default 21,282, about 4.7 KB each, the same mailbox as the
//! `search` example, so the full-text index has real content), flags 1% of them `\Deleted` and
//! expunges, then 20% of the rest and expunges again, timing each
//! `expunge_deleted` call as a session sees it (queue, job, durable commit),
//! and then how long after it the background sweep of the released blobs
//! was done.
//!
//! Run with `cargo run --release -p sluice-store --example expunge [N]`.

mod support;

use std::time::Instant;

use store::{FlagChange, MailboxId, SqliteOptions, SqliteStore, Store, Uid, FLAG_DELETED};
use support::deliver;

/// Flags every `step`-th message of the mailbox `\Deleted`, expunges, and
/// prints how many went, how long the expunge took and when their blobs
/// were swept.
async fn expunge_every(store: &SqliteStore, mailbox: MailboxId, step: usize, what: &str) {
    let uids: Vec<Uid> = store
        .list_messages(mailbox)
        .await
        .unwrap()
        .iter()
        .map(|m| m.uid)
        .step_by(step)
        .collect();
    store
        .update_flags(mailbox, &uids, FlagChange::Add, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    let swept = store.writer_stats().blobs_swept;
    let start = Instant::now();
    let gone = store.expunge_deleted(mailbox, None).await.unwrap();
    let ms = start.elapsed().as_secs_f64() * 1e3;
    assert_eq!(gone.len(), uids.len());
    store.sweep_now().await.unwrap();
    let sweep_ms = start.elapsed().as_secs_f64() * 1e3 - ms;
    assert_eq!(store.writer_stats().blobs_swept - swept, gone.len() as u64);
    println!(
        "expunge {what}: {:>6} messages in {ms:>8.1} ms; blobs swept {sweep_ms:>8.1} ms later",
        gone.len()
    );
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("N is a number of messages"))
        .unwrap_or(21_282);
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    store.add_domain("example.org").await.unwrap();
    let account = store.add_account("user@example.org", "pw").await.unwrap();
    let inbox = store.mailbox(account, "INBOX").await.unwrap().unwrap().id;

    let start = Instant::now();
    deliver(&store, inbox, n).await;
    println!(
        "delivered {n} messages in {:.1} s",
        start.elapsed().as_secs_f64()
    );

    expunge_every(&store, inbox, 100, " 1%").await;
    expunge_every(&store, inbox, 5, "20%").await;
}
