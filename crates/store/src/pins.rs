//! What open mailbox views still need of expunged messages.
//!
//! An IMAP session keeps a message in its view until it has told its
//! client EXPUNGE, which it may do only between commands (RFC 3501
//! §7.4.1); meanwhile the client may FETCH it, and should get its real
//! content (RFC 2180 §4.1). So the blob of an expunged message must not
//! be swept while a view may still show it. Each view pins its mailbox at
//! the modseq up to which it has announced every expunge; an expunge with
//! a higher modseq may still be in that view, and its blob stays.
//!
//! Pins live in this process: the sessions that can read a store's
//! messages are the server's own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::model::MailboxId;

/// The pins of every open view.
#[derive(Debug, Default)]
pub struct ViewPins {
    /// Per mailbox: (pin id, modseq the view has caught up to).
    by_mailbox: Mutex<HashMap<MailboxId, Vec<(u64, u64)>>>,
    next_id: AtomicU64,
}

impl ViewPins {
    /// Pins `mailbox` at `modseq` until the returned pin is dropped.
    pub fn pin(self: &Arc<Self>, mailbox: MailboxId, modseq: u64) -> ViewPin {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().entry(mailbox).or_default().push((id, modseq));
        ViewPin {
            pins: Arc::clone(self),
            mailbox,
            id,
        }
    }

    /// Whether a view of `mailbox` may still show a message expunged at
    /// `modseq`.
    pub fn needed(&self, mailbox: MailboxId, modseq: u64) -> bool {
        self.lock()
            .get(&mailbox)
            .is_some_and(|views| views.iter().any(|&(_, known)| known < modseq))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<MailboxId, Vec<(u64, u64)>>> {
        // A panic while holding this lock cannot leave the map half-changed.
        self.by_mailbox.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One view's pin; released when dropped.
#[derive(Debug)]
pub struct ViewPin {
    pins: Arc<ViewPins>,
    mailbox: MailboxId,
    id: u64,
}

impl ViewPin {
    /// The view has announced every expunge up to `modseq`: blobs expunged
    /// up to there are no longer needed by it. A pin never moves back.
    pub fn advance(&self, modseq: u64) {
        if let Some(views) = self.pins.lock().get_mut(&self.mailbox) {
            for (id, known) in views.iter_mut() {
                if *id == self.id && *known < modseq {
                    *known = modseq;
                }
            }
        }
    }
}

impl Drop for ViewPin {
    fn drop(&mut self) {
        let mut map = self.pins.lock();
        if let Some(views) = map.get_mut(&self.mailbox) {
            views.retain(|&(id, _)| id != self.id);
            if views.is_empty() {
                map.remove(&self.mailbox);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_keeps_later_expunges_until_it_advances_or_goes() {
        let pins = Arc::new(ViewPins::default());
        assert!(!pins.needed(1, 5));
        let a = pins.pin(1, 3);
        let b = pins.pin(1, 10);
        assert!(pins.needed(1, 5), "a has not caught up to 5");
        assert!(!pins.needed(1, 3), "both know of 3");
        assert!(!pins.needed(2, 5), "another mailbox");
        a.advance(7);
        assert!(!pins.needed(1, 5));
        assert!(pins.needed(1, 8));
        a.advance(2);
        assert!(!pins.needed(1, 7), "a pin never moves back");
        drop(a);
        assert!(!pins.needed(1, 8));
        assert!(pins.needed(1, 11));
        drop(b);
        assert!(!pins.needed(1, 11));
        assert!(pins.lock().is_empty());
    }
}
