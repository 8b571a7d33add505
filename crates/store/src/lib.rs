//! The mail store: everything Sluice keeps on disk.
//!
//! The [`Store`] trait is what the protocol servers (SMTP, POP3, IMAP,
//! webmail) build on; [`SqliteStore`] is the embedded default behind it.
//! A message delivered to N local recipients is written once as a blob and
//! referenced N times ([single-copy storage](Store::message_writer)); the
//! header fields clients list and search are indexed columns and the text is
//! in a full-text index, both filled once at delivery.
#![forbid(unsafe_code)]

mod auth;
mod directory;
mod error;
mod index;
mod keyword;
mod model;
mod password;
mod sqlite;
mod watch;

pub use auth::{AuthFailure, Authenticator};
pub use directory::{normalize_address, Directory, Resolution};
pub use error::{Result, StoreError};
pub use index::IndexedHeaders;
pub use model::{
    AccountId, AliasEntry, BlobId, Changes, Delivery, DeliveryReceipt, FlagChange, MailboxId,
    MailboxInfo, MailboxStatus, MessageData, MessageEntry, QueuedRecipient, Quota, SearchKey, Uid,
    FLAG_ANSWERED, FLAG_DELETED, FLAG_DRAFT, FLAG_FLAGGED, FLAG_SEEN,
};
pub use password::{hash_password, verify_password};
pub use sqlite::{SqliteOptions, SqliteStore, WriterStats};
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

    /// Starts writing a new message. Bytes are streamed in with
    /// [`MessageWriter::write`]; nothing is visible until
    /// [`MessageWriter::deliver`] returns, and it returns only once the
    /// delivery is durable.
    fn message_writer(&self) -> Box<dyn MessageWriter>;

    /// Looks up a mailbox of an account by name (`INBOX` is case-insensitive).
    async fn mailbox(&self, account: AccountId, name: &str) -> Result<Option<MailboxInfo>>;
    /// Lists the messages of a mailbox in UID order.
    async fn list_messages(&self, mailbox: MailboxId) -> Result<Vec<MessageEntry>>;
    /// Reads piece `seq` (0-based) of a blob; `None` past the end.
    async fn read_chunk(&self, blob: BlobId, seq: u32) -> Result<Option<Vec<u8>>>;
    /// The indexed header fields of a blob, read without opening its body.
    async fn headers(&self, blob: BlobId) -> Result<Option<IndexedHeaders>>;
    /// Removes messages from a mailbox in one transaction. Blobs whose last
    /// reference goes are deleted with their index entries.
    async fn expunge(&self, mailbox: MailboxId, uids: &[Uid]) -> Result<()>;
    /// Recipients waiting in the outbound queue.
    async fn queued(&self) -> Result<Vec<QueuedRecipient>>;

    /// Changes the flags and keywords of messages in one transaction. Only
    /// messages whose flags or keywords really change get a new modification
    /// sequence (RFC 7162 §3); they are returned as they are now. With
    /// `unchanged_since` (RFC 7162 UNCHANGEDSINCE), messages whose modseq is
    /// higher are left alone.
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
    /// their UIDs (IMAP EXPUNGE). With `uids`, only those (UID EXPUNGE).
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
    /// Creates a mailbox (a fresh UIDVALIDITY). `Exists` if the name is taken.
    async fn create_mailbox(
        &self,
        account: AccountId,
        name: &str,
        special_use: Option<&str>,
    ) -> Result<MailboxInfo>;
    /// Deletes a mailbox and its messages. INBOX cannot be deleted, nor a
    /// mailbox with children (`Invalid`, as Dovecot does).
    async fn delete_mailbox(&self, account: AccountId, name: &str) -> Result<()>;
    /// Renames a mailbox and its children (`parent/child` names follow,
    /// with `/` as the hierarchy separator). Renaming INBOX moves its
    /// messages into a new mailbox and leaves INBOX empty (RFC 3501 §6.3.5).
    async fn rename_mailbox(&self, account: AccountId, from: &str, to: &str) -> Result<()>;
    /// Subscribes or unsubscribes a mailbox.
    async fn set_subscribed(&self, account: AccountId, name: &str, subscribed: bool) -> Result<()>;
    /// Counters for STATUS and SELECT.
    async fn mailbox_status(&self, mailbox: MailboxId) -> Result<MailboxStatus>;
    /// Messages added or changed and UIDs expunged after `modseq`.
    async fn changes_since(&self, mailbox: MailboxId, modseq: u64) -> Result<Changes>;
    /// Message data for FETCH, in UID order; UIDs not in the mailbox are
    /// skipped.
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
    /// - `Body` and `Text` go to the full-text index and match whole words
    ///   (every word of the query, as a phrase when there are several),
    ///   after Unicode case and diacritic folding: exact for whole-word
    ///   queries. Words are split as the index splits them (runs of letters
    ///   and digits), so `zebra-report` is the phrase `zebra report` and
    ///   `zeb` does not match `zebra`. `Body` searches the decoded text
    ///   parts (their first [`INDEX_WINDOW`] bytes); `Text` the subject, the
    ///   From/To/Cc addresses or the body (a phrase lies within one of
    ///   them). A string without any word matches every message.
    /// - Dates are days since 1970-01-01 in UTC. `Before`/`On`/`Since` test
    ///   the internal date; `SentBefore`/`SentOn`/`SentSince` the `Date:`
    ///   field converted to UTC, or the internal date when the message has
    ///   no `Date:` field that parses.
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
    /// A receiver that changes whenever a commit touches the mailbox (new
    /// message, flags, expunge), in this process: IDLE waits on it.
    fn watch_mailbox(&self, mailbox: MailboxId) -> tokio::sync::watch::Receiver<u64>;
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
