//! PostgreSQL: Sieve scripts (ManageSieve's rules: one active script, the
//! active one cannot be deleted, renames keep it active, global scripts
//! apart) and the memory vacation and duplicate use.

use store::{ScriptOwner, SieveScriptInfo, Store, StoreError};

use super::{open, Fixture};

/// A store with the account `ann@example.org`, made with SQL so these
/// checks do not lean on the directory's methods; the account's id.
async fn with_account() -> (Fixture, i64) {
    let f = open().await;
    let id = f.sql(
        "INSERT INTO domains (name) VALUES ('example.org');
         INSERT INTO accounts (address, domain_id, password_hash, created)
         VALUES ('ann@example.org', (SELECT id FROM domains), 'x', 0) RETURNING id",
    );
    (f, id.parse().unwrap())
}

fn serial(f: &Fixture) -> i64 {
    f.sql("SELECT value FROM meta WHERE key = 'directory_serial'")
        .parse()
        .unwrap()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn info(name: &str, active: bool, size: u64) -> SieveScriptInfo {
    SieveScriptInfo {
        name: name.into(),
        active,
        size,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_active_script_that_cannot_be_deleted() {
    let (f, ann) = with_account().await;
    let store = &f.store;
    let me = ScriptOwner::Account(ann);
    store.put_sieve_script(me, "a", "keep;").await.unwrap();
    store.put_sieve_script(me, "b", "discard;").await.unwrap();
    store.activate_sieve_script(ann, Some("a")).await.unwrap();
    store.activate_sieve_script(ann, Some("b")).await.unwrap();
    assert_eq!(
        store.sieve_scripts(me).await.unwrap(),
        [info("a", false, 5), info("b", true, 8)]
    );

    let err = store.delete_sieve_script(me, "b").await.unwrap_err();
    assert!(matches!(err, StoreError::InUse(_)), "{err}");
    assert_eq!(
        store.sieve_script(me, "b").await.unwrap().as_deref(),
        Some("discard;")
    );
    store.rename_sieve_script(me, "b", "c").await.unwrap();
    let err = store.rename_sieve_script(me, "a", "c").await.unwrap_err();
    assert!(matches!(err, StoreError::Exists(_)), "{err}");
    assert_eq!(
        store.sieve_scripts(me).await.unwrap(),
        [info("a", false, 5), info("c", true, 8)]
    );
    assert_eq!(
        f.sql("SELECT name || ':' || source FROM sieve_scripts WHERE active"),
        "c:discard;"
    );

    store.activate_sieve_script(ann, None).await.unwrap();
    assert_eq!(
        f.sql("SELECT count(*) FROM sieve_scripts WHERE active"),
        "0"
    );
    store.delete_sieve_script(me, "c").await.unwrap();
    assert_eq!(
        store.sieve_scripts(me).await.unwrap(),
        [info("a", false, 5)]
    );
    assert!(store.sieve_script(me, "c").await.unwrap().is_none());

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_script_to_activate_leaves_the_active_one() {
    let (f, ann) = with_account().await;
    let me = ScriptOwner::Account(ann);
    f.store.put_sieve_script(me, "a", "keep;").await.unwrap();
    f.store.activate_sieve_script(ann, Some("a")).await.unwrap();
    let err = f
        .store
        .activate_sieve_script(ann, Some("b"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    assert_eq!(
        f.store.sieve_scripts(me).await.unwrap(),
        [info("a", true, 5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_listed_in_byte_order_with_their_size_in_bytes() {
    let (f, ann) = with_account().await;
    let me = ScriptOwner::Account(ann);
    for name in ["b", "é", "B", "a", "A b"] {
        f.store.put_sieve_script(me, name, "keep;").await.unwrap();
    }
    f.store
        .put_sieve_script(me, "a", "# café\r\nkeep;")
        .await
        .unwrap();
    let list = f.store.sieve_scripts(me).await.unwrap();
    let names: Vec<_> = list.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["A b", "B", "a", "b", "é"]);
    assert_eq!(list[2], info("a", false, 14));
    assert_eq!(
        f.store.sieve_script(me, "a").await.unwrap().as_deref(),
        Some("# café\r\nkeep;")
    );
    assert!(f.store.sieve_script(me, "A").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storing_again_replaces_the_source_and_keeps_it_active() {
    let (f, ann) = with_account().await;
    let me = ScriptOwner::Account(ann);
    f.store.put_sieve_script(me, "main", "keep;").await.unwrap();
    f.store
        .activate_sieve_script(ann, Some("main"))
        .await
        .unwrap();
    f.sql("UPDATE sieve_scripts SET updated = 0");
    f.store
        .put_sieve_script(me, "main", "discard;")
        .await
        .unwrap();
    assert_eq!(
        f.store.sieve_scripts(me).await.unwrap(),
        [info("main", true, 8)]
    );
    assert_eq!(
        f.store.sieve_script(me, "main").await.unwrap().as_deref(),
        Some("discard;")
    );
    let updated: i64 = f.sql("SELECT updated FROM sieve_scripts").parse().unwrap();
    assert!((now() - updated).abs() < 60, "{updated}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_scripts_are_apart_from_personal_ones() {
    let (f, ann) = with_account().await;
    let store = &f.store;
    store
        .put_sieve_script(ScriptOwner::Global, "spam", "fileinto \"Junk\";")
        .await
        .unwrap();
    store
        .put_sieve_script(ScriptOwner::Account(ann), "mine", "keep;")
        .await
        .unwrap();
    assert!(store
        .sieve_script(ScriptOwner::Account(ann), "spam")
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        store
            .sieve_script(ScriptOwner::Global, "spam")
            .await
            .unwrap()
            .as_deref(),
        Some("fileinto \"Junk\";")
    );
    assert_eq!(
        store.sieve_scripts(ScriptOwner::Global).await.unwrap(),
        [info("spam", false, 16)]
    );
    assert_eq!(
        store
            .sieve_scripts(ScriptOwner::Account(ann))
            .await
            .unwrap(),
        [info("mine", false, 5)]
    );
    // As in SQLite: global scripts are account 0's, which no account is.
    assert_eq!(
        f.sql("SELECT account_id FROM sieve_scripts WHERE name = 'spam'"),
        "0"
    );

    store
        .rename_sieve_script(ScriptOwner::Global, "spam", "junk")
        .await
        .unwrap();
    let err = store
        .delete_sieve_script(ScriptOwner::Account(ann), "junk")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    store
        .delete_sieve_script(ScriptOwner::Global, "junk")
        .await
        .unwrap();
    assert!(store
        .sieve_scripts(ScriptOwner::Global)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renames_need_a_known_script_and_a_free_valid_name() {
    let (f, ann) = with_account().await;
    let me = ScriptOwner::Account(ann);
    f.store.put_sieve_script(me, "a", "keep;").await.unwrap();
    let err = f
        .store
        .rename_sieve_script(me, "nope", "b")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
    let err = f.store.rename_sieve_script(me, "a", "a").await.unwrap_err();
    assert!(matches!(err, StoreError::Exists(_)), "{err}");
    let err = f.store.rename_sieve_script(me, "a", "").await.unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    assert_eq!(
        f.store.sieve_scripts(me).await.unwrap(),
        [info("a", false, 5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_needs_a_known_script() {
    let (f, ann) = with_account().await;
    let me = ScriptOwner::Account(ann);
    let err = f.store.delete_sieve_script(me, "a").await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_names_follow_rfc_5804() {
    let (f, ann) = with_account().await;
    let me = ScriptOwner::Account(ann);
    let long = "n".repeat(513);
    for bad in [
        "",
        "a\u{7}b",
        "tab\there",
        "line\u{2028}sep",
        "par\u{2029}",
        &long,
    ] {
        let err = f
            .store
            .put_sieve_script(me, bad, "keep;")
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Invalid(_)), "{bad:?}: {err}");
    }
    f.store
        .put_sieve_script(me, &"n".repeat(512), "keep;")
        .await
        .unwrap();
    f.store
        .put_sieve_script(me, "Vacation (été) ✉", "keep;")
        .await
        .unwrap();
    assert_eq!(f.sql("SELECT count(*) FROM sieve_scripts"), "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_of_scripts_moves_the_directory_serial_and_a_refused_one_does_not() {
    let (f, ann) = with_account().await;
    let me = ScriptOwner::Account(ann);
    let start = serial(&f);
    f.store.put_sieve_script(me, "a", "keep;").await.unwrap();
    assert_eq!(serial(&f), start + 1);
    f.store.activate_sieve_script(ann, Some("a")).await.unwrap();
    assert_eq!(serial(&f), start + 2);
    f.store.rename_sieve_script(me, "a", "b").await.unwrap();
    assert_eq!(serial(&f), start + 3);
    f.store.activate_sieve_script(ann, None).await.unwrap();
    assert_eq!(serial(&f), start + 4);
    f.store.delete_sieve_script(me, "b").await.unwrap();
    assert_eq!(serial(&f), start + 5);

    assert!(f.store.put_sieve_script(me, "", "keep;").await.is_err());
    assert!(f.store.activate_sieve_script(ann, Some("x")).await.is_err());
    assert!(f.store.delete_sieve_script(me, "x").await.is_err());
    assert!(f.store.rename_sieve_script(me, "x", "y").await.is_err());
    assert_eq!(serial(&f), start + 5);
    // Reading changes nothing either.
    f.store.sieve_scripts(me).await.unwrap();
    f.store.sieve_script(me, "x").await.unwrap();
    assert_eq!(serial(&f), start + 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_forgets_at_expiry() {
    let (f, ann) = with_account().await;
    let store = &f.store;
    let now = now();
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
    assert!(!store.sieve_memory_holds(ann + 1, "v:bob").await.unwrap());

    // The next remembering sweeps the account's expired entries.
    store
        .remember_in_sieve_memory(ann, vec![("d:<id@x>".into(), now + 60)])
        .await
        .unwrap();
    assert_eq!(
        f.sql("SELECT string_agg(key, ',' ORDER BY key) FROM sieve_memory"),
        "d:<id@x>,v:bob"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_keeps_the_later_expiry_of_a_key() {
    let (f, ann) = with_account().await;
    let now = now();
    f.store
        .remember_in_sieve_memory(ann, vec![("k".into(), now + 600)])
        .await
        .unwrap();
    // Earlier: kept at the later; given twice in one batch: the later.
    f.store
        .remember_in_sieve_memory(
            ann,
            vec![
                ("k".into(), now + 60),
                ("j".into(), now + 100),
                ("j".into(), now + 900),
                ("j".into(), now + 200),
            ],
        )
        .await
        .unwrap();
    let expires = |key: &str| -> i64 {
        f.sql(&format!(
            "SELECT expires FROM sieve_memory WHERE account_id = {ann} AND key = '{key}'"
        ))
        .parse()
        .unwrap()
    };
    assert_eq!(expires("k"), now + 600);
    assert_eq!(expires("j"), now + 900);
    f.store
        .remember_in_sieve_memory(ann, vec![("k".into(), now + 7200)])
        .await
        .unwrap();
    assert_eq!(expires("k"), now + 7200);
    f.store.remember_in_sieve_memory(ann, vec![]).await.unwrap();
    assert_eq!(f.sql("SELECT count(*) FROM sieve_memory"), "2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_account_has_a_memory_of_its_own() {
    let (f, ann) = with_account().await;
    let bob = ann + 1;
    let now = now();
    f.store
        .remember_in_sieve_memory(bob, vec![("gone".into(), now - 10)])
        .await
        .unwrap();
    f.sql(&format!(
        "INSERT INTO sieve_memory VALUES ({bob}, 'stale', {})",
        now - 5
    ));
    // Ann's remembering sweeps only Ann's expired entries.
    f.store
        .remember_in_sieve_memory(ann, vec![("k".into(), now + 60)])
        .await
        .unwrap();
    assert_eq!(
        f.sql(&format!(
            "SELECT string_agg(key, ',' ORDER BY key) FROM sieve_memory WHERE account_id = {bob}"
        )),
        "gone,stale"
    );
    assert!(f.store.sieve_memory_holds(ann, "k").await.unwrap());
    assert!(!f.store.sieve_memory_holds(bob, "k").await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activations_at_once_leave_exactly_one_script_active() {
    let (f, ann) = with_account().await;
    let me = ScriptOwner::Account(ann);
    let names: Vec<String> = (0..8).map(|i| format!("s{i}")).collect();
    for name in &names {
        f.store.put_sieve_script(me, name, "keep;").await.unwrap();
    }
    let tasks: Vec<_> = names
        .iter()
        .map(|name| {
            let (store, name) = (f.store.clone(), name.clone());
            tokio::spawn(async move { store.activate_sieve_script(ann, Some(&name)).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let list = f.store.sieve_scripts(me).await.unwrap();
    assert_eq!(list.len(), 8);
    assert_eq!(list.iter().filter(|s| s.active).count(), 1, "{list:?}");
}
