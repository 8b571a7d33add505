//! Per-account protocol records: created under new ids, replaced,
//! destroyed into tombstones, each write a higher change number, gone with
//! the account.

use store::{SqliteOptions, SqliteStore, Store, StoreError};

#[tokio::test]
async fn records_change_destroy_and_go_with_their_account() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    store.add_domain("example.org").await.unwrap();
    let a = store.add_account("a@example.org", "pw").await.unwrap();
    let b = store.add_account("b@example.org", "pw").await.unwrap();
    let (id1, c1) = store
        .put_account_record(a, "Identity", None, Some("{\"n\":1}"))
        .await
        .unwrap();
    let (id2, c2) = store
        .put_account_record(a, "Identity", None, Some("{\"n\":2}"))
        .await
        .unwrap();
    assert_ne!(id1, id2);
    assert!(c2 > c1);
    let (_, c3) = store
        .put_account_record(a, "Identity", Some(&id1), None)
        .await
        .unwrap();
    assert!(c3 > c2);
    let mut got = store.account_records(a, "Identity").await.unwrap();
    got.sort_by_key(|r| r.changed);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].id, id2);
    assert_eq!(got[0].body.as_deref(), Some("{\"n\":2}"));
    assert_eq!(
        (got[1].id.as_str(), got[1].body.as_deref()),
        (id1.as_str(), None)
    );
    // Kinds and accounts are apart.
    assert!(store.account_records(a, "Other").await.unwrap().is_empty());
    assert!(store
        .account_records(b, "Identity")
        .await
        .unwrap()
        .is_empty());
    // A named id is taken as given.
    let (named, _) = store
        .put_account_record(b, "Identity", Some("x"), Some("{}"))
        .await
        .unwrap();
    assert_eq!(named, "x");

    store.remove_account("a@example.org").await.unwrap();
    assert!(store
        .account_records(a, "Identity")
        .await
        .unwrap()
        .is_empty());
    let gone = store
        .put_account_record(a, "Identity", None, Some("{}"))
        .await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
}
