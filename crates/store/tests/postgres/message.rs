//! PostgreSQL: writing messages, reading them back, releasing blobs.
//!
//! The set-up is SQL (a domain, an account, mailbox rows), so these checks
//! stand on the message area alone; expunges are made as the entries area
//! makes them (entry deleted, tombstone written) through SQL too.

use std::time::{Duration, Instant};

use sluice_testkit::Postgres;
use store::{Delivery, MailboxId, PgOptions, PgStore, RecipientDsn, Store, StoreError, CHUNK_SIZE};

use super::Fixture;

/// Size of the pieces blobs are stored in (the SQLite back end's).
const PIECE: usize = 32 * 1024;

const MAIL: &[u8] = b"From: Alice <alice@example.org>\r\nTo: team@example.org\r\n\
Subject: quarterly zebra report\r\nMessage-ID: <q1@example.org>\r\n\r\nThe zebra numbers are in.\r\n";

/// A store whose sweeper keeps released blobs for `grace`.
async fn open_with_grace(grace: Duration) -> Fixture {
    let pg = Postgres::start();
    let url = pg.create_database();
    let db = url.rsplit('/').next().unwrap().to_string();
    let mut options = PgOptions::new(&url);
    options.release_grace = grace;
    let store = PgStore::connect(options).await.unwrap();
    Fixture { pg, db, store }
}

/// A store that sweeps released blobs at once, with `n` mailboxes of one
/// account, made in SQL.
async fn open_with_mailboxes(n: usize) -> (Fixture, Vec<MailboxId>) {
    let f = open_with_grace(Duration::ZERO).await;
    let boxes = add_mailboxes(&f, n);
    (f, boxes)
}

fn add_mailboxes(f: &Fixture, n: usize) -> Vec<MailboxId> {
    f.sql(
        "INSERT INTO domains (name) VALUES ('example.org');
         INSERT INTO accounts (address, domain_id, password_hash, created, modseq)
         SELECT 'a@example.org', id, 'x', 0, 1 FROM domains",
    );
    let ids = f.sql(&format!(
        "INSERT INTO mailboxes (account_id, name, uid_validity)
         SELECT a.id, 'box' || n, 1000 + n FROM accounts a, generate_series(1, {n}) n
         RETURNING id"
    ));
    ids.lines().map(|l| l.parse().unwrap()).collect()
}

fn count(f: &Fixture, sql: &str) -> i64 {
    f.sql(sql).parse().unwrap()
}

/// A client of the store's database, for rows psql would print as hex.
async fn client(f: &Fixture) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&f.pg.url(&f.db), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

async fn deliver_to(
    store: &PgStore,
    mailboxes: &[MailboxId],
    text: &[u8],
) -> store::DeliveryReceipt {
    let mut w = store.message_writer();
    w.write(text).await.unwrap();
    w.deliver(Delivery {
        mailboxes: mailboxes.to_vec(),
        ..Default::default()
    })
    .await
    .unwrap()
}

/// Reads a blob back through `read_chunk`, checking every chunk but the
/// last is full.
async fn read_back(store: &PgStore, blob: i64) -> Vec<u8> {
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

/// Bytes that differ from piece to piece and chunk to chunk, so a piece
/// read in the wrong place shows.
fn numbered(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / 4099) as u8)
        .collect()
}

/// Deletes entry `uid` of `mailbox` as an expunge does: the entry goes,
/// a tombstone at the mailbox's next modseq remembers it.
fn expunge(f: &Fixture, mailbox: MailboxId, uid: u32) {
    f.sql(&format!(
        "WITH a AS (UPDATE accounts SET modseq = modseq + 1 WHERE id = (SELECT account_id FROM mailboxes WHERE id = {mailbox}) RETURNING modseq), m AS (UPDATE mailboxes SET highest_modseq = (SELECT modseq FROM a)
                    WHERE id = {mailbox} RETURNING highest_modseq),
              e AS (DELETE FROM messages WHERE mailbox_id = {mailbox} AND uid = {uid} RETURNING *)
         INSERT INTO expunged (mailbox_id, uid, modseq, blob_id, size, flags, internal_date, keywords)
         SELECT e.mailbox_id, e.uid, m.highest_modseq, e.blob_id, e.size, e.flags,
                e.internal_date, e.keywords FROM e, m"
    ));
}

/// Waits up to 10 s for `sql` to count `n`.
async fn wait_for_count(f: &Fixture, sql: &str, n: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(f, sql) != n {
        assert!(Instant::now() < deadline, "{sql} is not {n} after 60 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_blob_for_many_recipients_freed_with_the_last_reference() {
    let (f, boxes) = open_with_mailboxes(15).await;
    let receipt = deliver_to(&f.store, &boxes, MAIL).await;
    let expected: Vec<(MailboxId, u32)> = boxes.iter().map(|&b| (b, 1)).collect();
    assert_eq!(receipt.entries, expected);
    assert_eq!(receipt.size, MAIL.len() as u64);
    assert_eq!(count(&f, "SELECT count(*) FROM blobs"), 1);
    assert_eq!(count(&f, "SELECT count(*) FROM messages"), 15);
    assert_eq!(count(&f, "SELECT refcount FROM blobs"), 15);
    assert_eq!(f.sql("SELECT complete FROM blobs"), "t");
    assert_eq!(
        f.sql("SELECT DISTINCT uid_next || ' ' || n_messages || ' ' || n_unseen || ' ' || n_bytes FROM mailboxes"),
        format!("2 1 1 {}", MAIL.len())
    );
    // Each entry takes the account's next modseq, in mailbox id order.
    assert_eq!(
        f.sql("SELECT string_agg(highest_modseq::text, ' ' ORDER BY id) FROM mailboxes"),
        (2..=16)
            .map(|m| m.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    );
    // Written once: one parsed row, one full-text row.
    assert_eq!(count(&f, "SELECT count(*) FROM blob_parsed"), 1);
    assert_eq!(
        count(&f, "SELECT count(*) FROM blob_text WHERE part = 0"),
        1
    );

    let h = f.store.headers(receipt.blob).await.unwrap().unwrap();
    assert_eq!(h.subject, "quarterly zebra report");
    assert_eq!(h.message_id, "q1@example.org");
    assert_eq!(
        f.store.read_chunk(receipt.blob, 0).await.unwrap().unwrap(),
        MAIL
    );
    assert_eq!(f.store.read_chunk(receipt.blob, 1).await.unwrap(), None);

    // Deleting from one mailbox leaves the others intact.
    expunge(&f, boxes[0], 1);
    assert_eq!(count(&f, "SELECT refcount FROM blobs"), 14);
    assert_eq!(f.sql("SELECT released IS NULL FROM blobs"), "t");
    assert_eq!(f.store.sweep_now().await.unwrap(), 0);
    assert_eq!(
        f.store.read_chunk(receipt.blob, 0).await.unwrap().unwrap(),
        MAIL
    );

    // The last reference takes the blob, its pieces, parsed and text rows.
    for &b in &boxes[1..] {
        expunge(&f, b, 1);
    }
    assert_eq!(f.sql("SELECT released IS NOT NULL FROM blobs"), "t");
    // The background sweeper may have taken it first.
    assert!(f.store.sweep_now().await.unwrap() <= 1);
    for table in ["blobs", "blob_chunks", "blob_parsed", "blob_text"] {
        assert_eq!(
            count(&f, &format!("SELECT count(*) FROM {table}")),
            0,
            "{table}"
        );
    }
    assert_eq!(f.store.read_chunk(receipt.blob, 0).await.unwrap(), None);
    assert_eq!(f.store.headers(receipt.blob).await.unwrap(), None);
    assert_eq!(f.store.sweep_now().await.unwrap(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_stream_in_pieces_and_read_back_byte_for_byte() {
    let (f, boxes) = open_with_mailboxes(1).await;
    let mut expected = b"Subject: big\r\nContent-Type: application/octet-stream\r\n\r\n".to_vec();
    expected.extend(numbered(5 * 1024 * 1024));
    let mut w = f.store.message_writer();
    let mut written = 0;
    for part in expected.chunks(65_536) {
        w.write(part).await.unwrap();
        written += part.len();
        if written == 40 * 65_536 {
            // Mid-message: an incomplete blob with the full pieces so far,
            // each stored by a statement of its own, no transaction open.
            assert_eq!(w.size(), written as u64);
            assert_eq!(
                f.sql("SELECT complete FROM blobs"),
                "f",
                "the blob row comes with the first piece"
            );
            assert_eq!(
                count(&f, "SELECT count(*) FROM blob_chunks"),
                (written / PIECE) as i64
            );
            assert_eq!(
                count(
                    &f,
                    "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'"
                ),
                0
            );
            let blob: i64 = f.sql("SELECT id FROM blobs").parse().unwrap();
            assert_eq!(f.store.headers(blob).await.unwrap(), None, "not complete");
        }
    }
    let receipt = w
        .deliver(Delivery {
            mailboxes: boxes.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(receipt.size, expected.len() as u64);
    assert_eq!(
        count(&f, "SELECT count(*) FROM blob_chunks"),
        expected.len().div_ceil(PIECE) as i64
    );
    assert!(
        count(&f, "SELECT max(length(data)) FROM blob_chunks") <= PIECE as i64,
        "no stored piece is larger than a piece"
    );
    assert_eq!(count(&f, "SELECT size FROM blobs"), expected.len() as i64);
    // Indexed from its start, which was let go of long before delivery.
    let h = f.store.headers(receipt.blob).await.unwrap().unwrap();
    assert_eq!(h.subject, "big");
    let back = read_back(&f.store, receipt.blob).await;
    assert_eq!(back.len(), expected.len());
    assert!(back == expected, "read back as written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_streams_compressed_and_reads_back_whole() {
    let (f, boxes) = open_with_mailboxes(1).await;
    let mut w = f.store.message_writer();
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
            mailboxes: boxes,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(read_back(&f.store, receipt.blob).await == expected);
    // Stored compressed (zstd, no dictionary), each piece a small part of
    // its size.
    let stored = count(
        &f,
        "SELECT sum(length(data)) FROM blob_chunks WHERE codec = 1",
    );
    assert!(
        stored > 0 && stored < expected.len() as i64 / 20,
        "{stored}"
    );
    assert_eq!(
        count(&f, "SELECT count(*) FROM blob_chunks WHERE codec = 2"),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pieces_read_back_as_whole_chunks_with_or_without_a_lead() {
    let (f, boxes) = open_with_mailboxes(1).await;
    let lead = b"Received: from a by b; Tue, 1 Jan 2030 00:00:00 +0000\r\n".to_vec();
    for len in [
        PIECE - 1,
        PIECE,
        PIECE + 1,
        CHUNK_SIZE - 1,
        CHUNK_SIZE,
        CHUNK_SIZE + PIECE + 3,
        3 * CHUNK_SIZE + 7,
    ] {
        for lead in [Vec::new(), lead.clone()] {
            let mut message = b"Subject: pieces\r\n\r\n".to_vec();
            message.extend(numbered(len));
            let mut w = f.store.message_writer();
            for part in message.chunks(7_001) {
                w.write(part).await.unwrap();
            }
            let receipt = w
                .deliver(Delivery {
                    mailboxes: boxes.clone(),
                    lead: lead.clone(),
                    ..Default::default()
                })
                .await
                .unwrap();
            let expected = [lead.as_slice(), &message].concat();
            assert_eq!(receipt.size, expected.len() as u64);
            assert!(
                read_back(&f.store, receipt.blob).await == expected,
                "{len} bytes, lead {}",
                lead.len()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lead_comes_first_in_small_and_large_messages() {
    let (f, boxes) = open_with_mailboxes(1).await;
    let db = client(&f).await;
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
        let mut w = f.store.message_writer();
        for piece in message.chunks(1000 + n) {
            w.write(piece).await.unwrap();
        }
        let receipt = w
            .deliver(Delivery {
                mailboxes: boxes.clone(),
                lead: lead.to_vec(),
                ..Default::default()
            })
            .await
            .unwrap();
        let expected = [lead.as_slice(), message].concat();
        assert_eq!(receipt.size, expected.len() as u64);
        assert!(
            read_back(&f.store, receipt.blob).await == expected,
            "message {n}"
        );
        let row = db
            .query_one(
                "SELECT p.header_codec, p.header, p.structure, m.size
                 FROM blob_parsed p JOIN messages m ON m.blob_id = p.blob_id
                 WHERE p.blob_id = $1",
                &[&receipt.blob],
            )
            .await
            .unwrap();
        let header = store::decode_chunk(i64::from(row.get::<_, i32>(0)), row.get(1)).unwrap();
        assert!(header.starts_with(lead), "message {n}");
        assert!(header.ends_with(b"\r\n\r\n"), "message {n}");
        assert_eq!(row.get::<_, i64>(3), expected.len() as i64);
        // The structure is the one of the message as stored.
        let mut parsed = mime_tree::StructureBuilder::new();
        parsed.feed(&expected);
        assert_eq!(
            row.get::<_, Vec<u8>>(2),
            parsed.finish().to_bytes(),
            "message {n}"
        );
    }
    // The two larger than a stored piece kept their pieces and got the
    // lead as a piece of its own.
    assert_eq!(
        count(&f, "SELECT count(*) FROM blob_chunks WHERE seq = -1"),
        2
    );

    // A lead of a chunk or more is refused, and nothing is stored.
    let blobs = count(&f, "SELECT count(*) FROM blobs");
    let mut w = f.store.message_writer();
    w.write(MAIL).await.unwrap();
    let refused = w
        .deliver(Delivery {
            mailboxes: boxes.clone(),
            lead: vec![b'x'; CHUNK_SIZE],
            ..Default::default()
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Invalid(_))),
        "{refused:?}"
    );
    assert_eq!(count(&f, "SELECT count(*) FROM blobs"), blobs);
    assert_eq!(count(&f, "SELECT count(*) FROM messages"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blobs_stored_in_chunk_sized_pieces_before_still_read() {
    let f = open_with_grace(Duration::ZERO).await;
    let db = client(&f).await;
    // A blob as the SQLite back end wrote them before pieces were smaller:
    // pieces of CHUNK_SIZE (the column's default) and a lead of its own.
    let body = numbered(2 * CHUNK_SIZE + 500);
    let lead = b"X-Lead: yes\r\n".to_vec();
    db.execute(
        "INSERT INTO blobs (id, complete, created) VALUES (900000, true, 0)",
        &[],
    )
    .await
    .unwrap();
    let mut rows: Vec<(i32, &[u8])> = vec![(-1, &lead)];
    rows.extend(
        body.chunks(CHUNK_SIZE)
            .enumerate()
            .map(|(n, p)| (n as i32, p)),
    );
    for (seq, data) in rows {
        db.execute(
            "INSERT INTO blob_chunks (blob_id, seq, codec, data) VALUES (900000, $1, 0, $2)",
            &[&seq, &data],
        )
        .await
        .unwrap();
    }
    assert!(read_back(&f.store, 900000).await == [lead, body].concat());
    assert_eq!(f.store.read_chunk(900001, 0).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_dropped_and_crashed_writes_leave_nothing() {
    let (f, boxes) = open_with_mailboxes(1).await;
    let mut w = f.store.message_writer();
    w.write(&vec![b'a'; CHUNK_SIZE * 2 + 10]).await.unwrap();
    assert_eq!(count(&f, "SELECT count(*) FROM blob_chunks"), 8);
    w.abort().await;
    assert_eq!(count(&f, "SELECT count(*) FROM blobs"), 0);
    assert_eq!(count(&f, "SELECT count(*) FROM blob_chunks"), 0);

    // A writer dropped mid-message (its connection died) frees its pieces.
    let mut w = f.store.message_writer();
    w.write(&vec![b'a'; CHUNK_SIZE + 10]).await.unwrap();
    assert_eq!(
        count(&f, "SELECT count(*) FROM blobs WHERE NOT complete"),
        1
    );
    drop(w);
    wait_for_count(&f, "SELECT count(*) FROM blobs", 0).await;
    assert_eq!(count(&f, "SELECT count(*) FROM blob_chunks"), 0);

    // A delivery that fails frees them too.
    let mut w = f.store.message_writer();
    w.write(&vec![b'a'; CHUNK_SIZE + 10]).await.unwrap();
    let missing = w
        .deliver(Delivery {
            mailboxes: vec![boxes[0], 999_999],
            ..Default::default()
        })
        .await;
    assert!(
        matches!(missing, Err(StoreError::NotFound(_))),
        "{missing:?}"
    );
    assert_eq!(count(&f, "SELECT count(*) FROM blobs"), 0);
    assert_eq!(count(&f, "SELECT count(*) FROM messages"), 0);
    assert_eq!(
        f.sql("SELECT uid_next || ' ' || highest_modseq FROM mailboxes"),
        "1 1",
        "the failed delivery's UID was rolled back"
    );

    // A node that dies mid-message leaves an incomplete blob; it is young,
    // so another node may be writing it, until it is a day old.
    let mut w = f.store.message_writer();
    w.write(&vec![b'a'; CHUNK_SIZE + 10]).await.unwrap();
    std::mem::forget(w);
    f.store.sweep_now().await.unwrap();
    assert_eq!(
        count(&f, "SELECT count(*) FROM blobs WHERE NOT complete"),
        1
    );
    f.sql("UPDATE blobs SET created = created - 86400 + 60");
    f.store.sweep_now().await.unwrap();
    assert_eq!(
        count(&f, "SELECT count(*) FROM blobs"),
        1,
        "not a day old yet"
    );
    f.sql("UPDATE blobs SET created = created - 120");
    f.store.sweep_now().await.unwrap();
    assert_eq!(count(&f, "SELECT count(*) FROM blobs"), 0);
    assert_eq!(count(&f, "SELECT count(*) FROM blob_chunks"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_delivery_stores_nothing() {
    let (f, boxes) = open_with_mailboxes(1).await;
    let mut w = f.store.message_writer();
    w.write(MAIL).await.unwrap();
    let none = w.deliver(Delivery::default()).await;
    assert!(matches!(none, Err(StoreError::Invalid(_))), "{none:?}");

    let mut w = f.store.message_writer();
    w.write(&numbered(3 * PIECE)).await.unwrap();
    let bad = w
        .deliver(Delivery {
            mailboxes: boxes.clone(),
            keywords: vec!["bad word".into()],
            ..Default::default()
        })
        .await;
    assert!(matches!(bad, Err(StoreError::Invalid(_))), "{bad:?}");
    let bad = {
        let mut w = f.store.message_writer();
        w.write(MAIL).await.unwrap();
        w.deliver(Delivery {
            mailboxes: boxes.clone(),
            mailbox_flags: vec![(0, vec!["(".into()])],
            ..Default::default()
        })
        .await
    };
    assert!(matches!(bad, Err(StoreError::Invalid(_))), "{bad:?}");
    wait_for_count(&f, "SELECT count(*) FROM blobs", 0).await;
    assert_eq!(count(&f, "SELECT count(*) FROM messages"), 0);
    assert_eq!(count(&f, "SELECT count(*) FROM blob_chunks"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_get_their_flags_keywords_date_and_queue_rows_their_envelope() {
    let (f, boxes) = open_with_mailboxes(3).await;
    let mut w = f.store.message_writer();
    w.write(MAIL).await.unwrap();
    let receipt = w
        .deliver(Delivery {
            sender: "s@example.net".into(),
            mailboxes: boxes.clone(),
            remote: vec!["r1@example.com".into(), "r2@example.com".into()],
            internal_date: Some(1_700_000_000),
            flags: store::FLAG_SEEN,
            keywords: vec![
                "$Label1".into(),
                "Work".into(),
                "WORK".into(),
                "$label1".into(),
            ],
            mailbox_flags: vec![(store::FLAG_FLAGGED, vec!["Sieve".into(), "sieve".into()])],
            remote_dsn: vec![RecipientDsn {
                notify: 3,
                orcpt: Some("rfc822;r1@example.com".into()),
            }],
            envid: Some("env-1".into()),
            ret_full: true,
            eight_bit: true,
            lead: Vec::new(),
            upload: None,
        })
        .await
        .unwrap();
    assert_eq!(receipt.entries.len(), 3);
    assert_eq!(
        f.sql("SELECT mailbox_id || '|' || uid || '|' || flags || '|' || keywords || '|' || internal_date || '|' || modseq || '|' || size FROM messages ORDER BY mailbox_id"),
        format!(
            "{}|1|{}|Sieve|1700000000|2|{len}\n{}|1|{}|$Label1 Work|1700000000|3|{len}\n{}|1|{}|$Label1 Work|1700000000|4|{len}",
            boxes[0],
            store::FLAG_FLAGGED,
            boxes[1],
            store::FLAG_SEEN,
            boxes[2],
            store::FLAG_SEEN,
            len = MAIL.len()
        )
    );
    // The first mailbox's entry is unseen, the others seen.
    assert_eq!(
        f.sql("SELECT n_unseen FROM mailboxes ORDER BY id"),
        "1\n0\n0"
    );
    assert_eq!(
        f.sql("SELECT blob_id || '|' || sender || '|' || recipient || '|' || notify || '|' || coalesce(orcpt, '-') || '|' || envid || '|' || ret_full || '|' || eight_bit || '|' || (next_attempt = created) FROM queue ORDER BY id"),
        format!(
            "{b}|s@example.net|r1@example.com|3|rfc822;r1@example.com|env-1|true|true|true\n\
             {b}|s@example.net|r2@example.com|0|-|env-1|true|true|true",
            b = receipt.blob
        )
    );
    assert_eq!(count(&f, "SELECT refcount FROM blobs"), 5);

    // Without a date the entry is dated now; UIDs and modseqs go on.
    let before = store_now();
    let second = deliver_to(&f.store, &boxes[..1], MAIL).await;
    assert_eq!(second.entries, vec![(boxes[0], 2)]);
    let date = count(
        &f,
        &format!(
            "SELECT internal_date FROM messages WHERE mailbox_id = {} AND uid = 2",
            boxes[0]
        ),
    );
    assert!(date >= before && date <= store_now(), "{date}");
    assert_eq!(
        f.sql(&format!(
            "SELECT uid_next || ' ' || highest_modseq FROM mailboxes WHERE id = {}",
            boxes[0]
        )),
        // The account's modseq: 1, then 2 to 4 for the first delivery's
        // three entries, 5 for this one.
        "3 5"
    );
    assert_eq!(
        count(&f, "SELECT count(*) FROM blobs"),
        2,
        "a blob per message"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mailbox_named_twice_gets_two_entries_and_a_remote_only_message_none() {
    let (f, boxes) = open_with_mailboxes(2).await;
    let receipt = deliver_to(&f.store, &[boxes[1], boxes[0], boxes[1]], MAIL).await;
    assert_eq!(
        receipt.entries,
        vec![(boxes[1], 1), (boxes[0], 1), (boxes[1], 2)]
    );
    assert_eq!(
        f.sql("SELECT uid_next || ' ' || highest_modseq || ' ' || n_messages FROM mailboxes ORDER BY id"),
        "2 2 1\n3 4 2"
    );
    assert_eq!(count(&f, "SELECT refcount FROM blobs"), 3);

    let mut w = f.store.message_writer();
    w.write(MAIL).await.unwrap();
    let remote = w
        .deliver(Delivery {
            remote: vec!["r@example.com".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(remote.entries.is_empty());
    assert_eq!(
        count(
            &f,
            &format!("SELECT refcount FROM blobs WHERE id = {}", remote.blob)
        ),
        1
    );
    assert_eq!(count(&f, "SELECT count(*) FROM queue"), 1);
}

fn store_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_fields_and_folded_text_are_indexed_at_delivery() {
    let (f, boxes) = open_with_mailboxes(1).await;
    let text = "From: =?utf-8?q?Z=C3=B6e?= <zoe@example.net>\r\nTo: a@example.org, Bob <bob@example.org>\r\n\
        Cc: carol@example.org\r\nSubject: Quarterly   ZEBRA Résumé\r\n\
        Date: Mon, 3 Jun 2024 10:00:00 +0000\r\nMessage-ID: <walrus-1@example.net>\r\n\
        X-Walrus: Tusk\r\n\r\nThe Zebra NUMBERS are   in, naïvely.\r\n";
    let receipt = deliver_to(&f.store, &boxes, text.as_bytes()).await;
    let h = f.store.headers(receipt.blob).await.unwrap().unwrap();
    assert_eq!(h.from, "Zöe <zoe@example.net>");
    assert!(
        h.to.contains("bob@example.org") && h.to.contains("a@example.org"),
        "{}",
        h.to
    );
    assert_eq!(h.cc, "carol@example.org");
    assert!(
        h.subject.starts_with("Quarterly") && h.subject.ends_with("ZEBRA Résumé"),
        "{}",
        h.subject
    );
    assert_eq!(h.date, Some(1_717_408_800));
    assert_eq!(h.message_id, "walrus-1@example.net");
    assert_eq!(
        count(&f, "SELECT hdr_day FROM blobs"),
        1_717_408_800 / 86_400
    );

    // The full-text row: FtsText's fields, folded (case, diacritics, runs
    // of white space), as SEARCH matches them.
    assert_eq!(
        f.sql("SELECT subject FROM blob_text"),
        "quarterly zebra resume"
    );
    let addresses = f.sql("SELECT addresses FROM blob_text");
    assert!(
        addresses.starts_with("zoe <zoe@example.net> "),
        "{addresses}"
    );
    assert!(addresses.contains("carol@example.org"), "{addresses}");
    assert!(
        addresses.contains("x-walrus: tusk"),
        "the header block: {addresses}"
    );
    assert!(!addresses.contains("  "), "{addresses}");
    let body = f.sql("SELECT body FROM blob_text");
    assert!(
        body.contains("the zebra numbers are in, naively."),
        "{body}"
    );
    assert_eq!(
        count(
            &f,
            "SELECT count(*) FROM blob_text WHERE body LIKE '%zebra numbers%' AND part = 0"
        ),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_in_the_text_is_stored_as_a_replacement_character() {
    let (f, boxes) = open_with_mailboxes(1).await;
    let receipt = deliver_to(&f.store, &boxes, b"Subject: nul\r\n\r\nzebra\0walrus\r\n").await;
    assert_eq!(f.sql("SELECT body FROM blob_text"), "zebra\u{FFFD}walrus");
    assert_eq!(
        count(
            &f,
            "SELECT count(*) FROM blob_text WHERE body LIKE '%zebrawalrus%'"
        ),
        0
    );
    // The message itself keeps its NUL.
    assert_eq!(
        f.store.read_chunk(receipt.blob, 0).await.unwrap().unwrap(),
        b"Subject: nul\r\n\r\nzebra\0walrus\r\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_after_a_large_attachment_is_indexed_at_delivery() {
    let (f, boxes) = open_with_mailboxes(1).await;
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
    let mut w = f.store.message_writer();
    for piece in message.chunks(65_536) {
        w.write(piece).await.unwrap();
    }
    let receipt = w
        .deliver(Delivery {
            mailboxes: boxes,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        count(
            &f,
            "SELECT count(*) FROM blob_text WHERE body LIKE '%the narwhal is after%'"
        ),
        1
    );
    assert_eq!(
        count(
            &f,
            "SELECT count(*) FROM blob_text WHERE body LIKE '%uesdbbqaaaai%'"
        ),
        0,
        "attachment bodies are not text"
    );
    assert_eq!(
        f.store
            .headers(receipt.blob)
            .await
            .unwrap()
            .unwrap()
            .subject,
        "scan"
    );
    assert!(read_back(&f.store, receipt.blob).await == message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_deliveries_all_land_with_distinct_uids() {
    let (f, boxes) = open_with_mailboxes(2).await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = f.store.clone();
        let mut boxes = boxes.clone();
        if i % 2 == 1 {
            // Half in the other order: no two deliveries deadlock.
            boxes.reverse();
        }
        tasks.push(tokio::spawn(async move {
            let text = format!("Subject: n{i}\r\n\r\nbody {i}\r\n");
            deliver_to(&store, &boxes, text.as_bytes()).await
        }));
    }
    let mut uids = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        let receipt = t.await.unwrap();
        // The same UID in both mailboxes: their rows are locked in the
        // same order by every delivery, whatever the order given; the
        // receipt keeps the order given.
        assert_eq!(receipt.entries[0].1, receipt.entries[1].1);
        let given: Vec<MailboxId> = receipt.entries.iter().map(|e| e.0).collect();
        let order = if i % 2 == 1 {
            vec![boxes[1], boxes[0]]
        } else {
            boxes.clone()
        };
        assert_eq!(given, order);
        uids.push(receipt.entries[0].1);
    }
    uids.sort_unstable();
    assert_eq!(uids, (1..=20).collect::<Vec<u32>>());
    assert_eq!(
        f.sql("SELECT DISTINCT uid_next || ' ' || n_messages FROM mailboxes"),
        "21 20"
    );
    // Every entry took the account's next modseq: 40 of them after the
    // account's 1.
    assert_eq!(count(&f, "SELECT max(highest_modseq) FROM mailboxes"), 41);
    assert_eq!(count(&f, "SELECT count(DISTINCT modseq) FROM messages"), 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_view_keeps_expunged_messages_readable_until_it_lets_go() {
    let (f, boxes) = open_with_mailboxes(1).await;
    let mailbox = boxes[0];
    let blob = deliver_to(&f.store, &boxes, MAIL).await.blob;
    let pin = f.store.pin_view(mailbox, 2);

    expunge(&f, mailbox, 1);
    assert_eq!(f.store.sweep_now().await.unwrap(), 0);
    assert_eq!(
        f.store.read_chunk(blob, 0).await.unwrap().as_deref(),
        Some(MAIL)
    );
    assert_eq!(count(&f, "SELECT count(*) FROM blobs"), 1);

    pin.advance(3);
    assert!(f.store.sweep_now().await.unwrap() <= 1);
    assert_eq!(f.store.read_chunk(blob, 0).await.unwrap(), None);
    assert_eq!(count(&f, "SELECT count(*) FROM blobs"), 0);
    drop(pin);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_blobs_wait_out_the_grace_period() {
    let f = open_with_grace(Duration::from_secs(600)).await;
    let boxes = add_mailboxes(&f, 1);
    let blob = deliver_to(&f.store, &boxes, MAIL).await.blob;
    expunge(&f, boxes[0], 1);
    let released = count(&f, "SELECT released FROM blobs");
    let now = count(&f, "SELECT extract(epoch FROM now())::bigint");
    assert!((now - 5..=now).contains(&released), "{released} {now}");
    assert_eq!(f.store.sweep_now().await.unwrap(), 0);
    assert_eq!(
        f.store.read_chunk(blob, 0).await.unwrap().as_deref(),
        Some(MAIL)
    );

    f.sql("UPDATE blobs SET released = released - 590");
    assert_eq!(f.store.sweep_now().await.unwrap(), 0, "still in its grace");
    f.sql("UPDATE blobs SET released = released - 20");
    assert_eq!(f.store.sweep_now().await.unwrap(), 1);
    assert_eq!(f.store.read_chunk(blob, 0).await.unwrap(), None);
    assert_eq!(count(&f, "SELECT count(*) FROM blob_text"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_sweeping_together_delete_each_blob_once() {
    let f = open_with_grace(Duration::ZERO).await;
    let other = PgStore::connect({
        let mut o = PgOptions::new(&f.pg.url(&f.db));
        o.release_grace = Duration::ZERO;
        o
    })
    .await
    .unwrap();
    f.sql(
        "INSERT INTO blobs (created, complete, released) SELECT 0, true, 0 FROM generate_series(1, 2000);
         INSERT INTO blob_chunks (blob_id, seq, data) SELECT id, 0, '\\x00' FROM blobs",
    );
    let (a, b, c) = tokio::join!(f.store.sweep_now(), other.sweep_now(), f.store.sweep_now());
    let swept = a.unwrap() + b.unwrap() + c.unwrap();
    // The background sweepers may have taken some first.
    assert!(swept <= 2000, "{swept}");
    wait_for_count(&f, "SELECT count(*) FROM blobs", 0).await;
    assert_eq!(count(&f, "SELECT count(*) FROM blob_chunks"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweeper_lets_the_store_go_with_its_last_handle() {
    let Fixture { pg, db, store } = open_with_grace(Duration::ZERO).await;
    let connections = || -> i64 {
        pg.psql(
            &db,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sluice'",
        )
        .parse()
        .unwrap()
    };
    assert!(connections() >= 1);
    // The background sweeper holds no handle between its rounds: dropping
    // the last one closes the pool.
    drop(store);
    let deadline = Instant::now() + Duration::from_secs(60);
    while connections() != 0 {
        assert!(
            Instant::now() < deadline,
            "the pool is still open after 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
