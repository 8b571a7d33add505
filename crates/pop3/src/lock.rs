//! RFC 1939 §8: a maildrop is used by one POP3 session at a time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use store::AccountId;

/// The accounts with a POP3 session open.
#[derive(Default)]
pub struct MailboxLocks {
    held: Mutex<HashSet<AccountId>>,
}

/// Holds an account's maildrop until dropped.
pub(crate) struct MailboxLock {
    locks: Arc<MailboxLocks>,
    account: AccountId,
}

impl MailboxLocks {
    /// Takes the lock for `account`, or `None` if another session has it.
    pub(crate) fn acquire(self: &Arc<Self>, account: AccountId) -> Option<MailboxLock> {
        self.held
            .lock()
            .expect("mailbox locks")
            .insert(account)
            .then(|| MailboxLock {
                locks: Arc::clone(self),
                account,
            })
    }
}

impl Drop for MailboxLock {
    fn drop(&mut self) {
        self.locks
            .held
            .lock()
            .expect("mailbox locks")
            .remove(&self.account);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time() {
        let locks = Arc::new(MailboxLocks::default());
        let a = locks.acquire(1).unwrap();
        assert!(locks.acquire(1).is_none());
        assert!(locks.acquire(2).is_some());
        drop(a);
        assert!(locks.acquire(1).is_some());
    }
}
