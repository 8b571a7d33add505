//! What the store examples share: a realistic mailbox, delivered through
//! the real writer as many SMTP sessions would.

// Each example is its own crate and uses only part of this module.
#![allow(dead_code)]

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use store::{Delivery, MailboxId, SqliteStore, Store};

/// Deliveries in flight at once, so group commit folds them as it would
/// for many SMTP sessions.
pub const IN_FLIGHT: usize = 64;

/// Target size of one message.
pub const MESSAGE_SIZE: usize = 4700;

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ren", "sta", "vo", "que", "tri", "bel", "dor", "fen", "gal", "hus", "ist",
    "jor", "kel", "lum", "mar", "nex", "ort", "pla", "rus", "sil", "tan", "ul", "ver", "wen",
    "xen", "yor", "zu", "an", "er",
];

const FIRST: &[&str] = &[
    "Alice",
    "Bruno",
    "Chiara",
    "Dmitri",
    "Elena",
    "Farid",
    "Greta",
    "Hiroshi",
    "Ines",
    "Jonas",
    "Katarzyna",
    "Lars",
    "Maya",
    "Niels",
    "Olga",
    "Pedro",
    "Quentin",
    "Rosa",
    "Sven",
    "Tamar",
];

const LAST: &[&str] = &[
    "Andersen",
    "Baker",
    "Castillo",
    "Dubois",
    "Eriksson",
    "Fischer",
    "Garcia",
    "Hoffmann",
    "Ivanova",
    "Jensen",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Novak",
    "Okafor",
    "Petrov",
];

const MONTHS: &[&str] = &[
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

const DAYS_IN_MONTH: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

const WEEKDAYS: &[&str] = &["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// Days since 1970-01-01 of 2024-01-01 (a Monday).
pub const YEAR_START: i64 = 19_723;

/// A pseudo-word; low indexes are far more likely, as in real text.
pub fn word(rng: &mut StdRng) -> String {
    let rank = (rng.gen::<f64>().powi(3) * 20_000.0) as usize;
    let mut n = rank + 1;
    let mut w = String::new();
    while n > 0 {
        w.push_str(SYLLABLES[n % SYLLABLES.len()]);
        n /= SYLLABLES.len();
    }
    w
}

/// A day of 2024 as a `Date:` field, in one of a few zones.
pub fn date(rng: &mut StdRng) -> String {
    let day_of_year = rng.gen_range(0..366u32);
    let (mut month, mut day) = (0, day_of_year);
    while day >= DAYS_IN_MONTH[month] {
        day -= DAYS_IN_MONTH[month];
        month += 1;
    }
    let zone = ["+0000", "+0100", "-0500", "+0900", "-0800"][rng.gen_range(0..5)];
    format!(
        "{}, {} {} 2024 {:02}:{:02}:{:02} {zone}",
        WEEKDAYS[day_of_year as usize % 7],
        day + 1,
        MONTHS[month],
        rng.gen_range(0..24),
        rng.gen_range(0..60),
        rng.gen_range(0..60),
    )
}

pub fn message(rng: &mut StdRng, i: usize) -> Vec<u8> {
    let first = FIRST[rng.gen_range(0..FIRST.len())];
    let last = LAST[rng.gen_range(0..LAST.len())];
    let subject: Vec<String> = (0..rng.gen_range(3..9)).map(|_| word(rng)).collect();
    let mut text = format!(
        "Return-Path: <{l}.{f}@lists.example.net>\r\n\
         Received: from mx{r}.example.net (mx{r}.example.net [192.0.2.{r}])\r\n\
         \tby mail.example.org with ESMTPS id {id:08x}\r\n\
         \tfor <user@example.org>; {d}\r\n\
         From: {first} {last} <{f}.{l}@example.net>\r\n\
         To: User Example <user@example.org>\r\n\
         Cc: {first2} <{f2}@example.com>\r\n\
         Subject: {s}\r\nDate: {d}\r\nMessage-ID: <{i}.{id:08x}@example.net>\r\n\
         MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Transfer-Encoding: 8bit\r\nList-Id: <talk.lists.example.net>\r\n\r\n",
        f = first.to_lowercase(),
        l = last.to_lowercase(),
        first2 = FIRST[i % FIRST.len()],
        f2 = FIRST[i % FIRST.len()].to_lowercase(),
        r = rng.gen_range(1..250),
        id = rng.gen::<u32>(),
        d = date(rng),
        s = subject.join(" "),
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

/// Delivers `n` messages into `mailbox`, [`IN_FLIGHT`] at a time.
pub async fn deliver(store: &SqliteStore, mailbox: MailboxId, n: usize) {
    deliver_range(store, mailbox, 0..n, IN_FLIGHT).await;
}

/// What [`deliver_range`] delivered: bytes of mail, and how long each
/// delivery took (writing and committing), in microseconds.
pub struct Delivered {
    pub bytes: u64,
    pub latencies_us: Vec<u64>,
}

impl Delivered {
    /// The latency below which `q` (0..1) of the deliveries finished.
    pub fn quantile_ms(&mut self, q: f64) -> f64 {
        self.latencies_us.sort_unstable();
        let i = ((self.latencies_us.len() as f64 * q) as usize).min(self.latencies_us.len() - 1);
        self.latencies_us[i] as f64 / 1e3
    }
}

/// Delivers messages number `range` into `mailbox`, `in_flight` at a time
/// (as many SMTP sessions would); each number always gives the same text.
pub async fn deliver_range(
    store: &SqliteStore,
    mailbox: MailboxId,
    range: std::ops::Range<usize>,
    in_flight: usize,
) -> Delivered {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(range.start));
    let end = range.end;
    let mut tasks = Vec::new();
    for _ in 0..in_flight {
        let store = store.clone();
        let next = Arc::clone(&next);
        tasks.push(tokio::spawn(async move {
            let mut done = Delivered {
                bytes: 0,
                latencies_us: Vec::new(),
            };
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= end {
                    break done;
                }
                let mut rng = StdRng::seed_from_u64(i as u64);
                let text = message(&mut rng, i);
                done.bytes += text.len() as u64;
                let start = std::time::Instant::now();
                let mut w = store.message_writer();
                w.write(&text).await.unwrap();
                w.deliver(Delivery {
                    mailboxes: vec![mailbox],
                    ..Default::default()
                })
                .await
                .unwrap();
                done.latencies_us.push(start.elapsed().as_micros() as u64);
            }
        }));
    }
    let mut all = Delivered {
        bytes: 0,
        latencies_us: Vec::new(),
    };
    for t in tasks {
        let done = t.await.unwrap();
        all.bytes += done.bytes;
        all.latencies_us.extend(done.latencies_us);
    }
    all
}
