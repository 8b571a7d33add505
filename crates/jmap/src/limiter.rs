//! Per-account limits on work running at once (`maxConcurrentRequests`,
//! `maxConcurrentUpload`, RFC 8620 §2).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use store::AccountId;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// At most `each` at once per account.
pub(crate) struct Limiter {
    each: usize,
    running: Mutex<HashMap<AccountId, Arc<Semaphore>>>,
}

impl Limiter {
    pub(crate) fn new(each: usize) -> Limiter {
        Limiter {
            each: each.max(1),
            running: Mutex::new(HashMap::new()),
        }
    }

    /// A turn for `account`, held until the permit is dropped; `Err` when
    /// the account already has all its turns.
    pub(crate) fn try_acquire(&self, account: AccountId) -> Result<OwnedSemaphorePermit, ()> {
        let semaphore = {
            let mut running = self.running.lock().expect("limiter lock");
            // Accounts with nothing running have all their permits back:
            // their entries can go, so the map stays as small as the set
            // of busy accounts.
            if running.len() > 1024 {
                let each = self.each;
                running.retain(|_, s| s.available_permits() < each);
            }
            Arc::clone(
                running
                    .entry(account)
                    .or_insert_with(|| Arc::new(Semaphore::new(self.each))),
            )
        };
        semaphore.try_acquire_owned().map_err(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_account_has_its_own_turns() {
        let l = Limiter::new(2);
        let a1 = l.try_acquire(1).unwrap();
        let _a2 = l.try_acquire(1).unwrap();
        assert!(l.try_acquire(1).is_err());
        assert!(l.try_acquire(2).is_ok());
        drop(a1);
        assert!(l.try_acquire(1).is_ok());
    }
}
