//! PostgreSQL: dkim. Keys are checked, rotate by algorithm, count as
//! directory edits and go with their domain, as in the SQLite back end.

use store::{DkimKey, Store, StoreError};

use super::open;

fn dkim_key(domain: &str, selector: &str, algorithm: &str, signing: bool) -> DkimKey {
    DkimKey {
        domain: domain.into(),
        selector: selector.into(),
        algorithm: algorithm.into(),
        private_der: vec![1, 2, 3],
        public_key: "AAAA".into(),
        created: 1,
        signing,
    }
}

/// The selectors that sign now.
fn signing(keys: Vec<DkimKey>) -> Vec<String> {
    keys.into_iter()
        .filter(|k| k.signing)
        .map(|k| k.selector)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dkim_keys_rotate_by_algorithm_and_go_with_their_domain() {
    let f = open().await;
    let store = &f.store;
    store.add_domain("Example.ORG").await.unwrap();
    let before = store.directory_serial().await.unwrap();
    assert!(matches!(
        store
            .add_dkim_key(dkim_key("example.net", "a", "rsa-sha256", true))
            .await,
        Err(StoreError::NotFound(_))
    ));
    for bad in ["", "a..b", "-a", "a b", "a/b", "a-", &"x".repeat(64)] {
        assert!(
            matches!(
                store
                    .add_dkim_key(dkim_key("example.org", bad, "rsa-sha256", true))
                    .await,
                Err(StoreError::Invalid(_))
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        store
            .add_dkim_key(dkim_key("example.org", "a", "dsa-sha1", true))
            .await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store
            .add_dkim_key(dkim_key("bad domain", "a", "rsa-sha256", true))
            .await,
        Err(StoreError::Invalid(_))
    ));
    assert_eq!(store.directory_serial().await.unwrap(), before);
    store
        .add_dkim_key(dkim_key("Example.ORG", "r1", "rsa-sha256", true))
        .await
        .unwrap();
    store
        .add_dkim_key(dkim_key("example.org", "e1", "ed25519-sha256", true))
        .await
        .unwrap();
    assert_eq!(store.directory_serial().await.unwrap(), before + 2);
    assert!(matches!(
        store
            .add_dkim_key(dkim_key("example.org", "r1", "rsa-sha256", false))
            .await,
        Err(StoreError::Exists(_))
    ));
    // A second RSA key is published first, then takes over.
    store
        .add_dkim_key(dkim_key("example.org", "r2", "rsa-sha256", false))
        .await
        .unwrap();
    assert_eq!(signing(store.dkim_keys().await.unwrap()), ["e1", "r1"]);
    store
        .set_dkim_signing("EXAMPLE.org", "r2", true)
        .await
        .unwrap();
    assert_eq!(signing(store.dkim_keys().await.unwrap()), ["e1", "r2"]);
    assert_eq!(store.directory_serial().await.unwrap(), before + 4);
    assert!(matches!(
        store.set_dkim_signing("example.org", "nope", true).await,
        Err(StoreError::NotFound(_))
    ));
    // Stopping touches no other key.
    store
        .set_dkim_signing("example.org", "e1", false)
        .await
        .unwrap();
    assert_eq!(signing(store.dkim_keys().await.unwrap()), ["r2"]);
    store.remove_dkim_key("example.org", "r1").await.unwrap();
    assert!(matches!(
        store.remove_dkim_key("example.org", "r1").await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(store.dkim_keys().await.unwrap().len(), 2);
    store.remove_domain("example.org").await.unwrap();
    assert!(store.dkim_keys().await.unwrap().is_empty());
    assert_eq!(f.sql("SELECT count(*) FROM dkim_keys"), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dkim_keys_read_back_whole_in_domain_then_selector_order() {
    let f = open().await;
    let store = &f.store;
    for d in ["b.test", "a.test", "a-b.test"] {
        store.add_domain(d).await.unwrap();
    }
    let mut key = dkim_key("b.test", "s2", "ed25519-sha256", true);
    key.private_der = (0..=255).collect();
    key.public_key = "MCowBQYDK2VwAyEA".into();
    key.created = 1_700_000_000;
    store.add_dkim_key(key.clone()).await.unwrap();
    for (domain, selector) in [("b.test", "s1"), ("a.test", "z"), ("a-b.test", "m")] {
        store
            .add_dkim_key(dkim_key(domain, selector, "rsa-sha256", false))
            .await
            .unwrap();
    }
    let keys = store.dkim_keys().await.unwrap();
    let names: Vec<String> = keys
        .iter()
        .map(|k| format!("{}/{}", k.domain, k.selector))
        .collect();
    // Byte order, as SQLite sorts: '-' before '.'.
    assert_eq!(names, ["a-b.test/m", "a.test/z", "b.test/s1", "b.test/s2"]);
    assert_eq!(keys[3], key);
    assert!(!keys[2].signing);
}
