//! A progress bar on stderr for long runs (indicatif; hidden when stderr
//! is not a terminal, so logs and `--json` output stay clean).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Runs shorter than this get no bar.
const LONG_RUN: Duration = Duration::from_secs(3);

/// A bar that follows a run against a deadline or a count, showing a
/// counter the workers bump.
pub struct Progress {
    bar: Option<ProgressBar>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// A bar over `duration` (seconds elapsed) showing `done` as `what`.
    pub fn timed(duration: Duration, what: &'static str, done: Arc<AtomicU64>) -> Progress {
        if duration < LONG_RUN {
            return Progress {
                bar: None,
                ticker: None,
            };
        }
        let bar = ProgressBar::new(duration.as_secs());
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len}s {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        let b = bar.clone();
        let ticker = tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                b.set_position(start.elapsed().as_secs());
                b.set_message(format!("{} {what}", done.load(Ordering::Relaxed)));
            }
        });
        Progress {
            bar: Some(bar),
            ticker: Some(ticker),
        }
    }

    /// A bar counting `total` items.
    pub fn counted(total: u64, what: &'static str) -> Progress {
        if total < 1000 {
            return Progress {
                bar: None,
                ticker: None,
            };
        }
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_message(what);
        Progress {
            bar: Some(bar),
            ticker: None,
        }
    }

    /// Advances a counted bar.
    pub fn inc(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }

    /// Removes the bar.
    pub fn finish(self) {
        if let Some(t) = self.ticker {
            t.abort();
        }
        if let Some(b) = self.bar {
            b.finish_and_clear();
        }
    }
}
