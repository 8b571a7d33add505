//! Change notices for mailboxes, within this process: IDLE sessions wait
//! on a `watch` receiver, and every committed change that touches a
//! mailbox bumps its counter. On SQLite, changes made by another process
//! (the command line) are not seen here; sessions still poll now and then.
//! On PostgreSQL, other nodes' changes arrive through `postgres::fanout`.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::watch;

use crate::model::MailboxId;

/// One `watch` channel per mailbox somebody is watching.
#[derive(Default)]
pub(crate) struct Watchers {
    senders: Mutex<HashMap<MailboxId, watch::Sender<u64>>>,
}

impl Watchers {
    /// A receiver for `mailbox`, creating its channel on first use.
    pub(crate) fn subscribe(&self, mailbox: MailboxId) -> watch::Receiver<u64> {
        let mut senders = self.senders.lock().expect("watchers lock");
        if let Some(tx) = senders.get(&mailbox) {
            return tx.subscribe();
        }
        // A new channel: a good moment to drop those nobody listens to any
        // more, so the map stays as small as the set of watched mailboxes.
        senders.retain(|_, tx| tx.receiver_count() > 0);
        let (tx, rx) = watch::channel(0);
        senders.insert(mailbox, tx);
        rx
    }

    /// Tells the watchers of these mailboxes that a change was committed.
    /// Call only after the commit is durable.
    pub(crate) fn notify(&self, mailboxes: impl IntoIterator<Item = MailboxId>) {
        let mut senders = self.senders.lock().expect("watchers lock");
        if senders.is_empty() {
            return;
        }
        for mailbox in mailboxes {
            if let Some(tx) = senders.get(&mailbox) {
                if tx.receiver_count() == 0 {
                    senders.remove(&mailbox);
                } else {
                    tx.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
        }
    }

    /// Wakes every watcher: after changes may have been missed (another
    /// node's notices while the connection carrying them was down), each
    /// session looks for itself what changed.
    pub(crate) fn notify_all(&self) {
        let mut senders = self.senders.lock().expect("watchers lock");
        senders.retain(|_, tx| tx.receiver_count() > 0);
        for tx in senders.values() {
            tx.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.senders.lock().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receivers_see_bumps_and_dead_channels_go() {
        let w = Watchers::default();
        let mut a = w.subscribe(1);
        let b = w.subscribe(2);
        w.notify([1, 3]);
        assert!(a.has_changed().unwrap());
        assert_eq!(*a.borrow_and_update(), 1);
        assert!(!b.has_changed().unwrap());
        drop(b);
        w.notify([2]);
        assert_eq!(w.len(), 1);
        drop(a);
        let _c = w.subscribe(4);
        assert_eq!(w.len(), 1, "mailbox 1's channel went when 4's came");
    }
}
