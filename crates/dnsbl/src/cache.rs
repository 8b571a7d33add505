//! The client's answer cache: TTL expiry, a size bound, and merging of
//! concurrent lookups for the same key into one query. No I/O.
//!
//! A key is in one of two states: `Ready` (an answer and when it expires) or
//! `Pending` (a query is in flight; later askers subscribe to its result
//! instead of sending their own).

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Instant;

use tokio::sync::watch;

/// Why a lookup produced no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// No reply in time.
    Timeout,
    /// A reply that was an error (SERVFAIL, REFUSED, ...), or an I/O error.
    Error,
}

/// What a waiter receives: `None` until the query is done.
pub(crate) type Shared<V> = Option<Result<V, Failure>>;

enum Slot<V> {
    Ready { value: V, expires: Instant },
    Pending(watch::Receiver<Shared<V>>),
}

/// The result of looking a key up.
pub(crate) enum Probe<V> {
    /// A fresh answer.
    Hit(V),
    /// A query for this key is in flight: wait on it.
    Join(watch::Receiver<Shared<V>>),
    /// Nobody has asked: the caller must query and publish through the
    /// sender (and call [`Cache::finish`]); the receiver is for waiting too.
    Lead(watch::Sender<Shared<V>>, watch::Receiver<Shared<V>>),
}

/// A bounded map of answers with expiry times.
pub(crate) struct Cache<K, V> {
    map: HashMap<K, Slot<V>>,
    max_entries: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> Cache<K, V> {
    pub(crate) fn new(max_entries: usize) -> Self {
        Cache {
            map: HashMap::new(),
            max_entries: max_entries.max(1),
        }
    }

    pub(crate) fn probe(&mut self, key: &K, now: Instant) -> Probe<V> {
        match self.map.get(key) {
            Some(Slot::Ready { value, expires }) if *expires > now => {
                return Probe::Hit(value.clone());
            }
            // a leader that vanished without publishing leaves a closed channel
            Some(Slot::Pending(rx)) if rx.has_changed().is_ok() => {
                return Probe::Join(rx.clone());
            }
            _ => {}
        }
        if self.map.len() >= self.max_entries && !self.map.contains_key(key) {
            self.evict(now);
        }
        let (tx, rx) = watch::channel(None);
        self.map.insert(key.clone(), Slot::Pending(rx.clone()));
        Probe::Lead(tx, rx)
    }

    /// Stores the answer of a finished query until `expires`, or forgets
    /// the key when there is nothing to keep (a failure, or a zero TTL).
    pub(crate) fn finish(&mut self, key: K, answer: Option<(V, Instant)>) {
        match answer {
            Some((value, expires)) => {
                self.map.insert(key, Slot::Ready { value, expires });
            }
            None => {
                self.map.remove(&key);
            }
        }
    }

    fn evict(&mut self, now: Instant) {
        self.map
            .retain(|_, s| !matches!(s, Slot::Ready { expires, .. } if *expires <= now));
        if self.map.len() < self.max_entries {
            return;
        }
        // Still full of live answers: drop a tenth of them, soonest to
        // expire first, so the bound holds and the work is amortised.
        let mut ready: Vec<(Instant, K)> = self
            .map
            .iter()
            .filter_map(|(k, s)| match s {
                Slot::Ready { expires, .. } => Some((*expires, k.clone())),
                Slot::Pending(_) => None,
            })
            .collect();
        let drop_n = (self.max_entries / 10).max(1).min(ready.len());
        ready.select_nth_unstable_by_key(drop_n.saturating_sub(1), |(e, _)| *e);
        for (_, k) in ready.into_iter().take(drop_n) {
            self.map.remove(&k);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn hit_until_expiry_then_lead_again() {
        let mut c: Cache<u32, &str> = Cache::new(10);
        let t0 = Instant::now();
        let Probe::Lead(tx, _) = c.probe(&1, t0) else {
            panic!()
        };
        assert!(matches!(c.probe(&1, t0), Probe::Join(_)));
        c.finish(1, Some(("x", t0 + Duration::from_secs(60))));
        let _ = tx.send(Some(Ok("x")));
        assert!(matches!(
            c.probe(&1, t0 + Duration::from_secs(59)),
            Probe::Hit("x")
        ));
        assert!(matches!(
            c.probe(&1, t0 + Duration::from_secs(60)),
            Probe::Lead(..)
        ));
    }

    #[test]
    fn failure_is_not_kept_and_a_dead_leader_is_replaced() {
        let mut c: Cache<u32, u8> = Cache::new(10);
        let t0 = Instant::now();
        let Probe::Lead(tx, _) = c.probe(&1, t0) else {
            panic!()
        };
        c.finish(1, None);
        drop(tx);
        assert!(matches!(c.probe(&1, t0), Probe::Lead(..)));
        // a leader dropped without finishing
        let Probe::Lead(tx, rx) = c.probe(&2, t0) else {
            panic!()
        };
        drop(tx);
        drop(rx);
        assert!(matches!(c.probe(&2, t0), Probe::Lead(..)));
    }

    #[test]
    fn size_stays_bounded() {
        let mut c: Cache<u32, u8> = Cache::new(100);
        let t0 = Instant::now();
        for k in 0..1000u32 {
            let _ = c.probe(&k, t0);
            c.finish(k, Some((1, t0 + Duration::from_secs(u64::from(k) + 1))));
            assert!(c.len() <= 100);
        }
        // the newest entry survives
        assert!(matches!(c.probe(&999, t0), Probe::Hit(1)));
    }
}
