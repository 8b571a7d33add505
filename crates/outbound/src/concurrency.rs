//! How many connections each destination gets at once (Postfix's model):
//! a destination starts with `initial` connections, earns one more after
//! each delivery run that reached it, up to `limit`, and is halved when a
//! run could not reach it, so a destination that slows or fails is not
//! hammered while a healthy one with a backlog gets parallel connections.

use std::collections::HashMap;
use std::sync::Mutex;

/// Destinations remembered at most; past it the idle ones are forgotten.
const MAX_REMEMBERED: usize = 10_000;

#[derive(Debug, Clone, Copy)]
struct Window {
    /// Connections allowed now.
    size: usize,
    /// Connections open now.
    running: usize,
}

/// What a delivery run to a destination learned about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Feedback {
    /// It answered: transactions completed (whatever their replies).
    Reached,
    /// No MX could be reached, or the session broke.
    Unreachable,
    /// Nothing learned (a DNS answer, a policy refusal).
    None,
}

/// The per-destination windows.
pub struct Concurrency {
    initial: usize,
    limit: usize,
    windows: Mutex<HashMap<String, Window>>,
}

impl Concurrency {
    pub fn new(initial: usize, limit: usize) -> Concurrency {
        let limit = limit.max(1);
        Concurrency {
            initial: initial.clamp(1, limit),
            limit,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Takes up to `wanted` connection slots for `domain`; returns how
    /// many were granted (0 when its window is full).
    pub fn acquire(&self, domain: &str, wanted: usize) -> usize {
        let mut windows = self.windows.lock().expect("concurrency lock");
        if windows.len() >= MAX_REMEMBERED && !windows.contains_key(domain) {
            windows.retain(|_, w| w.running > 0);
        }
        let w = windows.entry(domain.to_string()).or_insert(Window {
            size: self.initial,
            running: 0,
        });
        let granted = w.size.saturating_sub(w.running).min(wanted);
        w.running += granted;
        granted
    }

    /// Gives a slot back, with what its run learned.
    pub fn release(&self, domain: &str, feedback: Feedback) {
        let mut windows = self.windows.lock().expect("concurrency lock");
        if let Some(w) = windows.get_mut(domain) {
            w.running = w.running.saturating_sub(1);
            match feedback {
                Feedback::Reached => w.size = (w.size + 1).min(self.limit),
                Feedback::Unreachable => w.size = (w.size / 2).max(1),
                Feedback::None => {}
            }
        }
    }

    /// Connections open to `domain` now.
    pub fn running(&self, domain: &str) -> usize {
        self.windows
            .lock()
            .expect("concurrency lock")
            .get(domain)
            .map_or(0, |w| w.running)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_grow_on_success_and_halve_on_failure() {
        let c = Concurrency::new(2, 5);
        assert_eq!(c.acquire("a.test", 10), 2);
        assert_eq!(c.acquire("a.test", 10), 0);
        c.release("a.test", Feedback::Reached);
        c.release("a.test", Feedback::Reached);
        // 4 now.
        assert_eq!(c.acquire("a.test", 10), 4);
        for _ in 0..4 {
            c.release("a.test", Feedback::Reached);
        }
        // Capped at 5.
        assert_eq!(c.acquire("a.test", 10), 5);
        for _ in 0..5 {
            c.release("a.test", Feedback::Unreachable);
        }
        // Halved five times, never below one.
        assert_eq!(c.acquire("a.test", 10), 1);
        // Other destinations are apart.
        assert_eq!(c.acquire("b.test", 1), 1);
        assert_eq!(c.running("a.test"), 1);
    }
}
