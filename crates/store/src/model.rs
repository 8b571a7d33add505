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
