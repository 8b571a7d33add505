//! The mail store: everything Sluice keeps on disk.
//!
//! The [`Store`] trait is what the protocol servers (SMTP, POP3, IMAP,
//! webmail) build on; [`SqliteStore`] is the embedded default behind it.
//! A message delivered to N local recipients is written once as a blob and
//! referenced N times ([single-copy storage](Store::message_writer)); the
//! header fields clients list and search are indexed columns and the text is
//! in a full-text index, both filled once at delivery.
#![forbid(unsafe_code)]

mod api_token;
mod auth;
mod chunk_codec;
pub use chunk_codec::decode_chunk;
mod clock;
mod dictionary;
mod directory;
mod error;
mod identity;
pub mod ids;
mod index;
mod intake;
mod keyword;
mod login_gate;
mod mailbox_names;
mod model;
mod names;
mod notify;
mod owner;
mod password;
mod penalties;
mod pins;
mod postgres;
mod quota;
mod segment;
mod space;
mod spam_training;
mod sqlite;
mod text_sections;
mod thread;
mod watch;
mod web_settings;

pub use api_token::{
    api_tokens, check_api_token, create_api_token, revoke_api_token, ApiToken, API_TOKEN_KIND,
    MAX_NAME as MAX_TOKEN_NAME,
};
pub use auth::{decode_plain, AuthFailure, Authenticator, PlainError, ACCOUNT_ALERT};
pub use directory::{normalize_address, AccountEntry, Directory, Resolution, SieveSource};
pub use error::{Result, StoreError};
pub use identity::{identity_record_id, IDENTITY_KIND};
pub use index::IndexedHeaders;
pub use login_gate::{LoginGate, LIMITED_AFTER, LIMITED_CONNECTIONS};
pub use model::{
    AccountBlob, AccountChanges, AccountEmail, AccountId, AccountRecord, AliasEntry, BlobId,
    Changes, Delivery, DeliveryNotice, DeliveryReceipt, DkimKey, FlagChange, MailboxId,
    MailboxInfo, MailboxModseqs, MailboxStatus, MessageData, MessageEntry, QueueOutcome,
    QueuedRecipient, Quota, RecipientDsn, ScriptOwner, SearchKey, SieveScriptInfo, SpamModel,
    SpamTraining, Uid, Upload, WebSession, WebSettings, FLAG_ANSWERED, FLAG_DELETED, FLAG_DRAFT,
    FLAG_FLAGGED, FLAG_SEEN, NOTIFY_DELAY, NOTIFY_FAILURE, NOTIFY_NEVER, NOTIFY_SUCCESS,
};
pub use password::{hash_password, verify_password};
pub use penalties::{
    MemoryPenalties, PenaltyBook, PenaltyKey, Schedule, Turn, MAX_PENALTY, MAX_WAIT, PENALTY_WINDOW,
};
pub use pins::{ViewPin, ViewPins};
pub use space::{DiskSpace, DEFAULT_MIN_FREE};

/// A maildrop lock from [`Store::lock_maildrop`]: released when dropped.
#[derive(Default)]
pub struct MaildropLock {
    _held: Option<Box<dyn Send + Sync>>,
}

impl MaildropLock {
    /// A lock that lasts as long as `held`, whose drop releases it.
    pub(crate) fn holding(held: impl Send + Sync + 'static) -> MaildropLock {
        MaildropLock {
            _held: Some(Box::new(held)),
        }
    }
}
pub use postgres::{CopyStats, PgOptions, PgStore, PgTls};
pub use quota::parse_quota_limit;
pub use sqlite::{
    backup_database, disk_stats, load_dictionaries, restore_database, BackupStats, DiskStats,
    SqliteOptions, SqliteStore, WriterStats,
};
pub use watch::DirectoryWatch;

use async_trait::async_trait;

/// Size of one stored piece of a message blob. Readers get a message in
/// pieces of this size, so a 50 MB message never sits whole in memory.
pub const CHUNK_SIZE: usize = 128 * 1024;

/// How much of the start of a message is kept in memory while it is written,
/// to fill the header and full-text indexes at delivery. Text beyond this
/// window is stored but not full-text indexed. It is per connection in the
/// data stage, so it is kept small: mail text sits at the front, and large
/// mails are large because of attachments.
pub const INDEX_WINDOW: usize = 256 * 1024;

/// The storage interface every Sluice server uses.
///
/// Directory edits (domains, accounts, aliases) bump a serial number that
/// running servers poll ([`DirectoryWatch`]), so the command line can change
/// users while a server runs on the same data.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Loads a snapshot of domains, accounts and aliases.
    async fn load_directory(&self) -> Result<Directory>;
    /// The directory's change counter: it grows with every directory edit.
    async fn directory_serial(&self) -> Result<i64>;

    /// Adds a local domain. Names are stored lower-case.
    async fn add_domain(&self, name: &str) -> Result<()>;
    /// Removes a local domain that has no accounts left.
    async fn remove_domain(&self, name: &str) -> Result<()>;
    /// Lists local domains in name order.
    async fn list_domains(&self) -> Result<Vec<String>>;

    /// Creates an account (with INBOX and the special-use mailboxes) under
    /// an existing local domain.
    async fn add_account(&self, address: &str, password: &str) -> Result<AccountId>;
    /// Removes an account, its mailboxes and its references to blobs.
    async fn remove_account(&self, address: &str) -> Result<()>;
    /// Replaces an account's password.
    async fn set_password(&self, address: &str, password: &str) -> Result<()>;
    /// Lists account addresses in order.
    async fn list_accounts(&self) -> Result<Vec<String>>;

    /// Adds alias targets (local or remote addresses) for an address.
    async fn add_alias(&self, address: &str, targets: &[String]) -> Result<()>;
    /// Removes one target of an alias, or the whole alias with `None`.
    async fn remove_alias(&self, address: &str, target: Option<&str>) -> Result<()>;
    /// Lists aliases and their targets.
    async fn list_aliases(&self) -> Result<Vec<AliasEntry>>;

    /// The DKIM keys of every domain, by domain then selector.
    async fn dkim_keys(&self) -> Result<Vec<DkimKey>>;
    /// Adds a DKIM key. `NotFound` if its domain is not local, `Exists` if
    /// the domain already has that selector.
    async fn add_dkim_key(&self, key: DkimKey) -> Result<()>;
    /// Makes a key sign, or stop signing. A key that starts signing takes
    /// over from the domain's other keys of the same algorithm, which stop
    /// (they stay published). `NotFound` for an unknown key.
    async fn set_dkim_signing(&self, domain: &str, selector: &str, signing: bool) -> Result<()>;
    /// Removes a DKIM key. `NotFound` for an unknown key.
    async fn remove_dkim_key(&self, domain: &str, selector: &str) -> Result<()>;

    /// The Sieve scripts of an account, or the global ones, by name.
    async fn sieve_scripts(&self, owner: ScriptOwner) -> Result<Vec<SieveScriptInfo>>;
    /// A Sieve script's source, `None` if there is no such script.
    async fn sieve_script(&self, owner: ScriptOwner, name: &str) -> Result<Option<String>>;
    /// Stores a Sieve script (replacing one of the same name). The caller
    /// has compiled it: the store keeps text. `Invalid` for a bad name.
    async fn put_sieve_script(&self, owner: ScriptOwner, name: &str, source: &str) -> Result<()>;
    /// Makes `name` the account's active script (the one delivery runs),
    /// or none with `None`. `NotFound` for an unknown script.
    async fn activate_sieve_script(&self, account: AccountId, name: Option<&str>) -> Result<()>;
    /// Deletes a script: `NotFound` if unknown, `InUse` if active.
    async fn delete_sieve_script(&self, owner: ScriptOwner, name: &str) -> Result<()>;
    /// Renames a script: `NotFound`, or `Exists` if `to` is taken.
    async fn rename_sieve_script(&self, owner: ScriptOwner, from: &str, to: &str) -> Result<()>;
    /// Whether the Sieve memory of an account holds `key` unexpired (a
    /// vacation answer already sent, a message id `duplicate` has seen).
    async fn sieve_memory_holds(&self, account: AccountId, key: &str) -> Result<bool>;
    /// Puts keys in an account's Sieve memory until their expiry
    /// (seconds since the Unix epoch).
    async fn remember_in_sieve_memory(
        &self,
        account: AccountId,
        keys: Vec<(String, i64)>,
    ) -> Result<()>;

    /// Sets an account's own spam threshold, or back to the site's with
    /// `None`. `NotFound` for an unknown account.
    async fn set_spam_threshold(&self, address: &str, threshold: Option<f32>) -> Result<()>;
    /// Messages moved into or out of Junk that wait to train their
    /// account's spam model (the moves queue them), oldest first.
    async fn spam_training_batch(&self, limit: usize) -> Result<Vec<SpamTraining>>;
    /// Trains a spam model (an account's, or the global one with `None`)
    /// with a message's tokens as spam or ham. With a blob, a message
    /// trained as the other class before is untrained first, and one
    /// already trained as this class counts nothing; returns whether the
    /// model changed. `done` is the queue item this settles.
    async fn train_spam(
        &self,
        account: Option<AccountId>,
        blob: Option<BlobId>,
        tokens: Vec<String>,
        spam: bool,
        done: Option<i64>,
    ) -> Result<bool>;
    /// Drops a queued training item (its message is gone).
    async fn drop_spam_training(&self, id: i64) -> Result<()>;
    /// A spam model's totals and its counts of these tokens.
    async fn spam_model(
        &self,
        account: Option<AccountId>,
        tokens: Vec<String>,
    ) -> Result<SpamModel>;
    /// How many tokens a spam model holds.
    async fn spam_token_count(&self, account: Option<AccountId>) -> Result<u64>;
    /// Every token of a spam model: (token, spam, ham, last trained), for
    /// pruning.
    async fn spam_token_rows(
        &self,
        account: Option<AccountId>,
    ) -> Result<Vec<(String, u32, u32, i64)>>;
    /// Removes tokens from a spam model (pruning).
    async fn forget_spam_tokens(
        &self,
        account: Option<AccountId>,
        tokens: Vec<String>,
    ) -> Result<()>;

    /// Starts writing a new message. Bytes are streamed in with
    /// [`MessageWriter::write`]; nothing is visible until
    /// [`MessageWriter::deliver`] returns, and it returns only once the
    /// delivery is durable.
    fn message_writer(&self) -> Box<dyn MessageWriter>;

    /// The free-space state of the disk this store writes mail to: the
    /// servers check it before taking a message, and the store's message
    /// writers report to it when a write finds no space.
    fn space(&self) -> &DiskSpace;

    /// Looks up a mailbox of an account by name. `INBOX` is
    /// case-insensitive, also as the first level of a name (`inbox/x` is
    /// `INBOX/x`); other names are not (RFC 3501 §5.1).
    async fn mailbox(&self, account: AccountId, name: &str) -> Result<Option<MailboxInfo>>;
    /// Lists the messages of a mailbox in UID order.
    async fn list_messages(&self, mailbox: MailboxId) -> Result<Vec<MessageEntry>>;
    /// One page of a mailbox, newest first (internal date, then UID, both
    /// descending): `take` messages after the first `skip`, with what
    /// [`Store::message_data`] gives for each, read in one go.
    async fn list_newest(
        &self,
        mailbox: MailboxId,
        skip: usize,
        take: usize,
    ) -> Result<Vec<MessageData>>;
    /// Reads piece `seq` (0-based) of a blob; `None` past the end, and for
    /// a blob no entry or queue row references any more.
    async fn read_chunk(&self, blob: BlobId, seq: u32) -> Result<Option<Vec<u8>>>;
    /// The indexed header fields of a blob, read without opening its body;
    /// `None` for a blob nothing references any more.
    async fn headers(&self, blob: BlobId) -> Result<Option<IndexedHeaders>>;
    /// Removes messages from a mailbox in one transaction, leaving
    /// tombstones for [`Store::changes_since`]. Blobs whose last reference
    /// goes are released: unreadable at once, deleted with their index
    /// entries by a background sweep soon after, so the expunge does not
    /// wait for that.
    async fn expunge(&self, mailbox: MailboxId, uids: &[Uid]) -> Result<()>;
    /// Recipients waiting in the outbound queue, oldest first.
    async fn queued(&self) -> Result<Vec<QueuedRecipient>>;
    /// How many recipients wait in the outbound queue, and when the
    /// oldest was queued (seconds since the Unix epoch), without reading
    /// them all (for metrics).
    async fn queue_summary(&self) -> Result<(u64, Option<i64>)>;
    /// Leases up to `limit` due queue rows (`next_attempt <= now`, no
    /// lease running) for `lease_secs`, and returns them. A leased row is
    /// not handed out again until its lease ends or its outcome is
    /// recorded, so one recipient is never sent twice at once; a lease
    /// left by a crash runs out and the row is tried again.
    async fn claim_queue(
        &self,
        now: i64,
        lease_secs: i64,
        limit: usize,
    ) -> Result<Vec<QueuedRecipient>>;
    /// Queues a stored message (one already filed somewhere, e.g. a sent
    /// draft) for remote recipients, durably; the queue rows hold their
    /// own reference on the blob. `NotFound` for a blob that is gone.
    async fn queue_message(&self, blob: BlobId, sender: &str, recipients: &[String]) -> Result<()>;
    /// Notes, durably, that the senders of these queue rows were warned of
    /// their delay (a delay warning is sent once per recipient).
    async fn mark_queue_warned(&self, ids: Vec<i64>) -> Result<()>;
    /// Ends every lease: what a sender starting up calls, since no attempt
    /// of an earlier run can still be in flight. A store several nodes
    /// share (PostgreSQL) ends none, since another node's attempts may be;
    /// leases left by a crash run out by themselves there.
    async fn release_queue_leases(&self) -> Result<usize>;
    /// Records attempt outcomes, durably, before returning.
    async fn record_queue_outcomes(&self, outcomes: Vec<(i64, QueueOutcome)>) -> Result<()>;
    /// Makes a queue row (every row, for `None`) due at `now`; returns how
    /// many changed. `NotFound` for an unknown id.
    async fn retry_queue(&self, id: Option<i64>, now: i64) -> Result<usize>;
    /// Removes a queue row without sending it. `NotFound` for an unknown id.
    async fn remove_queued(&self, id: i64) -> Result<()>;
    /// Notified when a delivery in this process queues remote recipients.
    fn queue_signal(&self) -> std::sync::Arc<tokio::sync::Notify>;

    /// Changes the flags and keywords of messages in one transaction. Only
    /// messages whose flags or keywords really change get a new modification
    /// sequence (RFC 7162 §3); they are returned as they are now. With
    /// `unchanged_since` (RFC 7162 UNCHANGEDSINCE), messages whose modseq is
    /// higher are left alone.
    ///
    /// `keywords` are added (`Add`), removed (`Remove`), or with `Replace`
    /// become the message's keywords while `flags` become its system
    /// flags. Keywords compare ignoring ASCII case and keep the spelling
    /// they were first set with; each must be an IMAP atom (`Invalid`
    /// otherwise). The messages not returned were either already as asked
    /// or, with `unchanged_since`, modified after it: a server answering
    /// `MODIFIED` (RFC 7162 §3.2) takes the UIDs asked for whose modseq is
    /// now above `unchanged_since` and that are not in the result.
    async fn update_flags(
        &self,
        mailbox: MailboxId,
        uids: &[Uid],
        change: FlagChange,
        flags: u32,
        keywords: &[String],
        unchanged_since: Option<u64>,
    ) -> Result<Vec<MessageEntry>>;
    /// Copies messages into another mailbox without copying their text: the
    /// copies reference the same blobs. Returns `(source uid, new uid)` in
    /// UID order (RFC 4315 COPYUID).
    async fn copy_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>>;
    /// Removes every message flagged `\Deleted` in one statement and returns
    /// their UIDs (IMAP EXPUNGE), leaving tombstones. With `uids`, only
    /// those among them (RFC 4315 UID EXPUNGE).
    async fn expunge_deleted(&self, mailbox: MailboxId, uids: Option<&[Uid]>) -> Result<Vec<Uid>>;
    /// Moves messages to another mailbox in one transaction (RFC 6851):
    /// the copies reference the same blobs, the originals are expunged.
    /// Returns `(source uid, new uid)` in UID order.
    async fn move_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>>;

    /// The mailboxes of an account, in name order.
    async fn list_mailboxes(&self, account: AccountId) -> Result<Vec<MailboxInfo>>;
    /// Creates a mailbox (a fresh UIDVALIDITY). `Exists` if the name is taken
    /// (`INBOX` always is, in any case).
    ///
    /// Names are stored as given, except that a first level spelled `inbox`
    /// in any case is stored as `INBOX`; `/` separates levels. Empty names,
    /// names with control characters (CR, LF, NUL, ...), a leading or
    /// trailing `/` or an empty level (`a//b`), and names over 1000 bytes
    /// are `Invalid`. Missing parents are created too (RFC 3501 §6.3.3).
    /// The UIDVALIDITY is greater than any the account ever had, so a
    /// mailbox deleted and created again never reuses a UIDVALIDITY+UID
    /// pair, and a mailbox id is never reused. `special_use` is one of the
    /// RFC 6154 / RFC 8457 uses (`\Sent`, `\Trash`, ..., any case), else
    /// `Invalid`.
    async fn create_mailbox(
        &self,
        account: AccountId,
        name: &str,
        special_use: Option<&str>,
    ) -> Result<MailboxInfo>;
    /// Deletes a mailbox and its messages. INBOX cannot be deleted, nor a
    /// mailbox with children (`Invalid`, as Dovecot does). Its tombstones
    /// go with it: afterwards the mailbox's id answers `NotFound` (a
    /// session that had it selected should end, as after a BYE), and its
    /// watchers are woken to find that out.
    async fn delete_mailbox(&self, account: AccountId, name: &str) -> Result<()>;
    /// Renames a mailbox and its children (`parent/child` names follow,
    /// with `/` as the hierarchy separator). Renaming INBOX moves its
    /// messages into a new mailbox and leaves INBOX empty (RFC 3501 §6.3.5).
    ///
    /// A renamed mailbox keeps its id, UIDVALIDITY and UIDs. The new name
    /// follows the rules of [`Store::create_mailbox`]; missing parents are
    /// created. `NotFound` for an unknown `from`, `Exists` when `to` (or a
    /// name the children would get) is taken, `Invalid` for renaming a
    /// mailbox below itself. INBOX's own children stay where they are; the
    /// new mailbox for INBOX's messages gets fresh UIDs from 1.
    async fn rename_mailbox(&self, account: AccountId, from: &str, to: &str) -> Result<()>;
    /// Subscribes or unsubscribes a mailbox (`NotFound` if it does not
    /// exist, unless it is a lost subscription being dropped). Mailboxes
    /// made by [`Store::create_mailbox`] start unsubscribed (RFC 3501
    /// §6.3.6), those every account starts with subscribed. A subscribed
    /// mailbox that is deleted leaves its subscription behind
    /// ([`Store::lost_subscriptions`]); a mailbox created again under its
    /// name is subscribed again.
    async fn set_subscribed(&self, account: AccountId, name: &str, subscribed: bool) -> Result<()>;
    /// Subscribed names whose mailboxes no longer exist, in name order.
    async fn lost_subscriptions(&self, account: AccountId) -> Result<Vec<String>>;
    /// For each mailbox, the mailbox of the same account with the given
    /// special use (`\Junk` for quarantined mail), or the mailbox itself
    /// when the account has none (its user deleted it).
    async fn special_use_of(
        &self,
        mailboxes: &[MailboxId],
        special_use: &str,
    ) -> Result<Vec<MailboxId>>;
    /// Counters for STATUS and SELECT, read in one snapshot.
    async fn mailbox_status(&self, mailbox: MailboxId) -> Result<MailboxStatus>;
    /// Messages added or changed and UIDs expunged after `modseq`, all read
    /// in one snapshot with the HIGHESTMODSEQ they bring the caller to.
    /// `changes_since(m, 0)` lists every message. Expunged UIDs may
    /// include messages added and expunged after `modseq` that the caller
    /// never saw. `NotFound` once the mailbox is deleted.
    async fn changes_since(&self, mailbox: MailboxId, modseq: u64) -> Result<Changes>;
    /// Message data for FETCH, in UID order; UIDs not in the mailbox are
    /// skipped. An expunged message whose blob a view's pin still keeps
    /// ([`Store::pin_view`]) is answered as it was when expunged.
    async fn message_data(&self, mailbox: MailboxId, uids: &[Uid]) -> Result<Vec<MessageData>>;
    /// The UIDs matching a search, ascending. The whole key tree is one
    /// query; no key reads a message's text. Matching rules:
    ///
    /// - `From`, `To`, `Cc`, `Subject` match substrings of the indexed
    ///   columns ([`IndexedHeaders`]: the decoded subject; addresses as
    ///   `Name <addr>` items joined with `, `), case-insensitively after
    ///   simple Unicode lowercasing of each character. An empty string
    ///   matches every message.
    /// - `Bcc` and `Header(name, value)` look in the raw top-level header
    ///   block (its first [`INDEX_WINDOW`] bytes): a field whose name
    ///   equals `name` ignoring ASCII case, whose value, unfolded (CRLF
    ///   before white space removed) and trimmed, contains `value` with the
    ///   same case folding. Encoded words (RFC 2047) are matched as
    ///   written, not decoded. `Header(name, "")` matches messages having
    ///   the field (RFC 3501 §6.4.4); `Bcc("")` matches every message.
    ///   Messages stored before the header block was kept never match.
    /// - `Body` and `Text` are substring matches (RFC 3501 §6.4.4),
    ///   answered from the full-text index (sqlite/text_match.rs): the
    ///   string, trimmed, is in the decoded text parts (`Body`; their first
    ///   [`INDEX_WINDOW`] bytes), or in those, the subject or the header
    ///   (`Text`: decoded From/To/Cc, then the raw header block, every
    ///   field), after folding case and diacritics one character at a
    ///   time, with every run of white space counted as one space. Text in
    ///   scripts written without spaces (Chinese, Japanese, Thai, Lao,
    ///   Khmer, Myanmar, and Korean for its particles) is indexed one
    ///   character (grapheme cluster) at a time, and white space beside
    ///   those characters does not count: `日本語` finds
    ///   `…日本語のテキスト`. Messages indexed before the header block went
    ///   into the index have only the decoded From/To/Cc there. An empty
    ///   string matches every message.
    /// - Dates are days since 1970-01-01. `Before`/`On`/`Since` test the
    ///   internal date's UTC day; `SentBefore`/`SentOn`/`SentSince` the day
    ///   the `Date:` field names as written, whatever its time and zone
    ///   (RFC 3501 §6.4.4; messages stored before this rule have the UTC
    ///   day), or the internal date when the message has no `Date:` field
    ///   that parses.
    /// - `Keyword`/`Unkeyword` test for a whole keyword, ignoring ASCII
    ///   case; a string that cannot be a keyword (not an IMAP atom) is set
    ///   on no message.
    /// - `Larger`/`Smaller` are strict; `Uids` ranges are inclusive, in
    ///   either order; `FlagsSet(0)` and `FlagsUnset(0)` match everything.
    ///
    /// A tree nested deeper than 64 levels is refused (`Invalid`).
    async fn search(&self, mailbox: MailboxId, key: &SearchKey) -> Result<Vec<Uid>>;
    /// An account's storage use and limit.
    async fn quota(&self, account: AccountId) -> Result<Quota>;
    /// Sets an account's storage limit (`None` for unlimited).
    async fn set_quota(&self, address: &str, limit_bytes: Option<u64>) -> Result<()>;
    /// The keywords set on any message of the mailbox, each once (first
    /// spelling met), sorted ignoring case: for the FLAGS and
    /// PERMANENTFLAGS responses (RFC 3501 §7.2.6).
    async fn mailbox_keywords(&self, mailbox: MailboxId) -> Result<Vec<String>>;
    /// The UIDs of a mailbox as runs of consecutive UIDs, `(first, count)`,
    /// ascending: what a session keeps of a mailbox it selects, without
    /// reading every message row into memory.
    async fn uid_runs(&self, mailbox: MailboxId) -> Result<Vec<(Uid, u32)>>;
    /// The lowest UID without `\Seen` (SELECT's UNSEEN).
    async fn first_unseen(&self, mailbox: MailboxId) -> Result<Option<Uid>>;
    /// Takes the mailbox's new messages as recent for the caller (IMAP
    /// `\Recent`, RFC 3501 §2.3.2): returns `[from, to)`, the UIDs that
    /// arrived since the last claim, and no later claim returns them
    /// again, so exactly one session sees a message as recent.
    async fn claim_recent(&self, mailbox: MailboxId) -> Result<(Uid, Uid)>;
    /// A receiver that changes whenever a commit touches the mailbox (new
    /// message, flags, copy or move into or out of it, expunge, rename,
    /// deletion), in this process: IDLE waits on it. It is bumped only
    /// once the change is durable, so what it announces is readable.
    /// Changes made by another process (the command line) do not wake it:
    /// IDLE should still look now and then.
    fn watch_mailbox(&self, mailbox: MailboxId) -> tokio::sync::watch::Receiver<u64>;
    /// Pins a view of `mailbox` that has announced every expunge up to
    /// `modseq`: messages expunged after that stay readable through
    /// [`Store::message_data`] and [`Store::read_chunk`] (their blobs are
    /// not swept) until the pin advances past them or is dropped. A session
    /// pins before it reads the UIDs of its view.
    fn pin_view(&self, mailbox: MailboxId, modseq: u64) -> ViewPin;
    /// Takes the POP3 maildrop lock of `account` (RFC 1939 §8) for as long
    /// as the returned guard lives, across every node sharing the store;
    /// `None` when a session elsewhere holds it. Sessions of one process
    /// exclude each other before they ask (the POP3 server's own locks),
    /// so a store that is one process's alone, as SQLite's is, has nothing
    /// more to do.
    async fn lock_maildrop(&self, account: AccountId) -> Result<Option<MaildropLock>> {
        let _ = account;
        Ok(Some(MaildropLock::default()))
    }
    /// The book of failed logins every node sharing the store counts in
    /// ([`Authenticator::with_book`]), so guesses spread over the nodes
    /// are held to one schedule; `None` when the store is one process's
    /// alone, as SQLite's is, and the book in memory does.
    fn penalty_book(&self) -> Option<std::sync::Arc<dyn PenaltyBook>> {
        None
    }

    /// The blob `blob` if `account` may read it: an upload of its own that
    /// has not expired ([`Delivery::upload`]), or a message in one of its
    /// mailboxes; `None` otherwise (another account's blob, or one gone).
    async fn account_blob(&self, account: AccountId, blob: BlobId) -> Result<Option<AccountBlob>>;

    /// The account's modification sequence: every change to its
    /// mailboxes or their messages takes the next one, and the mailboxes'
    /// HIGHESTMODSEQs and messages' MODSEQs are numbers of this sequence.
    /// JMAP's state strings are made of it. `NotFound` for an unknown
    /// account.
    async fn account_modseq(&self, account: AccountId) -> Result<u64>;
    /// What changed in an account after `modseq`, read in one snapshot
    /// (see [`AccountChanges`]).
    async fn account_changes(&self, account: AccountId, modseq: u64) -> Result<AccountChanges>;
    /// The emails of an account, each a stored message with its entries
    /// in the account's mailboxes, by blob id: all of them, or those of
    /// `blobs` the account has. A message is filed in a thread once, when
    /// it first comes to the account: the thread its header's root
    /// message id names (the first of `References:`, else of
    /// `In-Reply-To:`, else its own `Message-ID:`), or its own; messages
    /// stored before the store kept threads are each in their own.
    async fn account_emails(
        &self,
        account: AccountId,
        blobs: Option<&[BlobId]>,
    ) -> Result<Vec<AccountEmail>>;
    /// The MIME structure and top-level header block of a stored blob
    /// (what delivery computed, or worked out from its chunks for mail
    /// stored before that), whatever references it; `None` for a blob
    /// that is not complete or is gone. Callers check the account may
    /// read it ([`Store::account_blob`]).
    async fn blob_structure(
        &self,
        blob: BlobId,
    ) -> Result<Option<(mime_tree::MessageStructure, Vec<u8>)>>;
    /// The emails of each thread asked for that the account has, oldest
    /// first (internal date, then blob id).
    async fn thread_emails(
        &self,
        account: AccountId,
        threads: &[i64],
    ) -> Result<Vec<(i64, Vec<BlobId>)>>;

    /// Records a new webmail session, and forgets sessions that expired.
    /// `Exists` if `id_hash` is already taken.
    async fn create_web_session(&self, session: &WebSession) -> Result<()>;
    /// The session whose token hashes to `id_hash`, if it exists, has not
    /// expired at `now` (seconds since the Unix epoch) and its account
    /// still exists.
    async fn web_session(&self, id_hash: &str, now: i64) -> Result<Option<WebSession>>;
    /// Ends a session (logout); ending an unknown one is not an error.
    async fn delete_web_session(&self, id_hash: &str) -> Result<()>;
    /// An account's webmail settings (the defaults if never saved).
    async fn web_settings(&self, account: AccountId) -> Result<WebSettings>;
    /// Saves an account's webmail settings. `Invalid` for a page size of
    /// 0 or above 500; `NotFound` for an unknown account.
    async fn set_web_settings(&self, account: AccountId, settings: &WebSettings) -> Result<()>;

    /// Every record of `kind` the account has, tombstones included, in
    /// no particular order.
    async fn account_records(&self, account: AccountId, kind: &str) -> Result<Vec<AccountRecord>>;
    /// Writes one record of `kind`: `body` `None` destroys it (leaving a
    /// tombstone). `id` `None` creates a record under a new id (the
    /// change number it is written at, in decimal). Answers the id and
    /// the change number. `NotFound` for an unknown account.
    async fn put_account_record(
        &self,
        account: AccountId,
        kind: &str,
        id: Option<&str>,
        body: Option<&str>,
    ) -> Result<(String, u64)>;
}

/// A message being written into the store, piece by piece.
#[async_trait]
pub trait MessageWriter: Send {
    /// Appends bytes to the message.
    async fn write(&mut self, data: &[u8]) -> Result<()>;
    /// Bytes written so far.
    fn size(&self) -> u64;
    /// Makes the message visible to its recipients, durably: one blob, one
    /// mailbox entry per local recipient, one queue entry per remote one.
    async fn deliver(self: Box<Self>, delivery: Delivery) -> Result<DeliveryReceipt>;
    /// Throws the message away.
    async fn abort(self: Box<Self>);
}
