//! The PostgreSQL back end against a real PostgreSQL 15 on loopback,
//! a server of its own per test (started by the test kit): schema
//! migrations, what the back end answers when the database goes away, and
//! each area of the `Store` trait in a module of its own.

mod directory;
mod dkim;
mod entries;
mod mailboxes;
mod message;
mod queue;
mod search;
mod sieve;
mod spam;
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
    /// (unaligned, tuples only), for checks of the tables themselves.
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

#[tokio::test]
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

#[tokio::test]
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
