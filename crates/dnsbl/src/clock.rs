//! The clock the client's cache reads: real time, or a hand-moved clock for
//! replays and tests (so a 24-hour TTL can be replayed without waiting a day
//! and tests need no sleeps).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the cache gets "now" from. Time-outs of DNS queries always use
/// real time; only cache expiry follows this clock.
#[derive(Debug, Clone, Default)]
pub struct Clock(Option<Arc<Manual>>);

#[derive(Debug)]
struct Manual {
    start: Instant,
    offset_nanos: AtomicU64,
}

impl Clock {
    /// The system's monotonic clock.
    pub fn system() -> Clock {
        Clock(None)
    }

    /// A clock that stands still until [`Clock::advance`] moves it.
    pub fn manual() -> Clock {
        Clock(Some(Arc::new(Manual {
            start: Instant::now(),
            offset_nanos: AtomicU64::new(0),
        })))
    }

    /// The current instant.
    pub fn now(&self) -> Instant {
        match &self.0 {
            None => Instant::now(),
            Some(m) => m.start + Duration::from_nanos(m.offset_nanos.load(Ordering::Acquire)),
        }
    }

    /// Moves a manual clock forward (no effect on the system clock).
    pub fn advance(&self, by: Duration) {
        if let Some(m) = &self.0 {
            let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
            m.offset_nanos.fetch_add(nanos, Ordering::AcqRel);
        }
    }

    /// Sets a manual clock to `since_start` after its creation, if that is
    /// later than where it stands (no effect on the system clock).
    pub fn set_elapsed(&self, since_start: Duration) {
        if let Some(m) = &self.0 {
            let nanos = u64::try_from(since_start.as_nanos()).unwrap_or(u64::MAX);
            m.offset_nanos.fetch_max(nanos, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = Clock::manual();
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        c.advance(Duration::from_secs(86_400));
        assert_eq!(c.now() - t0, Duration::from_secs(86_400));
        c.set_elapsed(Duration::from_secs(10));
        assert_eq!(c.now() - t0, Duration::from_secs(86_400));
        c.set_elapsed(Duration::from_secs(90_000));
        assert_eq!(c.now() - t0, Duration::from_secs(90_000));
    }
}
