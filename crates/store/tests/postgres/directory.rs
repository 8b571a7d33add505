//! PostgreSQL: directory. Domains, accounts, aliases and quotas are checked
//! and counted as in the SQLite back end; an account starts with its
//! mailboxes and leaves nothing behind.

use store::{verify_password, Resolution, Store, StoreError};

use super::{open, Fixture};

/// The id of `address`'s INBOX, read from the table.
fn inbox_of(f: &Fixture, address: &str) -> i64 {
    f.sql(&format!(
        "SELECT m.id FROM mailboxes m JOIN accounts a ON a.id = m.account_id
         WHERE a.address = '{address}' AND m.name = 'INBOX'"
    ))
    .parse()
    .unwrap()
}

/// A number psql printed.
fn number(f: &Fixture, sql: &str) -> i64 {
    let out = f.sql(sql);
    out.parse()
        .unwrap_or_else(|_| panic!("{sql:?} gave {out:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_edits_are_checked_and_bump_the_serial() {
    let f = open().await;
    let store = &f.store;
    assert_eq!(store.directory_serial().await.unwrap(), 0);
    store.add_domain("Example.ORG.").await.unwrap();
    let s0 = store.directory_serial().await.unwrap();
    assert_eq!(s0, 1);
    assert_eq!(store.list_domains().await.unwrap(), ["example.org"]);
    assert!(matches!(
        store.add_account("x@nowhere.test", "pw").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.add_domain("example.org").await,
        Err(StoreError::Exists(_))
    ));
    assert!(matches!(
        store.add_domain("bad domain").await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.add_account("not an address", "pw").await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.add_account("y@example.org", "").await,
        Err(StoreError::Invalid(_))
    ));
    // Refused edits count nothing.
    assert_eq!(store.directory_serial().await.unwrap(), s0);

    store.add_account("x@example.org", "pw").await.unwrap();
    assert!(matches!(
        store.add_account("X@example.org", "pw").await,
        Err(StoreError::Exists(_))
    ));
    assert!(matches!(
        store.remove_domain("example.org").await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store.remove_domain("example.net").await,
        Err(StoreError::NotFound(_))
    ));
    store
        .add_alias(
            "team@example.org",
            &["x@example.org".into(), "far@remote.test".into()],
        )
        .await
        .unwrap();
    assert_eq!(store.directory_serial().await.unwrap(), s0 + 2);
    assert_eq!(store.list_accounts().await.unwrap(), vec!["x@example.org"]);
    let aliases = store.list_aliases().await.unwrap();
    assert_eq!(aliases.len(), 1);
    assert_eq!(aliases[0].address, "team@example.org");
    assert_eq!(aliases[0].targets, ["far@remote.test", "x@example.org"]);
    assert_eq!(
        f.sql("SELECT string_agg(name, ',' ORDER BY id) FROM mailboxes"),
        "INBOX,Sent,Drafts,Trash,Junk,Archive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_account_gets_subscribed_mailboxes_with_fresh_uidvalidities() {
    let f = open().await;
    f.store.add_domain("example.org").await.unwrap();
    let before = store_now();
    let a = f.store.add_account("A@Example.org", "pw").await.unwrap();
    assert_eq!(
        f.sql(&format!(
            "SELECT string_agg(name || ':' || coalesce(special_use, '-') || ':' || subscribed::text
                               || ':' || uid_next || ':' || highest_modseq, ' ' ORDER BY id)
             FROM mailboxes WHERE account_id = {a}"
        )),
        // Each took the account's next modseq.
        "INBOX:-:true:1:1 Sent:\\Sent:true:1:2 Drafts:\\Drafts:true:1:3 \
         Trash:\\Trash:true:1:4 Junk:\\Junk:true:1:5 Archive:\\Archive:true:1:6"
    );
    // One UIDVALIDITY after another from the clock on, the last one kept
    // on the account for the mailboxes created later.
    let validities: Vec<i64> = f
        .sql(&format!(
            "SELECT uid_validity FROM mailboxes WHERE account_id = {a} ORDER BY id"
        ))
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert!(validities[0] >= before, "{validities:?}");
    for pair in validities.windows(2) {
        assert_eq!(pair[1], pair[0] + 1, "{validities:?}");
    }
    assert_eq!(
        number(
            &f,
            &format!("SELECT uid_validity_last FROM accounts WHERE id = {a}")
        ),
        validities[5]
    );

    // A second account right after starts above nothing of the first's:
    // UIDVALIDITY is per account, from the clock.
    let b = f.store.add_account("b@example.org", "pw").await.unwrap();
    assert_ne!(a, b);
    let b_first = number(
        &f,
        &format!("SELECT min(uid_validity) FROM mailboxes WHERE account_id = {b}"),
    );
    assert!(b_first >= before);

    let d = f.store.load_directory().await.unwrap();
    let entry = d.account("a@example.org").unwrap();
    assert_eq!(entry.id, a);
    assert_eq!(entry.inbox, inbox_of(&f, "a@example.org"));
    assert!(verify_password("pw", &entry.password_hash));
    assert!(!verify_password("other", &entry.password_hash));
    assert_eq!(entry.spam_threshold, None);
    assert_eq!(
        d.account_by_inbox(entry.inbox).unwrap().address,
        "a@example.org"
    );
}

fn store_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_directory_snapshot_holds_domains_accounts_aliases_and_scripts() {
    let f = open().await;
    let store = &f.store;
    store.add_domain("example.org").await.unwrap();
    store.add_domain("example.net").await.unwrap();
    let a = store.add_account("a@example.org", "pw").await.unwrap();
    let b = store.add_account("b@example.net", "pw").await.unwrap();
    store
        .add_alias(
            "team@example.org",
            &["a@example.org".into(), "b@example.net".into()],
        )
        .await
        .unwrap();
    store
        .add_alias("out@example.org", &["far@remote.test".into()])
        .await
        .unwrap();
    f.sql(&format!(
        "UPDATE accounts SET spam_threshold = 7.5 WHERE id = {b}"
    ));
    f.sql(&format!(
        "INSERT INTO sieve_scripts (account_id, name, source, active, updated) VALUES
            ({a}, 'on', 'keep;', true, 0),
            ({a}, 'off', 'discard;', false, 0),
            (0, 'global', 'stop;', false, 0)"
    ));

    let d = store.load_directory().await.unwrap();
    assert_eq!(d.serial(), store.directory_serial().await.unwrap());
    assert!(d.is_local_domain("EXAMPLE.net."));
    assert!(!d.is_local_domain("remote.test"));
    assert_eq!(d.account_count(), 2);
    assert_eq!(
        d.account("b@example.net").unwrap().spam_threshold,
        Some(7.5)
    );
    let (inbox_a, inbox_b) = (inbox_of(&f, "a@example.org"), inbox_of(&f, "b@example.net"));
    assert_eq!(
        d.resolve("team@example.org"),
        Resolution::Deliver {
            mailboxes: vec![inbox_a, inbox_b],
            remote: vec![],
        }
    );
    assert_eq!(
        d.resolve("out@example.org"),
        Resolution::Deliver {
            mailboxes: vec![],
            remote: vec!["far@remote.test".into()],
        }
    );
    assert_eq!(d.resolve("nobody@example.org"), Resolution::UnknownUser);
    assert_eq!(d.resolve("x@remote.test"), Resolution::NotLocal);
    assert_eq!(
        d.addresses_of(d.account("a@example.org").unwrap()),
        ["a@example.org", "team@example.org"]
    );
    let active = d.active_script(a).unwrap();
    assert_eq!((active.name.as_str(), &*active.source), ("on", "keep;"));
    assert!(d.active_script(b).is_none());
    assert_eq!(&*d.global_script("global").unwrap().source, "stop;");
    assert!(d.global_script("off").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aliases_gain_and_lose_targets() {
    let f = open().await;
    let store = &f.store;
    store.add_domain("example.org").await.unwrap();
    assert!(matches!(
        store.add_alias("team@example.org", &[]).await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store
            .add_alias("team@example.org", &["not an address".into()])
            .await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        store
            .add_alias("team@elsewhere.test", &["a@example.org".into()])
            .await,
        Err(StoreError::NotFound(_))
    ));
    store
        .add_alias(
            "Team@example.org",
            &["B@example.org".into(), "a@example.org".into()],
        )
        .await
        .unwrap();
    // A target it already has is taken without complaint, and counted.
    let s = store.directory_serial().await.unwrap();
    store
        .add_alias(
            "team@example.org",
            &["a@example.org".into(), "c@x.test".into()],
        )
        .await
        .unwrap();
    assert_eq!(store.directory_serial().await.unwrap(), s + 1);
    store
        .add_alias("a.b@example.org", &["a@example.org".into()])
        .await
        .unwrap();
    store
        .add_alias("ab@example.org", &["a@example.org".into()])
        .await
        .unwrap();
    let listed = |aliases: Vec<store::AliasEntry>| {
        aliases
            .into_iter()
            .map(|a| format!("{}={}", a.address, a.targets.join(",")))
            .collect::<Vec<_>>()
    };
    // Byte order, as SQLite sorts: '.' before 'b'.
    assert_eq!(
        listed(store.list_aliases().await.unwrap()),
        [
            "a.b@example.org=a@example.org",
            "ab@example.org=a@example.org",
            "team@example.org=a@example.org,b@example.org,c@x.test",
        ]
    );

    assert!(matches!(
        store
            .remove_alias("team@example.org", Some("zz@example.org"))
            .await,
        Err(StoreError::NotFound(_))
    ));
    let s = store.directory_serial().await.unwrap();
    store
        .remove_alias("TEAM@example.org", Some("B@example.org"))
        .await
        .unwrap();
    assert_eq!(store.directory_serial().await.unwrap(), s + 1);
    store.remove_alias("ab@example.org", None).await.unwrap();
    assert!(matches!(
        store.remove_alias("ab@example.org", None).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        listed(store.list_aliases().await.unwrap()),
        [
            "a.b@example.org=a@example.org",
            "team@example.org=a@example.org,c@x.test",
        ]
    );
    assert_eq!(store.directory_serial().await.unwrap(), s + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn domains_and_accounts_list_in_byte_order() {
    let f = open().await;
    let store = &f.store;
    for d in ["b.test", "a-b.test", "ab.test", "a.test"] {
        store.add_domain(d).await.unwrap();
    }
    assert_eq!(
        store.list_domains().await.unwrap(),
        ["a-b.test", "a.test", "ab.test", "b.test"]
    );
    for a in ["b@a.test", "a_b@a.test", "A.b@a.test", "ab@a.test"] {
        store.add_account(a, "pw").await.unwrap();
    }
    assert_eq!(
        store.list_accounts().await.unwrap(),
        ["a.b@a.test", "a_b@a.test", "ab@a.test", "b@a.test"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_and_quotas_change_on_known_accounts() {
    let f = open().await;
    let store = &f.store;
    store.add_domain("example.org").await.unwrap();
    let a = store.add_account("a@example.org", "old").await.unwrap();
    assert!(matches!(
        store.set_password("nobody@example.org", "new").await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.set_password("a@example.org", "").await,
        Err(StoreError::Invalid(_))
    ));
    let s = store.directory_serial().await.unwrap();
    store.set_password("A@example.org", "new").await.unwrap();
    assert_eq!(store.directory_serial().await.unwrap(), s + 1);
    let hash = f.sql(&format!(
        "SELECT password_hash FROM accounts WHERE id = {a}"
    ));
    assert!(verify_password("new", &hash));
    assert!(!verify_password("old", &hash));
    let d = store.load_directory().await.unwrap();
    assert!(verify_password(
        "new",
        &d.account("a@example.org").unwrap().password_hash
    ));

    assert!(matches!(
        store.set_quota("nobody@example.org", Some(10)).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        store.set_quota("a@example.org", Some(u64::MAX)).await,
        Err(StoreError::Invalid(_))
    ));
    store
        .set_quota("a@example.org", Some(1_000_000))
        .await
        .unwrap();
    assert_eq!(
        number(
            &f,
            &format!("SELECT quota_bytes FROM accounts WHERE id = {a}")
        ),
        1_000_000
    );
    store.set_quota("a@example.org", None).await.unwrap();
    assert_eq!(
        f.sql(&format!(
            "SELECT coalesce(quota_bytes::text, 'none') FROM accounts WHERE id = {a}"
        )),
        "none"
    );
    // Quotas are not in the directory: no reload is due.
    assert_eq!(store.directory_serial().await.unwrap(), s + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_an_account_releases_its_references_and_leaves_nothing() {
    let f = open().await;
    let store = &f.store;
    store.add_domain("example.org").await.unwrap();
    let a = store.add_account("a@example.org", "pw").await.unwrap();
    let b = store.add_account("b@example.org", "pw").await.unwrap();
    let (inbox_a, inbox_b) = (inbox_of(&f, "a@example.org"), inbox_of(&f, "b@example.org"));
    // One blob delivered to both, and a little of everything else.
    let blob = number(
        &f,
        "INSERT INTO blobs (size, complete, created) VALUES (5, true, 0) RETURNING id",
    );
    f.sql(&format!(
        "INSERT INTO messages (mailbox_id, uid, blob_id, size, internal_date, modseq) VALUES
            ({inbox_a}, 1, {blob}, 5, 0, 2), ({inbox_b}, 1, {blob}, 5, 0, 2);
         INSERT INTO lost_subscriptions VALUES ({a}, 'Old');
         INSERT INTO sieve_scripts (account_id, name, source, active, updated)
             VALUES ({a}, 's', 'keep;', true, 0), ({b}, 's', 'keep;', true, 0);
         INSERT INTO sieve_memory VALUES ({a}, 'k', 99);
         INSERT INTO spam_tokens (account_id, token, spam, seen) VALUES ({a}, 't', 1, 0);
         INSERT INTO spam_totals (account_id, spam) VALUES ({a}, 1);
         INSERT INTO spam_trained VALUES ({a}, {blob}, true);
         INSERT INTO spam_training (account_id, blob_id, spam) VALUES ({a}, {blob}, true);
         INSERT INTO web_sessions VALUES ('s', {a}, 'c', 0, 100);
         INSERT INTO web_settings (account_id) VALUES ({a});"
    ));
    assert_eq!(number(&f, "SELECT refcount FROM blobs"), 2);
    let mut watch = store.watch_mailbox(inbox_a);
    let mut other = store.watch_mailbox(inbox_b);
    let s = store.directory_serial().await.unwrap();

    assert!(matches!(
        store.remove_account("nobody@example.org").await,
        Err(StoreError::NotFound(_))
    ));
    store.remove_account("A@example.org").await.unwrap();
    assert_eq!(store.directory_serial().await.unwrap(), s + 1);
    assert!(
        watch.has_changed().unwrap(),
        "IDLE on a's INBOX hears of it"
    );
    watch.mark_unchanged();
    assert!(!other.has_changed().unwrap());
    other.mark_unchanged();
    assert_eq!(number(&f, "SELECT refcount FROM blobs"), 1);
    assert_eq!(
        number(&f, &format!("SELECT count(*) FROM accounts WHERE id = {a}")),
        0
    );
    for table in [
        "mailboxes",
        "lost_subscriptions",
        "sieve_scripts",
        "sieve_memory",
        "spam_tokens",
        "spam_totals",
        "spam_trained",
        "spam_training",
        "web_sessions",
        "web_settings",
    ] {
        assert_eq!(
            number(
                &f,
                &format!("SELECT count(*) FROM {table} WHERE account_id = {a}"),
            ),
            0,
            "{table}"
        );
    }
    assert_eq!(number(&f, "SELECT count(*) FROM messages"), 1);
    assert_eq!(
        number(
            &f,
            &format!("SELECT count(*) FROM mailboxes WHERE account_id = {b}")
        ),
        6
    );
    assert_eq!(store.list_accounts().await.unwrap(), ["b@example.org"]);
    assert!(store
        .load_directory()
        .await
        .unwrap()
        .account("a@example.org")
        .is_none());

    store.remove_account("b@example.org").await.unwrap();
    assert_eq!(number(&f, "SELECT refcount FROM blobs"), 0);
    assert_eq!(number(&f, "SELECT count(*) FROM mailboxes"), 0);
    // The domain is empty now and may go; the address may come back,
    // with an id never given before.
    store.add_account("a@example.org", "pw").await.unwrap();
    assert!(number(&f, "SELECT max(id) FROM accounts") > b);
    store.remove_account("a@example.org").await.unwrap();
    store.remove_domain("example.org").await.unwrap();
    assert!(store.list_domains().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_account_creations_each_get_their_mailboxes_once() {
    let f = open().await;
    f.store.add_domain("example.org").await.unwrap();
    let tries = (0..4).map(|i| {
        let store = f.store.clone();
        let address = if i < 2 {
            "same@example.org".to_string()
        } else {
            format!("u{i}@example.org")
        };
        tokio::spawn(async move { store.add_account(&address, "pw").await })
    });
    let mut exists = 0;
    for t in tries {
        match t.await.unwrap() {
            Ok(_) => {}
            Err(StoreError::Exists(_)) => exists += 1,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(exists, 1);
    assert_eq!(f.store.list_accounts().await.unwrap().len(), 3);
    assert_eq!(number(&f, "SELECT count(*) FROM mailboxes"), 18);
    assert_eq!(f.store.directory_serial().await.unwrap(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_removed_while_accounts_and_keys_are_added_leaves_no_orphans() {
    let f = open().await;
    f.store.add_domain("example.org").await.unwrap();
    let adds = (0..4).map(|i| {
        let store = f.store.clone();
        tokio::spawn(async move {
            store
                .add_account(&format!("u{i}@example.org"), "pw")
                .await
                .map(|_| ())
        })
    });
    let key = {
        let store = f.store.clone();
        tokio::spawn(async move {
            store
                .add_dkim_key(store::DkimKey {
                    domain: "example.org".into(),
                    selector: "s".into(),
                    algorithm: "ed25519-sha256".into(),
                    private_der: vec![1],
                    public_key: "AAAA".into(),
                    created: 0,
                    signing: true,
                })
                .await
        })
    };
    let remove = {
        let store = f.store.clone();
        tokio::spawn(async move { store.remove_domain("example.org").await })
    };
    // Each add comes either before the removal (which then fails for an
    // account, or takes the key with it) or after it; never a database
    // error.
    let mut accounts_added = 0;
    for add in adds {
        match add.await.unwrap() {
            Ok(()) => accounts_added += 1,
            Err(StoreError::NotFound(_)) => {}
            Err(e) => panic!("{e:?}"),
        }
    }
    match key.await.unwrap() {
        Ok(()) | Err(StoreError::NotFound(_)) => {}
        Err(e) => panic!("{e:?}"),
    }
    match remove.await.unwrap() {
        Ok(()) => {
            assert_eq!(number(&f, "SELECT count(*) FROM domains"), 0);
            assert_eq!(number(&f, "SELECT count(*) FROM accounts"), 0);
            assert_eq!(number(&f, "SELECT count(*) FROM dkim_keys"), 0);
            assert_eq!(accounts_added, 0);
        }
        Err(StoreError::Invalid(_)) => {
            assert_eq!(number(&f, "SELECT count(*) FROM domains"), 1);
            assert!(accounts_added > 0);
            assert_eq!(number(&f, "SELECT count(*) FROM accounts"), accounts_added);
        }
        Err(e) => panic!("{e:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_added_while_another_node_removes_its_domain_is_not_found() {
    let f = open().await;
    f.store.add_domain("example.org").await.unwrap();
    // Another node's removal, held open between its lock and its commit.
    let (mut other, connection) = tokio_postgres::connect(&f.pg.url(&f.db), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let removal = other.transaction().await.unwrap();
    removal
        .execute(
            "SELECT id FROM domains WHERE name = 'example.org' FOR UPDATE",
            &[],
        )
        .await
        .unwrap();
    let add = {
        let store = f.store.clone();
        tokio::spawn(async move { store.add_account("a@example.org", "pw").await })
    };
    // The add waits on the domain's row: it has not finished, whatever
    // the time given (it cannot, before the removal ends).
    let waiting = wait_for_lock(&f).await;
    assert!(waiting, "the add does not wait for the domain's lock");
    assert!(!add.is_finished());
    removal
        .execute("DELETE FROM domains WHERE name = 'example.org'", &[])
        .await
        .unwrap();
    removal.commit().await.unwrap();
    let added = add.await.unwrap();
    assert!(matches!(added, Err(StoreError::NotFound(_))), "{added:?}");
    assert_eq!(number(&f, "SELECT count(*) FROM accounts"), 0);
}

/// Whether some session of the store's database comes to wait on a lock
/// within ten seconds.
async fn wait_for_lock(f: &Fixture) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let waiting = number(
            f,
            &format!(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = '{}' AND wait_event_type = 'Lock'",
                f.db
            ),
        );
        if waiting > 0 {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    false
}
