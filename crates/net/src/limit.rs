//! Concurrent connections per client address, fewer for an address that
//! has been failing to log in.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Says which client addresses to hold to fewer connections.
pub type HeldAddresses = Arc<dyn Fn(IpAddr) -> bool + Send + Sync>;

/// Counts open connections per client address and in all, and refuses
/// past either limit.
pub struct ConnLimiter {
    per_ip: usize,
    total: usize,
    /// Addresses held to fewer connections, and how many (see
    /// [`ConnLimiter::holding`]).
    held: Option<(HeldAddresses, usize)>,
    /// Open connections per address, and in all.
    open: Mutex<(HashMap<IpAddr, usize>, usize)>,
}

/// Why a connection was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its address has `per_ip` connections open.
    FromAddress,
    /// The listener has `total` connections open.
    Full,
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
        ConnLimiter::with_total(per_ip, usize::MAX)
    }

    /// At most `per_ip` simultaneous connections from one address and
    /// `total` from all together.
    pub fn with_total(per_ip: usize, total: usize) -> Arc<ConnLimiter> {
        Arc::new(ConnLimiter {
            per_ip,
            total,
            held: None,
            open: Mutex::new((HashMap::new(), 0)),
        })
    }

    /// [`ConnLimiter::with_total`], and at most `held_per_ip` from an
    /// address `held` says to hold (one failing to log in: its guesses
    /// are one at a time anyway, and its other connections only cost).
    /// `held` is asked at each new connection, so it must be cheap.
    pub fn holding(
        per_ip: usize,
        total: usize,
        held: HeldAddresses,
        held_per_ip: usize,
    ) -> Arc<ConnLimiter> {
        Arc::new(ConnLimiter {
            per_ip,
            total,
            held: Some((held, held_per_ip.min(per_ip))),
            open: Mutex::new((HashMap::new(), 0)),
        })
    }

    /// Takes a slot for `ip`, unless a limit is reached.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Result<ConnGuard, Refused> {
        let mut guard = self.open.lock().expect("limiter lock");
        let (per_address, all) = &mut *guard;
        if *all >= self.total {
            return Err(Refused::Full);
        }
        let n = per_address.entry(ip).or_insert(0);
        let limit = match &self.held {
            Some((held, fewer)) if *n >= *fewer && held(ip) => *fewer,
            _ => self.per_ip,
        };
        if *n >= limit {
            if *n == 0 {
                per_address.remove(&ip);
            }
            return Err(Refused::FromAddress);
        }
        *n += 1;
        *all += 1;
        Ok(ConnGuard {
            limiter: Arc::clone(self),
            ip,
        })
    }

    /// Connections open from `ip`.
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.open
            .lock()
            .expect("limiter lock")
            .0
            .get(&ip)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let mut guard = self.limiter.open.lock().expect("limiter lock");
        let (per_address, all) = &mut *guard;
        *all -= 1;
        if let Some(n) = per_address.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                per_address.remove(&self.ip);
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
        assert_eq!(l.try_acquire(a).err(), Some(Refused::FromAddress));
        assert!(l.try_acquire(b).is_ok());
        drop(g1);
        assert_eq!(l.open_from(a), 1);
        assert!(l.try_acquire(a).is_ok());
    }

    #[test]
    fn a_held_address_gets_fewer_connections() {
        let bad: IpAddr = "10.0.0.66".parse().unwrap();
        let l = ConnLimiter::holding(5, 100, Arc::new(move |ip| ip == bad), 2);
        let held: Vec<_> = (0..2).map(|_| l.try_acquire(bad).unwrap()).collect();
        assert_eq!(l.try_acquire(bad).err(), Some(Refused::FromAddress));
        let good: IpAddr = "10.0.0.1".parse().unwrap();
        let others: Vec<_> = (0..5).map(|_| l.try_acquire(good).unwrap()).collect();
        assert_eq!(l.try_acquire(good).err(), Some(Refused::FromAddress));
        drop((held, others));
        assert_eq!(l.open_from(bad), 0);
    }

    #[test]
    fn the_total_counts_every_address() {
        let l = ConnLimiter::with_total(5, 3);
        let ips: Vec<IpAddr> = (1..=4)
            .map(|i| format!("10.0.0.{i}").parse().unwrap())
            .collect();
        let guards: Vec<_> = ips[..3]
            .iter()
            .map(|ip| l.try_acquire(*ip).unwrap())
            .collect();
        assert_eq!(l.try_acquire(ips[3]).err(), Some(Refused::Full));
        drop(guards);
        assert!(l.try_acquire(ips[3]).is_ok());
    }
}
