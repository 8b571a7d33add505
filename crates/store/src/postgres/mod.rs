//! The PostgreSQL back end: the store for sites that outgrow one machine.
//! Several Sluice nodes share one database; each node keeps a pool of
//! connections (`deadpool-postgres`). Every change is one transaction,
//! committed with PostgreSQL's own durability (synchronous_commit on)
//! before anything is acknowledged; concurrent deliveries are folded into
//! one log flush by PostgreSQL's group commit, so there is no writer
//! thread here.
//!
//! The schema mirrors the SQLite back end's (schema.rs); so do the answers.
//! Where they differ, the module that differs says so.

mod account_view;
mod directory;
mod dkim;
mod entries;
mod fanout;
mod from_sqlite;
mod mailboxes;
mod maildrop;
mod message;
mod penalties;
mod prepared;
mod queue;
mod records;
mod retext;
mod schema;
mod search;
mod sections;
mod sieve;
mod spam;
mod sweep;
mod tls;
mod uploads;
mod web;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{ManagerConfig, Pool, RecyclingMethod, Runtime};

use crate::directory::Directory;
use crate::error::{Result, StoreError};
use crate::index::IndexedHeaders;
use crate::model::{
    AccountId, AliasEntry, BlobId, Changes, DkimKey, FlagChange, MailboxId, MailboxInfo,
    MailboxStatus, MessageData, MessageEntry, QueueOutcome, QueuedRecipient, Quota, ScriptOwner,
    SearchKey, SieveScriptInfo, SpamModel, SpamTraining, Uid, WebSession, WebSettings,
};
use crate::notify::Watchers;
use crate::{MessageWriter, Store};
pub use from_sqlite::CopyStats;
pub use tls::PgTls;

/// Where the database is and how many connections a node may hold.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `postgres://user@host:port/dbname` (libpq's URL form); a password
    /// is better given in `password` than in the URL.
    pub url: String,
    /// The password, when the URL has none (read from a file or the
    /// environment by the caller; never required inline).
    pub password: Option<String>,
    /// Connections this node keeps at most.
    pub pool_size: usize,
    /// How long a request waits for a free connection (or a new one to
    /// open) before it fails as unavailable.
    pub wait: Duration,
    /// How long a blob whose last reference went is kept before the
    /// sweeper deletes it: sessions on other nodes may still show its
    /// message, and their view pins cannot be seen from here (sweep.rs).
    pub release_grace: Duration,
    /// TLS to the database. A `sslmode` in the URL must agree with it.
    pub tls: PgTls,
    /// The CA certificates (PEM) `verify-full` trusts; without one, the
    /// Mozilla roots.
    pub ca_file: Option<PathBuf>,
    /// A one-shot command rather than a server: no change-notice listener,
    /// no blob sweeper. Its changes still reach the running nodes: the
    /// notices it sends go out through the pool, and directory edits bump
    /// the serial the nodes poll.
    pub tool: bool,
}

impl PgOptions {
    /// Defaults for `url`: 16 connections, 5 s to get one.
    pub fn new(url: &str) -> PgOptions {
        PgOptions {
            url: url.to_string(),
            password: None,
            pool_size: 16,
            wait: Duration::from_secs(5),
            release_grace: Duration::from_secs(10 * 60),
            tls: PgTls::Disable,
            ca_file: None,
            tool: false,
        }
    }
}

/// The store on PostgreSQL.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    watchers: Arc<Watchers>,
    /// Change notices to and from the other nodes.
    fanout: fanout::Fanout,
    maildrops: Arc<maildrop::MaildropLocks>,
    pins: Arc<crate::ViewPins>,
    queue_signal: Arc<tokio::sync::Notify>,
    /// [`PgOptions::release_grace`].
    release_grace: Duration,
    /// Wakes the sweeper before its next round (sweep.rs).
    sweep_wake: Arc<tokio::sync::Notify>,
    /// Held while this node sweeps: the background task and a caller of
    /// `sweep_now` take turns, so neither returns while the other still
    /// holds rows it skipped.
    sweeping: tokio::sync::Mutex<()>,
    /// Wakes this node's writer of long messages' sections (sections.rs).
    sections_wake: Arc<tokio::sync::Notify>,
    /// Whether the database's disk was found full (no directory here to
    /// measure: its files are on the database server).
    space: Arc<crate::DiskSpace>,
}

/// A pooled connection.
pub(crate) type Conn = deadpool_postgres::Object;

impl PgStore {
    /// Connects to the database and brings its schema up to date.
    pub async fn connect(options: PgOptions) -> Result<PgStore> {
        let (url, url_tls) = PgTls::split_url(&options.url)
            .map_err(|e| StoreError::Invalid(format!("PostgreSQL URL: {e}")))?;
        if let Some(mode) = url_tls.filter(|&m| m != options.tls) {
            return Err(StoreError::Invalid(format!(
                "PostgreSQL URL: sslmode={} contradicts the TLS mode asked for ({})",
                mode.name(),
                options.tls.name()
            )));
        }
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StoreError::Invalid(format!("PostgreSQL URL: {e}")))?;
        if let Some(password) = &options.password {
            config.password(password);
        }
        config.connect_timeout(options.wait);
        let connector = tls::Connector::new(options.tls, options.ca_file.as_deref(), &mut config)?;
        // Named by job, for pg_stat_activity: the pool's connections, and
        // the ones of their own that the listener and the locks hold.
        let named = |name: &str| {
            let mut c = config.clone();
            c.application_name(name);
            c
        };
        let manager = connector.manager(
            named(if options.tool {
                "sluice tool"
            } else {
                "sluice"
            }),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .wait_timeout(Some(options.wait))
            .create_timeout(Some(options.wait))
            .recycle_timeout(Some(options.wait))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Invalid(format!("PostgreSQL pool: {e}")))?;
        let watchers = Arc::new(Watchers::default());
        // The maildrop locks connect when first asked, which a tool never
        // does.
        let maildrops = maildrop::MaildropLocks::new(named("sluice maildrop"), connector.clone());
        let (fanout, listening) = if options.tool {
            (fanout::Fanout::send_only(pool.clone()), None)
        } else {
            let (fanout, listening) =
                fanout::Fanout::start(pool.clone(), named("sluice listen"), connector, &watchers);
            (fanout, Some(listening))
        };
        let store = PgStore {
            inner: Arc::new(Inner {
                fanout,
                maildrops,
                pool,
                watchers,
                pins: Arc::new(crate::ViewPins::default()),
                queue_signal: Arc::new(tokio::sync::Notify::new()),
                sections_wake: Arc::new(tokio::sync::Notify::new()),
                release_grace: options.release_grace,
                sweep_wake: Arc::new(tokio::sync::Notify::new()),
                sweeping: tokio::sync::Mutex::new(()),
                space: Arc::new(crate::DiskSpace::new(None)),
            }),
        };
        let mut conn = store.conn().await?;
        schema::migrate(&mut conn).await?;
        // Chunks packed with a dictionary (copied from a SQLite store) name
        // it; every one the database has must be known to read them.
        for row in conn
            .query(
                "SELECT dict FROM zstd_dictionaries ORDER BY created, id",
                &[],
            )
            .await?
        {
            crate::dictionary::register(row.get::<_, &[u8]>(0))?;
        }
        // Once connected, the node hears the others' changes: sessions
        // that start now miss nothing. A listener slower than the wait
        // keeps trying in the background.
        if let Some(listening) = listening {
            let _ = tokio::time::timeout(options.wait, listening).await;
        }
        drop(conn);
        if !options.tool {
            sweep::start(&store);
            retext::start(&store);
            sections::start(&store);
        }
        Ok(store)
    }

    /// A connection from the pool; `Unavailable` when none can be had
    /// within the wait (the database is down or every connection busy).
    pub(crate) async fn conn(&self) -> Result<Conn> {
        self.inner
            .pool
            .get()
            .await
            .map_err(|e| StoreError::Unavailable(describe(&e)))
    }

    /// Tells the IDLE sessions of this node, and of the others, that these
    /// mailboxes changed. Call only after the commit.
    pub(crate) fn notify(&self, mailboxes: impl IntoIterator<Item = MailboxId>) {
        let mailboxes: Vec<MailboxId> = mailboxes.into_iter().collect();
        self.inner.watchers.notify(mailboxes.iter().copied());
        self.inner.fanout.send(mailboxes);
        sweep::changed(&self.inner);
    }
}

/// `e` with its causes: tokio-postgres shows "error performing TLS
/// handshake" and keeps why (the certificate's issuer unknown, the server
/// without TLS) in its source.
pub(crate) fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = cause.source();
    }
    text
}

/// The trait, each method answered by the module that owns its tables.
#[async_trait]
impl Store for PgStore {
    async fn load_directory(&self) -> Result<Directory> {
        PgStore::load_directory(self).await
    }
    async fn directory_serial(&self) -> Result<i64> {
        PgStore::directory_serial(self).await
    }
    async fn add_domain(&self, name: &str) -> Result<()> {
        PgStore::add_domain(self, name).await
    }
    async fn remove_domain(&self, name: &str) -> Result<()> {
        PgStore::remove_domain(self, name).await
    }
    async fn list_domains(&self) -> Result<Vec<String>> {
        PgStore::list_domains(self).await
    }
    async fn add_account(&self, address: &str, password: &str) -> Result<AccountId> {
        PgStore::add_account(self, address, password).await
    }
    async fn remove_account(&self, address: &str) -> Result<()> {
        PgStore::remove_account(self, address).await
    }
    async fn set_password(&self, address: &str, password: &str) -> Result<()> {
        PgStore::set_password(self, address, password).await
    }
    async fn list_accounts(&self) -> Result<Vec<String>> {
        PgStore::list_accounts(self).await
    }
    async fn add_alias(&self, address: &str, targets: &[String]) -> Result<()> {
        PgStore::add_alias(self, address, targets).await
    }
    async fn remove_alias(&self, address: &str, target: Option<&str>) -> Result<()> {
        PgStore::remove_alias(self, address, target).await
    }
    async fn list_aliases(&self) -> Result<Vec<AliasEntry>> {
        PgStore::list_aliases(self).await
    }
    async fn dkim_keys(&self) -> Result<Vec<DkimKey>> {
        PgStore::dkim_keys(self).await
    }
    async fn add_dkim_key(&self, key: DkimKey) -> Result<()> {
        PgStore::add_dkim_key(self, key).await
    }
    async fn set_dkim_signing(&self, domain: &str, selector: &str, signing: bool) -> Result<()> {
        PgStore::set_dkim_signing(self, domain, selector, signing).await
    }
    async fn remove_dkim_key(&self, domain: &str, selector: &str) -> Result<()> {
        PgStore::remove_dkim_key(self, domain, selector).await
    }
    async fn sieve_scripts(&self, owner: ScriptOwner) -> Result<Vec<SieveScriptInfo>> {
        PgStore::sieve_scripts(self, owner).await
    }
    async fn sieve_script(&self, owner: ScriptOwner, name: &str) -> Result<Option<String>> {
        PgStore::sieve_script(self, owner, name).await
    }
    async fn put_sieve_script(&self, owner: ScriptOwner, name: &str, source: &str) -> Result<()> {
        PgStore::put_sieve_script(self, owner, name, source).await
    }
    async fn activate_sieve_script(&self, account: AccountId, name: Option<&str>) -> Result<()> {
        PgStore::activate_sieve_script(self, account, name).await
    }
    async fn delete_sieve_script(&self, owner: ScriptOwner, name: &str) -> Result<()> {
        PgStore::delete_sieve_script(self, owner, name).await
    }
    async fn rename_sieve_script(&self, owner: ScriptOwner, from: &str, to: &str) -> Result<()> {
        PgStore::rename_sieve_script(self, owner, from, to).await
    }
    async fn sieve_memory_holds(&self, account: AccountId, key: &str) -> Result<bool> {
        PgStore::sieve_memory_holds(self, account, key).await
    }
    async fn remember_in_sieve_memory(
        &self,
        account: AccountId,
        keys: Vec<(String, i64)>,
    ) -> Result<()> {
        PgStore::remember_in_sieve_memory(self, account, keys).await
    }
    async fn set_spam_threshold(&self, address: &str, threshold: Option<f32>) -> Result<()> {
        PgStore::set_spam_threshold(self, address, threshold).await
    }
    async fn spam_training_batch(&self, limit: usize) -> Result<Vec<SpamTraining>> {
        PgStore::spam_training_batch(self, limit).await
    }
    async fn train_spam(
        &self,
        account: Option<AccountId>,
        blob: Option<BlobId>,
        tokens: Vec<String>,
        spam: bool,
        done: Option<i64>,
    ) -> Result<bool> {
        PgStore::train_spam(self, account, blob, tokens, spam, done).await
    }
    async fn drop_spam_training(&self, id: i64) -> Result<()> {
        PgStore::drop_spam_training(self, id).await
    }
    async fn spam_model(
        &self,
        account: Option<AccountId>,
        tokens: Vec<String>,
    ) -> Result<SpamModel> {
        PgStore::spam_model(self, account, tokens).await
    }
    async fn spam_token_count(&self, account: Option<AccountId>) -> Result<u64> {
        PgStore::spam_token_count(self, account).await
    }
    async fn spam_token_rows(
        &self,
        account: Option<AccountId>,
    ) -> Result<Vec<(String, u32, u32, i64)>> {
        PgStore::spam_token_rows(self, account).await
    }
    async fn forget_spam_tokens(
        &self,
        account: Option<AccountId>,
        tokens: Vec<String>,
    ) -> Result<()> {
        PgStore::forget_spam_tokens(self, account, tokens).await
    }
    async fn mailbox(&self, account: AccountId, name: &str) -> Result<Option<MailboxInfo>> {
        PgStore::mailbox(self, account, name).await
    }
    async fn list_messages(&self, mailbox: MailboxId) -> Result<Vec<MessageEntry>> {
        PgStore::list_messages(self, mailbox).await
    }
    async fn list_newest(
        &self,
        mailbox: MailboxId,
        skip: usize,
        take: usize,
    ) -> Result<Vec<MessageData>> {
        PgStore::list_newest(self, mailbox, skip, take).await
    }
    async fn read_chunk(&self, blob: BlobId, seq: u32) -> Result<Option<Vec<u8>>> {
        PgStore::read_chunk(self, blob, seq).await
    }
    async fn headers(&self, blob: BlobId) -> Result<Option<IndexedHeaders>> {
        PgStore::headers(self, blob).await
    }
    async fn expunge(&self, mailbox: MailboxId, uids: &[Uid]) -> Result<()> {
        PgStore::expunge(self, mailbox, uids).await
    }
    async fn queued(&self) -> Result<Vec<QueuedRecipient>> {
        PgStore::queued(self).await
    }
    async fn queue_summary(&self) -> Result<(u64, Option<i64>)> {
        PgStore::queue_summary(self).await
    }
    async fn claim_queue(
        &self,
        now: i64,
        lease_secs: i64,
        limit: usize,
    ) -> Result<Vec<QueuedRecipient>> {
        PgStore::claim_queue(self, now, lease_secs, limit).await
    }
    async fn queue_message(&self, blob: BlobId, sender: &str, recipients: &[String]) -> Result<()> {
        PgStore::queue_message(self, blob, sender, recipients).await
    }
    async fn mark_queue_warned(&self, ids: Vec<i64>) -> Result<()> {
        PgStore::mark_queue_warned(self, ids).await
    }
    async fn release_queue_leases(&self) -> Result<usize> {
        PgStore::release_queue_leases(self).await
    }
    async fn record_queue_outcomes(&self, outcomes: Vec<(i64, QueueOutcome)>) -> Result<()> {
        PgStore::record_queue_outcomes(self, outcomes).await
    }
    async fn retry_queue(&self, id: Option<i64>, now: i64) -> Result<usize> {
        PgStore::retry_queue(self, id, now).await
    }
    async fn remove_queued(&self, id: i64) -> Result<()> {
        PgStore::remove_queued(self, id).await
    }
    async fn update_flags(
        &self,
        mailbox: MailboxId,
        uids: &[Uid],
        change: FlagChange,
        flags: u32,
        keywords: &[String],
        unchanged_since: Option<u64>,
    ) -> Result<Vec<MessageEntry>> {
        PgStore::update_flags(
            self,
            mailbox,
            uids,
            change,
            flags,
            keywords,
            unchanged_since,
        )
        .await
    }
    async fn copy_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>> {
        PgStore::copy_messages(self, from, uids, to).await
    }
    async fn expunge_deleted(&self, mailbox: MailboxId, uids: Option<&[Uid]>) -> Result<Vec<Uid>> {
        PgStore::expunge_deleted(self, mailbox, uids).await
    }
    async fn move_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>> {
        PgStore::move_messages(self, from, uids, to).await
    }
    async fn list_mailboxes(&self, account: AccountId) -> Result<Vec<MailboxInfo>> {
        PgStore::list_mailboxes(self, account).await
    }
    async fn create_mailbox(
        &self,
        account: AccountId,
        name: &str,
        special_use: Option<&str>,
    ) -> Result<MailboxInfo> {
        PgStore::create_mailbox(self, account, name, special_use).await
    }
    async fn delete_mailbox(&self, account: AccountId, name: &str) -> Result<()> {
        PgStore::delete_mailbox(self, account, name).await
    }
    async fn rename_mailbox(&self, account: AccountId, from: &str, to: &str) -> Result<()> {
        PgStore::rename_mailbox(self, account, from, to).await
    }
    async fn set_subscribed(&self, account: AccountId, name: &str, subscribed: bool) -> Result<()> {
        PgStore::set_subscribed(self, account, name, subscribed).await
    }
    async fn lost_subscriptions(&self, account: AccountId) -> Result<Vec<String>> {
        PgStore::lost_subscriptions(self, account).await
    }
    async fn special_use_of(
        &self,
        mailboxes: &[MailboxId],
        special_use: &str,
    ) -> Result<Vec<MailboxId>> {
        PgStore::special_use_of(self, mailboxes, special_use).await
    }
    async fn mailbox_status(&self, mailbox: MailboxId) -> Result<MailboxStatus> {
        PgStore::mailbox_status(self, mailbox).await
    }
    async fn changes_since(&self, mailbox: MailboxId, modseq: u64) -> Result<Changes> {
        PgStore::changes_since(self, mailbox, modseq).await
    }
    async fn message_data(&self, mailbox: MailboxId, uids: &[Uid]) -> Result<Vec<MessageData>> {
        PgStore::message_data(self, mailbox, uids).await
    }
    async fn search(&self, mailbox: MailboxId, key: &SearchKey) -> Result<Vec<Uid>> {
        PgStore::search(self, mailbox, key).await
    }
    async fn quota(&self, account: AccountId) -> Result<Quota> {
        PgStore::quota(self, account).await
    }
    async fn set_quota(&self, address: &str, limit_bytes: Option<u64>) -> Result<()> {
        PgStore::set_quota(self, address, limit_bytes).await
    }
    async fn mailbox_keywords(&self, mailbox: MailboxId) -> Result<Vec<String>> {
        PgStore::mailbox_keywords(self, mailbox).await
    }
    async fn uid_runs(&self, mailbox: MailboxId) -> Result<Vec<(Uid, u32)>> {
        PgStore::uid_runs(self, mailbox).await
    }
    async fn first_unseen(&self, mailbox: MailboxId) -> Result<Option<Uid>> {
        PgStore::first_unseen(self, mailbox).await
    }
    async fn claim_recent(&self, mailbox: MailboxId) -> Result<(Uid, Uid)> {
        PgStore::claim_recent(self, mailbox).await
    }
    async fn account_blob(
        &self,
        account: AccountId,
        blob: BlobId,
    ) -> Result<Option<crate::AccountBlob>> {
        PgStore::account_blob(self, account, blob).await
    }
    async fn account_modseq(&self, account: AccountId) -> Result<u64> {
        PgStore::account_modseq(self, account).await
    }
    async fn account_changes(
        &self,
        account: AccountId,
        modseq: u64,
    ) -> Result<crate::AccountChanges> {
        PgStore::account_changes(self, account, modseq).await
    }
    async fn account_emails(
        &self,
        account: AccountId,
        blobs: Option<&[BlobId]>,
    ) -> Result<Vec<crate::AccountEmail>> {
        PgStore::account_emails(self, account, blobs).await
    }
    async fn blob_structure(
        &self,
        blob: BlobId,
    ) -> Result<Option<(mime_tree::MessageStructure, Vec<u8>)>> {
        PgStore::blob_structure(self, blob).await
    }
    async fn thread_emails(
        &self,
        account: AccountId,
        threads: &[i64],
    ) -> Result<Vec<(i64, Vec<BlobId>)>> {
        PgStore::thread_emails(self, account, threads).await
    }
    async fn create_web_session(&self, session: &WebSession) -> Result<()> {
        PgStore::create_web_session(self, session).await
    }
    async fn web_session(&self, id_hash: &str, now: i64) -> Result<Option<WebSession>> {
        PgStore::web_session(self, id_hash, now).await
    }
    async fn delete_web_session(&self, id_hash: &str) -> Result<()> {
        PgStore::delete_web_session(self, id_hash).await
    }
    async fn web_settings(&self, account: AccountId) -> Result<WebSettings> {
        PgStore::web_settings(self, account).await
    }
    async fn set_web_settings(&self, account: AccountId, settings: &WebSettings) -> Result<()> {
        PgStore::set_web_settings(self, account, settings).await
    }
    async fn account_records(
        &self,
        account: AccountId,
        kind: &str,
    ) -> Result<Vec<crate::AccountRecord>> {
        PgStore::account_records(self, account, kind).await
    }
    async fn put_account_record(
        &self,
        account: AccountId,
        kind: &str,
        id: Option<&str>,
        body: Option<&str>,
    ) -> Result<(String, u64)> {
        PgStore::put_account_record(self, account, kind, id, body).await
    }

    fn message_writer(&self) -> Box<dyn MessageWriter> {
        Box::new(crate::space::Watched {
            inner: Box::new(message::PgMessageWriter::new(self.clone())),
            space: Arc::clone(&self.inner.space),
        })
    }

    fn space(&self) -> &crate::DiskSpace {
        &self.inner.space
    }

    fn queue_signal(&self) -> Arc<tokio::sync::Notify> {
        self.inner.queue_signal.clone()
    }

    fn watch_mailbox(&self, mailbox: MailboxId) -> tokio::sync::watch::Receiver<u64> {
        self.inner.watchers.subscribe(mailbox)
    }

    fn pin_view(&self, mailbox: MailboxId, modseq: u64) -> crate::ViewPin {
        self.inner.pins.pin(mailbox, modseq)
    }

    async fn lock_maildrop(&self, account: AccountId) -> Result<Option<crate::MaildropLock>> {
        self.inner.maildrops.take(account).await
    }

    fn penalty_book(&self) -> Option<Arc<dyn crate::PenaltyBook>> {
        Some(self.penalties())
    }
}
