//! Webmail sessions and settings: they survive reopening the store, expire,
//! and go with their account.

use store::{SqliteOptions, SqliteStore, Store, StoreError, WebSession, WebSettings};

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

#[tokio::test]
async fn sessions_survive_a_restart_expire_and_end() {
    let dir = tempfile::tempdir().unwrap();
    let account = {
        let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
        store.add_domain("example.org").await.unwrap();
        let a = store.add_account("a@example.org", "pw").await.unwrap();
        store
            .create_web_session(&session("s1", a, 1000))
            .await
            .unwrap();
        let again = store.create_web_session(&session("s1", a, 1000)).await;
        assert!(matches!(again, Err(StoreError::Exists(_))), "{again:?}");
        a
    };
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    let s = store.web_session("s1", 1050).await.unwrap().unwrap();
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

    store.delete_web_session("s2").await.unwrap();
    store.delete_web_session("s2").await.unwrap();
    assert_eq!(store.web_session("s2", 2050).await.unwrap(), None);
}

#[tokio::test]
async fn removing_an_account_ends_its_sessions_and_settings() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    store.add_domain("example.org").await.unwrap();
    let a = store.add_account("a@example.org", "pw").await.unwrap();
    store.create_web_session(&session("s", a, 0)).await.unwrap();
    let custom = WebSettings {
        display_name: "Alice".into(),
        signature: "-- \nAlice".into(),
        page_size: 20,
        remote_ok: vec!["news@example.net".into(), "x@example.com".into()],
    };
    assert_eq!(store.web_settings(a).await.unwrap(), WebSettings::default());
    store.set_web_settings(a, &custom).await.unwrap();
    assert_eq!(store.web_settings(a).await.unwrap(), custom);

    store.remove_account("a@example.org").await.unwrap();
    assert_eq!(store.web_session("s", 1).await.unwrap(), None);
    assert_eq!(store.web_settings(a).await.unwrap(), WebSettings::default());
    let gone = store.set_web_settings(a, &custom).await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
}

#[tokio::test]
async fn settings_out_of_bounds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
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
    ] {
        let r = store.set_web_settings(a, &bad).await;
        assert!(matches!(r, Err(StoreError::Invalid(_))), "{r:?}");
    }
    assert_eq!(store.web_settings(a).await.unwrap(), WebSettings::default());
}
