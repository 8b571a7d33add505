//! Sluice's Sieve interpreter: a mail filtering script (RFC 5228 and the
//! extensions in [`EXTENSIONS`]) is compiled once with [`compile`] and run
//! per message with [`run`], which returns what to do as an [`Outcome`].
//! No I/O happens here: what the script needs from the outside (mailboxes,
//! included scripts, duplicate memory) it asks of a [`Host`].
#![forbid(unsafe_code)]

mod action;
mod address;
mod compile;
mod date;
mod encoded;
mod error;
mod lexer;
mod matching;
mod message;
mod parser;
mod run;
mod script;
mod vacation;
mod variables;

pub use action::{Action, Outcome};
pub use compile::compile;
pub use error::{CompileError, RuntimeError};
pub use message::Message;
pub use run::run;
pub use script::Script;

/// Every extension this interpreter implements, as `require` names them
/// (also the ManageSieve SIEVE capability).
pub const EXTENSIONS: &[&str] = &[
    "fileinto",
    "reject",
    "ereject",
    "envelope",
    "encoded-character",
    "vacation",
    "vacation-seconds",
    "imap4flags",
    "variables",
    "body",
    "relational",
    "subaddress",
    "copy",
    "regex",
    "date",
    "index",
    "mailbox",
    "include",
    "duplicate",
    "spamtest",
    "spamtestplus",
    "virustest",
    "comparator-i;octet",
    "comparator-i;ascii-casemap",
    "comparator-i;ascii-numeric",
];

/// Where an included script lives (RFC 6609 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// The user's own scripts (`:personal`, the default).
    Personal,
    /// Scripts the administrator provides (`:global`).
    Global,
}

/// The SMTP envelope of the delivery being filtered (RFC 5228 §5.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The reverse-path; "" for the null sender.
    pub from: String,
    /// The recipient as given at RCPT.
    pub to: String,
    /// The authenticated sender (the AUTH parameter), if any.
    pub auth: Option<String>,
}

/// RFC 5235 spam verdict of the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpamVerdict {
    /// 1..=10 (0 = not tested).
    pub score: u8,
    /// 0..=100 for `spamtestplus` (`:percent`), if known.
    pub percent: Option<u8>,
}

/// Everything a run looks at besides the script.
pub struct Context<'a> {
    /// The message.
    pub message: &'a Message,
    /// Its envelope.
    pub envelope: &'a Envelope,
    /// The recipient's own addresses (account + aliases), for vacation's
    /// "was I addressed" check (RFC 5230 §4.5) and :from checks.
    pub addresses: &'a [String],
    /// RFC 5235 spamtest value 1..=10 (0 = not tested), and the percent for
    /// `spamtestplus` (:percent) if known.
    pub spam: Option<SpamVerdict>,
    /// RFC 5235 virustest value 1..=5 (0 = not tested).
    pub virus: Option<u8>,
    /// "now" for the date/currentdate tests and vacation, with its UTC offset.
    pub now: time::OffsetDateTime,
}

/// What a run asks of the world outside.
pub trait Host {
    /// RFC 5490 mailboxexists: whether the user's mailbox exists.
    fn mailbox_exists(&self, name: &str) -> bool;
    /// RFC 6609 include: the source of a personal or global script, None
    /// when there is none.
    fn script_source(&self, location: Location, name: &str) -> Option<String>;
    /// RFC 7352 duplicate: whether this id was seen (for this user) within
    /// `period_secs`. Do NOT record here; recording is returned in Outcome.
    /// The id is a hex digest of the test's handle and the message's id.
    fn duplicate_seen(&self, id: &str, period_secs: u64) -> bool;
}

/// Bounds on one run; exceeding one stops it with a [`RuntimeError`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Tests and commands evaluated, includes counted.
    pub max_steps: u64,
    /// Distinct redirect addresses.
    pub max_redirects: usize,
    /// Actions in the outcome.
    pub max_actions: usize,
    /// How deep `include` may nest.
    pub max_include_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 100_000,
            max_redirects: 4,
            max_actions: 32,
            max_include_depth: 5,
        }
    }
}
