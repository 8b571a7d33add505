//! How long IMAP SEARCH waits for the store on a large mailbox: fills one
//! mailbox with N messages (default 21,282, about 4.7 KB each, with
//! realistic headers: From with display names, a year of Date: fields,
//! worded subjects and bodies), then times `search` for a FROM, a SENTON,
//! a SUBJECT and a TEXT key (median of 5 runs each), and last an
//! `expunge_deleted` of 20% of the mailbox.
//!
//! Run with `cargo run --release -p sluice-store --example search [N]`.

mod support;

use std::time::Instant;

use store::{
    FlagChange, MailboxId, SearchKey, SqliteOptions, SqliteStore, Store, Uid, FLAG_DELETED,
};
use support::{deliver, YEAR_START};

/// Runs of each search; the median is printed.
const RUNS: usize = 5;

/// Runs `key` [`RUNS`] times and prints the median time and the hit count.
async fn time_search(store: &SqliteStore, mailbox: MailboxId, what: &str, key: SearchKey) {
    let mut times = Vec::with_capacity(RUNS);
    let mut hits = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        hits = store.search(mailbox, &key).await.unwrap().len();
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "search {what:<20} {hits:>6} hits, median {:>7.1} ms",
        times[RUNS / 2]
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

    time_search(
        &store,
        inbox,
        "FROM lindqvist",
        SearchKey::From("lindqvist".into()),
    )
    .await;
    // 2024-06-15.
    time_search(
        &store,
        inbox,
        "SENTON 15-Jun-2024",
        SearchKey::SentOn(YEAR_START + 166),
    )
    .await;
    time_search(
        &store,
        inbox,
        "SUBJECT kalo",
        SearchKey::Subject("kalo".into()),
    )
    .await;
    time_search(&store, inbox, "TEXT kalo", SearchKey::Text("kalo".into())).await;
    // Substrings (RFC 3501): inside words, a rare word, one letter, two
    // words with the punctuation between them.
    time_search(&store, inbox, "TEXT alo", SearchKey::Text("alo".into())).await;
    time_search(&store, inbox, "BODY lindq", SearchKey::Body("lindq".into())).await;
    time_search(&store, inbox, "BODY k", SearchKey::Body("k".into())).await;
    time_search(
        &store,
        inbox,
        "TEXT \"lo, mi\"",
        SearchKey::Text("lo, mi".into()),
    )
    .await;
    time_search(&store, inbox, "TEXT zzqq", SearchKey::Text("zzqq".into())).await;

    let uids: Vec<Uid> = store
        .list_messages(inbox)
        .await
        .unwrap()
        .iter()
        .map(|m| m.uid)
        .step_by(5)
        .collect();
    store
        .update_flags(inbox, &uids, FlagChange::Add, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    let start = Instant::now();
    let gone = store.expunge_deleted(inbox, None).await.unwrap();
    println!(
        "expunge 20%: {:>6} messages in {:>8.1} ms",
        gone.len(),
        start.elapsed().as_secs_f64() * 1e3
    );
    assert_eq!(gone.len(), uids.len());
}
