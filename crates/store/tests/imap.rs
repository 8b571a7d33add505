//! The store API the IMAP server builds on: the mailbox tree, keywords,
//! modification sequences and tombstones, moves, APPEND-style deliveries,
//! change notices, status and quota figures; and what JMAP adds on top
//! (uploads, the account-wide view of changes). Every test runs on both back
//! ends, SQLite and PostgreSQL (a real server of its own per test): they
//! must give the same answers.

use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use sluice_testkit::Postgres;
use store::{
    Delivery, FlagChange, MailboxId, PgOptions, PgStore, SqliteOptions, SqliteStore, Store,
    StoreError, Uid, FLAG_ANSWERED, FLAG_DELETED, FLAG_FLAGGED, FLAG_SEEN,
};

/// Runs each test body once on SQLite and once on PostgreSQL, as the
/// tests `NAME::sqlite` and `NAME::postgres`.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(super::Fixture::sqlite().await).await
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(super::Fixture::postgres().await).await
            }
        }
    )*};
}

enum Backend {
    Sqlite {
        _dir: tempfile::TempDir,
        store: SqliteStore,
    },
    Postgres {
        pg: Postgres,
        db: String,
        store: PgStore,
    },
}

struct Fixture {
    backend: Backend,
    store: Arc<dyn Store>,
    account: i64,
    inbox: MailboxId,
}

impl Fixture {
    async fn sqlite() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
        Fixture::with(Backend::Sqlite { _dir: dir, store }).await
    }

    async fn postgres() -> Fixture {
        let pg = Postgres::start();
        let url = pg.create_database();
        let db = url.rsplit('/').next().unwrap().to_string();
        let mut options = PgOptions::new(&url);
        // Blobs go as soon as nothing needs them, as on SQLite.
        options.release_grace = Duration::ZERO;
        let store = PgStore::connect(options).await.unwrap();
        Fixture::with(Backend::Postgres { pg, db, store }).await
    }

    async fn with(backend: Backend) -> Fixture {
        let store: Arc<dyn Store> = match &backend {
            Backend::Sqlite { store, .. } => Arc::new(store.clone()),
            Backend::Postgres { store, .. } => Arc::new(store.clone()),
        };
        store.add_domain("example.org").await.unwrap();
        let account = store.add_account("a@example.org", "pw").await.unwrap();
        let inbox = store.mailbox(account, "INBOX").await.unwrap().unwrap().id;
        Fixture {
            backend,
            store,
            account,
            inbox,
        }
    }

    /// Releases the blobs nothing references any more, now.
    async fn sweep_now(&self) -> usize {
        match &self.backend {
            Backend::Sqlite { store, .. } => store.sweep_now().await.unwrap(),
            Backend::Postgres { store, .. } => store.sweep_now().await.unwrap(),
        }
    }

    /// Write jobs the SQLite writer has run; PostgreSQL has no writer
    /// thread (every change is one transaction of its own).
    fn writer_jobs(&self) -> Option<u64> {
        match &self.backend {
            Backend::Sqlite { store, .. } => Some(store.writer_stats().jobs),
            Backend::Postgres { .. } => None,
        }
    }

    /// On SQLite, that exactly one write job ran since `before`.
    fn assert_one_job_since(&self, before: Option<u64>, what: &str) {
        if let (Some(before), Some(now)) = (before, self.writer_jobs()) {
            assert_eq!(now - before, 1, "{what}: one transaction");
        }
    }

    /// Runs a statement on the database: `sqlite` or `postgres`, the same
    /// change in each dialect.
    fn exec(&self, sqlite: &str, postgres: &str) {
        match &self.backend {
            Backend::Sqlite { store, .. } => {
                let c = Connection::open(store.path()).unwrap();
                c.busy_timeout(Duration::from_secs(10)).unwrap();
                c.execute_batch(sqlite).unwrap();
            }
            Backend::Postgres { pg, db, .. } => {
                pg.psql(db, postgres);
            }
        }
    }

    async fn id(&self, name: &str) -> MailboxId {
        self.store
            .mailbox(self.account, name)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no mailbox {name}"))
            .id
    }

    async fn deliver_to(&self, mailbox: MailboxId, text: &[u8], delivery: Delivery) -> Uid {
        let mut w = self.store.message_writer();
        w.write(text).await.unwrap();
        w.deliver(Delivery {
            mailboxes: vec![mailbox],
            ..delivery
        })
        .await
        .unwrap()
        .entries[0]
            .1
    }

    async fn deliver_n(&self, mailbox: MailboxId, n: usize) -> Vec<Uid> {
        let mut uids = Vec::new();
        for i in 0..n {
            let text = format!("Subject: m{i}\r\n\r\nbody {i}\r\n");
            uids.push(
                self.deliver_to(mailbox, text.as_bytes(), Delivery::default())
                    .await,
            );
        }
        uids
    }

    /// The one number `sql` selects (SQL both dialects accept).
    fn count(&self, sql: &str) -> i64 {
        match &self.backend {
            Backend::Sqlite { store, .. } => {
                let c = Connection::open(store.path()).unwrap();
                c.query_row(sql, [], |r| r.get(0)).unwrap()
            }
            Backend::Postgres { pg, db, .. } => {
                let out = pg.psql(db, sql);
                out.parse()
                    .unwrap_or_else(|_| panic!("{sql}: not a number: {out:?}"))
            }
        }
    }

    /// The UIDs `key` finds in the inbox.
    async fn search(&self, key: store::SearchKey) -> Vec<Uid> {
        self.store.search(self.inbox, &key).await.unwrap()
    }

    /// Index rows of long messages' sections (text_sections.rs).
    fn section_rows(&self) -> i64 {
        match &self.backend {
            Backend::Sqlite { store, .. } => {
                let c = Connection::open(store.path().with_file_name("fts.db")).unwrap();
                c.query_row("SELECT count(*) FROM fts_docsize WHERE id < 0", [], |r| {
                    r.get(0)
                })
                .unwrap()
            }
            Backend::Postgres { .. } => self.count("SELECT count(*) FROM blob_text WHERE part > 0"),
        }
    }

    async fn names(&self) -> Vec<String> {
        self.store
            .list_mailboxes(self.account)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.name)
            .collect()
    }
}

fn uids(entries: &[store::MessageEntry]) -> Vec<Uid> {
    entries.iter().map(|m| m.uid).collect()
}

async fn default_mailboxes_are_listed_with_special_use_and_subscription(f: Fixture) {
    let all = f.store.list_mailboxes(f.account).await.unwrap();
    let view: Vec<(&str, Option<&str>, bool)> = all
        .iter()
        .map(|m| (m.name.as_str(), m.special_use.as_deref(), m.subscribed))
        .collect();
    assert_eq!(
        view,
        [
            ("Archive", Some("\\Archive"), true),
            ("Drafts", Some("\\Drafts"), true),
            ("INBOX", None, true),
            ("Junk", Some("\\Junk"), true),
            ("Sent", Some("\\Sent"), true),
            ("Trash", Some("\\Trash"), true),
        ]
    );
    // INBOX is found in any case, other names only as written.
    assert_eq!(
        f.store
            .mailbox(f.account, "inBox")
            .await
            .unwrap()
            .unwrap()
            .id,
        f.inbox
    );
    assert!(f.store.mailbox(f.account, "sent").await.unwrap().is_none());
    let sent = f.store.mailbox(f.account, "Sent").await.unwrap().unwrap();
    assert_eq!(sent.special_use.as_deref(), Some("\\Sent"));

    f.store
        .set_subscribed(f.account, "Sent", false)
        .await
        .unwrap();
    assert!(
        !f.store
            .mailbox(f.account, "Sent")
            .await
            .unwrap()
            .unwrap()
            .subscribed
    );
    f.store
        .set_subscribed(f.account, "inbox", false)
        .await
        .unwrap();
    assert!(matches!(
        f.store.set_subscribed(f.account, "Nope", true).await,
        Err(StoreError::NotFound(_))
    ));
}

async fn create_checks_names_and_makes_parents(f: Fixture) {
    for bad in ["", "/lead", "trail/", "a//b", "cr\rlf", "nl\n", "nul\0"] {
        assert!(
            matches!(
                f.store.create_mailbox(f.account, bad, None).await,
                Err(StoreError::Invalid(_))
            ),
            "{bad:?}"
        );
    }
    for taken in ["INBOX", "inbox", "InBoX", "Sent"] {
        assert!(
            matches!(
                f.store.create_mailbox(f.account, taken, None).await,
                Err(StoreError::Exists(_))
            ),
            "{taken:?}"
        );
    }
    assert!(matches!(
        f.store
            .create_mailbox(f.account, "Odd", Some("\\Bogus"))
            .await,
        Err(StoreError::Invalid(_))
    ));

    let made = f
        .store
        .create_mailbox(f.account, "Projects/2025/Q1", Some("\\flagged"))
        .await
        .unwrap();
    assert_eq!(made.name, "Projects/2025/Q1");
    assert_eq!(made.special_use.as_deref(), Some("\\Flagged"));
    assert_eq!(made.uid_next, 1);
    // CREATE does not subscribe (RFC 3501 §6.3.6).
    assert!(!made.subscribed);
    assert_eq!(
        f.store
            .mailbox(f.account, "Projects/2025/Q1")
            .await
            .unwrap(),
        Some(made.clone())
    );
    let names = f.names().await;
    for n in ["Projects", "Projects/2025", "Projects/2025/Q1"] {
        assert!(names.contains(&n.to_string()), "{names:?}");
    }
    assert!(matches!(
        f.store
            .create_mailbox(f.account, "Projects/2025/Q1", None)
            .await,
        Err(StoreError::Exists(_))
    ));
    // Names are case-sensitive except INBOX; children of INBOX are fine.
    f.store
        .create_mailbox(f.account, "projects", None)
        .await
        .unwrap();
    let child = f
        .store
        .create_mailbox(f.account, "inbox/Lists", None)
        .await
        .unwrap();
    assert_eq!(child.name, "INBOX/Lists");
    // Unicode names are stored as given.
    f.store
        .create_mailbox(f.account, "Zürich/Café", None)
        .await
        .unwrap();
    assert!(f.names().await.contains(&"Zürich/Café".to_string()));
}

async fn delete_refuses_inbox_and_parents_and_never_reuses_uidvalidity(f: Fixture) {
    for inbox in ["INBOX", "inbox"] {
        assert!(matches!(
            f.store.delete_mailbox(f.account, inbox).await,
            Err(StoreError::Invalid(_))
        ));
    }
    assert!(matches!(
        f.store.delete_mailbox(f.account, "Nope").await,
        Err(StoreError::NotFound(_))
    ));
    let first = f
        .store
        .create_mailbox(f.account, "Work/Old", None)
        .await
        .unwrap();
    assert!(matches!(
        f.store.delete_mailbox(f.account, "Work").await,
        Err(StoreError::Invalid(_))
    ));
    f.deliver_n(first.id, 3).await;
    let blobs = f.count("SELECT count(*) FROM blobs");
    f.store
        .update_flags(first.id, &[1], FlagChange::Add, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    f.store.expunge_deleted(first.id, None).await.unwrap();
    assert_eq!(
        f.count("SELECT count(*) FROM expunged"),
        1,
        "a tombstone while the mailbox lives"
    );
    f.store.delete_mailbox(f.account, "Work/Old").await.unwrap();
    assert!(f
        .store
        .mailbox(f.account, "Work/Old")
        .await
        .unwrap()
        .is_none());
    // Its messages, their blobs and its tombstones went with it.
    f.sweep_now().await;
    assert_eq!(f.count("SELECT count(*) FROM blobs"), blobs - 3);
    assert_eq!(f.count("SELECT count(*) FROM expunged"), 0);
    assert!(matches!(
        f.store.changes_since(first.id, 0).await,
        Err(StoreError::NotFound(_))
    ));
    f.store.delete_mailbox(f.account, "Work").await.unwrap();

    // Created again within the same second: a greater UIDVALIDITY, and
    // never the old id (a session may still hold it).
    let again = f
        .store
        .create_mailbox(f.account, "Work/Old", None)
        .await
        .unwrap();
    assert!(again.uid_validity > first.uid_validity);
    assert_ne!(again.id, first.id);
    let all = f.store.list_mailboxes(f.account).await.unwrap();
    assert!(all
        .iter()
        .all(|m| m.id == again.id || m.uid_validity < again.uid_validity));
}

async fn rename_takes_children_along_and_keeps_uids(f: Fixture) {
    let a = f.store.create_mailbox(f.account, "a", None).await.unwrap();
    let ab = f
        .store
        .create_mailbox(f.account, "a/b", None)
        .await
        .unwrap();
    f.store.create_mailbox(f.account, "ab", None).await.unwrap();
    f.deliver_n(ab.id, 2).await;
    f.store
        .create_mailbox(f.account, "taken", None)
        .await
        .unwrap();

    assert!(matches!(
        f.store.rename_mailbox(f.account, "a", "taken").await,
        Err(StoreError::Exists(_))
    ));
    assert!(matches!(
        f.store.rename_mailbox(f.account, "a", "INBOX").await,
        Err(StoreError::Exists(_))
    ));
    assert!(matches!(
        f.store.rename_mailbox(f.account, "a", "a/b/c").await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        f.store.rename_mailbox(f.account, "a", "bad//name").await,
        Err(StoreError::Invalid(_))
    ));
    assert!(matches!(
        f.store.rename_mailbox(f.account, "nope", "x").await,
        Err(StoreError::NotFound(_))
    ));

    f.store
        .rename_mailbox(f.account, "a", "new/place")
        .await
        .unwrap();
    let names = f.names().await;
    assert!(names.contains(&"new".to_string()), "parent made: {names:?}");
    assert!(names.contains(&"new/place/b".to_string()));
    assert!(
        names.contains(&"ab".to_string()),
        "a sibling is not a child"
    );
    assert!(!names.iter().any(|n| n == "a" || n == "a/b"));
    let moved = f
        .store
        .mailbox(f.account, "new/place/b")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(moved.id, ab.id);
    assert_eq!(moved.uid_validity, ab.uid_validity);
    assert_eq!(moved.uid_next, 3);
    assert_eq!(
        uids(&f.store.list_messages(moved.id).await.unwrap()),
        [1, 2]
    );
    let parent = f
        .store
        .mailbox(f.account, "new/place")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((parent.id, parent.uid_validity), (a.id, a.uid_validity));
    // The old name is free and gets a fresh UIDVALIDITY.
    let fresh = f.store.create_mailbox(f.account, "a", None).await.unwrap();
    assert!(fresh.uid_validity > a.uid_validity);
}

async fn renaming_inbox_moves_its_messages_and_leaves_it_empty(f: Fixture) {
    f.store
        .create_mailbox(f.account, "INBOX/Child", None)
        .await
        .unwrap();
    f.deliver_n(f.inbox, 3).await;
    f.store
        .update_flags(
            f.inbox,
            &[2],
            FlagChange::Add,
            FLAG_FLAGGED,
            &["Work".into()],
            None,
        )
        .await
        .unwrap();
    f.store.expunge(f.inbox, &[1]).await.unwrap();
    let before = f.store.mailbox(f.account, "INBOX").await.unwrap().unwrap();
    f.sweep_now().await;
    let blobs = f.count("SELECT count(*) FROM blobs");

    f.store
        .rename_mailbox(f.account, "inbox", "Old Mail")
        .await
        .unwrap();
    let inbox = f.store.mailbox(f.account, "INBOX").await.unwrap().unwrap();
    assert_eq!(inbox.id, before.id);
    assert_eq!(inbox.uid_validity, before.uid_validity);
    assert_eq!(inbox.uid_next, before.uid_next, "INBOX UIDs go on");
    assert!(f.store.list_messages(f.inbox).await.unwrap().is_empty());
    assert!(
        f.store
            .mailbox(f.account, "INBOX/Child")
            .await
            .unwrap()
            .is_some(),
        "children of INBOX are not renamed"
    );
    let old = f
        .store
        .mailbox(f.account, "Old Mail")
        .await
        .unwrap()
        .unwrap();
    let moved = f.store.list_messages(old.id).await.unwrap();
    assert_eq!(uids(&moved), [1, 2], "new UIDs in the target");
    assert_eq!(moved[0].flags, FLAG_FLAGGED);
    assert_eq!(moved[0].keywords, ["Work"]);
    f.sweep_now().await;
    assert_eq!(f.count("SELECT count(*) FROM blobs"), blobs);
    let changes = f
        .store
        .changes_since(f.inbox, before.highest_modseq)
        .await
        .unwrap();
    assert_eq!(changes.expunged, [2, 3]);
}

async fn keywords_are_added_removed_and_replaced_case_insensitively(f: Fixture) {
    f.deliver_n(f.inbox, 3).await;
    let changed = f
        .store
        .update_flags(
            f.inbox,
            &[1, 2],
            FlagChange::Add,
            0,
            &["$Forwarded".into(), "Work".into()],
            None,
        )
        .await
        .unwrap();
    assert_eq!(uids(&changed), [1, 2]);
    assert_eq!(changed[0].keywords, ["$Forwarded", "Work"]);
    // Same keywords in other case: nothing changes, nothing returned.
    let changed = f
        .store
        .update_flags(f.inbox, &[1], FlagChange::Add, 0, &["WORK".into()], None)
        .await
        .unwrap();
    assert!(changed.is_empty());
    let changed = f
        .store
        .update_flags(f.inbox, &[1], FlagChange::Remove, 0, &["work".into()], None)
        .await
        .unwrap();
    assert_eq!(changed[0].keywords, ["$Forwarded"]);
    // Replace sets system flags and keywords together.
    let changed = f
        .store
        .update_flags(
            f.inbox,
            &[2, 3],
            FlagChange::Replace,
            FLAG_SEEN,
            &["work".into(), "Home".into()],
            None,
        )
        .await
        .unwrap();
    assert_eq!(changed[0].keywords, ["Work", "Home"], "first spelling kept");
    assert_eq!(changed[1].keywords, ["work", "Home"]);
    assert!(changed.iter().all(|m| m.flags == FLAG_SEEN));
    let listed = f.store.list_messages(f.inbox).await.unwrap();
    assert_eq!(listed[0].keywords, ["$Forwarded"]);
    assert_eq!(listed[1].keywords, ["Work", "Home"]);
    assert_eq!(
        f.store.mailbox_keywords(f.inbox).await.unwrap(),
        ["$Forwarded", "Home", "Work"]
    );
    let changed = f
        .store
        .update_flags(f.inbox, &[1, 2, 3], FlagChange::Replace, 0, &[], None)
        .await
        .unwrap();
    assert_eq!(uids(&changed), [1, 2, 3]);
    assert!(changed
        .iter()
        .all(|m| m.keywords.is_empty() && m.flags == 0));
    assert!(f.store.mailbox_keywords(f.inbox).await.unwrap().is_empty());

    for bad in ["two words", "", "\\Seen", "paren("] {
        assert!(matches!(
            f.store
                .update_flags(f.inbox, &[1], FlagChange::Add, 0, &[bad.into()], None)
                .await,
            Err(StoreError::Invalid(_))
        ));
    }
}

async fn unchanged_since_leaves_newer_messages_alone(f: Fixture) {
    f.deliver_n(f.inbox, 3).await;
    let base = f
        .store
        .mailbox_status(f.inbox)
        .await
        .unwrap()
        .highest_modseq;
    f.store
        .update_flags(f.inbox, &[2], FlagChange::Add, FLAG_ANSWERED, &[], None)
        .await
        .unwrap();
    let changed = f
        .store
        .update_flags(
            f.inbox,
            &[1, 2, 3],
            FlagChange::Add,
            FLAG_SEEN,
            &[],
            Some(base),
        )
        .await
        .unwrap();
    assert_eq!(uids(&changed), [1, 3], "2 changed after {base}");
    let listed = f.store.list_messages(f.inbox).await.unwrap();
    assert_eq!(listed[1].flags, FLAG_ANSWERED);
    // A failed conditional store with nothing else to do changes nothing.
    let before = f
        .store
        .mailbox_status(f.inbox)
        .await
        .unwrap()
        .highest_modseq;
    let changed = f
        .store
        .update_flags(f.inbox, &[2], FlagChange::Add, FLAG_SEEN, &[], Some(1))
        .await
        .unwrap();
    assert!(changed.is_empty());
    assert_eq!(
        f.store
            .mailbox_status(f.inbox)
            .await
            .unwrap()
            .highest_modseq,
        before,
        "no change, no new modseq"
    );
}

async fn changes_since_reports_new_changed_and_expunged(f: Fixture) {
    f.deliver_n(f.inbox, 5).await;
    let all = f.store.changes_since(f.inbox, 0).await.unwrap();
    assert_eq!(uids(&all.changed), [1, 2, 3, 4, 5]);
    assert!(all.expunged.is_empty());
    assert_eq!(all.uid_next, 6);
    let mark = all.highest_modseq;
    assert_eq!(
        f.store.changes_since(f.inbox, mark).await.unwrap().changed,
        []
    );

    f.store
        .update_flags(f.inbox, &[2], FlagChange::Add, 0, &["Later".into()], None)
        .await
        .unwrap();
    f.store.expunge(f.inbox, &[4]).await.unwrap();
    f.store
        .update_flags(f.inbox, &[5], FlagChange::Add, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    f.store.expunge_deleted(f.inbox, None).await.unwrap();
    let trash = f.id("Trash").await;
    f.store.move_messages(f.inbox, &[1], trash).await.unwrap();
    f.deliver_n(f.inbox, 1).await;

    let c = f.store.changes_since(f.inbox, mark).await.unwrap();
    assert_eq!(uids(&c.changed), [2, 6]);
    assert_eq!(c.changed[0].keywords, ["Later"]);
    assert_eq!(c.expunged, [1, 4, 5]);
    assert_eq!(c.uid_next, 7);
    let status = f.store.mailbox_status(f.inbox).await.unwrap();
    assert_eq!(c.highest_modseq, status.highest_modseq);
    assert!(c.changed.iter().all(|m| m.modseq > mark));
    // Caught up: nothing more.
    let none = f
        .store
        .changes_since(f.inbox, c.highest_modseq)
        .await
        .unwrap();
    assert!(none.changed.is_empty() && none.expunged.is_empty());
    // The expunges after the flag change only.
    let flag_modseq = c.changed[0].modseq;
    let later = f.store.changes_since(f.inbox, flag_modseq).await.unwrap();
    assert_eq!(later.expunged, [1, 4, 5]);
    assert_eq!(uids(&later.changed), [6]);
}

async fn move_copies_entries_and_expunges_the_originals_in_one_go(f: Fixture) {
    f.deliver_n(f.inbox, 4).await;
    f.store
        .update_flags(
            f.inbox,
            &[3],
            FlagChange::Add,
            FLAG_SEEN,
            &["Kept".into()],
            None,
        )
        .await
        .unwrap();
    let archive = f.id("Archive").await;
    f.deliver_n(archive, 1).await;
    let before = f.store.mailbox_status(f.inbox).await.unwrap();
    f.sweep_now().await;
    let blobs = f.count("SELECT count(*) FROM blobs");
    let jobs = f.writer_jobs();
    let map = f
        .store
        .move_messages(f.inbox, &[4, 3, 99], archive)
        .await
        .unwrap();
    assert_eq!(map, [(3, 2), (4, 3)]);
    f.assert_one_job_since(jobs, "move");
    assert_eq!(uids(&f.store.list_messages(f.inbox).await.unwrap()), [1, 2]);
    let target = f.store.list_messages(archive).await.unwrap();
    assert_eq!(uids(&target), [1, 2, 3]);
    assert_eq!(
        (target[1].flags, target[1].keywords.clone()),
        (FLAG_SEEN, vec!["Kept".to_string()])
    );
    f.sweep_now().await;
    assert_eq!(
        f.count("SELECT count(*) FROM blobs"),
        blobs,
        "no blob freed"
    );
    assert_eq!(f.count("SELECT max(refcount) FROM blobs"), 1);
    let changes = f
        .store
        .changes_since(f.inbox, before.highest_modseq)
        .await
        .unwrap();
    assert_eq!(changes.expunged, [3, 4]);
    assert!(changes.highest_modseq > before.highest_modseq);
    // Nothing to move: nothing happens.
    assert!(f
        .store
        .move_messages(f.inbox, &[42], archive)
        .await
        .unwrap()
        .is_empty());
}

async fn uid_expunge_takes_only_the_named_deleted_messages(f: Fixture) {
    f.deliver_n(f.inbox, 5).await;
    f.store
        .update_flags(
            f.inbox,
            &[1, 2, 3, 4],
            FlagChange::Add,
            FLAG_DELETED,
            &[],
            None,
        )
        .await
        .unwrap();
    let gone = f
        .store
        .expunge_deleted(f.inbox, Some(&[2, 4, 5]))
        .await
        .unwrap();
    assert_eq!(gone, [2, 4]);
    assert_eq!(
        uids(&f.store.list_messages(f.inbox).await.unwrap()),
        [1, 3, 5]
    );
    assert_eq!(
        f.store.expunge_deleted(f.inbox, None).await.unwrap(),
        [1, 3]
    );
}

/// Fills a mailbox with `n` entries straight through SQL, all sharing one
/// blob: a big mailbox without thousands of deliveries.
fn bulk_fill(f: &Fixture, mailbox: MailboxId, n: u32) {
    f.exec(
        &format!(
            "BEGIN IMMEDIATE;
             INSERT INTO blobs (size, complete, created, hdr_subject) VALUES (10, 1, 0, 'bulk');
             INSERT INTO blob_chunks (blob_id, seq, data)
                 VALUES (last_insert_rowid(), 0, CAST('Subject: x' AS BLOB));
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {n})
             INSERT INTO messages (mailbox_id, uid, blob_id, size, flags, internal_date, modseq)
                 SELECT {mailbox}, i, (SELECT max(id) FROM blobs), 10,
                        CASE WHEN i % 5 = 0 THEN 8 ELSE 0 END, 0, 1 FROM n;
             UPDATE mailboxes SET uid_next = {n} + 1, highest_modseq = 1 WHERE id = {mailbox};
             COMMIT;"
        ),
        &format!(
            "BEGIN;
             INSERT INTO blobs (size, complete, created, hdr_subject) VALUES (10, true, 0, 'bulk');
             INSERT INTO blob_chunks (blob_id, seq, data)
                 VALUES ((SELECT max(id) FROM blobs), 0, 'Subject: x'::bytea);
             INSERT INTO messages (mailbox_id, uid, blob_id, size, flags, internal_date, modseq)
                 SELECT {mailbox}, i, (SELECT max(id) FROM blobs), 10,
                        CASE WHEN i % 5 = 0 THEN 8 ELSE 0 END, 0, 1
                 FROM generate_series(1, {n}) AS i;
             UPDATE mailboxes SET uid_next = {n} + 1, highest_modseq = 1 WHERE id = {mailbox};
             COMMIT;"
        ),
    );
}

async fn expunging_a_fifth_of_a_big_mailbox_is_one_job(f: Fixture) {
    bulk_fill(&f, f.inbox, 5000);
    let jobs = f.writer_jobs();
    let gone = f.store.expunge_deleted(f.inbox, None).await.unwrap();
    assert_eq!(gone, (1..=1000).map(|i| i * 5).collect::<Vec<Uid>>());
    f.assert_one_job_since(jobs, "expunge");
    assert_eq!(f.store.list_messages(f.inbox).await.unwrap().len(), 4000);
    let changes = f.store.changes_since(f.inbox, 1).await.unwrap();
    assert_eq!(changes.expunged, gone);
    assert!(changes.changed.is_empty());
    assert_eq!(
        f.count("SELECT refcount FROM blobs WHERE hdr_subject = 'bulk'"),
        4000
    );
    // And the same for a move of 1000 messages.
    let trash = f.id("Trash").await;
    let some: Vec<Uid> = (1..=1000).collect();
    let jobs = f.writer_jobs();
    let map = f.store.move_messages(f.inbox, &some, trash).await.unwrap();
    assert_eq!(map.len(), 800);
    f.assert_one_job_since(jobs, "move");
}

async fn append_style_delivery_keeps_flags_keywords_date_and_header(f: Fixture) {
    let text = b"From: Alice <alice@example.org>\r\nSubject: drafted\r\nX-Long: one\r\n two\r\n\r\nBody.\r\n";
    let drafts = f.id("Drafts").await;
    let uid = f
        .deliver_to(
            drafts,
            text,
            Delivery {
                internal_date: Some(1_700_000_000),
                flags: FLAG_SEEN | store::FLAG_DRAFT,
                keywords: vec!["$MDNSent".into(), "$mdnsent".into(), "Work".into()],
                ..Default::default()
            },
        )
        .await;
    let listed = f.store.list_messages(drafts).await.unwrap();
    assert_eq!(listed.len(), 1);
    let m = &listed[0];
    assert_eq!(m.uid, uid);
    assert_eq!(m.internal_date, 1_700_000_000);
    assert_eq!(m.flags, FLAG_SEEN | store::FLAG_DRAFT);
    assert_eq!(m.keywords, ["$MDNSent", "Work"]);

    let data = f.store.message_data(drafts, &[uid, 77]).await.unwrap();
    assert_eq!(data.len(), 1);
    assert_eq!(&data[0].entry, m);
    assert_eq!(data[0].headers.subject, "drafted");
    assert_eq!(
        data[0].header,
        b"From: Alice <alice@example.org>\r\nSubject: drafted\r\nX-Long: one\r\n two\r\n\r\n"
    );
    let mut builder = mime_tree::StructureBuilder::new();
    builder.feed(text);
    assert_eq!(
        data[0].structure,
        builder.finish(),
        "the structure builder's output, stored and read back"
    );
    assert!(f.store.message_data(drafts, &[]).await.unwrap().is_empty());

    // A bad keyword refuses the delivery.
    let mut w = f.store.message_writer();
    w.write(text).await.unwrap();
    assert!(matches!(
        w.deliver(Delivery {
            mailboxes: vec![drafts],
            keywords: vec!["no good".into()],
            ..Default::default()
        })
        .await,
        Err(StoreError::Invalid(_))
    ));
    assert_eq!(f.store.list_messages(drafts).await.unwrap().len(), 1);
}

async fn header_block_is_cut_at_the_window_and_old_blobs_are_worked_out(f: Fixture) {
    // A header longer than the index window: stored cut at the window.
    let mut text = b"Subject: long\r\n".to_vec();
    while text.len() < store::INDEX_WINDOW + 1000 {
        text.extend_from_slice(b"X-Filler: 0123456789012345678901234567890123456789\r\n");
    }
    text.extend_from_slice(b"\r\nbody\r\n");
    let uid = f.deliver_to(f.inbox, &text, Delivery::default()).await;
    let data = f.store.message_data(f.inbox, &[uid]).await.unwrap();
    assert_eq!(data[0].header, &text[..store::INDEX_WINDOW]);

    // A blob delivered before the store kept header blocks: read from the
    // chunks instead.
    let small = b"Subject: old\r\nTo: x@example.org\r\n\r\nold body\r\n";
    let uid = f.deliver_to(f.inbox, small, Delivery::default()).await;
    f.exec("DELETE FROM blob_parsed", "DELETE FROM blob_parsed");
    let data = f.store.message_data(f.inbox, &[uid]).await.unwrap();
    assert_eq!(data[0].header, b"Subject: old\r\nTo: x@example.org\r\n\r\n");
}

async fn a_damaged_structure_is_an_error_not_a_panic(f: Fixture) {
    let uid = f.deliver_n(f.inbox, 1).await[0];
    f.exec(
        "UPDATE blob_parsed SET structure = X'FFFF00'",
        "UPDATE blob_parsed SET structure = '\\xFFFF00'",
    );
    assert!(matches!(
        f.store.message_data(f.inbox, &[uid]).await,
        Err(StoreError::Corrupt(_))
    ));
}

async fn watchers_wake_after_deliveries_flag_changes_and_expunges(f: Fixture) {
    let mut rx = f.store.watch_mailbox(f.inbox);
    let mut other = f.store.watch_mailbox(f.id("Sent").await);
    let wait = Duration::from_secs(10);

    f.deliver_n(f.inbox, 1).await;
    tokio::time::timeout(wait, rx.changed())
        .await
        .expect("no notice after a delivery")
        .unwrap();
    rx.borrow_and_update();

    f.store
        .update_flags(f.inbox, &[1], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    tokio::time::timeout(wait, rx.changed())
        .await
        .expect("no notice after a flag change")
        .unwrap();
    rx.borrow_and_update();

    // A no-op change wakes nobody; an expunge does.
    f.store
        .update_flags(f.inbox, &[1], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    assert!(!rx.has_changed().unwrap());
    f.store.expunge(f.inbox, &[1]).await.unwrap();
    tokio::time::timeout(wait, rx.changed())
        .await
        .expect("no notice after an expunge")
        .unwrap();
    assert!(!other.has_changed().unwrap(), "other mailboxes stay quiet");
    other.borrow_and_update();

    // Several receivers of one mailbox all hear it.
    let mut second = f.store.watch_mailbox(f.inbox);
    rx.borrow_and_update();
    let copy = f.deliver_n(f.inbox, 1).await;
    for r in [&mut rx, &mut second] {
        tokio::time::timeout(wait, r.changed())
            .await
            .unwrap()
            .unwrap();
    }
    // A move wakes both ends.
    let sent = f.id("Sent").await;
    f.store.move_messages(f.inbox, &copy, sent).await.unwrap();
    tokio::time::timeout(wait, other.changed())
        .await
        .unwrap()
        .unwrap();
    tokio::time::timeout(wait, rx.changed())
        .await
        .unwrap()
        .unwrap();
}

async fn status_and_quota_figures(f: Fixture) {
    let q = f.store.quota(f.account).await.unwrap();
    assert_eq!(
        q,
        store::Quota::default(),
        "a new account: unlimited, empty"
    );
    let sizes: Vec<u64> = {
        let mut sizes = Vec::new();
        for i in 0..4 {
            let text = format!("Subject: {i}\r\n\r\n{}\r\n", "x".repeat(i * 100));
            f.deliver_to(f.inbox, text.as_bytes(), Delivery::default())
                .await;
            sizes.push(text.len() as u64);
        }
        sizes
    };
    f.store
        .update_flags(f.inbox, &[1, 2], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    f.store
        .update_flags(f.inbox, &[2, 3], FlagChange::Add, FLAG_DELETED, &[], None)
        .await
        .unwrap();
    let s = f.store.mailbox_status(f.inbox).await.unwrap();
    assert_eq!(
        (s.messages, s.unseen, s.deleted, s.size, s.uid_next),
        (4, 2, 2, sizes.iter().sum(), 5)
    );
    let info = f.store.mailbox(f.account, "INBOX").await.unwrap().unwrap();
    assert_eq!(
        (s.uid_validity, s.highest_modseq),
        (info.uid_validity, info.highest_modseq)
    );
    let empty = f.store.mailbox_status(f.id("Junk").await).await.unwrap();
    assert_eq!((empty.messages, empty.size, empty.uid_next), (0, 0, 1));
    assert!(matches!(
        f.store.mailbox_status(987_654).await,
        Err(StoreError::NotFound(_))
    ));

    // A copy counts again: each entry is the user's message.
    f.store
        .copy_messages(f.inbox, &[4], f.id("Archive").await)
        .await
        .unwrap();
    f.store
        .set_quota("A@example.org", Some(1_000_000))
        .await
        .unwrap();
    let q = f.store.quota(f.account).await.unwrap();
    assert_eq!(q.messages, 5);
    assert_eq!(q.used_bytes, sizes.iter().sum::<u64>() + sizes[3]);
    assert_eq!(q.limit_bytes, Some(1_000_000));
    f.store.set_quota("a@example.org", None).await.unwrap();
    assert_eq!(f.store.quota(f.account).await.unwrap().limit_bytes, None);
    assert!(matches!(
        f.store.set_quota("b@example.org", Some(1)).await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        f.store.quota(987_654).await,
        Err(StoreError::NotFound(_))
    ));
    // Another account starts unlimited and empty.
    let b = f.store.add_account("b@example.org", "pw").await.unwrap();
    assert_eq!(f.store.quota(b).await.unwrap(), store::Quota::default());
}

async fn moving_within_a_mailbox_renumbers_and_delivering_nowhere_fails(f: Fixture) {
    f.deliver_n(f.inbox, 2).await;
    let map = f
        .store
        .move_messages(f.inbox, &[1, 2], f.inbox)
        .await
        .unwrap();
    assert_eq!(map, [(1, 3), (2, 4)]);
    assert_eq!(uids(&f.store.list_messages(f.inbox).await.unwrap()), [3, 4]);
    assert_eq!(
        f.store.changes_since(f.inbox, 0).await.unwrap().expunged,
        [1, 2]
    );
    assert_eq!(f.count("SELECT min(refcount) FROM blobs"), 1);

    let mut w = f.store.message_writer();
    w.write(b"Subject: lost\r\n\r\n").await.unwrap();
    assert!(matches!(
        w.deliver(Delivery {
            mailboxes: vec![987_654],
            ..Default::default()
        })
        .await,
        Err(StoreError::NotFound(_))
    ));
    assert!(matches!(
        f.store.copy_messages(f.inbox, &[3], 987_654).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(
        f.count("SELECT count(*) FROM blobs"),
        2,
        "nothing left behind"
    );
}

async fn watchers_wake_when_their_mailbox_is_renamed_or_deleted(f: Fixture) {
    let made = f
        .store
        .create_mailbox(f.account, "w/x", None)
        .await
        .unwrap();
    let mut rx = f.store.watch_mailbox(made.id);
    let wait = Duration::from_secs(10);
    f.store.rename_mailbox(f.account, "w", "v").await.unwrap();
    tokio::time::timeout(wait, rx.changed())
        .await
        .expect("no notice after a rename of the parent")
        .unwrap();
    rx.borrow_and_update();
    f.store.delete_mailbox(f.account, "v/x").await.unwrap();
    tokio::time::timeout(wait, rx.changed())
        .await
        .expect("no notice after a delete")
        .unwrap();
    assert!(matches!(
        f.store.mailbox_status(made.id).await,
        Err(StoreError::NotFound(_))
    ));
}

async fn uid_runs_and_first_unseen(f: Fixture) {
    assert!(f.store.uid_runs(f.inbox).await.unwrap().is_empty());
    assert_eq!(f.store.first_unseen(f.inbox).await.unwrap(), None);
    f.deliver_n(f.inbox, 10).await;
    assert_eq!(f.store.uid_runs(f.inbox).await.unwrap(), vec![(1, 10)]);
    f.store.expunge(f.inbox, &[1, 4, 5, 10]).await.unwrap();
    assert_eq!(
        f.store.uid_runs(f.inbox).await.unwrap(),
        vec![(2, 2), (6, 4)]
    );
    f.store
        .update_flags(f.inbox, &[2, 3, 6], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    assert_eq!(f.store.first_unseen(f.inbox).await.unwrap(), Some(7));
}

/// What `mailbox_status` should say, counted from the messages themselves.
fn counted(f: &Fixture, mailbox: MailboxId) -> (u32, u32, u32, u64) {
    let count = |what: &str| {
        f.count(&format!(
            "SELECT coalesce(sum({what}), 0) FROM messages WHERE mailbox_id = {mailbox}"
        ))
    };
    (
        count("1") as u32,
        count(&format!(
            "CASE WHEN flags & {FLAG_SEEN} = 0 THEN 1 ELSE 0 END"
        )) as u32,
        count(&format!(
            "CASE WHEN flags & {FLAG_DELETED} != 0 THEN 1 ELSE 0 END"
        )) as u32,
        count("size") as u64,
    )
}

async fn assert_counts_kept(f: &Fixture, step: &str) {
    let boxes = f.store.list_mailboxes(f.account).await.unwrap();
    let (mut messages, mut bytes) = (0, 0);
    for b in boxes {
        let s = f.store.mailbox_status(b.id).await.unwrap();
        let want = counted(f, b.id);
        assert_eq!(
            (s.messages, s.unseen, s.deleted, s.size),
            want,
            "{} after {step}",
            b.name
        );
        assert_eq!(
            (b.messages, b.unseen),
            (want.0, want.1),
            "{} after {step}",
            b.name
        );
        messages += want.0 as u64;
        bytes += want.3;
    }
    let q = f.store.quota(f.account).await.unwrap();
    assert_eq!(
        (q.messages, q.used_bytes),
        (messages, bytes),
        "after {step}"
    );
}

async fn kept_counts_follow_every_kind_of_change(f: Fixture) {
    let archive = f.id("Archive").await;
    f.deliver_n(f.inbox, 6).await;
    f.deliver_to(
        f.inbox,
        b"Subject: seen\r\n\r\nx\r\n",
        Delivery {
            flags: FLAG_SEEN | FLAG_DELETED,
            ..Delivery::default()
        },
    )
    .await;
    assert_counts_kept(&f, "deliveries").await;
    let flag = |uids: &'static [Uid], change, bits| {
        let store = &f.store;
        let inbox = f.inbox;
        async move {
            store
                .update_flags(inbox, uids, change, bits, &[], None)
                .await
                .unwrap();
        }
    };
    flag(&[1, 2, 3], FlagChange::Add, FLAG_SEEN | FLAG_FLAGGED).await;
    flag(&[2, 4], FlagChange::Add, FLAG_DELETED).await;
    flag(&[3], FlagChange::Remove, FLAG_SEEN).await;
    flag(&[1], FlagChange::Replace, FLAG_ANSWERED).await;
    assert_counts_kept(&f, "flag changes").await;
    f.store
        .copy_messages(f.inbox, &[1, 2], archive)
        .await
        .unwrap();
    assert_counts_kept(&f, "copy").await;
    f.store
        .move_messages(f.inbox, &[3, 5], archive)
        .await
        .unwrap();
    assert_counts_kept(&f, "move").await;
    f.store.expunge_deleted(f.inbox, None).await.unwrap();
    assert_counts_kept(&f, "expunge of \\Deleted").await;
    f.store.expunge(archive, &[1]).await.unwrap();
    assert_counts_kept(&f, "expunge").await;
    f.store
        .rename_mailbox(f.account, "INBOX", "Old")
        .await
        .unwrap();
    assert_counts_kept(&f, "renaming INBOX").await;
    f.store.delete_mailbox(f.account, "Old").await.unwrap();
    assert_counts_kept(&f, "deleting a mailbox").await;
}

async fn newest_first_pages_follow_the_date_then_the_uid(f: Fixture) {
    // Dates out of UID order, and two messages of one second.
    for date in [300, 100, 200, 200, 50] {
        f.deliver_to(
            f.inbox,
            format!("Subject: {date}\r\n\r\nx\r\n").as_bytes(),
            Delivery {
                internal_date: Some(date),
                ..Delivery::default()
            },
        )
        .await;
    }
    let page = |skip, take| {
        let store = &f.store;
        let inbox = f.inbox;
        async move {
            let page = store.list_newest(inbox, skip, take).await.unwrap();
            page.iter().map(|d| d.entry.uid).collect::<Vec<Uid>>()
        }
    };
    assert_eq!(page(0, 10).await, [1, 4, 3, 2, 5]);
    assert_eq!(page(1, 2).await, [4, 3]);
    assert_eq!(page(4, 2).await, [5]);
    assert!(page(5, 2).await.is_empty());
}

/// The recent count, counted from the messages themselves.
fn counted_recent(f: &Fixture, mailbox: MailboxId) -> u32 {
    f.count(&format!(
        "SELECT count(*) FROM messages m JOIN mailboxes x ON x.id = m.mailbox_id
         WHERE x.id = {mailbox} AND m.uid >= x.recent_from"
    )) as u32
}

async fn recent_counts_agree_whether_the_range_is_all_none_or_some(f: Fixture) {
    let expect = |want: u32, step: &'static str| {
        let f = &f;
        async move {
            let s = f.store.mailbox_status(f.inbox).await.unwrap();
            assert_eq!(s.recent, want, "{step}");
            assert_eq!(s.recent, counted_recent(f, f.inbox), "{step}");
        }
    };
    expect(0, "empty").await;
    f.deliver_n(f.inbox, 6).await;
    expect(6, "never claimed: every message").await;
    f.store.claim_recent(f.inbox).await.unwrap();
    expect(0, "claimed").await;
    f.deliver_n(f.inbox, 3).await;
    expect(3, "new after the claim").await;
    // The old messages go: the range now starts before the first UID left.
    f.store
        .update_flags(
            f.inbox,
            &[1, 2, 3, 4, 5, 6],
            FlagChange::Add,
            FLAG_DELETED,
            &[],
            None,
        )
        .await
        .unwrap();
    f.store.expunge_deleted(f.inbox, None).await.unwrap();
    expect(3, "only recent ones left").await;
    f.deliver_n(f.inbox, 2).await;
    expect(5, "and more").await;
}

/// BODY and TEXT find what the headers of MIME parts say (an
/// attachment's name and type: the body holds them, RFC 3501 §6.4.4), in
/// attached messages too; the message's own header only for TEXT.
async fn searches_find_what_mime_part_headers_say(f: Fixture) {
    let text = b"Subject: scans\r\nX-Origin: scanner\r\n\
Content-Type: multipart/mixed; boundary=b\r\n\r\n\
--b\r\nContent-Type: text/plain\r\n\r\nsee the file\r\n\
--b\r\nContent-Type: application/pdf; name=\"kestrel-survey.pdf\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\nAAAA\r\n\
--b\r\nContent-Type: message/rfc822\r\n\r\nSubject: forwarded-osprey\r\n\r\ninner\r\n--b--\r\n";
    f.deliver_to(f.inbox, text, Delivery::default()).await;
    f.deliver_to(
        f.inbox,
        b"Subject: plain\r\n\r\nsee the file\r\n",
        Delivery::default(),
    )
    .await;
    let search = |key| f.search(key);
    use store::SearchKey::{Body, Text};
    for needle in [
        "KESTREL-survey.pdf",
        "application/pdf",
        "forwarded-osprey",
        "estrel",
    ] {
        assert_eq!(search(Body(needle.into())).await, [1], "BODY {needle}");
        assert_eq!(search(Text(needle.into())).await, [1], "TEXT {needle}");
    }
    assert!(search(Body("X-Origin".into())).await.is_empty());
    assert_eq!(search(Text("X-Origin".into())).await, [1]);
    assert_eq!(search(Body("see the file".into())).await, [1, 2]);
}

/// A message whose text runs far past the index window is searched
/// whole: a word, a piece of one, a phrase, HTML and part headers after
/// a megabyte of text; its rows go with it.
async fn searches_find_the_whole_text_of_a_long_message(f: Fixture) {
    let mut plain = String::from("needle-early and then\r\n");
    let mut n = 0;
    while plain.len() < 1_200_000 {
        n += 1;
        plain.push_str(&format!("w{n:07} l{n:06}e caf\u{e9} "));
        if n % 8 == 0 {
            plain.push_str("\r\n");
        }
        if n == 40_000 {
            plain.push_str("quiet harbour\r\nlights ");
        }
    }
    plain.push_str("zanzibarend\r\n");
    let mut qp = String::new();
    for line in plain.split("\r\n") {
        qp.push_str(&line.replace('\u{e9}', "=C3=A9"));
        qp.push_str("\r\n");
    }
    let html = "<html><body><p>the <b>ospreyhtmltail</b> &amp; more</p></body></html>";
    let mut html64 = Vec::new();
    let mut lines = mime_tree::Base64Lines::default();
    lines.push(html.as_bytes(), &mut html64);
    lines.finish_line(&mut html64);
    let html64 = String::from_utf8(html64).unwrap();
    let message = format!(
        "Subject: a long one\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
--b\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n\
{qp}--b\r\nContent-Type: text/html\r\nContent-Transfer-Encoding: base64\r\n\r\n{html64}\
--b\r\nContent-Type: application/pdf; name=\"tail-report.pdf\"\r\n\r\nAAAA\r\n--b--\r\n"
    );
    assert!(message.len() > 4 * store::INDEX_WINDOW);
    f.deliver_to(f.inbox, message.as_bytes(), Delivery::default())
        .await;
    f.deliver_to(
        f.inbox,
        b"Subject: short\r\n\r\nneedle-early only\r\n",
        Delivery::default(),
    )
    .await;
    let search = |key| f.search(key);
    use store::SearchKey::{Body, Text};
    for needle in [
        "zanzibarend",
        "ANZIBARE",
        "quiet harbour lights",
        "w0045000 l045000e",
        "ospreyhtmltail & more",
        "tail-report.pdf",
    ] {
        assert_eq!(search(Body(needle.into())).await, [1], "BODY {needle}");
        assert_eq!(search(Text(needle.into())).await, [1], "TEXT {needle}");
    }
    assert_eq!(search(Text("needle-early".into())).await, [1, 2]);
    assert!(search(Body("zanzibarendx".into())).await.is_empty());
    assert!(search(Body("quiet harbour lightsx".into()))
        .await
        .is_empty());
    assert!(f.section_rows() >= 8, "{} sections", f.section_rows());
    f.store.expunge(f.inbox, &[1]).await.unwrap();
    // The background sweeper may have taken the blob first: sweep_now
    // returns only once its index rows are gone too.
    f.sweep_now().await;
    assert_eq!(f.section_rows(), 0, "the sections go with the message");
    assert!(search(Body("zanzibarend".into())).await.is_empty());
}

/// A database whose full-text rows are of an older version has them made
/// again: searches give the older answers until then, the new ones after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn older_full_text_rows_are_made_again_on_postgres() {
    let f = Fixture::postgres().await;
    let attached = b"Subject: scans\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n\
--b\r\nContent-Type: text/plain\r\n\r\nsee the file\r\n\
--b\r\nContent-Type: application/pdf; name=\"kestrel-survey.pdf\"\r\n\r\nAAAA\r\n--b--\r\n";
    for _ in 0..70 {
        f.deliver_to(f.inbox, attached, Delivery::default()).await;
    }
    let long = format!(
        "Subject: long\r\n\r\n{}the kestrel-tailword\r\n",
        "some words on a line\r\n".repeat(20_000)
    );
    f.deliver_to(f.inbox, long.as_bytes(), Delivery::default())
        .await;
    let tail = store::SearchKey::Body("kestrel-tailword".into());
    assert_eq!(f.store.search(f.inbox, &tail).await.unwrap(), [71]);
    // As rows written before part headers were text, and before the
    // whole text of long messages was.
    f.exec(
        "",
        "UPDATE blob_text SET body = 'see the file';
         DELETE FROM blob_text WHERE part > 0;
         UPDATE meta SET value = 1 WHERE key = 'text_version';",
    );
    let key = store::SearchKey::Body("kestrel-survey.pdf".into());
    assert!(f.store.search(f.inbox, &key).await.unwrap().is_empty());
    assert!(f.store.search(f.inbox, &tail).await.unwrap().is_empty());
    let Backend::Postgres { store, pg, db } = &f.backend else {
        unreachable!()
    };
    store.retext_now().await.unwrap();
    assert_eq!(f.store.search(f.inbox, &key).await.unwrap().len(), 70);
    assert_eq!(f.store.search(f.inbox, &tail).await.unwrap(), [71]);
    let meta = pg.psql(
        db,
        "SELECT key || '=' || value FROM meta WHERE key LIKE 'text%'",
    );
    assert_eq!(meta.trim(), "text_version=3", "{meta}");
    assert_eq!(f.count("SELECT count(*) FROM blob_text_pending"), 0);
}

/// Sections a node did not get to make (it stopped after the delivery's
/// commit) are made by the next node to start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_starting_node_makes_the_sections_another_left_on_postgres() {
    let f = Fixture::postgres().await;
    let long = format!(
        "Subject: long\r\n\r\n{}the plover-tailword\r\n",
        "words of a long message\r\n".repeat(20_000)
    );
    f.deliver_to(f.inbox, long.as_bytes(), Delivery::default())
        .await;
    let tail = store::SearchKey::Body("plover-tailword".into());
    assert_eq!(f.store.search(f.inbox, &tail).await.unwrap(), [1]);
    let made = f.section_rows();
    assert!(made >= 3, "{made} sections");
    // As a node leaves it when it stops between the commit and the rows.
    f.exec(
        "",
        "DELETE FROM blob_text WHERE part > 0;
         INSERT INTO blob_text_pending SELECT id FROM blobs;",
    );
    let Backend::Postgres { pg, db, .. } = &f.backend else {
        unreachable!()
    };
    let _other = PgStore::connect(PgOptions::new(&pg.url(db))).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while f.count("SELECT count(*) FROM blob_text_pending") > 0 {
        assert!(std::time::Instant::now() < deadline, "still pending");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(f.section_rows(), made);
}

/// JMAP uploads (RFC 8620 §6.1): a blob kept for its account alone until
/// it expires; an expired one goes with the next upload.
async fn uploads_are_the_accounts_own_until_they_expire(f: Fixture) {
    let other = f.store.add_account("b@example.org", "pw").await.unwrap();
    let upload = |account, expires, text: &'static [u8]| {
        let store = Arc::clone(&f.store);
        async move {
            let mut w = store.message_writer();
            w.write(text).await.unwrap();
            w.deliver(Delivery {
                upload: Some(store::Upload {
                    account,
                    content_type: "image/png".into(),
                    expires,
                }),
                ..Default::default()
            })
            .await
            .unwrap()
            .blob
        }
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let kept = upload(f.account, now + 3600, b"\x89PNG\r\n\x1a\n\0\0binary").await;
    let found = f
        .store
        .account_blob(f.account, kept)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (found.size, found.content_type.as_deref()),
        (16, Some("image/png"))
    );
    assert_eq!(
        f.store.read_chunk(kept, 0).await.unwrap().unwrap(),
        b"\x89PNG\r\n\x1a\n\0\0binary",
        "stored byte for byte"
    );
    assert_eq!(f.store.account_blob(other, kept).await.unwrap(), None);
    let expired = upload(f.account, now - 1, b"old").await;
    assert_eq!(
        f.store.account_blob(f.account, expired).await.unwrap(),
        None
    );
    // The next upload deletes the expired one, and the sweep its blob.
    upload(other, now + 3600, b"new").await;
    f.sweep_now().await;
    assert_eq!(f.store.read_chunk(expired, 0).await.unwrap(), None);
    assert!(f.store.read_chunk(kept, 0).await.unwrap().is_some());
    // A message is its account's to read too.
    let uid = f
        .deliver_to(f.inbox, b"Subject: m\r\n\r\nbody\r\n", Delivery::default())
        .await;
    let blob = f.store.message_data(f.inbox, &[uid]).await.unwrap()[0]
        .entry
        .blob;
    assert_eq!(
        f.store.account_blob(f.account, blob).await.unwrap(),
        Some(store::AccountBlob {
            size: 20,
            content_type: None
        })
    );
    assert_eq!(f.store.account_blob(other, blob).await.unwrap(), None);
}

/// The account-wide view JMAP answers from: one modseq for the account
/// (the mailboxes' HIGHESTMODSEQs are its numbers), emails with their
/// threads, and what changed, arrived or left after a modseq.
async fn the_account_view_follows_every_change(f: Fixture) {
    let store = &f.store;
    let m0 = store.account_modseq(f.account).await.unwrap();
    let status = store.mailbox_status(f.inbox).await.unwrap();
    assert!(m0 >= status.highest_modseq, "the account's is the highest");
    let a = f
        .deliver_to(
            f.inbox,
            b"Message-ID: <a@x>\r\nSubject: first\r\n\r\nA\r\n",
            Delivery::default(),
        )
        .await;
    let b = f
        .deliver_to(
            f.inbox,
            b"Message-ID: <b@x>\r\nReferences: <a@x>\r\nSubject: Re: first\r\n\r\nB\r\n",
            Delivery::default(),
        )
        .await;
    let data = store.message_data(f.inbox, &[a, b]).await.unwrap();
    let (blob_a, blob_b) = (data[0].entry.blob, data[1].entry.blob);
    let m1 = store.account_modseq(f.account).await.unwrap();
    assert_eq!(m1, m0 + 2);
    assert_eq!(
        store.mailbox_status(f.inbox).await.unwrap().highest_modseq,
        m1
    );
    let c = store.account_changes(f.account, m0).await.unwrap();
    assert_eq!(c.modseq, m1);
    assert_eq!(c.emails, vec![(blob_a, m0 + 1), (blob_b, m0 + 2)]);
    assert!(c.emails_gone.is_empty());
    let emails = store.account_emails(f.account, None).await.unwrap();
    assert_eq!(emails.len(), 2);
    let thread = emails[0].thread;
    assert_eq!(
        emails[1].thread, thread,
        "the reply is in the first's thread"
    );
    assert_eq!(emails[0].headers.subject, "first");
    assert_eq!(c.threads, vec![(thread, false, true)]);
    // The last change of each, where a list cut short ends.
    assert_eq!(c.email_modseqs, vec![(blob_a, m0 + 1), (blob_b, m0 + 2)]);
    assert_eq!(c.thread_modseqs, vec![(thread, m0 + 2)]);
    assert_eq!(
        store.thread_emails(f.account, &[thread]).await.unwrap(),
        vec![(thread, vec![blob_a, blob_b])]
    );

    // A flag change: the email changed, nothing arrived.
    store
        .update_flags(f.inbox, &[a], FlagChange::Add, FLAG_SEEN, &[], None)
        .await
        .unwrap();
    let c = store.account_changes(f.account, m1).await.unwrap();
    assert_eq!(c.emails, vec![(blob_a, m0 + 1)]);
    assert!(c.threads.is_empty());
    assert_eq!(
        c.email_modseqs,
        vec![(blob_a, c.modseq)],
        "its flags' modseq"
    );
    assert!(c.modseq > m1);
    // A copy into another mailbox: the same email, in two mailboxes.
    let archive = f.id("Archive").await;
    let m2 = store.account_modseq(f.account).await.unwrap();
    store.copy_messages(f.inbox, &[a], archive).await.unwrap();
    let c = store.account_changes(f.account, m2).await.unwrap();
    assert_eq!(c.emails, vec![(blob_a, m0 + 1)]);
    let one = store
        .account_emails(f.account, Some(&[blob_a]))
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(
        one[0].entries.iter().map(|(m, _)| *m).collect::<Vec<_>>(),
        {
            let mut both = vec![f.inbox, archive];
            both.sort();
            both
        }
    );
    // Expunged from one: still there, changed; from both: gone.
    let m3 = store.account_modseq(f.account).await.unwrap();
    store.expunge(f.inbox, &[a]).await.unwrap();
    let c = store.account_changes(f.account, m3).await.unwrap();
    assert_eq!(
        (c.emails.clone(), c.emails_gone.clone()),
        (vec![(blob_a, m0 + 1)], vec![])
    );
    let archived = store.list_messages(archive).await.unwrap()[0].uid;
    store.expunge(archive, &[archived]).await.unwrap();
    let c = store.account_changes(f.account, m3).await.unwrap();
    assert_eq!(c.emails_gone, vec![(blob_a, m0 + 1)]);
    assert!(c.emails.is_empty(), "{c:?}");
    assert_eq!(c.threads, vec![(thread, true, true)], "B is left in it");
    assert_eq!(c.email_modseqs, vec![(blob_a, c.modseq)], "when it went");
    assert_eq!(c.thread_modseqs, vec![(thread, c.modseq)]);
    assert_eq!(
        store.thread_emails(f.account, &[thread]).await.unwrap(),
        vec![(thread, vec![blob_b])]
    );

    // The mailbox tree: created, renamed, (un)subscribed, deleted.
    let m4 = store.account_modseq(f.account).await.unwrap();
    let made = store
        .create_mailbox(f.account, "Lists", None)
        .await
        .unwrap();
    let c = store.account_changes(f.account, m4).await.unwrap();
    let row = c.mailboxes.iter().find(|m| m.id == made.id).unwrap();
    assert!(row.created > m4 && row.meta == row.created, "{row:?}");
    let m5 = store.account_modseq(f.account).await.unwrap();
    store
        .rename_mailbox(f.account, "Lists", "Groups")
        .await
        .unwrap();
    store
        .set_subscribed(f.account, "Groups", true)
        .await
        .unwrap();
    let c = store.account_changes(f.account, m5).await.unwrap();
    let row = c.mailboxes.iter().find(|m| m.id == made.id).unwrap();
    assert!(row.meta > m5 && row.created <= m5, "{row:?}");
    let inbox_row = c.mailboxes.iter().find(|m| m.id == f.inbox).unwrap();
    assert!(inbox_row.meta <= m5, "INBOX did not change: {inbox_row:?}");
    // A mailbox deleted with a message in it takes that message out.
    store.copy_messages(f.inbox, &[b], made.id).await.unwrap();
    let m6 = store.account_modseq(f.account).await.unwrap();
    store.delete_mailbox(f.account, "Groups").await.unwrap();
    let c = store.account_changes(f.account, m6).await.unwrap();
    assert_eq!(c.mailboxes_gone, vec![(made.id, row.created)]);
    assert_eq!(c.emails, vec![(blob_b, m0 + 2)], "B left a mailbox");
    let [(gone, gone_at)] = c.mailboxes_gone_at[..] else {
        panic!("{:?}", c.mailboxes_gone_at)
    };
    assert!(gone == made.id && gone_at > m6 && gone_at <= c.modseq);
    let [(changed, changed_at)] = c.email_modseqs[..] else {
        panic!("{:?}", c.email_modseqs)
    };
    assert!(changed == blob_b && changed_at > m6 && changed_at <= c.modseq);
    assert!(!c.mailboxes.iter().any(|m| m.id == made.id));
    assert!(c.modseq > m6);
    // The per-mailbox numbers IMAP sees still grow.
    let before = store.mailbox_status(f.inbox).await.unwrap().highest_modseq;
    store
        .update_flags(f.inbox, &[b], FlagChange::Add, FLAG_FLAGGED, &[], None)
        .await
        .unwrap();
    let after = store.mailbox_status(f.inbox).await.unwrap().highest_modseq;
    assert!(after > before);
    assert_eq!(after, store.account_modseq(f.account).await.unwrap());
}

/// The stored structure of any complete blob (what JMAP's Email/parse
/// reads), an upload as well as a message.
async fn a_blobs_structure_is_read_whatever_holds_it(f: Fixture) {
    let mut w = f.store.message_writer();
    w.write(b"Subject: parse me\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\n\r\none\r\n--B--\r\n")
        .await
        .unwrap();
    let blob = w
        .deliver(Delivery {
            upload: Some(store::Upload {
                account: f.account,
                content_type: "message/rfc822".into(),
                expires: i64::MAX,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .blob;
    let (structure, header) = f.store.blob_structure(blob).await.unwrap().unwrap();
    assert_eq!(structure.root.media_subtype, "mixed");
    assert!(header.starts_with(b"Subject: parse me\r\n"));
    assert!(header.ends_with(b"\r\n\r\n"));
    assert_eq!(f.store.blob_structure(blob + 1000).await.unwrap(), None);
}

on_both!(
    a_blobs_structure_is_read_whatever_holds_it,
    the_account_view_follows_every_change,
    uploads_are_the_accounts_own_until_they_expire,
    searches_find_what_mime_part_headers_say,
    searches_find_the_whole_text_of_a_long_message,
    default_mailboxes_are_listed_with_special_use_and_subscription,
    create_checks_names_and_makes_parents,
    delete_refuses_inbox_and_parents_and_never_reuses_uidvalidity,
    rename_takes_children_along_and_keeps_uids,
    renaming_inbox_moves_its_messages_and_leaves_it_empty,
    keywords_are_added_removed_and_replaced_case_insensitively,
    unchanged_since_leaves_newer_messages_alone,
    changes_since_reports_new_changed_and_expunged,
    move_copies_entries_and_expunges_the_originals_in_one_go,
    uid_expunge_takes_only_the_named_deleted_messages,
    expunging_a_fifth_of_a_big_mailbox_is_one_job,
    append_style_delivery_keeps_flags_keywords_date_and_header,
    header_block_is_cut_at_the_window_and_old_blobs_are_worked_out,
    a_damaged_structure_is_an_error_not_a_panic,
    watchers_wake_after_deliveries_flag_changes_and_expunges,
    status_and_quota_figures,
    moving_within_a_mailbox_renumbers_and_delivering_nowhere_fails,
    watchers_wake_when_their_mailbox_is_renamed_or_deleted,
    uid_runs_and_first_unseen,
    kept_counts_follow_every_kind_of_change,
    newest_first_pages_follow_the_date_then_the_uid,
    recent_counts_agree_whether_the_range_is_all_none_or_some,
);
