//! Sieve scripts in the store: ManageSieve's rules (one active script,
//! the active one cannot be deleted, renames keep it active), the
//! directory snapshot delivery reads, per-mailbox flags, and the memory
//! vacation and duplicate use.

use store::{Delivery, ScriptOwner, SqliteOptions, SqliteStore, Store, StoreError};

async fn open() -> (tempfile::TempDir, SqliteStore, i64) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    store.add_domain("example.org").await.unwrap();
    let id = store.add_account("ann@example.org", "pw").await.unwrap();
    (dir, store, id)
}

#[tokio::test]
async fn one_active_script_that_cannot_be_deleted() {
    let (_dir, store, ann) = open().await;
    let me = ScriptOwner::Account(ann);
    store.put_sieve_script(me, "a", "keep;").await.unwrap();
    store.put_sieve_script(me, "b", "discard;").await.unwrap();
    store.activate_sieve_script(ann, Some("a")).await.unwrap();
    store.activate_sieve_script(ann, Some("b")).await.unwrap();
    let list = store.sieve_scripts(me).await.unwrap();
    let active: Vec<_> = list.iter().filter(|s| s.active).map(|s| &s.name).collect();
    assert_eq!(active, ["b"]);
    assert_eq!(list[0].size, 5);

    let err = store.delete_sieve_script(me, "b").await.unwrap_err();
    assert!(matches!(err, StoreError::InUse(_)), "{err}");
    store.rename_sieve_script(me, "b", "c").await.unwrap();
    let err = store.rename_sieve_script(me, "a", "c").await.unwrap_err();
    assert!(matches!(err, StoreError::Exists(_)), "{err}");

    let d = store.load_directory().await.unwrap();
    let active = d.active_script(ann).unwrap();
    assert_eq!((active.name.as_str(), &*active.source), ("c", "discard;"));

    store.activate_sieve_script(ann, None).await.unwrap();
    store.delete_sieve_script(me, "c").await.unwrap();
    assert!(store
        .load_directory()
        .await
        .unwrap()
        .active_script(ann)
        .is_none());
    let err = store
        .activate_sieve_script(ann, Some("zz"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    let err = store
        .put_sieve_script(me, "x\ny", "keep;")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
}

#[tokio::test]
async fn global_scripts_are_apart_from_personal_ones() {
    let (_dir, store, ann) = open().await;
    store
        .put_sieve_script(ScriptOwner::Global, "spam", "fileinto \"Junk\";")
        .await
        .unwrap();
    assert!(store
        .sieve_script(ScriptOwner::Account(ann), "spam")
        .await
        .unwrap()
        .is_none());
    let d = store.load_directory().await.unwrap();
    assert_eq!(
        &*d.global_script("spam").unwrap().source,
        "fileinto \"Junk\";"
    );
    assert!(!d.has_scripts());
}

#[tokio::test]
async fn each_mailbox_can_start_with_its_own_flags() {
    let (_dir, store, ann) = open().await;
    let d = store.load_directory().await.unwrap();
    let inbox = d.account("ann@example.org").unwrap().inbox;
    assert_eq!(d.account_by_inbox(inbox).unwrap().id, ann);
    let other = store.create_mailbox(ann, "Lists", None).await.unwrap().id;
    let mut w = store.message_writer();
    w.write(b"Subject: x\r\n\r\nbody\r\n").await.unwrap();
    w.deliver(Delivery {
        mailboxes: vec![inbox, other],
        mailbox_flags: vec![(store::FLAG_FLAGGED, vec!["$Work".into()])],
        ..Default::default()
    })
    .await
    .unwrap();
    let first = &store.list_messages(inbox).await.unwrap()[0];
    assert_eq!(first.flags, store::FLAG_FLAGGED);
    assert_eq!(first.keywords, ["$Work"]);
    let second = &store.list_messages(other).await.unwrap()[0];
    assert_eq!(second.flags, 0);
    assert!(second.keywords.is_empty());
}

#[tokio::test]
async fn the_memory_forgets_at_expiry() {
    let (_dir, store, ann) = open().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(!store.sieve_memory_holds(ann, "v:bob").await.unwrap());
    store
        .remember_in_sieve_memory(
            ann,
            vec![("v:bob".into(), now + 3600), ("old".into(), now - 1)],
        )
        .await
        .unwrap();
    assert!(store.sieve_memory_holds(ann, "v:bob").await.unwrap());
    assert!(!store.sieve_memory_holds(ann, "old").await.unwrap());
}
