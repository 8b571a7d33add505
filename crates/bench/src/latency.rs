//! Latency samples and their percentiles, and a per-second timeline of
//! completions for "latency over time" reports and plots.

use std::time::Duration;

use serde::Serialize;

/// Latency samples of one kind of operation, kept exactly (microseconds).
///
/// Exact samples cost 4 bytes each: ten million operations take 40 MB,
/// more than any run of this tool on one machine needs, and percentiles
/// then need no bucketing error analysis.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    micros: Vec<u32>,
}

/// The percentiles a report shows, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Number of samples.
    pub count: u64,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram::default()
    }

    /// Records one sample.
    pub fn record(&mut self, d: Duration) {
        self.micros.push(d.as_micros().min(u32::MAX as u128) as u32);
    }

    /// Adds all of `other`'s samples.
    pub fn merge(&mut self, other: &Histogram) {
        self.micros.extend_from_slice(&other.micros);
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.micros.len()
    }

    /// Whether there are no samples.
    pub fn is_empty(&self) -> bool {
        self.micros.is_empty()
    }

    /// The nearest-rank percentile `p` (0 < p ≤ 100), in microseconds:
    /// the smallest sample with at least p% of the samples at or below it.
    pub fn percentile_micros(&self, p: f64) -> Option<u32> {
        let mut sorted = self.micros.clone();
        sorted.sort_unstable();
        nearest_rank(&sorted, p)
    }

    /// The summary a report shows.
    pub fn summary(&self) -> Percentiles {
        if self.micros.is_empty() {
            return Percentiles::default();
        }
        let mut sorted = self.micros.clone();
        sorted.sort_unstable();
        let ms = |v: Option<u32>| v.unwrap_or(0) as f64 / 1000.0;
        let sum: u64 = sorted.iter().map(|&v| v as u64).sum();
        Percentiles {
            count: sorted.len() as u64,
            mean_ms: sum as f64 / sorted.len() as f64 / 1000.0,
            p50_ms: ms(nearest_rank(&sorted, 50.0)),
            p90_ms: ms(nearest_rank(&sorted, 90.0)),
            p99_ms: ms(nearest_rank(&sorted, 99.0)),
            max_ms: ms(sorted.last().copied()),
        }
    }
}

fn nearest_rank(sorted: &[u32], p: f64) -> Option<u32> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(f64::MIN_POSITIVE, 100.0);
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Completions per second of the run, with their mean latency.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timeline {
    /// Completions in each second since the start.
    pub count: Vec<u64>,
    /// Sum of latencies (ms) of the completions in each second.
    pub latency_sum_ms: Vec<f64>,
}

impl Timeline {
    /// Records a completion at `at` (since the start) that took `took`.
    pub fn record(&mut self, at: Duration, took: Duration) {
        let s = at.as_secs() as usize;
        if self.count.len() <= s {
            self.count.resize(s + 1, 0);
            self.latency_sum_ms.resize(s + 1, 0.0);
        }
        self.count[s] += 1;
        self.latency_sum_ms[s] += took.as_secs_f64() * 1000.0;
    }

    /// Adds another timeline second by second.
    pub fn merge(&mut self, other: &Timeline) {
        if self.count.len() < other.count.len() {
            self.count.resize(other.count.len(), 0);
            self.latency_sum_ms.resize(other.count.len(), 0.0);
        }
        for (i, c) in other.count.iter().enumerate() {
            self.count[i] += c;
            self.latency_sum_ms[i] += other.latency_sum_ms[i];
        }
    }

    /// Mean latency (ms) in each second (0 where nothing completed).
    pub fn mean_ms(&self) -> Vec<f64> {
        self.count
            .iter()
            .zip(&self.latency_sum_ms)
            .map(|(&c, &s)| if c == 0 { 0.0 } else { s / c as f64 })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hist(v: &[u32]) -> Histogram {
        let mut h = Histogram::new();
        for &x in v {
            h.record(Duration::from_micros(x as u64));
        }
        h
    }

    #[test]
    fn nearest_rank_on_1_to_100() {
        let v: Vec<u32> = (1..=100).rev().collect();
        let h = hist(&v);
        assert_eq!(h.percentile_micros(50.0), Some(50));
        assert_eq!(h.percentile_micros(90.0), Some(90));
        assert_eq!(h.percentile_micros(99.0), Some(99));
        assert_eq!(h.percentile_micros(100.0), Some(100));
        let s = h.summary();
        assert_eq!(s.count, 100);
        assert!((s.mean_ms - 0.0505).abs() < 1e-9);
        assert_eq!(s.max_ms, 0.1);
    }

    #[test]
    fn small_sets() {
        assert_eq!(hist(&[]).percentile_micros(50.0), None);
        assert_eq!(hist(&[7]).percentile_micros(99.0), Some(7));
        assert_eq!(hist(&[1, 2]).percentile_micros(50.0), Some(1));
        assert_eq!(hist(&[1, 2]).percentile_micros(51.0), Some(2));
        assert_eq!(hist(&[]).summary(), Percentiles::default());
    }

    #[test]
    fn timeline_buckets_by_second() {
        let mut t = Timeline::default();
        t.record(Duration::from_millis(100), Duration::from_millis(2));
        t.record(Duration::from_millis(900), Duration::from_millis(4));
        t.record(Duration::from_millis(2500), Duration::from_millis(6));
        assert_eq!(t.count, vec![2, 0, 1]);
        assert_eq!(t.mean_ms(), vec![3.0, 0.0, 6.0]);
        let mut u = Timeline::default();
        u.record(Duration::from_millis(3100), Duration::from_millis(1));
        t.merge(&u);
        assert_eq!(t.count, vec![2, 0, 1, 1]);
    }

    proptest! {
        #[test]
        fn percentiles_are_ordered_samples(v in proptest::collection::vec(0u32..1_000_000, 1..500)) {
            let h = hist(&v);
            let p50 = h.percentile_micros(50.0).unwrap();
            let p90 = h.percentile_micros(90.0).unwrap();
            let p99 = h.percentile_micros(99.0).unwrap();
            prop_assert!(p50 <= p90 && p90 <= p99);
            prop_assert!(v.contains(&p50) && v.contains(&p99));
            // At least p% of the samples are at or below the p-th percentile,
            // and fewer than p% are strictly below it.
            let at_or_below = v.iter().filter(|&&x| x <= p90).count() as f64;
            let below = v.iter().filter(|&&x| x < p90).count() as f64;
            prop_assert!(at_or_below / v.len() as f64 >= 0.9);
            prop_assert!(below / (v.len() as f64) < 0.9);
        }

        #[test]
        fn merge_is_concatenation(a in proptest::collection::vec(0u32..1000, 0..50),
                                  b in proptest::collection::vec(0u32..1000, 0..50)) {
            let mut h = hist(&a);
            h.merge(&hist(&b));
            let mut all = a.clone();
            all.extend(&b);
            prop_assert_eq!(h.summary(), hist(&all).summary());
        }
    }
}
