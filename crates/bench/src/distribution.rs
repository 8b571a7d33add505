//! The random distributions the workloads draw from: message sizes,
//! recipients per message, exact shares, Zipf ranks and exponential
//! inter-arrival times. Each parses from the short strings used on the
//! command line.

use std::fmt;
use std::str::FromStr;

use rand::Rng;

use crate::error::BenchError;

/// Message sizes in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeDist {
    /// Always this many bytes (`4096`, `4k`).
    Fixed(usize),
    /// Uniform between two bounds, inclusive (`0-5k`, as postal's `-m 5`).
    Range(usize, usize),
    /// Log-normal with a mean near the seed's 4.7 KB and a long tail
    /// (median about 2.9 KB, capped at 1 MB): `realistic`.
    Realistic,
}

/// Median and shape of [`SizeDist::Realistic`]: mean = median·e^(σ²/2) ≈ 4.7 KB.
const REALISTIC_MEDIAN: f64 = 2850.0;
const REALISTIC_SIGMA: f64 = 1.0;
const REALISTIC_CAP: usize = 1 << 20;

impl SizeDist {
    /// Draws one size.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        match *self {
            SizeDist::Fixed(n) => n,
            SizeDist::Range(a, b) => rng.gen_range(a..=b),
            SizeDist::Realistic => {
                let z = standard_normal(rng);
                let v = REALISTIC_MEDIAN * (REALISTIC_SIGMA * z).exp();
                (v as usize).clamp(200, REALISTIC_CAP)
            }
        }
    }

    /// The distribution's mean, for reports.
    pub fn mean(&self) -> f64 {
        match *self {
            SizeDist::Fixed(n) => n as f64,
            SizeDist::Range(a, b) => (a + b) as f64 / 2.0,
            SizeDist::Realistic => REALISTIC_MEDIAN * (REALISTIC_SIGMA.powi(2) / 2.0).exp(),
        }
    }
}

fn parse_bytes(s: &str) -> Result<usize, BenchError> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    let (num, mult) = if let Some(n) = lower.strip_suffix("kb").or(lower.strip_suffix('k')) {
        (n.to_string(), 1024)
    } else if let Some(n) = lower.strip_suffix("mb").or(lower.strip_suffix('m')) {
        (n.to_string(), 1024 * 1024)
    } else {
        (lower.clone(), 1)
    };
    let n: f64 = num
        .trim()
        .parse()
        .map_err(|_| BenchError::Invalid(format!("size {s:?}")))?;
    if !(n >= 0.0 && n.is_finite()) {
        return Err(BenchError::Invalid(format!("size {s:?}")));
    }
    Ok((n * mult as f64).round() as usize)
}

impl FromStr for SizeDist {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("realistic") {
            return Ok(SizeDist::Realistic);
        }
        match s.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (parse_bytes(a)?, parse_bytes(b)?);
                if a > b {
                    return Err(BenchError::Invalid(format!("size range {s:?} is reversed")));
                }
                Ok(SizeDist::Range(a, b))
            }
            None => Ok(SizeDist::Fixed(parse_bytes(s)?)),
        }
    }
}

impl fmt::Display for SizeDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeDist::Fixed(n) => write!(f, "{n}"),
            SizeDist::Range(a, b) => write!(f, "{a}-{b}"),
            SizeDist::Realistic => f.write_str("realistic"),
        }
    }
}

/// Recipients per message.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RecipientDist {
    /// Always this many (`1`, `15`).
    Fixed(usize),
    /// Uniform between two bounds, inclusive (`5-15`).
    Range(usize, usize),
    /// Legitimate mail: one recipient, two in 2% of messages (mean 1.02,
    /// as in the university trace of the spam-aware study): `legit`.
    Legit,
    /// Spam: uniform 5 to 15 (`spam`), the common case in the sinkhole trace.
    Spam,
}

impl RecipientDist {
    /// Draws one count (at least 1).
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let n = match *self {
            RecipientDist::Fixed(n) => n,
            RecipientDist::Range(a, b) => rng.gen_range(a..=b),
            RecipientDist::Legit => {
                if rng.gen_bool(0.02) {
                    2
                } else {
                    1
                }
            }
            RecipientDist::Spam => rng.gen_range(5..=15),
        };
        n.max(1)
    }

    /// The largest count this can draw.
    pub fn max(&self) -> usize {
        match *self {
            RecipientDist::Fixed(n) => n.max(1),
            RecipientDist::Range(_, b) => b.max(1),
            RecipientDist::Legit => 2,
            RecipientDist::Spam => 15,
        }
    }
}

impl FromStr for RecipientDist {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BenchError::Invalid(format!("recipients {s:?}"));
        match s.trim() {
            "legit" => Ok(RecipientDist::Legit),
            "spam" => Ok(RecipientDist::Spam),
            t => match t.split_once('-') {
                Some((a, b)) => {
                    let a: usize = a.trim().parse().map_err(|_| bad())?;
                    let b: usize = b.trim().parse().map_err(|_| bad())?;
                    if a == 0 || a > b {
                        return Err(bad());
                    }
                    Ok(RecipientDist::Range(a, b))
                }
                None => match t.parse() {
                    Ok(0) | Err(_) => Err(bad()),
                    Ok(n) => Ok(RecipientDist::Fixed(n)),
                },
            },
        }
    }
}

impl fmt::Display for RecipientDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecipientDist::Fixed(n) => write!(f, "{n}"),
            RecipientDist::Range(a, b) => write!(f, "{a}-{b}"),
            RecipientDist::Legit => f.write_str("legit"),
            RecipientDist::Spam => f.write_str("spam"),
        }
    }
}

/// Whether item `i` of a sequence is one of the chosen share `ratio`.
///
/// Spreads the chosen items evenly so that among the first `n` items exactly
/// `floor(n·ratio)` are chosen, whatever `n` is: a run that stops at any
/// moment still has the exact share, with no randomness to average out.
pub fn exact_share(i: u64, ratio: f64) -> bool {
    if ratio <= 0.0 {
        return false;
    }
    if ratio >= 1.0 {
        return true;
    }
    chosen_before(i + 1, ratio) > chosen_before(i, ratio)
}

/// How many of the first `n` items [`exact_share`] chooses.
pub fn chosen_before(n: u64, ratio: f64) -> u64 {
    // Multiply in integers of a fixed grain so the count is exact and
    // monotone (no float drift over millions of items).
    const GRAIN: u128 = 1 << 32;
    let r = (ratio.clamp(0.0, 1.0) * GRAIN as f64).round() as u128;
    ((n as u128 * r) / GRAIN) as u64
}

/// A standard normal draw (Box-Muller).
pub fn standard_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// An exponential draw with the given mean (Poisson arrivals).
pub fn exponential(rng: &mut impl Rng, mean: f64) -> f64 {
    let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    -mean * u.ln()
}

/// Ranks 0..n drawn with probability proportional to 1/(rank+1)^s.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    /// A Zipf law over `n` ranks with exponent `s`.
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for k in 0..n {
            total += 1.0 / ((k + 1) as f64).powf(s);
            cdf.push(total);
        }
        for v in &mut cdf {
            *v /= total;
        }
        Zipf { cdf }
    }

    /// Draws one rank.
    pub fn sample(&self, rng: &mut impl Rng) -> usize {
        let u: f64 = rng.gen();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn parses_sizes() {
        assert_eq!("4096".parse::<SizeDist>().unwrap(), SizeDist::Fixed(4096));
        assert_eq!("4k".parse::<SizeDist>().unwrap(), SizeDist::Fixed(4096));
        assert_eq!(
            "0-5k".parse::<SizeDist>().unwrap(),
            SizeDist::Range(0, 5120)
        );
        assert_eq!(
            "realistic".parse::<SizeDist>().unwrap(),
            SizeDist::Realistic
        );
        assert!("5k-1k".parse::<SizeDist>().is_err());
        assert!("lots".parse::<SizeDist>().is_err());
    }

    #[test]
    fn parses_recipients() {
        assert_eq!(
            "15".parse::<RecipientDist>().unwrap(),
            RecipientDist::Fixed(15)
        );
        assert_eq!(
            "5-15".parse::<RecipientDist>().unwrap(),
            RecipientDist::Range(5, 15)
        );
        assert_eq!(
            "legit".parse::<RecipientDist>().unwrap(),
            RecipientDist::Legit
        );
        assert!("0".parse::<RecipientDist>().is_err());
        assert!("3-2".parse::<RecipientDist>().is_err());
    }

    #[test]
    fn realistic_sizes_have_the_seed_mean() {
        let mut rng = StdRng::seed_from_u64(7);
        let n = 200_000;
        let total: usize = (0..n).map(|_| SizeDist::Realistic.sample(&mut rng)).sum();
        let mean = total as f64 / n as f64;
        assert!((4400.0..5000.0).contains(&mean), "mean {mean}");
    }

    #[test]
    fn legit_recipients_average_1_02() {
        let mut rng = StdRng::seed_from_u64(1);
        let n = 200_000;
        let total: usize = (0..n).map(|_| RecipientDist::Legit.sample(&mut rng)).sum();
        let mean = total as f64 / n as f64;
        assert!((1.015..1.025).contains(&mean), "mean {mean}");
    }

    #[test]
    fn zipf_prefers_low_ranks() {
        let z = Zipf::new(1000, 1.0);
        let mut rng = StdRng::seed_from_u64(3);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng)] += 1;
        }
        assert!(counts[0] > counts[1] && counts[1] > counts[9] && counts[9] > counts[999]);
        // Rank 1 draws about twice as often as rank 2 under s = 1.
        let r = counts[0] as f64 / counts[1] as f64;
        assert!((1.8..2.2).contains(&r), "ratio {r}");
    }

    proptest! {
        #[test]
        fn exact_share_is_exact_at_every_prefix(ratio in 0.0f64..=1.0, n in 0u64..5000) {
            let chosen = (0..n).filter(|&i| exact_share(i, ratio)).count() as u64;
            prop_assert_eq!(chosen, chosen_before(n, ratio));
            let ideal = n as f64 * ratio;
            prop_assert!((chosen as f64 - ideal).abs() <= 1.0);
        }

        #[test]
        fn sizes_stay_in_range(a in 0usize..10_000, extra in 0usize..10_000, seed: u64) {
            let d = SizeDist::Range(a, a + extra);
            let mut rng = StdRng::seed_from_u64(seed);
            for _ in 0..50 {
                let s = d.sample(&mut rng);
                prop_assert!(s >= a && s <= a + extra);
            }
        }

        #[test]
        fn recipients_stay_within_max(a in 1usize..20, extra in 0usize..20, seed: u64) {
            let d = RecipientDist::Range(a, a + extra);
            let mut rng = StdRng::seed_from_u64(seed);
            for _ in 0..50 {
                let n = d.sample(&mut rng);
                prop_assert!(n >= a && n <= d.max());
            }
        }
    }
}
