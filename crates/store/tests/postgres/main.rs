//! The PostgreSQL back end against a real PostgreSQL 15 on loopback,
//! a server of its own per test (started by the test kit): schema
//! migrations, what the back end answers when the database goes away, and
//! each area of the `Store` trait in a module of its own.

mod directory;
mod dkim;
mod entries;
mod mailboxes;
mod message;
mod penalties;
mod queue;
mod records;
mod search;
mod sieve;
mod spam;
mod tls;
mod tool;
mod web;

use sluice_testkit::Postgres;
use store::{MailboxId, PgOptions, PgStore, Store, StoreError};

/// A store on a database of its own in a server of its own.
pub struct Fixture {
    /// The server: keep it alive as long as the store.
    pub pg: Postgres,
    /// The database's name, for [`Fixture::sql`].
    pub db: String,
    pub store: PgStore,
}

impl Fixture {
    /// Runs `sql` in the store's database with `psql`; what it printed
    /// (unaligned, tuples only), for checks of the tables themselves. It
    /// blocks its thread: the tests run on a runtime with two, so the
    /// store's own tasks (the sweeper) go on meanwhile, and a statement
    /// waiting for a lock one of them holds does not wait forever.
    pub fn sql(&self, sql: &str) -> String {
        self.pg.psql(&self.db, sql)
    }
}

/// A new server and a store on a new database in it.
pub async fn open() -> Fixture {
    let pg = Postgres::start();
    let url = pg.create_database();
    let db = url.rsplit('/').next().unwrap().to_string();
    let store = PgStore::connect(PgOptions::new(&url)).await.unwrap();
    Fixture { pg, db, store }
}

/// [`open`], with the domain `example.org`, the account `a@example.org`
/// (password `pw`); the account's id and its INBOX's.
pub async fn open_with_account() -> (Fixture, i64, MailboxId) {
    let f = open().await;
    f.store.add_domain("example.org").await.unwrap();
    let account = f.store.add_account("a@example.org", "pw").await.unwrap();
    let inbox = f.store.mailbox(account, "INBOX").await.unwrap().unwrap().id;
    (f, account, inbox)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_database_gets_the_schema_once_and_a_newer_one_is_refused() {
    let pg = Postgres::start();
    let url = pg.create_database();
    let db = url.rsplit('/').next().unwrap().to_string();
    PgStore::connect(PgOptions::new(&url)).await.unwrap();
    let version = pg.psql(&db, "SELECT version FROM schema_version");
    assert!(version.parse::<i64>().unwrap() >= 1, "{version}");
    // A second node connecting finds the work done and changes nothing.
    PgStore::connect(PgOptions::new(&url)).await.unwrap();
    assert_eq!(pg.psql(&db, "SELECT count(*) FROM schema_version"), "1");
    assert_eq!(pg.psql(&db, "SELECT version FROM schema_version"), version);
    assert_eq!(
        pg.psql(
            &db,
            "SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'"
        ),
        "1"
    );

    pg.psql(&db, "UPDATE schema_version SET version = version + 100");
    match PgStore::connect(PgOptions::new(&url)).await {
        Err(StoreError::SchemaTooNew { found, supported }) => {
            assert_eq!(found, supported + 100)
        }
        other => panic!("a newer schema was not refused: {:?}", other.err()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_unavailable() {
    let mut pg = Postgres::start();
    let url = pg.create_database();
    pg.stop();
    let mut options = PgOptions::new(&url);
    options.wait = std::time::Duration::from_secs(1);
    match PgStore::connect(options).await {
        Err(StoreError::Unavailable(why)) => assert!(!why.is_empty()),
        other => panic!("expected Unavailable, got {:?}", other.err()),
    }
}

/// A second node: another store on the same database.
async fn second_node(f: &Fixture) -> PgStore {
    PgStore::connect(PgOptions::new(&f.pg.url(&f.db)))
        .await
        .unwrap()
}

async fn deliver(store: &PgStore, mailbox: MailboxId, text: &[u8]) -> store::Uid {
    let mut w = store.message_writer();
    w.write(text).await.unwrap();
    w.deliver(store::Delivery {
        mailboxes: vec![mailbox],
        ..Default::default()
    })
    .await
    .unwrap()
    .entries[0]
        .1
}

/// Waits up to `limit` for `rx` to see a change; how long it took.
async fn woken(
    rx: &mut tokio::sync::watch::Receiver<u64>,
    limit: std::time::Duration,
) -> Option<std::time::Duration> {
    let started = std::time::Instant::now();
    tokio::time::timeout(limit, rx.changed())
        .await
        .ok()
        .map(|r| r.unwrap())
        .map(|_| started.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_on_one_node_wake_watchers_on_another() {
    let (f, _account, inbox) = open_with_account().await;
    let b = second_node(&f).await;
    let mut on_b = b.watch_mailbox(inbox);
    // Nothing polls: a wake-up comes from the other node's notice or not
    // at all, so a generous bound loses nothing (how fast it is belongs
    // to the benchmarks).
    let second = std::time::Duration::from_secs(30);

    let uid = deliver(&f.store, inbox, b"Subject: from a\r\n\r\nhi\r\n").await;
    assert!(woken(&mut on_b, second).await.is_some(), "delivery on A");
    assert_eq!(b.list_messages(inbox).await.unwrap().len(), 1);

    // Flags set on B are seen by A, and wake A's watchers.
    let mut on_a = f.store.watch_mailbox(inbox);
    b.update_flags(
        inbox,
        &[uid],
        store::FlagChange::Add,
        store::FLAG_FLAGGED,
        &[],
        None,
    )
    .await
    .unwrap();
    assert!(woken(&mut on_a, second).await.is_some(), "flags on B");
    let entries = f.store.list_messages(inbox).await.unwrap();
    assert_eq!(entries[0].flags & store::FLAG_FLAGGED, store::FLAG_FLAGGED);

    // An expunge on A reaches B as a change too.
    f.store
        .update_flags(
            inbox,
            &[uid],
            store::FlagChange::Add,
            store::FLAG_DELETED,
            &[],
            None,
        )
        .await
        .unwrap();
    let _ = woken(&mut on_b, second).await;
    f.store.expunge_deleted(inbox, None).await.unwrap();
    assert!(woken(&mut on_b, second).await.is_some(), "expunge on A");
    assert_eq!(b.changes_since(inbox, 1).await.unwrap().expunged, vec![uid]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_going_away_is_a_temporary_failure_and_service_resumes() {
    let (mut f, _account, inbox) = open_with_account().await;
    let b = second_node(&f).await;
    let mut on_b = b.watch_mailbox(inbox);
    deliver(&f.store, inbox, b"Subject: one\r\n\r\n1\r\n").await;
    assert!(woken(&mut on_b, std::time::Duration::from_secs(1))
        .await
        .is_some());

    f.pg.stop();
    // Nothing is acknowledged while the database is away.
    let mut w = f.store.message_writer();
    let written = w.write(b"Subject: two\r\n\r\n2\r\n").await;
    let delivered = match written {
        Ok(()) => {
            w.deliver(store::Delivery {
                mailboxes: vec![inbox],
                ..Default::default()
            })
            .await
        }
        Err(e) => Err(e),
    };
    let e = delivered.expect_err("delivered with the database down");
    assert!(e.is_unavailable(), "{e}");
    let e = f.store.list_messages(inbox).await.expect_err("listed");
    assert!(e.is_unavailable(), "{e}");

    f.pg.restart();
    // The pools connect again by themselves; so does B's listener, which
    // wakes its watchers once to look for what they missed.
    let back = std::time::Duration::from_secs(10);
    assert!(
        woken(&mut on_b, back).await.is_some(),
        "resync after restart"
    );
    let uid = deliver(&f.store, inbox, b"Subject: three\r\n\r\n3\r\n").await;
    assert!(woken(&mut on_b, std::time::Duration::from_secs(1))
        .await
        .is_some());
    let uids: Vec<_> = b
        .list_messages(inbox)
        .await
        .unwrap()
        .iter()
        .map(|m| m.uid)
        .collect();
    assert_eq!(uids, vec![1, uid], "the refused message is not there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maildrop_is_locked_across_nodes_until_its_holder_lets_go() {
    let (f, account, _inbox) = open_with_account().await;
    let b = second_node(&f).await;
    let held = f.store.lock_maildrop(account).await.unwrap();
    assert!(held.is_some());
    assert!(
        b.lock_maildrop(account).await.unwrap().is_none(),
        "B got A's lock"
    );
    // Another account is free.
    let other = f.store.add_account("b@example.org", "pw").await.unwrap();
    assert!(b.lock_maildrop(other).await.unwrap().is_some());
    drop(held);
    let mut taken = None;
    for _ in 0..50 {
        taken = b.lock_maildrop(account).await.unwrap();
        if taken.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(taken.is_some(), "released");
    // A node that goes away lets go of what it held.
    drop(b);
    drop(taken);
    let mut again = None;
    for _ in 0..100 {
        again = f.store.lock_maildrop(account).await.unwrap();
        if again.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(again.is_some());
}
