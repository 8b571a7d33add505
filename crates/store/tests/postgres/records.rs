//! PostgreSQL: per-account protocol records, as on SQLite.

use store::{Store, StoreError};

use super::open;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_change_destroy_and_go_with_their_account() {
    let f = open().await;
    let store = &f.store;
    store.add_domain("example.org").await.unwrap();
    let a = store.add_account("a@example.org", "pw").await.unwrap();
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
    assert_eq!(got[0].body.as_deref(), Some("{\"n\":2}"));
    assert_eq!(got[1].body, None);
    assert!(store.account_records(a, "Other").await.unwrap().is_empty());
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
