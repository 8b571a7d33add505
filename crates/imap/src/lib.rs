//! Sluice's IMAP server: IMAP4rev1 (RFC 3501) over the store, with the
//! extensions mail clients use (IDLE, UIDPLUS, MOVE, SPECIAL-USE,
//! NAMESPACE, ID, ENABLE, UNSELECT, CHILDREN, LITERAL+, SASL-IR,
//! AUTH=PLAIN, CONDSTORE, QUOTA, STATUS=SIZE, ESEARCH, SEARCHRES, BINARY,
//! LIST-EXTENDED, LIST-STATUS, SORT, SORT=DISPLAY, ESORT, THREAD=ORDEREDSUBJECT,
//! THREAD=REFERENCES, THREAD=REFS), and IMAP4rev2 (RFC 9051) for clients
//! that `ENABLE IMAP4rev2`.
//!
//! Commands are parsed and responses written with `imap-codec`. Where it
//! lacks something the gap is filled in one place, named here:
//! - [`framing`] decides when a command is complete and streams an
//!   APPEND's literal (or RFC 3516 literal8) into the store instead of
//!   buffering it;
//! - [`search`] parses the RFC 4731 `RETURN (...)` clause (with RFC 5182
//!   `SAVE`) and writes the ESEARCH response;
//! - [`preparse`] parses an extended LIST (RFC 5258 selection and return
//!   options, several patterns, RFC 5819 `STATUS`) before imap-codec
//!   sees it, and replaces the SEARCHRES `$` by the set it stands for;
//! - [`fetch`] streams large body sections as literals after the part of
//!   the FETCH response imap-codec encoded, and writes `BINARY[...]`
//!   data (with its `<origin>`, as literal8 when it has NUL) by hand;
//! - [`sort`] and [`thread`] answer SORT (RFC 5256, RFC 5957, ESORT of
//!   RFC 5267) and THREAD (RFC 5256) from the stored header data, and
//!   write their responses;
//! - [`list`] writes the CHILDINFO extended data of LIST responses.
//!
//! IMAP4rev2 mode (RFC 9051 Appendix E) changes, for that session only:
//! mailbox names are UTF-8 on the wire and converted from and to the
//! stored modified UTF-7 ([`utf7`]); SEARCH answers with ESEARCH; there
//! is no RECENT response or STATUS item; SELECT sends the mailbox's LIST
//! line and no UNSEEN code; DELETE of a parent says `[HASCHILDREN]`.
//! `[CLOSED]` is sent in both modes when SELECT or EXAMINE closes a
//! mailbox (RFC 7162 §3.2.11 asks it of CONDSTORE servers). Not done from
//! RFC 9051: `\NonExistent` and `\Remote` never apply (every mailbox
//! exists with its parents, none is remote), the `OLDNAME` LIST
//! extended data is not sent, DELETE of a mailbox with children is
//! refused rather than leaving a `\Noselect` parent, and `UNAUTHENTICATE`,
//! `APPENDLIMIT` and `STATUS DELETED-STORAGE` are not offered.
//!
//! What a list view or a search needs comes from what the store computed
//! at delivery (header columns, the full-text index, the MIME structure),
//! never from parsing messages again.
//!
//! `\Recent` (RFC 3501 §2.3.2): the first read-write IMAP4rev1 session to
//! see new mail, at SELECT or when it catches up, takes it as recent (the
//! store hands each UID out once); EXAMINE and STATUS count what nobody
//! took yet. IMAP4rev2 sessions take none (RFC 9051 dropped `\Recent`).
#![forbid(unsafe_code)]

mod append;
mod auth;
mod base_subject;
mod commands;
mod config;
mod convert;
mod cte;
mod fetch;
mod flags;
mod framing;
mod idle;
mod list;
mod messages;
mod out;
mod preparse;
mod reply;
mod search;
mod section;
mod selected;
mod server;
mod session;
mod sort;
mod thread;
mod uidmap;
mod utf7;

pub use config::ImapConfig;
pub use server::{serve, Context};

/// Entry points for the fuzz targets in `crates/imap/fuzz`; not an API.
#[doc(hidden)]
pub mod fuzzing {
    /// Runs a command's bytes through every step before decoding
    /// (framing, the RETURN and LIST-EXTENDED parsers, `$` substitution,
    /// the APPEND probe) and imap-codec's decoder.
    pub fn pre_decode(data: &[u8]) {
        crate::session::pre_decode(data);
    }

    /// The RFC 5256 §2.1 base subject of any decoded subject: never
    /// panics, and the base subject of a base subject is itself.
    pub fn base_subject(text: &str) {
        let (once, _) = crate::base_subject::base_subject(text);
        assert_eq!(crate::base_subject::base_subject(&once).0, once);
    }

    /// Modified UTF-7 (RFC 3501 §5.1.3): decoding any text never panics,
    /// and what decodes encodes back to the same text.
    pub fn utf7(text: &str) {
        if let Some(name) = crate::utf7::decode(text) {
            let again = crate::utf7::encode(&name);
            assert_eq!(crate::utf7::decode(&again).as_deref(), Some(name.as_str()));
        }
    }
}
