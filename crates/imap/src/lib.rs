//! Sluice's IMAP server: IMAP4rev1 (RFC 3501) over the store, with the
//! extensions mail clients use (IDLE, UIDPLUS, MOVE, SPECIAL-USE,
//! NAMESPACE, ID, ENABLE, UNSELECT, CHILDREN, LITERAL+, SASL-IR,
//! AUTH=PLAIN, CONDSTORE, QUOTA, ESEARCH).
//!
//! Commands are parsed and responses written with `imap-codec`. Where it
//! lacks something the gap is filled in one place, named here:
//! - [`framing`] decides when a command is complete and streams an
//!   APPEND's literal into the store instead of buffering it;
//! - [`search`] parses the RFC 4731 `RETURN (...)` clause and writes the
//!   ESEARCH response;
//! - [`fetch`] streams large body sections as literals after the part of
//!   the FETCH response imap-codec encoded.
//!
//! What a list view or a search needs comes from what the store computed
//! at delivery (header columns, the full-text index, the MIME structure),
//! never from parsing messages again.
//!
//! `\Recent` is not kept: no session is given it, RECENT counts are 0,
//! and the NEW and RECENT search keys match nothing (IMAP4rev2 drops
//! `\Recent` for the same reason: it is per-session state few clients use).
#![forbid(unsafe_code)]

mod append;
mod auth;
mod commands;
mod config;
mod convert;
mod fetch;
mod flags;
mod framing;
mod idle;
mod list;
mod messages;
mod out;
mod reply;
mod search;
mod section;
mod selected;
mod server;
mod session;
mod uidmap;

pub use config::ImapConfig;
pub use server::{serve, Context};
