//! One score from all the evidence: Bayes and the verdicts Sluice already
//! has (DNSBL, SPF, DKIM, DMARC, virus scan), SpamAssassin style.
//!
//! | reason | when | points |
//! | --- | --- | --- |
//! | `BAYES_00` | probability < 0.01 | -2.5 |
//! | `BAYES_05` | 0.01 ..< 0.05 | -1.0 |
//! | `BAYES_20` | 0.05 ..< 0.20 | -0.5 |
//! | `BAYES_40` | 0.20 ..< 0.40 | -0.1 |
//! | `BAYES_50` | 0.40 ..< 0.60 | 0 (listed, not counted) |
//! | `BAYES_60` | 0.60 ..< 0.80 | 1.0 |
//! | `BAYES_80` | 0.80 ..< 0.95 | 2.0 |
//! | `BAYES_95` | 0.95 ..< 0.99 | 3.0 |
//! | `BAYES_99` | 0.99 ..< 0.999 | 4.0 |
//! | `BAYES_999` | ≥ 0.999 | 5.0 |
//! | `DNSBL` | each zone that lists the client | 2.5, at most 5.0 |
//! | `SPF_FAIL` / `SPF_SOFTFAIL` / `SPF_PERMERROR` | | 2.0 / 1.0 / 0.5 |
//! | `DKIM_PASS` / `DKIM_FAIL` | | -0.5 / 0.5 |
//! | `DMARC_PASS` / `DMARC_FAIL` | | -0.5 / 1.5 |
//! | `VIRUS` | the scanner found malware | 20.0 |
//!
//! The bands are SpamAssassin's; the points are stronger at the spammy end
//! than SpamAssassin's (3.5 for BAYES_99) because Sluice has a handful of
//! tests, not hundreds: a Bayes verdict of 99.9% reaches the default
//! threshold on its own, one of 99% needs one more piece of evidence.

use std::str::FromStr;

use crate::bayes::Bayes;
use crate::error::Error;
use crate::header::fold;

/// The score at or above which a message is spam unless the user chose
/// another threshold (SpamAssassin's `required_score` default).
pub const DEFAULT_THRESHOLD: f32 = 5.0;

/// Points per DNSBL zone that lists the client, and the most all zones
/// together can add.
const DNSBL_POINTS: f32 = 2.5;
const DNSBL_CAP: f32 = 5.0;

/// The result of an SPF, DKIM or DMARC check (RFC 8601 §2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthResult {
    /// The check passed.
    Pass,
    /// The check failed.
    Fail,
    /// SPF: the domain says the host is probably not allowed.
    SoftFail,
    /// The domain makes no statement.
    Neutral,
    /// There was nothing to check (no record, no signature).
    None,
    /// A temporary error (DNS) stopped the check.
    TempError,
    /// The domain's record or the signature is broken.
    PermError,
}

impl FromStr for AuthResult {
    type Err = Error;

    /// Reads the RFC 8601 result keyword ("pass", "softfail", ...; case
    /// does not matter; "policy" for DKIM counts as fail).
    fn from_str(s: &str) -> Result<Self, Error> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "pass" => AuthResult::Pass,
            "fail" | "policy" => AuthResult::Fail,
            "softfail" => AuthResult::SoftFail,
            "neutral" => AuthResult::Neutral,
            "none" => AuthResult::None,
            "temperror" => AuthResult::TempError,
            "permerror" => AuthResult::PermError,
            _ => return Err(Error::UnknownAuthResult(s.to_string())),
        })
    }
}

/// Verdicts Sluice already has, combined with Bayes into one score.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// The user's Bayes verdict, if the model is trained enough.
    pub bayes: Option<Bayes>,
    /// Zones that list the client.
    pub dnsbl: Vec<String>,
    /// SPF result for the envelope sender.
    pub spf: Option<AuthResult>,
    /// DKIM result (the best signature's).
    pub dkim: Option<AuthResult>,
    /// DMARC result for the From domain.
    pub dmarc: Option<AuthResult>,
    /// Whether the virus scanner found malware.
    pub virus: bool,
}

/// The combined score of a message and the tests that made it.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// The sum of the reasons' points.
    pub points: f32,
    /// The tests that fired, in the order they were checked.
    pub reasons: Vec<Reason>,
}

/// One test that fired, with its points.
#[derive(Debug, Clone, PartialEq)]
pub struct Reason {
    /// The test's name as it appears in `X-Spam-Status:`, e.g. "BAYES_99",
    /// "DNSBL", "SPF_FAIL", "DKIM_PASS".
    pub name: &'static str,
    /// Points it adds (negative: evidence for ham).
    pub points: f32,
}

/// The SpamAssassin band of a Bayes probability and its points (see the
/// module's table).
fn bayes_band(p: f64) -> (&'static str, f32) {
    match p {
        // Only a caller's own Bayes value can be NaN: no evidence.
        p if p.is_nan() => ("BAYES_50", 0.0),
        p if p < 0.01 => ("BAYES_00", -2.5),
        p if p < 0.05 => ("BAYES_05", -1.0),
        p if p < 0.20 => ("BAYES_20", -0.5),
        p if p < 0.40 => ("BAYES_40", -0.1),
        p if p < 0.60 => ("BAYES_50", 0.0),
        p if p < 0.80 => ("BAYES_60", 1.0),
        p if p < 0.95 => ("BAYES_80", 2.0),
        p if p < 0.99 => ("BAYES_95", 3.0),
        p if p < 0.999 => ("BAYES_99", 4.0),
        _ => ("BAYES_999", 5.0),
    }
}

/// Combines the evidence into one score (points per test in the module's
/// table).
pub fn score(evidence: &Evidence) -> Score {
    let mut reasons = Vec::new();
    if let Some(b) = &evidence.bayes {
        let (name, points) = bayes_band(b.probability);
        reasons.push(Reason { name, points });
    }
    if !evidence.dnsbl.is_empty() {
        let points = (DNSBL_POINTS * evidence.dnsbl.len() as f32).min(DNSBL_CAP);
        reasons.push(Reason {
            name: "DNSBL",
            points,
        });
    }
    let spf = match evidence.spf {
        Some(AuthResult::Fail) => Some(("SPF_FAIL", 2.0)),
        Some(AuthResult::SoftFail) => Some(("SPF_SOFTFAIL", 1.0)),
        Some(AuthResult::PermError) => Some(("SPF_PERMERROR", 0.5)),
        _ => None,
    };
    let dkim = match evidence.dkim {
        Some(AuthResult::Pass) => Some(("DKIM_PASS", -0.5)),
        Some(AuthResult::Fail) => Some(("DKIM_FAIL", 0.5)),
        _ => None,
    };
    let dmarc = match evidence.dmarc {
        Some(AuthResult::Pass) => Some(("DMARC_PASS", -0.5)),
        // Not more: mail forwarded by lists fails SPF and DMARC alike, and
        // enforcing a domain's DMARC policy is `[auth_checks] dmarc`'s job.
        // SPF and DMARC failing together stay under the threshold.
        Some(AuthResult::Fail) => Some(("DMARC_FAIL", 1.5)),
        _ => None,
    };
    let virus = evidence.virus.then_some(("VIRUS", 20.0));
    for (name, points) in [spf, dkim, dmarc, virus].into_iter().flatten() {
        reasons.push(Reason { name, points });
    }
    // Folded from +0.0: an empty f32 sum is -0.0, which prints as "-0.0".
    let points = reasons.iter().fold(0.0, |sum, r| sum + r.points);
    Score { points, reasons }
}

impl Score {
    /// RFC 5235 spamtest value 1..=10 (1 = certainly not spam .. 10 =
    /// certainly spam) and percent 0..=100, for Sieve.
    ///
    /// RFC 5235 §3.2 keeps 0 for "not tested", which a computed score
    /// never is. The value is `1 + round(percent × 9 / 100)`, so 6 and
    /// above means at least [`DEFAULT_THRESHOLD`] points: a Sieve script's
    /// `spamtest :value "ge" "6"` agrees with the default verdict.
    pub fn spamtest(&self) -> u8 {
        1 + ((u32::from(self.percent()) * 9 + 50) / 100) as u8
    }

    /// RFC 5235 §3.2 spamtest `:percent` value: the points mapped linearly
    /// from -5 (0%) to 15 (100%), rounded down and clamped, so the default
    /// threshold of 5 points is 50%.
    pub fn percent(&self) -> u8 {
        if self.points.is_nan() {
            return 50;
        }
        let p = ((f64::from(self.points) + 5.0) * 5.0)
            .floor()
            .clamp(0.0, 100.0) as u8;
        // Rounding must not put a score just under the threshold at 50%.
        if self.points < DEFAULT_THRESHOLD {
            p.min(49)
        } else {
            p.max(50)
        }
    }

    /// Whether the message is spam at this threshold (points at or above
    /// it).
    pub fn is_spam(&self, threshold: f32) -> bool {
        self.points >= threshold
    }

    /// `X-Spam-Status:` value, SpamAssassin style: "Yes, score=7.3
    /// required=5.0 tests=BAYES_99=3.5,DNSBL=2.0", folded with CRLF and a
    /// tab before a test that would make the line longer than about 76
    /// characters (counting the field name).
    pub fn status_header(&self, threshold: f32) -> String {
        let verdict = if self.is_spam(threshold) { "Yes" } else { "No" };
        let head = format!(
            "{verdict}, score={:.1} required={threshold:.1} tests=",
            self.points
        );
        if self.reasons.is_empty() {
            return format!("{head}none");
        }
        let items: Vec<String> = self
            .reasons
            .iter()
            .map(|r| format!("{}={}", r.name, points_text(r.points)))
            .collect();
        fold("X-Spam-Status", &head, &items, ",")
    }

    /// `X-Spam-Score:` value: the points with one decimal, e.g. "7.3".
    pub fn score_header(&self) -> String {
        format!("{:.1}", self.points)
    }
}

/// Points as SpamAssassin prints a test's score: up to three decimals,
/// without trailing zeros ("3.5", "-0.5", "2").
fn points_text(p: f32) -> String {
    let s = format!("{p:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bayes(p: f64) -> Option<Bayes> {
        Some(Bayes {
            probability: p,
            significant: vec![],
        })
    }

    #[test]
    fn nothing_known_is_zero() {
        let s = score(&Evidence::default());
        assert_eq!(s.points, 0.0);
        assert!(s.reasons.is_empty());
        assert!(!s.is_spam(DEFAULT_THRESHOLD));
        assert_eq!(
            s.status_header(5.0),
            "No, score=0.0 required=5.0 tests=none"
        );
        assert_eq!(s.score_header(), "0.0");
    }

    #[test]
    fn bayes_bands() {
        for (p, name) in [
            (0.0, "BAYES_00"),
            (0.03, "BAYES_05"),
            (0.1, "BAYES_20"),
            (0.3, "BAYES_40"),
            (0.5, "BAYES_50"),
            (0.7, "BAYES_60"),
            (0.9, "BAYES_80"),
            (0.97, "BAYES_95"),
            (0.995, "BAYES_99"),
            (1.0, "BAYES_999"),
            (f64::NAN, "BAYES_50"),
        ] {
            let s = score(&Evidence {
                bayes: bayes(p),
                ..Default::default()
            });
            assert_eq!(s.reasons[0].name, name, "{p}");
        }
    }

    #[test]
    fn spammy_evidence_adds_up() {
        let s = score(&Evidence {
            bayes: bayes(0.995),
            dnsbl: vec![
                "zen.example".into(),
                "bl.example".into(),
                "x.example".into(),
            ],
            spf: Some(AuthResult::SoftFail),
            dkim: Some(AuthResult::Pass),
            dmarc: Some(AuthResult::Fail),
            virus: false,
        });
        // 4.0 + 5.0 (capped) + 1.0 - 0.5 + 1.5
        assert!((s.points - 11.0).abs() < 1e-6);
        assert!(s.is_spam(DEFAULT_THRESHOLD));
        assert_eq!(s.spamtest(), 8);
        assert_eq!(s.percent(), 80);
        assert_eq!(
            s.status_header(DEFAULT_THRESHOLD),
            "Yes, score=11.0 required=5.0 tests=BAYES_99=4,DNSBL=5,\r\n\tSPF_SOFTFAIL=1,DKIM_PASS=-0.5,DMARC_FAIL=1.5"
        );
        assert_eq!(s.score_header(), "11.0");
    }

    #[test]
    fn good_mail() {
        let s = score(&Evidence {
            bayes: bayes(0.001),
            spf: Some(AuthResult::Pass),
            dkim: Some(AuthResult::Pass),
            dmarc: Some(AuthResult::Pass),
            ..Default::default()
        });
        assert!((s.points + 3.5).abs() < 1e-6);
        assert_eq!(s.spamtest(), 2);
        assert!(!s.is_spam(DEFAULT_THRESHOLD));
        let v = score(&Evidence {
            virus: true,
            ..Default::default()
        });
        assert!(v.is_spam(DEFAULT_THRESHOLD));
    }

    #[test]
    fn spamtest_agrees_with_default_threshold() {
        let at = |points: f32| Score {
            points,
            reasons: vec![],
        };
        assert_eq!(at(5.0).spamtest(), 6);
        assert_eq!(at(4.9).spamtest(), 5);
        assert_eq!(at(-100.0).spamtest(), 1);
        assert_eq!(at(100.0).spamtest(), 10);
        assert_eq!(at(f32::NAN).percent(), 50);
    }

    #[test]
    fn auth_results_parse() {
        assert_eq!("SoftFail".parse::<AuthResult>(), Ok(AuthResult::SoftFail));
        assert_eq!("permerror".parse::<AuthResult>(), Ok(AuthResult::PermError));
        assert!("maybe".parse::<AuthResult>().is_err());
    }

    proptest! {
        #[test]
        fn spamtest_in_range_and_monotone(a in -50.0f32..50.0, b in -50.0f32..50.0) {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let (lo, hi) = (Score { points: lo, reasons: vec![] }, Score { points: hi, reasons: vec![] });
            prop_assert!((1..=10).contains(&lo.spamtest()));
            prop_assert!(lo.percent() <= 100);
            prop_assert!(lo.spamtest() <= hi.spamtest());
            prop_assert!(lo.percent() <= hi.percent());
            prop_assert_eq!(hi.spamtest() >= 6, hi.is_spam(DEFAULT_THRESHOLD));
        }

        #[test]
        fn header_lines_stay_short(n in 0usize..40, p in 0.0f64..1.0) {
            let s = score(&Evidence {
                bayes: bayes(p),
                dnsbl: vec!["z".into(); n % 3],
                spf: Some(AuthResult::Fail),
                dkim: Some(AuthResult::Fail),
                dmarc: Some(AuthResult::Fail),
                virus: n % 2 == 0,
            });
            let header = format!("X-Spam-Status: {}", s.status_header(DEFAULT_THRESHOLD));
            for line in header.split("\r\n") {
                prop_assert!(line.len() <= 90, "{line}");
            }
        }
    }
}
