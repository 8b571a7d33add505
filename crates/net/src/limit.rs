//! Concurrent connections per client address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Counts open connections per client address and refuses past a limit.
pub struct ConnLimiter {
    per_ip: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// Held by a session for as long as its connection counts; dropping it
/// frees the slot.
pub struct ConnGuard {
    limiter: Arc<ConnLimiter>,
    ip: IpAddr,
}

impl ConnLimiter {
    /// At most `per_ip` simultaneous connections from one address.
    pub fn new(per_ip: usize) -> Arc<ConnLimiter> {
        Arc::new(ConnLimiter {
            per_ip,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// Takes a slot for `ip`, or `None` if it already has `per_ip`.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Option<ConnGuard> {
        let mut open = self.open.lock().expect("limiter lock");
        let n = open.entry(ip).or_insert(0);
        if *n >= self.per_ip {
            return None;
        }
        *n += 1;
        Some(ConnGuard {
            limiter: Arc::clone(self),
            ip,
        })
    }

    /// Connections open from `ip`.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.open
            .lock()
            .expect("limiter lock")
            .get(&ip)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let mut open = self.limiter.open.lock().expect("limiter lock");
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_per_address_and_freed_on_drop() {
        let l = ConnLimiter::new(2);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let g1 = l.try_acquire(a).unwrap();
        let _g2 = l.try_acquire(a).unwrap();
        assert!(l.try_acquire(a).is_none());
        assert!(l.try_acquire(b).is_some());
        drop(g1);
        assert_eq!(l.open_from(a), 1);
        assert!(l.try_acquire(a).is_some());
    }
}
