//! Sluice's SMTP server (RFC 5321).
//!
//! A connection starts in the [gate](gate): a small task with a fixed line
//! buffer that runs greeting, EHLO, MAIL and RCPT against the in-memory
//! directory. Only a connection that names a valid local recipient is
//! trusted with more: the [data stage](data) that streams the message into
//! the store, replying `250` once the delivery is durable.
#![forbid(unsafe_code)]

mod auth_checks;
mod auto_reply;
mod blocklist;
mod config;
mod content;
mod data;
mod filter;
#[doc(hidden)]
pub mod fuzzing;
mod gate;
mod header_fix;
mod message_auth;
mod received;
mod reply;
mod server;
mod spam_check;
mod spf;
mod srs;
mod submission;

pub use auth_checks::{AuthChecksConfig, DkimMode, DmarcMode, SpfMode};
pub use blocklist::{BlocklistPolicy, IpNet};
pub use config::SmtpConfig;
pub use content::{Action, ContentPolicy, Engine};
pub use filter::{FilterConfig, Filters};
pub use message_auth::{MessageAuth, SealingKey, SealingKeys};
pub use net::{DotUnstuffer, LineEnds};
pub use server::{serve, serve_submission, Context, DeliveredReport};
pub use spam_check::SpamConfig;
pub use spf::SpfCheck;
pub use srs::{today as srs_today, Srs, SrsError};
pub use submission::{SenderCheck, Submission, SubmissionConfig};
