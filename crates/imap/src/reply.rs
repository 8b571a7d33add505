//! The tagged result of a command.

use imap_codec::imap_types::response::Code;

use crate::session::Next;

pub(crate) enum Kind {
    Ok,
    No,
    Bad,
}

/// How a command ends: `OK`, `NO` or `BAD`, with an optional code.
pub(crate) struct Reply {
    pub(crate) kind: Kind,
    pub(crate) code: Option<Code<'static>>,
    pub(crate) text: String,
    pub(crate) next: Next,
    /// Whether EXPUNGE responses may precede the tagged reply
    /// (RFC 3501 §7.4.1: not for FETCH, STORE and SEARCH).
    pub(crate) expunge_ok: bool,
}

impl Reply {
    fn new(kind: Kind, text: impl Into<String>) -> Reply {
        Reply {
            kind,
            code: None,
            text: text.into(),
            next: Next::Continue,
            expunge_ok: true,
        }
    }

    pub(crate) fn ok(text: impl Into<String>) -> Reply {
        Reply::new(Kind::Ok, text)
    }

    pub(crate) fn no(text: impl Into<String>) -> Reply {
        Reply::new(Kind::No, text)
    }

    pub(crate) fn bad(text: impl Into<String>) -> Reply {
        Reply::new(Kind::Bad, text)
    }

    pub(crate) fn code(mut self, code: Code<'static>) -> Reply {
        self.code = Some(code);
        self
    }

    pub(crate) fn close(mut self) -> Reply {
        self.next = Next::Close;
        self
    }

    pub(crate) fn no_expunge(mut self) -> Reply {
        self.expunge_ok = false;
        self
    }
}
