//! The two engines a message can be scanned with, behind one session type:
//! Sluice's own streaming scanner, or a running clamd that gets each decoded
//! MIME part (for sites that want ClamAV's whole engine). The SMTP data
//! stage and the SMTP proxy both take either.

use crate::clamd::{ClamdClient, ClamdError, ClamdMailSession};
use crate::{Scanner, Session, Verdict};

/// Which engine scans.
#[derive(Debug, Clone)]
pub enum Engine {
    /// Sluice's own streaming scanner.
    Builtin(Scanner),
    /// A running clamd: each decoded MIME part is streamed to it with
    /// INSTREAM.
    Clamd(ClamdClient),
}

impl Engine {
    /// Starts scanning one message.
    pub fn session(&self) -> EngineSession {
        match self {
            Engine::Builtin(scanner) => EngineSession::Builtin(scanner.session()),
            Engine::Clamd(client) => EngineSession::Clamd(client.mail_session()),
        }
    }
}

/// One message's scan in progress.
#[derive(Debug)]
pub enum EngineSession {
    /// In this task, on the bytes as they come.
    Builtin(Session),
    /// With blocking writes to clamd: see [`EngineSession::blocks`].
    Clamd(ClamdMailSession),
}

impl EngineSession {
    /// Whether feeding and finishing wait on another process (clamd):
    /// an async caller runs those calls with `block_in_place`.
    pub fn blocks(&self) -> bool {
        matches!(self, EngineSession::Clamd(_))
    }

    /// Feeds the next piece of the message.
    pub fn feed(&mut self, piece: &[u8]) {
        match self {
            EngineSession::Builtin(s) => s.feed(piece),
            EngineSession::Clamd(s) => s.feed(piece),
        }
    }

    /// The name of what was found already, if anything (the rest of the
    /// message need not be scanned).
    pub fn infected(&self) -> Option<&str> {
        match self {
            EngineSession::Builtin(s) => s.infected(),
            EngineSession::Clamd(s) => s.found(),
        }
    }

    /// The verdict, or why there is none (clamd unreachable or failing).
    pub fn finish(self) -> Result<Verdict, ClamdError> {
        match self {
            EngineSession::Builtin(s) => Ok(s.finish()),
            EngineSession::Clamd(s) => s.finish(),
        }
    }
}
