//! TLS to the database: every connection the store makes (the pool, the
//! change-notice listener, the maildrop locks) is encrypted, `verify-full`
//! refuses a certificate from another CA or for another host, and
//! `require` refuses a server without TLS rather than going on in plain
//! text.

use sluice_testkit::{make_server_certificate, Postgres};
use store::{PgOptions, PgStore, PgTls, Store};

fn options(url: &str, tls: PgTls, pg: &Postgres) -> PgOptions {
    let mut o = PgOptions::new(url);
    o.tls = tls;
    o.ca_file = pg.ca_file.clone();
    o.wait = std::time::Duration::from_secs(2);
    o
}

/// Why connecting failed.
async fn refused(options: PgOptions) -> String {
    match PgStore::connect(options).await {
        Ok(_) => panic!("connected"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_encrypts_the_pool_the_listener_and_the_maildrop_locks() {
    let pg = Postgres::start_with_tls();
    let url = pg.create_database();
    let db = url.rsplit('/').next().unwrap().to_string();
    let store = PgStore::connect(options(&url, PgTls::VerifyFull, &pg))
        .await
        .unwrap();
    store.add_domain("example.org").await.unwrap();
    let account = store.add_account("a@example.org", "pw").await.unwrap();
    let _lock = store.lock_maildrop(account).await.unwrap().unwrap();
    let seen = pg.psql(
        &db,
        "SELECT DISTINCT a.application_name || ' ' || s.ssl
         FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
         WHERE a.application_name LIKE 'sluice%' ORDER BY 1",
    );
    assert_eq!(
        seen.lines().collect::<Vec<_>>(),
        ["sluice listen true", "sluice maildrop true", "sluice true"],
        "{seen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_refuses_another_ca_and_another_host_name() {
    let pg = Postgres::start_with_tls();
    let url = pg.create_database();
    let db = url.rsplit('/').next().unwrap();

    let other = tempfile::tempdir().unwrap();
    make_server_certificate(other.path());
    let mut o = options(&url, PgTls::VerifyFull, &pg);
    o.ca_file = Some(other.path().join("ca.pem"));
    let why = refused(o).await;
    assert!(why.contains("invalid peer certificate"), "{why}");
    assert!(why.contains("UnknownIssuer"), "{why}");

    // The right CA, but the URL names a host the certificate does not:
    // the connection goes to 127.0.0.1 (hostaddr), the name checked is
    // the host's.
    let misnamed = format!(
        "host=db.invalid hostaddr=127.0.0.1 port={} user={} dbname={db}",
        pg.port,
        sluice_testkit::PG_USER
    );
    let why = refused(options(&misnamed, PgTls::VerifyFull, &pg)).await;
    assert!(why.contains("not valid for name \"db.invalid\""), "{why}");

    // Without a CA file, the Mozilla roots do not know the test CA.
    let mut o = options(&url, PgTls::VerifyFull, &pg);
    o.ca_file = None;
    let why = refused(o).await;
    assert!(why.contains("UnknownIssuer"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_encrypts_without_checking_and_never_falls_back_to_plain_text() {
    let pg = Postgres::start_with_tls();
    let url = pg.create_database();
    let mut o = options(&url, PgTls::Require, &pg);
    o.ca_file = None;
    let store = PgStore::connect(o).await.unwrap();
    assert!(store.list_domains().await.unwrap().is_empty());
    drop(store);

    let plain = Postgres::start();
    let url = plain.create_database();
    let why = refused(options(&url, PgTls::Require, &plain)).await;
    assert!(why.contains("server does not support TLS"), "{why}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_urls_sslmode_must_agree_with_the_mode_asked_for() {
    let pg = Postgres::start_with_tls();
    let url = pg.create_database();
    let why = refused(options(
        &format!("{url}?sslmode=verify-full"),
        PgTls::Require,
        &pg,
    ))
    .await;
    assert!(why.contains("sslmode=verify-full"), "{why}");
    // Agreeing, it is taken out before tokio-postgres (which does not
    // know verify-full) parses the rest.
    PgStore::connect(options(
        &format!("{url}?sslmode=verify-full"),
        PgTls::VerifyFull,
        &pg,
    ))
    .await
    .unwrap();
}
