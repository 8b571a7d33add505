//! PostgreSQL: the outbound queue. Blobs are written straight into the
//! table, as stored messages the queue refers to.

use std::collections::HashSet;
use std::time::Duration;

use store::{PgOptions, PgStore, QueueOutcome, RecipientDsn, Store, StoreError};

use super::{open, Fixture};

/// A complete blob of `size` bytes that `refs` things already reference
/// (a message filed somewhere holds one); its id.
/// A complete blob with `refs` references; one with none was released
/// just now, so the sweeper leaves it alone for its grace period.
fn blob(f: &Fixture, size: i64, refs: i64) -> i64 {
    f.sql(&format!(
        "INSERT INTO blobs (created, complete, size, refcount, released)
         VALUES (0, true, {size}, {refs},
                 CASE WHEN {refs} = 0 THEN extract(epoch FROM now())::bigint END)
         RETURNING id"
    ))
    .parse()
    .unwrap()
}

fn refcount(f: &Fixture, blob: i64) -> String {
    f.sql(&format!("SELECT refcount FROM blobs WHERE id = {blob}"))
}

/// Rows due at `due`, straight into the table, for `blob`; their ids.
fn queue_rows(f: &Fixture, blob: i64, due: &[i64]) -> Vec<i64> {
    due.iter()
        .map(|d| {
            f.sql(&format!(
                "INSERT INTO queue (blob_id, sender, recipient, next_attempt, created)
                 VALUES ({blob}, 's@example.org', 'r{d}@far.test', {d}, {d}) RETURNING id"
            ))
            .parse()
            .unwrap()
        })
        .collect()
}

/// Whether the queue signal was given (a permit is waiting).
async fn signalled(store: &PgStore) -> bool {
    tokio::time::timeout(Duration::from_millis(50), store.queue_signal().notified())
        .await
        .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_message_is_queued_per_recipient_and_holds_its_blob() {
    let f = open().await;
    assert_eq!(f.store.queue_summary().await.unwrap(), (0, None));
    assert!(f.store.queued().await.unwrap().is_empty());
    let b = blob(&f, 1234, 1);
    let before = store_now();
    f.store
        .queue_message(
            b,
            "s@example.org",
            &["x@far.test".into(), "y@far.test".into()],
        )
        .await
        .unwrap();
    let after = store_now();
    assert!(signalled(&f.store).await);
    assert_eq!(refcount(&f, b), "3");
    let queued = f.store.queued().await.unwrap();
    assert_eq!(queued.len(), 2);
    assert!(queued[0].id < queued[1].id);
    for (q, rcpt) in queued.iter().zip(["x@far.test", "y@far.test"]) {
        assert_eq!(q.blob, b);
        assert_eq!(q.sender, "s@example.org");
        assert_eq!(q.recipient, rcpt);
        assert_eq!(q.attempts, 0);
        assert!((before..=after).contains(&q.created), "{q:?}");
        assert_eq!(q.next_attempt, q.created);
        assert_eq!(q.last_error, None);
        assert_eq!(q.size, 1234);
        assert!(!q.warned);
        assert_eq!(q.dsn, RecipientDsn::default());
        assert_eq!(q.envid, None);
        assert!(!q.ret_full && !q.eight_bit);
    }
    assert_eq!(
        f.store.queue_summary().await.unwrap(),
        (2, Some(queued[0].created))
    );
    // The DSN columns the writer fills are read back as they are.
    f.sql(&format!(
        "UPDATE queue SET notify = 6, orcpt = 'rfc822;X@far.test', envid = 'E1',
             ret_full = true, eight_bit = true, created = created - 100
         WHERE id = {}",
        queued[1].id
    ));
    let q = &f.store.queued().await.unwrap()[1];
    assert_eq!(q.dsn.notify, 6);
    assert_eq!(q.dsn.orcpt.as_deref(), Some("rfc822;X@far.test"));
    assert_eq!(q.envid.as_deref(), Some("E1"));
    assert!(q.ret_full && q.eight_bit);
    assert_eq!(
        f.store.queue_summary().await.unwrap(),
        (2, Some(queued[1].created - 100))
    );
}

fn store_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_live_blob_can_be_queued() {
    let f = open().await;
    let unreferenced = blob(&f, 10, 0);
    let incomplete: i64 = f
        .sql("INSERT INTO blobs (created, complete, refcount) VALUES (0, false, 1) RETURNING id")
        .parse()
        .unwrap();
    for b in [unreferenced, incomplete, 999_999] {
        match f
            .store
            .queue_message(b, "s@x.test", &["r@far.test".into()])
            .await
        {
            Err(StoreError::NotFound(_)) => {}
            other => panic!("blob {b}: {other:?}"),
        }
    }
    assert!(f.store.queued().await.unwrap().is_empty());
    assert!(!signalled(&f.store).await);
    assert_eq!(refcount(&f, unreferenced), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn due_rows_are_leased_oldest_first_and_not_handed_out_twice() {
    let f = open().await;
    let b = blob(&f, 10, 1);
    // Due at 50, 10, 30, 10 and (not yet) 200.
    let ids = queue_rows(&f, b, &[50, 10, 30, 10, 200]);
    let claimed = f.store.claim_queue(100, 60, 3).await.unwrap();
    let got: Vec<i64> = claimed.iter().map(|q| q.id).collect();
    assert_eq!(got, [ids[1], ids[3], ids[2]]);
    assert_eq!(
        f.sql("SELECT string_agg(lease_until::text, ',' ORDER BY id) FROM queue"),
        "0,160,160,160,0"
    );
    // The leased rows are not claimed again while the lease runs.
    let claimed = f.store.claim_queue(159, 60, 10).await.unwrap();
    assert_eq!(claimed.iter().map(|q| q.id).collect::<Vec<_>>(), [ids[0]]);
    assert!(f.store.claim_queue(159, 60, 10).await.unwrap().is_empty());
    // An expired lease is claimed again; a row comes due.
    let claimed = f.store.claim_queue(200, 60, 10).await.unwrap();
    assert_eq!(
        claimed.iter().map(|q| q.id).collect::<Vec<_>>(),
        [ids[1], ids[3], ids[2], ids[4]]
    );
    assert!(f.store.claim_queue(200, 60, 0).await.unwrap().is_empty());
    assert_eq!(
        f.store
            .claim_queue(10_000, 1, usize::MAX)
            .await
            .unwrap()
            .len(),
        5
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_are_recorded_and_finished_rows_release_their_blob() {
    let f = open().await;
    let b = blob(&f, 10, 1);
    let ids = queue_rows(&f, b, &[1, 2, 3, 4]);
    assert_eq!(refcount(&f, b), "5");
    f.store.claim_queue(100, 60, 10).await.unwrap();
    f.store
        .record_queue_outcomes(vec![
            (ids[0], QueueOutcome::Delivered),
            (
                ids[1],
                QueueOutcome::Deferred {
                    next_attempt: 500,
                    reason: "451 try later".into(),
                },
            ),
            (ids[2], QueueOutcome::Released),
            (
                ids[3],
                QueueOutcome::Failed {
                    reason: "550 no such user".into(),
                },
            ),
            // A row removed meanwhile: nothing to record.
            (999_999, QueueOutcome::Delivered),
        ])
        .await
        .unwrap();
    assert_eq!(refcount(&f, b), "3");
    let queued = f.store.queued().await.unwrap();
    assert_eq!(queued.len(), 2);
    let (deferred, released) = (&queued[0], &queued[1]);
    assert_eq!(deferred.id, ids[1]);
    assert_eq!(deferred.attempts, 1);
    assert_eq!(deferred.next_attempt, 500);
    assert_eq!(deferred.last_error.as_deref(), Some("451 try later"));
    assert_eq!(released.id, ids[2]);
    assert_eq!(released.attempts, 0);
    assert_eq!(released.next_attempt, 3);
    assert_eq!(released.last_error, None);
    assert_eq!(f.sql("SELECT max(lease_until) FROM queue"), "0");
    // Released: claimable again at once; deferred: when it is due (by
    // then the new lease of the other has run out too).
    let claimed = f.store.claim_queue(100, 60, 10).await.unwrap();
    assert_eq!(claimed.iter().map(|q| q.id).collect::<Vec<_>>(), [ids[2]]);
    let claimed = f.store.claim_queue(500, 60, 10).await.unwrap();
    assert_eq!(
        claimed.iter().map(|q| q.id).collect::<Vec<_>>(),
        [ids[2], ids[1]]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_warnings_retries_and_removals() {
    let f = open().await;
    let b = blob(&f, 10, 1);
    let ids = queue_rows(&f, b, &[1, 2, 300, 400]);
    // Warned: just these rows.
    f.store
        .mark_queue_warned(vec![ids[1], ids[3]])
        .await
        .unwrap();
    let warned: Vec<bool> = f
        .store
        .queued()
        .await
        .unwrap()
        .iter()
        .map(|q| q.warned)
        .collect();
    assert_eq!(warned, [false, true, false, true]);
    f.store.mark_queue_warned(vec![]).await.unwrap();
    // Leases are not ended by a node starting up (another may be sending
    // them); they run out.
    assert_eq!(f.store.claim_queue(100, 60, 10).await.unwrap().len(), 2);
    assert_eq!(f.store.release_queue_leases().await.unwrap(), 0);
    assert!(f.store.claim_queue(100, 60, 10).await.unwrap().is_empty());
    assert_eq!(f.store.claim_queue(161, 60, 10).await.unwrap().len(), 2);
    // Retry: one row, or every row not yet due; the sender is woken.
    while signalled(&f.store).await {}
    assert_eq!(f.store.retry_queue(Some(ids[3]), 100).await.unwrap(), 1);
    assert!(signalled(&f.store).await);
    assert_eq!(
        f.sql("SELECT string_agg(next_attempt::text, ',' ORDER BY id) FROM queue"),
        "1,2,300,100"
    );
    assert_eq!(f.store.retry_queue(None, 150).await.unwrap(), 1);
    assert!(signalled(&f.store).await);
    assert_eq!(
        f.sql("SELECT string_agg(next_attempt::text, ',' ORDER BY id) FROM queue"),
        "1,2,150,100"
    );
    assert!(matches!(
        f.store.retry_queue(Some(999_999), 100).await,
        Err(StoreError::NotFound(_))
    ));
    // Removal drops the row and its reference.
    f.store.remove_queued(ids[0]).await.unwrap();
    assert_eq!(refcount(&f, b), "4");
    assert!(matches!(
        f.store.remove_queued(ids[0]).await,
        Err(StoreError::NotFound(_))
    ));
    let left: Vec<i64> = f
        .store
        .queued()
        .await
        .unwrap()
        .iter()
        .map(|q| q.id)
        .collect();
    assert_eq!(left, &ids[1..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_claiming_at_once_never_get_the_same_row() {
    let f = open().await;
    let b = blob(&f, 10, 1);
    f.sql(&format!(
        "INSERT INTO queue (blob_id, sender, recipient, next_attempt, created)
         SELECT {b}, 's@example.org', 'r' || n || '@far.test', n % 17, 0
         FROM generate_series(1, 300) AS n"
    ));
    let url = f.pg.url(&f.db);
    let nodes = [
        PgStore::connect(PgOptions::new(&url)).await.unwrap(),
        PgStore::connect(PgOptions::new(&url)).await.unwrap(),
    ];
    let mut tasks = Vec::new();
    for node in nodes {
        // Several claimers per node, as several senders would.
        for _ in 0..3 {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                loop {
                    let claimed = node.claim_queue(100, 600, 7).await.unwrap();
                    if claimed.is_empty() {
                        return got;
                    }
                    got.extend(claimed.into_iter().map(|q| q.id));
                }
            }));
        }
    }
    let mut seen = HashSet::new();
    let mut per_task = Vec::new();
    for t in tasks {
        let got = t.await.unwrap();
        per_task.push(got.len());
        for id in got {
            assert!(seen.insert(id), "row {id} claimed twice");
        }
    }
    assert_eq!(seen.len(), 300, "{per_task:?}");
    assert_eq!(
        f.sql("SELECT count(*) FROM queue WHERE lease_until = 700"),
        "300"
    );
    // Once the leases run out, the rows are claimed again.
    assert_eq!(f.store.claim_queue(700, 60, 1000).await.unwrap().len(), 300);
}
