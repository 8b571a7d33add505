//! Plain data types the store hands out.

/// Row id of an account.
pub type AccountId = i64;
/// Row id of a mailbox.
pub type MailboxId = i64;
/// Row id of a stored message blob.
pub type BlobId = i64;
/// IMAP/POP3 unique id of a message within its mailbox (RFC 3501 §2.3.1.1).
pub type Uid = u32;

/// `\Seen` (RFC 3501 §2.3.2).
pub const FLAG_SEEN: u32 = 1;
/// `\Answered`.
pub const FLAG_ANSWERED: u32 = 2;
/// `\Flagged`.
pub const FLAG_FLAGGED: u32 = 4;
/// `\Deleted`.
pub const FLAG_DELETED: u32 = 8;
/// `\Draft`.
pub const FLAG_DRAFT: u32 = 16;

/// A mailbox and its IMAP counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailboxInfo {
    /// Row id.
    pub id: MailboxId,
    /// Owner.
    pub account: AccountId,
    /// Name, `INBOX` for the inbox.
    pub name: String,
    /// RFC 3501 §2.3.1.1 UIDVALIDITY.
    pub uid_validity: u32,
    /// Next UID to be assigned.
    pub uid_next: Uid,
    /// RFC 7162 HIGHESTMODSEQ.
    pub highest_modseq: u64,
    /// RFC 6154 special use (`\\Sent`, `\\Trash`, ...).
    pub special_use: Option<String>,
    /// In the account's subscription list (RFC 3501 §6.3.6).
    pub subscribed: bool,
    /// Messages in the mailbox (a kept count: reading it costs nothing).
    pub messages: u32,
    /// Messages without `\\Seen` (kept likewise), for folder lists.
    pub unseen: u32,
}

/// Counters of a mailbox, for STATUS and SELECT (RFC 3501 §6.3.10).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MailboxStatus {
    /// Messages in the mailbox.
    pub messages: u32,
    /// Messages without `\\Seen`.
    pub unseen: u32,
    /// Messages with `\\Deleted`.
    pub deleted: u32,
    /// Sum of message sizes (RFC 8438 STATUS=SIZE).
    pub size: u64,
    /// Next UID to be assigned.
    pub uid_next: Uid,
    /// UIDVALIDITY.
    pub uid_validity: u32,
    /// HIGHESTMODSEQ.
    pub highest_modseq: u64,
    /// Messages no session has taken as recent yet (RFC 3501 §2.3.2).
    pub recent: u32,
    /// The lowest UID not yet taken as recent ([`crate::Store::claim_recent`]).
    pub recent_from: Uid,
}

/// What changed in a mailbox after a modification sequence: how a session
/// catches up with other sessions and with new mail (RFC 7162 §3.1.4).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Messages added or whose flags changed, in UID order, as they are now.
    pub changed: Vec<MessageEntry>,
    /// UIDs expunged, in UID order.
    pub expunged: Vec<Uid>,
    /// The mailbox's HIGHESTMODSEQ these changes bring the caller to.
    pub highest_modseq: u64,
    /// The mailbox's next UID.
    pub uid_next: Uid,
}

/// A message with what was computed from it at delivery, so list views and
/// BODYSTRUCTURE never open its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageData {
    /// Flags, size, dates.
    pub entry: MessageEntry,
    /// Indexed header fields.
    pub headers: crate::IndexedHeaders,
    /// MIME structure and envelope.
    pub structure: mime_tree::MessageStructure,
    /// The raw top-level header block, including the empty line that ends
    /// it (at most [`crate::INDEX_WINDOW`] bytes; longer headers are cut).
    pub header: Vec<u8>,
}

/// Storage quota of an account (RFC 9208 STORAGE, in octets, and MESSAGE).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quota {
    /// Octets used by all the account's messages.
    pub used_bytes: u64,
    /// Limit in octets, `None` for unlimited.
    pub limit_bytes: Option<u64>,
    /// Messages in all the account's mailboxes.
    pub messages: u64,
}

/// A search over one mailbox, the store's form of RFC 3501 §6.4.4 SEARCH
/// keys. Message sequence numbers are the session's business: it turns
/// them into UID sets before asking the store.
///
/// Text keys match as described on [`crate::Store::search`]. Dates are days
/// since 1970-01-01 (UTC), compared disregarding time, as the RFC asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchKey {
    /// Every message.
    All,
    /// All of these (an empty list matches every message).
    And(Vec<SearchKey>),
    /// Either.
    Or(Box<SearchKey>, Box<SearchKey>),
    /// Not this.
    Not(Box<SearchKey>),
    /// UIDs in these inclusive ranges.
    Uids(Vec<(Uid, Uid)>),
    /// All of these flag bits (`FLAG_*`) set.
    FlagsSet(u32),
    /// None of these flag bits set.
    FlagsUnset(u32),
    /// This keyword set (case-insensitive).
    Keyword(String),
    /// This keyword not set.
    Unkeyword(String),
    /// `From:` contains the string (case-insensitive substring).
    From(String),
    /// `To:` contains the string.
    To(String),
    /// `Cc:` contains the string.
    Cc(String),
    /// `Bcc:` contains the string.
    Bcc(String),
    /// `Subject:` contains the string.
    Subject(String),
    /// Header field (name case-insensitive) contains the string; an empty
    /// string matches every message that has the field.
    Header(String, String),
    /// The body text contains the word(s).
    Body(String),
    /// The header or body text contains the word(s).
    Text(String),
    /// `Date:` before this day.
    SentBefore(i64),
    /// `Date:` on this day.
    SentOn(i64),
    /// `Date:` on or after this day.
    SentSince(i64),
    /// Internal date before this day.
    Before(i64),
    /// Internal date on this day.
    On(i64),
    /// Internal date on or after this day.
    Since(i64),
    /// Larger than this many octets.
    Larger(u64),
    /// Smaller than this many octets.
    Smaller(u64),
    /// Modification sequence at least this (RFC 7162 MODSEQ).
    ModSeqAtLeast(u64),
}

/// One message in a mailbox, as listed without opening its blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageEntry {
    /// UID within the mailbox.
    pub uid: Uid,
    /// The blob holding the message text.
    pub blob: BlobId,
    /// Size in octets (lines end in CRLF, as sent on the wire).
    pub size: u64,
    /// Flag bits (`FLAG_*`).
    pub flags: u32,
    /// Internal date, seconds since the Unix epoch.
    pub internal_date: i64,
    /// Modification sequence of the last change.
    pub modseq: u64,
    /// Keywords (RFC 3501 §2.3.2 flag-keyword), as first written.
    pub keywords: Vec<String>,
}

/// Where a finished message goes.
#[derive(Debug, Clone, Default)]
pub struct Delivery {
    /// Envelope sender (empty for the null reverse-path).
    pub sender: String,
    /// Local mailboxes to file the message into (usually INBOXes).
    pub mailboxes: Vec<MailboxId>,
    /// Remote addresses to queue the message for.
    pub remote: Vec<String>,
    /// Internal date; `None` means now.
    pub internal_date: Option<i64>,
    /// Flag bits the new entries start with (IMAP APPEND; 0 for mail).
    pub flags: u32,
    /// Keywords the new entries start with: IMAP atoms (the delivery is
    /// refused as `Invalid` otherwise), repeats ignoring case dropped.
    pub keywords: Vec<String>,
    /// Flag bits and keywords for each of `mailboxes` in order, where a
    /// filter set its own (Sieve's `:flags`, RFC 5232); a mailbox past the
    /// end of this list starts with `flags` and `keywords`.
    pub mailbox_flags: Vec<(u32, Vec<String>)>,
    /// What the sender asked of delivery status notifications for each
    /// `remote` recipient (RFC 3461 NOTIFY and ORCPT), in the same order;
    /// empty when nothing was asked.
    pub remote_dsn: Vec<RecipientDsn>,
    /// RFC 3461 ENVID: the sender's identifier of the message, returned in
    /// reports.
    pub envid: Option<String>,
    /// RFC 3461 RET=FULL: reports carry the whole message, not only its
    /// header.
    pub ret_full: bool,
    /// The message has bytes outside ASCII (8-bit content): it needs a next
    /// server with 8BITMIME (RFC 6152).
    pub eight_bit: bool,
    /// Header fields to put in front of the message, known only once all
    /// of it was written (`Authentication-Results:`, whose DKIM result
    /// needs the body hash): CRLF-terminated fields, shorter than
    /// [`crate::CHUNK_SIZE`]. The stored message begins with them.
    pub lead: Vec<u8>,
    /// Keep the blob as an upload of an account (JMAP, RFC 8620 §6.1):
    /// it holds a reference of its own until it expires, and the account
    /// may read it ([`crate::Store::account_blob`]). A delivery with only
    /// an upload and no recipients is allowed.
    pub upload: Option<Upload>,
}

/// A blob kept as an account's upload (RFC 8620 §6.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// Whose upload.
    pub account: AccountId,
    /// The media type the client gave.
    pub content_type: String,
    /// When it stops being kept, seconds since the Unix epoch.
    pub expires: i64,
}

/// A blob an account may read, as [`crate::Store::account_blob`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountBlob {
    /// Its size in bytes.
    pub size: u64,
    /// The media type of an upload; `None` for a message.
    pub content_type: Option<String>,
}

/// What a delivery produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryReceipt {
    /// The single blob shared by every recipient.
    pub blob: BlobId,
    /// `(mailbox, uid)` for each local recipient, in the order given.
    pub entries: Vec<(MailboxId, Uid)>,
    /// Size of the stored message.
    pub size: u64,
}

/// An alias and where it points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasEntry {
    /// The alias address.
    pub address: String,
    /// Local or remote target addresses.
    pub targets: Vec<String>,
}

/// A DKIM signing key of a local domain (RFC 6376). Published at
/// `<selector>._domainkey.<domain>`; only keys marked `signing` sign, so a
/// new key can be published before it is used and an old one kept in DNS
/// while mail it signed is still in flight (rotation with two selectors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DkimKey {
    /// The signing domain (`d=`), a local domain.
    pub domain: String,
    /// The selector (`s=`).
    pub selector: String,
    /// `rsa-sha256` or `ed25519-sha256`.
    pub algorithm: String,
    /// The private key, DER (PKCS#1 for RSA, PKCS#8 for Ed25519).
    pub private_der: Vec<u8>,
    /// The public key as DNS publishes it (`p=`), base64.
    pub public_key: String,
    /// When it was made (seconds since the Unix epoch).
    pub created: i64,
    /// Whether it signs outgoing mail now.
    pub signing: bool,
}

/// A local delivery whose sender asked to hear of it (RFC 3461
/// NOTIFY=SUCCESS): what the SMTP server hands to the outbound queue,
/// which makes and sends the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryNotice {
    /// The stored message.
    pub blob: BlobId,
    /// The envelope sender, to whom the report goes.
    pub sender: String,
    /// The message's ENVID, if given.
    pub envid: Option<String>,
    /// Each local recipient (as given at RCPT) with its ORCPT.
    pub recipients: Vec<(String, Option<String>)>,
}

/// NOTIFY=SUCCESS (RFC 3461 §4.1): report a delivery.
pub const NOTIFY_SUCCESS: u8 = 1;
/// NOTIFY=FAILURE: report a failure.
pub const NOTIFY_FAILURE: u8 = 2;
/// NOTIFY=DELAY: report a delay.
pub const NOTIFY_DELAY: u8 = 4;
/// NOTIFY=NEVER: report nothing.
pub const NOTIFY_NEVER: u8 = 8;

/// What the sender asked of delivery status notifications for one
/// recipient (RFC 3461).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecipientDsn {
    /// `NOTIFY_*` bits; 0 when NOTIFY was not given, which means failures
    /// and delays are reported (§4.1).
    pub notify: u8,
    /// ORCPT: the recipient as the sender first gave it (decoded).
    pub orcpt: Option<String>,
}

impl RecipientDsn {
    /// Whether a report of this kind (`NOTIFY_SUCCESS`, `NOTIFY_FAILURE`
    /// or `NOTIFY_DELAY`) is wanted.
    pub fn wants(&self, kind: u8) -> bool {
        if self.notify == 0 {
            kind != NOTIFY_SUCCESS
        } else {
            self.notify & kind != 0
        }
    }
}

/// One recipient waiting in the outbound queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedRecipient {
    /// Queue row id.
    pub id: i64,
    /// Blob to send.
    pub blob: BlobId,
    /// Envelope sender.
    pub sender: String,
    /// Remote recipient.
    pub recipient: String,
    /// Attempts made so far.
    pub attempts: u32,
    /// When it is due next (seconds since the Unix epoch).
    pub next_attempt: i64,
    /// The reason the last attempt did not deliver, if one was made.
    pub last_error: Option<String>,
    /// When it was queued (seconds since the Unix epoch).
    pub created: i64,
    /// Size of the message, in bytes.
    pub size: u64,
    /// Whether the sender was already warned of a delay.
    pub warned: bool,
    /// The reports the sender asked for.
    pub dsn: RecipientDsn,
    /// The message's ENVID, if given.
    pub envid: Option<String>,
    /// RET=FULL was given.
    pub ret_full: bool,
    /// The message has 8-bit content.
    pub eight_bit: bool,
}

/// What became of an attempt to deliver a queued recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueOutcome {
    /// The remote side took responsibility (2xx): the recipient leaves the
    /// queue.
    Delivered,
    /// A temporary failure: try again at `next_attempt`.
    Deferred {
        /// Seconds since the Unix epoch.
        next_attempt: i64,
        /// The reply or error, for `sluice queue` and the log.
        reason: String,
    },
    /// Not attempted: the lease is given back, the schedule unchanged.
    Released,
    /// A permanent failure (5xx, or given up): the recipient leaves the
    /// queue.
    Failed {
        /// The reply or error.
        reason: String,
    },
}

/// How a flag update combines with the flags a message has (RFC 3501
/// §6.4.6: `+FLAGS`, `-FLAGS`, `FLAGS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagChange {
    /// Set these flags, keep the others.
    Add,
    /// Clear these flags, keep the others.
    Remove,
    /// Make these the message's flags.
    Replace,
}

/// A logged-in webmail session. The cookie holds a random token; the
/// store keeps only its SHA-256, so a copy of the database does not let
/// anyone in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSession {
    /// Hex SHA-256 of the cookie's token.
    pub id_hash: String,
    /// Who is logged in.
    pub account: AccountId,
    /// The account's address, as read back with the session
    /// ([`crate::Store::create_web_session`] does not look at it).
    pub address: String,
    /// The token every state-changing form of this session carries.
    pub csrf: String,
    /// When the session began, seconds since the Unix epoch.
    pub created: i64,
    /// When it stops being valid, seconds since the Unix epoch.
    pub expires: i64,
}

/// An account's webmail preferences.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSettings {
    /// Shown in `From:` of mail composed in the webmail; empty for none.
    pub display_name: String,
    /// Appended to new messages; empty for none.
    pub signature: String,
    /// Messages per page of a message list.
    pub page_size: u32,
    /// Senders (normalised addresses) whose remote content is loaded
    /// without asking.
    pub remote_ok: Vec<String>,
}

impl Default for WebSettings {
    fn default() -> Self {
        WebSettings {
            display_name: String::new(),
            signature: String::new(),
            page_size: 50,
            remote_ok: Vec::new(),
        }
    }
}

/// One of an account's protocol records: a small JSON document of a kind
/// (a JMAP Identity, EmailSubmission, ...) that the store keeps for the
/// protocol which owns it, with the change number that last touched it.
/// A destroyed record stays as a tombstone (no body) so that `/changes`
/// can report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountRecord {
    /// The record's id, unique within its account and kind.
    pub id: String,
    /// The kind's change number at its last write; the kind's state is the
    /// highest of these.
    pub changed: u64,
    /// The document, `None` once destroyed.
    pub body: Option<String>,
}

/// A stored Sieve script as ManageSieve lists it (RFC 5804 §2.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SieveScriptInfo {
    /// The script's name, unique per account.
    pub name: String,
    /// Whether it is the account's active script (the one delivery runs).
    pub active: bool,
    /// Its size in bytes.
    pub size: u64,
}

/// Whose Sieve scripts: an account's own, or the site's global ones that
/// `include :global` reaches (RFC 6609 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScriptOwner {
    /// The account's personal scripts.
    Account(AccountId),
    /// The global scripts.
    Global,
}

/// What the spam classifier needs of one model for one message: how many
/// messages trained each class, and the counts of the message's tokens
/// the model knows, as (spam, ham).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpamModel {
    /// Messages trained as spam.
    pub spam_messages: u32,
    /// Messages trained as ham.
    pub ham_messages: u32,
    /// Known tokens of the message: (spam, ham) counts.
    pub counts: std::collections::HashMap<String, (u32, u32)>,
}

/// A message moved into or out of Junk, waiting to train its account's
/// model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpamTraining {
    /// Queue row id.
    pub id: i64,
    /// Whose model.
    pub account: AccountId,
    /// The message.
    pub blob: BlobId,
    /// Spam (moved into Junk) or ham (moved out of it).
    pub spam: bool,
}

/// What changed in an account after a modification sequence: what JMAP's
/// /changes methods answer from (RFC 8620 §5.2). Every change to an
/// account's mailboxes and messages takes the account's next modseq (IMAP
/// sessions see the same numbers as per-mailbox MODSEQs, RFC 7162 allows
/// the gaps), so one number is the state of the whole account.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccountChanges {
    /// The account's modseq now: the state these changes bring to.
    pub modseq: u64,
    /// Emails (blobs) in the account now that changed after the modseq
    /// asked about (arrived, flags or keywords, mailboxes), each with the
    /// modseq it arrived at.
    pub emails: Vec<(BlobId, u64)>,
    /// Emails whose last entry in the account went after it, each with
    /// the modseq it had arrived at.
    pub emails_gone: Vec<(BlobId, u64)>,
    /// Threads an email joined or left after it: (thread, had emails
    /// then, has emails now).
    pub threads: Vec<(i64, bool, bool)>,
    /// Every mailbox of the account now, with the modseqs of its
    /// creation, of its last change of name, role or subscription, and its
    /// HIGHESTMODSEQ (the last change of its messages).
    pub mailboxes: Vec<MailboxModseqs>,
    /// Mailboxes deleted after it: (id, modseq of their creation).
    pub mailboxes_gone: Vec<(MailboxId, u64)>,
    /// The modseq of the last change of each email in `emails` or
    /// `emails_gone`: its last flag, keyword or mailbox change (the
    /// CONDSTORE modseq of its entries), or when it went. A /changes
    /// answer cut short by `maxChanges` (RFC 8620 §5.2) stops below one of
    /// these.
    pub email_modseqs: Vec<(BlobId, u64)>,
    /// The modseq of the last change of each thread in `threads`: the
    /// last time an email joined or left it.
    pub thread_modseqs: Vec<(i64, u64)>,
    /// When each of `mailboxes_gone` was deleted.
    pub mailboxes_gone_at: Vec<(MailboxId, u64)>,
}

/// The modseqs of a mailbox's life (see [`AccountChanges::mailboxes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MailboxModseqs {
    /// The mailbox.
    pub id: MailboxId,
    /// When it was created (0: before the store kept this).
    pub created: u64,
    /// Its last rename, role or subscription change.
    pub meta: u64,
    /// Its last message change (HIGHESTMODSEQ).
    pub contents: u64,
}

/// One email of an account: a stored message and its entries in the
/// account's mailboxes (JMAP's Email, RFC 8621 §4, is the message, which
/// may be in several mailboxes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountEmail {
    /// The stored message.
    pub blob: BlobId,
    /// Its thread ([`crate::Store::account_emails`]).
    pub thread: i64,
    /// Its entries, by mailbox then UID.
    pub entries: Vec<(MailboxId, MessageEntry)>,
    /// Its indexed header fields.
    pub headers: crate::IndexedHeaders,
}
