//! What a delivery costs the disk as the store grows: bytes appended to
//! the write-ahead logs per byte of mail (the database's, and the
//! full-text index file's), the delivery rate, and the sizes of the files
//! and their logs, step by step.
//!
//! Delivers TOTAL messages (about 4.7 KB each, the `search` example's
//! mailbox) into one mailbox, IN_FLIGHT at a time as that many SMTP
//! sessions would, and prints a line every STEP messages. With READERS > 0,
//! that many tasks keep listing the mailbox meanwhile, as IMAP sessions do,
//! so the log always has readers in it.
//!
//! The log files' sizes are also watched every few milliseconds between
//! the lines: `peak` columns are the largest each reached, which is what
//! the `store.wal_limit_mb` bound is about (a single large transaction
//! overshoots it until the writer can cut the log).
//!
//! Run with `cargo run --release -p sluice-store --example wal [TOTAL] [STEP] [IN_FLIGHT] [READERS]`
//! (defaults 21,282, 5,000, 10, 2). With `WAL_KEEP_DIR=path` the store is
//! made in `path` (which must not hold one yet) and left there, for
//! `sqlite3` and `dbstat` to look at after.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use store::{SqliteOptions, SqliteStore, Store};
use support::deliver_range;

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .nth(n)
        .map(|a| a.parse().expect("arguments are numbers"))
        .unwrap_or(default)
}

fn file_mb(path: &std::path::Path) -> f64 {
    std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1e6)
}

fn dir_mb(dir: &std::path::Path) -> f64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len() as f64 / 1e6)
        .sum()
}

#[tokio::main]
async fn main() {
    let (total, step, in_flight, readers) = (arg(1, 21_282), arg(2, 5_000), arg(3, 10), arg(4, 2));
    let temp = tempfile::tempdir().unwrap();
    let dir = match std::env::var_os("WAL_KEEP_DIR") {
        Some(keep) => std::path::PathBuf::from(keep),
        None => temp.path().to_owned(),
    };
    let store = SqliteStore::open(&dir, SqliteOptions::default()).unwrap();
    store.add_domain("example.org").await.unwrap();
    let account = store.add_account("user@example.org", "pw").await.unwrap();
    let inbox = store.mailbox(account, "INBOX").await.unwrap().unwrap().id;
    let db = store.path().to_owned();
    let index = store.index_path();
    let wal_of = |file: &std::path::Path| {
        let mut name = file.as_os_str().to_owned();
        name.push("-wal");
        std::path::PathBuf::from(name)
    };
    let (wal, index_wal) = (wal_of(&db), wal_of(&index));

    // The largest size each log file reaches, polled.
    let peaks = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let watching = Arc::new(AtomicBool::new(true));
    let watcher = {
        let (peaks, watching) = (Arc::clone(&peaks), Arc::clone(&watching));
        let files = [wal.clone(), index_wal.clone()];
        std::thread::spawn(move || {
            while watching.load(Ordering::Relaxed) {
                for (peak, file) in peaks.iter().zip(&files) {
                    let len = std::fs::metadata(file).map_or(0, |m| m.len());
                    peak.fetch_max(len, Ordering::Relaxed);
                }
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        })
    };
    let take_peaks = || {
        [
            peaks[0].swap(0, Ordering::Relaxed) as f64 / 1e6,
            peaks[1].swap(0, Ordering::Relaxed) as f64 / 1e6,
        ]
    };
    let mut overall_peaks = [0.0f64; 2];

    let stop = Arc::new(AtomicBool::new(false));
    let mut reader_tasks = Vec::new();
    for _ in 0..readers {
        let (store, stop) = (store.clone(), Arc::clone(&stop));
        reader_tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let list = store.list_messages(inbox).await.unwrap();
                std::hint::black_box(list.len());
            }
        }));
    }

    println!(
        "messages   msg/s  WAL B/mail B  index WAL B/B  WAL MB  peak  DB MB  index WAL MB  peak  index MB  commit batch  p50 ms  p99 ms"
    );
    let mut done = 0;
    while done < total {
        let next = (done + step).min(total);
        let before = store.writer_stats();
        let index_before = store.index_writer_stats();
        let start = Instant::now();
        let mut delivered = deliver_range(&store, inbox, done..next, in_flight).await;
        let mail = delivered.bytes;
        let secs = start.elapsed().as_secs_f64();
        let after = store.writer_stats();
        let index_after = store.index_writer_stats();
        let peak = take_peaks();
        overall_peaks[0] = overall_peaks[0].max(peak[0]);
        overall_peaks[1] = overall_peaks[1].max(peak[1]);
        println!(
            "{next:>8} {:>7.0} {:>13.2} {:>14.2} {:>7.1} {:>5.1} {:>6.1} {:>13.1} {:>5.1} {:>9.1} {:>13.1} {:>7.2} {:>7.2}",
            (next - done) as f64 / secs,
            (after.wal_bytes - before.wal_bytes) as f64 / mail as f64,
            (index_after.wal_bytes - index_before.wal_bytes) as f64 / mail as f64,
            file_mb(&wal),
            peak[0],
            file_mb(&db),
            file_mb(&index_wal),
            peak[1],
            file_mb(&index),
            (after.jobs - before.jobs) as f64 / (after.transactions - before.transactions) as f64,
            delivered.quantile_ms(0.5),
            delivered.quantile_ms(0.99),
        );
        done = next;
    }
    stop.store(true, Ordering::Relaxed);
    for t in reader_tasks {
        t.await.unwrap();
    }
    let truncated = store.truncate_wal().await.unwrap();
    watching.store(false, Ordering::Relaxed);
    watcher.join().unwrap();
    let peak = take_peaks();
    println!(
        "largest log files: database {:.1} MB, index {:.1} MB (limit {:.1} MB)",
        overall_peaks[0].max(peak[0]),
        overall_peaks[1].max(peak[1]),
        SqliteOptions::default().wal_limit as f64 / 1e6,
    );
    let stats = store::disk_stats(&db).unwrap();
    println!(
        "after the load: WAL truncated {truncated}, data directory {:.1} MB ({:.1} MiB) for {:.1} MB of mail; database {:.1} MB, index {:.1} MB",
        dir_mb(&dir),
        dir_mb(&dir) * 1e6 / (1024.0 * 1024.0),
        stats.mail_bytes as f64 / 1e6,
        stats.database_bytes as f64 / 1e6,
        stats.index_bytes as f64 / 1e6,
    );
    let (all, index_all) = (store.writer_stats(), store.index_writer_stats());
    println!(
        "log written in all: database {:.1} MB, index {:.1} MB ({:.2} and {:.2} bytes per byte of mail)",
        all.wal_bytes as f64 / 1e6,
        index_all.wal_bytes as f64 / 1e6,
        all.wal_bytes as f64 / stats.mail_bytes as f64,
        index_all.wal_bytes as f64 / stats.mail_bytes as f64,
    );
    for (name, bytes) in stats.objects.iter().take(12) {
        println!("  {name:<28} {:>8.1} MB", *bytes as f64 / 1e6);
    }
}
