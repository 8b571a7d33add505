//! What a run decides: the actions in order, collapsed and checked for
//! conflicts as RFC 5228 §4.2.1 and RFC 5429 §2.1 describe.

use crate::error::RuntimeError;

/// One thing to do with the message.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Store in the user's inbox (explicit `keep`, or the implicit keep).
    Keep {
        /// IMAP flags to set (RFC 5232).
        flags: Vec<String>,
    },
    /// Store in `mailbox` (RFC 5228 §4.1).
    FileInto {
        /// The mailbox name as the script gave it.
        mailbox: String,
        /// IMAP flags to set (RFC 5232).
        flags: Vec<String>,
        /// Create the mailbox if it does not exist (RFC 5490 §3.2 `:create`).
        create: bool,
    },
    /// Forward to `address` (RFC 5228 §4.2).
    Redirect {
        /// The bare address (`local@domain`).
        address: String,
    },
    /// Refuse the message (RFC 5429): `extended` for `ereject`, which asks
    /// for a refusal at the SMTP level when possible.
    Reject {
        /// The text of the refusal.
        reason: String,
        /// Whether it came from `ereject`.
        extended: bool,
    },
    /// RFC 5230: an answer to send. `to` = the envelope sender; the caller
    /// checks its per-sender memory with `handle` + `period_secs` before
    /// sending.
    Vacation {
        /// Where the answer goes: the envelope sender.
        to: String,
        /// The `:from` address, if the script gave one.
        from: Option<String>,
        /// The answer's subject.
        subject: String,
        /// The answer's body, or a MIME entity when `mime`.
        reason: String,
        /// Whether `reason` is a MIME entity (RFC 5230 §4.8 `:mime`).
        mime: bool,
        /// What identifies this answer for the per-sender memory (§4.2).
        handle: String,
        /// How long not to answer the same sender again, in seconds.
        period_secs: u64,
    },
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Everything to do, in order. The implicit keep, when not cancelled,
    /// appears as a `Keep` (with the internal imap4flags variable's flags).
    /// No keep/fileinto/redirect in the list = the message is discarded.
    pub actions: Vec<Action>,
    /// RFC 7352: ids to remember after a successful delivery: (id, period_secs).
    pub duplicates: Vec<(String, u64)>,
}

/// Actions collected during a run.
pub(crate) struct Actions {
    pub list: Vec<Action>,
    max_actions: usize,
    max_redirects: usize,
    redirects: usize,
    vacations: usize,
}

/// RFC 5321 §2.4: the local part is case-sensitive, the domain is not.
fn same_address(a: &str, b: &str) -> bool {
    match (a.rsplit_once('@'), b.rsplit_once('@')) {
        (Some((la, da)), Some((lb, db))) => la == lb && da.eq_ignore_ascii_case(db),
        _ => a == b,
    }
}

fn is_inbox(mailbox: &str) -> bool {
    mailbox.eq_ignore_ascii_case("INBOX")
}

/// Merges `add` into `flags`, keeping the first spelling of each flag.
fn merge(flags: &mut Vec<String>, add: &[String]) {
    for f in add {
        if !flags.iter().any(|g| g.eq_ignore_ascii_case(f)) {
            flags.push(f.clone());
        }
    }
}

impl Actions {
    pub(crate) fn new(max_actions: usize, max_redirects: usize) -> Self {
        Actions {
            list: Vec::new(),
            max_actions,
            max_redirects,
            redirects: 0,
            vacations: 0,
        }
    }

    fn push(&mut self, a: Action) -> Result<(), RuntimeError> {
        if self.list.len() >= self.max_actions {
            return Err(RuntimeError::TooManyActions(self.max_actions));
        }
        self.list.push(a);
        Ok(())
    }

    fn rejected(&self) -> bool {
        self.list.iter().any(|a| matches!(a, Action::Reject { .. }))
    }

    /// RFC 5429 §2.1: reject cannot go with delivering the message anyway.
    /// Pigeonhole refuses the combination at run time; so do we.
    fn no_reject(&self, what: &str) -> Result<(), RuntimeError> {
        if self.rejected() {
            return Err(RuntimeError::Conflict(format!("reject and {what}")));
        }
        Ok(())
    }

    /// Keep in the inbox; a second keep (or fileinto "INBOX") is the same
    /// action (RFC 5228 §4.2.1), its flags merged.
    pub(crate) fn keep(&mut self, flags: Vec<String>) -> Result<(), RuntimeError> {
        self.no_reject("keep")?;
        self.store(None, flags, false)
    }

    pub(crate) fn fileinto(
        &mut self,
        mailbox: String,
        flags: Vec<String>,
        create: bool,
    ) -> Result<(), RuntimeError> {
        self.no_reject("fileinto")?;
        if is_inbox(&mailbox) {
            return self.store(None, flags, create);
        }
        self.store(Some(mailbox), flags, create)
    }

    fn store(
        &mut self,
        mailbox: Option<String>,
        flags: Vec<String>,
        create: bool,
    ) -> Result<(), RuntimeError> {
        for a in &mut self.list {
            match (a, &mailbox) {
                (Action::Keep { flags: f }, None) => {
                    merge(f, &flags);
                    return Ok(());
                }
                (
                    Action::FileInto {
                        mailbox: m,
                        flags: f,
                        create: c,
                    },
                    Some(want),
                ) if m == want => {
                    merge(f, &flags);
                    *c |= create;
                    return Ok(());
                }
                _ => {}
            }
        }
        self.push(match mailbox {
            None => Action::Keep { flags },
            Some(mailbox) => Action::FileInto {
                mailbox,
                flags,
                create,
            },
        })
    }

    /// Redirect; the same address twice is one redirect (RFC 5228 §4.2.1).
    pub(crate) fn redirect(&mut self, address: String) -> Result<(), RuntimeError> {
        self.no_reject("redirect")?;
        if self
            .list
            .iter()
            .any(|a| matches!(a, Action::Redirect { address: b } if same_address(b, &address)))
        {
            return Ok(());
        }
        if self.redirects >= self.max_redirects {
            return Err(RuntimeError::TooManyRedirects(self.max_redirects));
        }
        self.redirects += 1;
        self.push(Action::Redirect { address })
    }

    /// RFC 5429 §2.1: reject with anything that delivers is an error, as is
    /// a second reject; RFC 5230 §4.7: reject with vacation too.
    pub(crate) fn reject(&mut self, reason: String, extended: bool) -> Result<(), RuntimeError> {
        if let Some(a) = self.list.first() {
            let what = match a {
                Action::Keep { .. } => "keep",
                Action::FileInto { .. } => "fileinto",
                Action::Redirect { .. } => "redirect",
                Action::Reject { .. } => "a second reject",
                Action::Vacation { .. } => "vacation",
            };
            return Err(RuntimeError::Conflict(format!("reject and {what}")));
        }
        self.push(Action::Reject { reason, extended })
    }

    /// RFC 5230 §4.7: at most one vacation per run, not with reject. A
    /// vacation that decided not to answer still counts (`a` is None), as
    /// in Pigeonhole.
    pub(crate) fn vacation(&mut self, a: Option<Action>) -> Result<(), RuntimeError> {
        if self.vacations > 0 {
            return Err(RuntimeError::Conflict("two vacation actions".into()));
        }
        self.vacations += 1;
        if self.rejected() {
            return Err(RuntimeError::Conflict("reject and vacation".into()));
        }
        match a {
            Some(a) => self.push(a),
            None => Ok(()),
        }
    }

    /// The implicit keep (RFC 5228 §2.10.2), when nothing cancelled it.
    pub(crate) fn implicit_keep(&mut self, flags: Vec<String>) -> Result<(), RuntimeError> {
        if self.rejected() {
            return Ok(());
        }
        if self.list.iter().any(|a| matches!(a, Action::Keep { .. })) {
            return Ok(());
        }
        self.push(Action::Keep { flags })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_collapse() {
        let mut a = Actions::new(10, 10);
        a.fileinto("X".into(), vec!["\\Seen".into()], false)
            .unwrap();
        a.fileinto("X".into(), vec!["\\seen".into(), "a".into()], true)
            .unwrap();
        a.keep(vec![]).unwrap();
        a.fileinto("inbox".into(), vec![], false).unwrap();
        a.redirect("a@b.c".into()).unwrap();
        a.redirect("a@b.c".into()).unwrap();
        assert_eq!(
            a.list,
            vec![
                Action::FileInto {
                    mailbox: "X".into(),
                    flags: vec!["\\Seen".into(), "a".into()],
                    create: true
                },
                Action::Keep { flags: vec![] },
                Action::Redirect {
                    address: "a@b.c".into()
                },
            ]
        );
    }

    #[test]
    fn reject_conflicts() {
        let mut a = Actions::new(10, 10);
        a.fileinto("X".into(), vec![], false).unwrap();
        assert!(a.reject("no".into(), false).is_err());
        let mut a = Actions::new(10, 10);
        a.reject("no".into(), false).unwrap();
        assert!(a.redirect("a@b.c".into()).is_err());
        assert!(a.keep(vec![]).is_err());
        a.implicit_keep(vec![]).unwrap();
        assert_eq!(a.list.len(), 1);
    }

    #[test]
    fn limits() {
        let mut a = Actions::new(3, 1);
        a.redirect("a@b.c".into()).unwrap();
        assert!(matches!(
            a.redirect("d@e.f".into()),
            Err(RuntimeError::TooManyRedirects(1))
        ));
        a.fileinto("1".into(), vec![], false).unwrap();
        a.fileinto("2".into(), vec![], false).unwrap();
        assert!(matches!(
            a.fileinto("3".into(), vec![], false),
            Err(RuntimeError::TooManyActions(3))
        ));
    }
}
