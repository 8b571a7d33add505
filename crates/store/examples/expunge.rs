//! How long an IMAP EXPUNGE waits for the store: fills one mailbox with N
//! messages (default 21,282, about 4.7 KB of varied text each, so the
//! full-text index has real content), flags 1% of them `\Deleted` and
//! expunges, then 20% of the rest and expunges again, timing each
//! `expunge_deleted` call as a session sees it (queue, job, durable commit),
//! and then how long after it the background sweep of the released blobs
//! was done.
//!
//! Run with `cargo run --release -p sluice-store --example expunge [N]`.

use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use store::{
    Delivery, FlagChange, MailboxId, SqliteOptions, SqliteStore, Store, Uid, FLAG_DELETED,
};

/// Deliveries in flight at once, so group commit folds them as it would
/// for many SMTP sessions.
const IN_FLIGHT: usize = 64;

/// Target size of one message.
const MESSAGE_SIZE: usize = 4700;

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ren", "sta", "vo", "que", "tri", "bel", "dor", "fen", "gal", "hus", "ist",
    "jor", "kel", "lum", "mar", "nex", "ort", "pla", "rus", "sil", "tan", "ul", "ver", "wen",
    "xen", "yor", "zu", "an", "er",
];

/// A pseudo-word; low indexes are far more likely, as in real text.
fn word(rng: &mut StdRng) -> String {
    let rank = (rng.gen::<f64>().powi(3) * 20_000.0) as usize;
    let mut n = rank + 1;
    let mut w = String::new();
    while n > 0 {
        w.push_str(SYLLABLES[n % SYLLABLES.len()]);
        n /= SYLLABLES.len();
    }
    w
}

fn message(rng: &mut StdRng, i: usize) -> Vec<u8> {
    let subject: Vec<String> = (0..rng.gen_range(3..9)).map(|_| word(rng)).collect();
    let mut text = format!(
        "From: {} <{}@example.net>\r\nTo: user@example.org\r\nSubject: {}\r\n\
         Date: Mon, 3 Mar 2025 10:{:02}:{:02} +0000\r\nMessage-ID: <{i}.{}@example.net>\r\n\
         Content-Type: text/plain; charset=utf-8\r\n\r\n",
        word(rng),
        word(rng),
        subject.join(" "),
        i / 60 % 60,
        i % 60,
        rng.gen::<u32>(),
    );
    let mut line = String::new();
    while text.len() < MESSAGE_SIZE {
        line.push_str(&word(rng));
        if line.len() > 70 {
            line.push_str(if rng.gen_bool(0.1) {
                ".\r\n\r\n"
            } else {
                "\r\n"
            });
            text.push_str(&line);
            line.clear();
        } else {
            line.push(' ');
        }
    }
    text.into_bytes()
}

async fn deliver(store: &SqliteStore, mailbox: MailboxId, n: usize) {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..IN_FLIGHT {
        let store = store.clone();
        let next = Arc::clone(&next);
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(t as u64);
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let text = message(&mut rng, i);
                let mut w = store.message_writer();
                w.write(&text).await.unwrap();
                w.deliver(Delivery {
                    mailboxes: vec![mailbox],
                    ..Default::default()
                })
                .await
                .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

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
