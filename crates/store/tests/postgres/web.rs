//! PostgreSQL: web. Sessions expire, end, and go with their account;
//! settings are checked and kept per account.

use store::{PgOptions, PgStore, Store, StoreError, WebSession, WebSettings};

use super::open;

fn session(id: &str, account: i64, created: i64) -> WebSession {
    WebSession {
        id_hash: id.into(),
        account,
        address: "a@example.org".into(),
        csrf: format!("csrf-{id}"),
        created,
        expires: created + 100,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_expire_and_end() {
    let f = open().await;
    let store = &f.store;
    store.add_domain("example.org").await.unwrap();
    let account = store.add_account("a@example.org", "pw").await.unwrap();
    store
        .create_web_session(&session("s1", account, 1000))
        .await
        .unwrap();
    let again = store
        .create_web_session(&session("s1", account, 1000))
        .await;
    assert!(matches!(again, Err(StoreError::Exists(_))), "{again:?}");

    // Another node (a second pool on the same database) sees it.
    let other_node = PgStore::connect(PgOptions::new(&f.pg.url(&f.db)))
        .await
        .unwrap();
    let s = other_node.web_session("s1", 1050).await.unwrap().unwrap();
    assert_eq!(s, session("s1", account, 1000));
    assert_eq!(
        store.web_session("s1", 1100).await.unwrap(),
        None,
        "expired"
    );
    assert_eq!(store.web_session("other", 1050).await.unwrap(), None);

    // A new session sweeps the expired ones out.
    store
        .create_web_session(&session("s2", account, 2000))
        .await
        .unwrap();
    assert_eq!(store.web_session("s1", 1050).await.unwrap(), None);
    assert_eq!(
        f.sql("SELECT string_agg(id_hash, ',') FROM web_sessions"),
        "s2"
    );

    store.delete_web_session("s2").await.unwrap();
    store.delete_web_session("s2").await.unwrap();
    assert_eq!(store.web_session("s2", 2050).await.unwrap(), None);
    assert_eq!(f.sql("SELECT count(*) FROM web_sessions"), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_reads_back_its_accounts_address_not_the_one_given() {
    let f = open().await;
    let store = &f.store;
    store.add_domain("example.org").await.unwrap();
    let b = store.add_account("b@example.org", "pw").await.unwrap();
    let mut s = session("s", b, 0);
    s.address = "someone-else@example.org".into();
    store.create_web_session(&s).await.unwrap();
    let read = store.web_session("s", 1).await.unwrap().unwrap();
    assert_eq!(read.address, "b@example.org");
    assert_eq!(read.account, b);
    assert_eq!(read.csrf, "csrf-s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_an_account_ends_its_sessions_and_settings() {
    let f = open().await;
    let store = &f.store;
    store.add_domain("example.org").await.unwrap();
    let a = store.add_account("a@example.org", "pw").await.unwrap();
    let b = store.add_account("b@example.org", "pw").await.unwrap();
    store.create_web_session(&session("s", a, 0)).await.unwrap();
    store.create_web_session(&session("t", b, 0)).await.unwrap();
    let custom = WebSettings {
        display_name: "Alice".into(),
        signature: "-- \nAlice".into(),
        page_size: 20,
        remote_ok: vec!["news@example.net".into(), "x@example.com".into()],
    };
    assert_eq!(store.web_settings(a).await.unwrap(), WebSettings::default());
    store.set_web_settings(a, &custom).await.unwrap();
    store.set_web_settings(b, &custom).await.unwrap();
    assert_eq!(store.web_settings(a).await.unwrap(), custom);
    // Saving again replaces the row.
    let changed = WebSettings {
        page_size: 500,
        remote_ok: vec![],
        ..custom.clone()
    };
    store.set_web_settings(a, &changed).await.unwrap();
    assert_eq!(store.web_settings(a).await.unwrap(), changed);
    assert_eq!(
        f.sql(&format!(
            "SELECT count(*) FROM web_settings WHERE account_id = {a}"
        )),
        "1"
    );

    store.remove_account("a@example.org").await.unwrap();
    assert_eq!(store.web_session("s", 1).await.unwrap(), None);
    assert_eq!(store.web_settings(a).await.unwrap(), WebSettings::default());
    let gone = store.set_web_settings(a, &custom).await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
    // The other account keeps its own.
    assert_eq!(store.web_session("t", 1).await.unwrap().unwrap().account, b);
    assert_eq!(store.web_settings(b).await.unwrap(), custom);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_out_of_bounds_are_refused() {
    let f = open().await;
    let store = &f.store;
    store.add_domain("example.org").await.unwrap();
    let a = store.add_account("a@example.org", "pw").await.unwrap();
    for bad in [
        WebSettings {
            page_size: 0,
            ..Default::default()
        },
        WebSettings {
            page_size: 501,
            ..Default::default()
        },
        WebSettings {
            remote_ok: vec!["a@b\nc@d".into()],
            ..Default::default()
        },
        WebSettings {
            remote_ok: vec!["a@b\rc@d".into()],
            ..Default::default()
        },
    ] {
        let r = store.set_web_settings(a, &bad).await;
        assert!(matches!(r, Err(StoreError::Invalid(_))), "{r:?}");
    }
    assert_eq!(store.web_settings(a).await.unwrap(), WebSettings::default());
    assert_eq!(f.sql("SELECT count(*) FROM web_settings"), "0");
}
