//! The content scan of the data stage: every message is fed, as it
//! streams in, to the scanner (`scan` crate); its verdict decides the reply
//! at the end of DATA, before anything is acknowledged.

use serde::Deserialize;

use crate::reply::Reply;

/// What to do with a message given a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Refuse it with `554 5.7.1` (no bounce: the sender hears it now).
    Reject,
    /// Deliver it anyway (the verdict is still logged).
    Accept,
}

/// Which engine scans: the built-in scanner, in the session's task, or
/// clamd, each decoded MIME part streamed to it.
pub use scan::Engine;

/// The scanner and what to do with each kind of verdict.
pub struct ContentPolicy {
    /// The engine (with its signatures and limits, for the built-in one).
    pub engine: Engine,
    /// A signature matched.
    pub on_infected: Action,
    /// A limit against bombs was hit before the whole message was scanned.
    pub on_limit: Action,
    /// An encrypted archive entry could not be scanned (only given when the
    /// scanner's encrypted policy is reject).
    pub on_encrypted: Action,
}

/// One message's scan in progress. clamd is written to with blocking
/// I/O: `block_in_place` keeps the other tasks of this worker running
/// meanwhile (the server runs on the multi-threaded runtime).
pub(crate) struct ContentScan(scan::EngineSession);

impl ContentScan {
    /// Feeds the next piece of the message.
    pub(crate) fn feed(&mut self, piece: &[u8]) {
        if self.0.blocks() {
            tokio::task::block_in_place(|| self.0.feed(piece))
        } else {
            self.0.feed(piece)
        }
    }

    /// Whether something was found already.
    pub(crate) fn infected(&self) -> bool {
        self.0.infected().is_some()
    }

    /// The verdict, or why there is none (clamd unreachable).
    pub(crate) fn finish(self) -> Result<scan::Verdict, String> {
        let session = self.0;
        if session.blocks() {
            tokio::task::block_in_place(|| session.finish())
        } else {
            session.finish()
        }
        .map_err(|e| e.to_string())
    }
}

impl ContentPolicy {
    /// Starts scanning one message.
    pub(crate) fn start(&self) -> ContentScan {
        ContentScan(self.engine.session())
    }

    /// Scans a stored message, streamed from the store piece by piece:
    /// `Ok(Some(why))` when the policy refuses it, `Ok(None)` when it goes
    /// through, `Err` when it could not be scanned (clamd unreachable, the
    /// store failing). For mail that did not come over SMTP (the webmail).
    pub async fn check_stored(
        &self,
        store: &dyn store::Store,
        blob: store::BlobId,
    ) -> Result<Option<String>, String> {
        let mut session = self.start();
        let mut seq = 0;
        while let Some(piece) = store
            .read_chunk(blob, seq)
            .await
            .map_err(|e| e.to_string())?
        {
            session.feed(&piece);
            if session.infected() {
                break;
            }
            seq += 1;
        }
        let verdict = session.finish()?;
        Ok(self.judge(&verdict).map(|reply| reply.text))
    }

    /// The refusal for `verdict`, or `None` if the message goes through.
    pub(crate) fn judge(&self, verdict: &scan::Verdict) -> Option<Reply> {
        use scan::Verdict as V;
        let (action, text) = match verdict {
            V::Clean => return None,
            V::Infected { name } => (
                self.on_infected,
                format!("Message rejected: virus found ({name})"),
            ),
            V::LimitExceeded(kind) => (
                self.on_limit,
                format!(
                    "Message rejected: content could not be scanned ({})",
                    kind.as_str()
                ),
            ),
            V::Encrypted => (
                self.on_encrypted,
                "Message rejected: encrypted archive cannot be scanned".to_string(),
            ),
        };
        (action == Action::Reject).then(|| Reply::new(554, "5.7.1", text))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn policy(on_limit: Action) -> ContentPolicy {
        ContentPolicy {
            engine: Engine::Builtin(scan::Scanner::new(
                Arc::new(scan::Database::builtin()),
                scan::Limits::default(),
            )),
            on_infected: Action::Reject,
            on_limit,
            on_encrypted: Action::Accept,
        }
    }

    #[test]
    fn verdicts_map_to_replies() {
        let p = policy(Action::Accept);
        assert_eq!(p.judge(&scan::Verdict::Clean), None);
        let r = p
            .judge(&scan::Verdict::Infected {
                name: "Eicar-Signature".into(),
            })
            .unwrap();
        assert_eq!((r.code, r.status), (554, "5.7.1"));
        assert!(r.text.contains("Eicar-Signature"));
        assert_eq!(
            p.judge(&scan::Verdict::LimitExceeded(scan::LimitKind::Ratio)),
            None
        );
        assert_eq!(p.judge(&scan::Verdict::Encrypted), None);
        let strict = policy(Action::Reject);
        assert!(strict
            .judge(&scan::Verdict::LimitExceeded(scan::LimitKind::Ratio))
            .unwrap()
            .text
            .contains("compression-ratio"));
    }
}
