//! Training and classifying: Robinson's f(w) per token, Fisher's
//! chi-square to combine them.
//!
//! Gary Robinson, "A Statistical Approach to the Spam Problem" (Linux
//! Journal, 2003) and the chi-square combining that SpamBayes and
//! SpamAssassin use.

use std::collections::HashMap;

use crate::header::{fold, quoted};
use crate::tokens::Tokens;

/// Neither class may have fewer trained messages than this for
/// [`classify`] to answer: with less, a handful of messages decide the
/// verdict of everything and Bayes does more harm than good.
/// (SpamAssassin waits for 200 of each; a personal mailbox should not
/// have to wait that long.)
pub const MIN_TRAINED: u32 = 50;

/// Robinson's strength `s` of the prior: how many messages' worth of
/// evidence the assumed probability `x` counts for. Low: trust the
/// counts. 0.3 and the minimum distance below were chosen on the
/// SpamAssassin public corpus (see `examples/accuracy.rs`), on a split
/// other than the one reported.
const S: f64 = 0.3;
/// Robinson's assumed probability `x` of a token never seen before.
const X: f64 = 0.5;
/// Tokens whose f(w) is within this distance of 0.5 say too little and
/// are left out of the combining.
const MIN_DISTANCE: f64 = 0.3;
/// At most this many of the most significant tokens are combined.
const MAX_SIGNIFICANT: usize = 150;

/// How many trained messages of each class contained a token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Spam messages that had the token.
    pub spam: u32,
    /// Ham (good) messages that had the token.
    pub ham: u32,
}

/// How many messages trained each class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Messages trained as spam.
    pub spam: u32,
    /// Messages trained as ham.
    pub ham: u32,
}

/// The class a message is trained as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// Unwanted mail.
    Spam,
    /// Wanted mail.
    Ham,
}

/// Whether training adds a message to its class or takes it back out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Delta {
    /// Count the message: +1 for each token and for the class total.
    Learn,
    /// Take back an earlier Learn: -1 (saturating at 0).
    Unlearn,
}

/// Bayes result: probability the message is spam 0.0..=1.0 and the most
/// significant tokens with their probabilities (for the header's
/// breakdown).
#[derive(Debug, Clone, PartialEq)]
pub struct Bayes {
    /// The combined probability that the message is spam, 0.0..=1.0.
    pub probability: f64,
    /// The tokens that were combined, most significant (farthest from
    /// 0.5) first, each with its f(w); at most 150. Take the first few for
    /// a header.
    pub significant: Vec<(String, f64)>,
}

impl Bayes {
    /// A header value that explains the verdict (for `X-Spam-Bayes:`, say):
    /// the probability with four decimals, then up to `max` of the most
    /// significant tokens with their f(w), e.g.
    /// `0.9987; "viagra"=0.994, "click here"=0.941`. Tokens are quoted
    /// strings in printable ASCII (other characters as `\u{hex}`); the
    /// value is folded like [`Score::status_header`](crate::Score::status_header).
    pub fn breakdown(&self, max: usize) -> String {
        let head = format!("{:.4};", self.probability);
        let items: Vec<String> = self
            .significant
            .iter()
            .take(max)
            .map(|(t, f)| format!("{}={f:.3}", quoted(t)))
            .collect();
        if items.is_empty() {
            return head.trim_end_matches(';').to_string();
        }
        fold("X-Spam-Bayes", &format!("{head} "), &items, ", ")
    }
}

/// Trains (or untrains) one message: each of its tokens' count of `class`
/// and the class total go up by one for [`Delta::Learn`] and down by one,
/// saturating at zero, for [`Delta::Unlearn`]. A token whose counts both
/// reach zero is removed, so Learn then Unlearn gives back the model it
/// started from.
///
/// The store keeps the counts in SQL and applies exactly these deltas
/// there (upsert +1; -1 with `MAX(0, ...)` and a delete of rows at 0/0);
/// this function is the one definition that in-memory training and the
/// tests share. Moving a message out of Junk is `Unlearn` as spam, then
/// `Learn` as ham.
pub fn train(
    counts: &mut HashMap<String, Counts>,
    totals: &mut Totals,
    tokens: &Tokens,
    class: Class,
    delta: Delta,
) {
    fn field(c: &mut Counts, class: Class) -> &mut u32 {
        match class {
            Class::Spam => &mut c.spam,
            Class::Ham => &mut c.ham,
        }
    }
    let total = match class {
        Class::Spam => &mut totals.spam,
        Class::Ham => &mut totals.ham,
    };
    match delta {
        Delta::Learn => {
            *total = total.saturating_add(1);
            for token in tokens.iter() {
                let c = counts.entry(token.to_string()).or_default();
                let f = field(c, class);
                *f = f.saturating_add(1);
            }
        }
        Delta::Unlearn => {
            *total = total.saturating_sub(1);
            for token in tokens.iter() {
                if let Some(c) = counts.get_mut(token) {
                    let f = field(c, class);
                    *f = f.saturating_sub(1);
                    if *c == Counts::default() {
                        counts.remove(token);
                    }
                }
            }
        }
    }
}

/// Bayes result for a message's tokens given the user's model: the spam
/// probability and the tokens that decided it. `None` when the model has
/// too little training: fewer than [`MIN_TRAINED`] (50) messages of
/// either class.
///
/// Each token's probability is Robinson's f(w) = (s·x + n·p) / (s + n)
/// with s = 0.3, x = 0.5, p the token's spam frequency over the sum of its
/// spam and ham frequencies, and n its count measured on the scale of the
/// smaller class (so a token seen once in a class of 10,000 weighs less
/// than one seen once in a class of 100, and f(w) only grows with the
/// spam count). Tokens with |f(w) - 0.5| < 0.3 are left out; of the rest,
/// the 150 farthest from 0.5 are combined with Fisher's chi-square method:
/// S = 1 - Q(-2 Σ ln(1 - f), 2n), H = 1 - Q(-2 Σ ln f, 2n),
/// probability = (1 + S - H) / 2. With no significant token it is 0.5.
///
/// More spam counts for the message's tokens never lower the probability
/// as long as the same tokens decide (f(w) only grows with the spam count
/// and the combining only grows with each f(w)). A token that crosses into
/// the significant set can lower it, though: chi-square combining reads a
/// mildly spammy token next to very spammy ones as mixed evidence.
pub fn classify(
    tokens: &Tokens,
    totals: Totals,
    counts: &HashMap<String, Counts>,
) -> Option<Bayes> {
    if totals.spam < MIN_TRAINED || totals.ham < MIN_TRAINED {
        return None;
    }
    let mut scored: Vec<(&str, f64)> = tokens
        .iter()
        .filter_map(|t| {
            let c = counts.get(t)?;
            let f = token_probability(*c, totals)?;
            ((f - 0.5).abs() >= MIN_DISTANCE).then_some((t, f))
        })
        .collect();
    scored.sort_by(|a, b| {
        let (da, db) = ((a.1 - 0.5).abs(), (b.1 - 0.5).abs());
        db.total_cmp(&da).then_with(|| a.0.cmp(b.0))
    });
    scored.truncate(MAX_SIGNIFICANT);
    let probability = combine(scored.iter().map(|(_, f)| *f));
    Some(Bayes {
        probability,
        significant: scored
            .into_iter()
            .map(|(t, f)| (t.to_string(), f))
            .collect(),
    })
}

/// Robinson's f(w) for a token (see [`classify`]); `None` for a token that
/// no trained message had.
pub(crate) fn token_probability(c: Counts, totals: Totals) -> Option<f64> {
    let (nspam, nham) = (f64::from(totals.spam.max(1)), f64::from(totals.ham.max(1)));
    // A count above its class total can only come from a damaged model.
    let b = f64::from(c.spam).min(nspam);
    let g = f64::from(c.ham).min(nham);
    if b == 0.0 && g == 0.0 {
        return None;
    }
    let scale = nspam.min(nham);
    let (b, g) = (b / nspam * scale, g / nham * scale);
    // (s·x + n·p) / (s + n) with n = b + g and p = b / (b + g).
    Some((S * X + b) / (S + b + g))
}

/// Fisher's chi-square combining of token probabilities (see
/// [`classify`]); 0.5 for none.
pub(crate) fn combine(fs: impl Iterator<Item = f64>) -> f64 {
    let (mut n, mut ln_f, mut ln_not_f) = (0usize, 0.0f64, 0.0f64);
    for f in fs {
        let f = f.clamp(1e-12, 1.0 - 1e-12);
        n += 1;
        ln_f += f.ln();
        ln_not_f += (1.0 - f).ln();
    }
    if n == 0 {
        return 0.5;
    }
    let spamminess = 1.0 - chi2q(-2.0 * ln_not_f, 2 * n);
    let hamminess = 1.0 - chi2q(-2.0 * ln_f, 2 * n);
    ((1.0 + spamminess - hamminess) / 2.0).clamp(0.0, 1.0)
}

/// The probability that a chi-square variable with `v` (even) degrees of
/// freedom is at least `x2`, summed in the log domain so large values do
/// not underflow early.
fn chi2q(x2: f64, v: usize) -> f64 {
    let m = x2 / 2.0;
    let mut log_term = -m;
    let mut sum = log_term.exp();
    for i in 1..v / 2 {
        log_term += (m / i as f64).ln();
        sum += log_term.exp();
    }
    sum.min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::tokenize;
    use proptest::prelude::*;

    /// A tiny hand-made corpus, repeated with small variations until both
    /// classes reach [`MIN_TRAINED`].
    const SPAM: &[&str] = &[
        "Subject: Cheap meds online\r\n\r\nBuy cheap viagra pills online now, no prescription needed. Click here http://pills.example/buy\r\n",
        "Subject: You have WON\r\n\r\nCongratulations winner! Claim your lottery prize money now. Send your bank details.\r\n",
        "Subject: Make money fast\r\n\r\nEarn money from home, guaranteed income, click here to unsubscribe. Limited offer!\r\n",
        "Subject: Hot singles\r\n\r\nLonely singles in your area want to meet. Click here now, free offer.\r\n",
    ];
    const HAM: &[&str] = &[
        "Subject: Meeting notes\r\n\r\nHere are the notes from Tuesday's meeting about the release schedule. Please review the draft.\r\n",
        "Subject: Dinner on Saturday\r\n\r\nAre you free for dinner on Saturday? We could try the new Italian place near the station.\r\n",
        "Subject: Re: build failure\r\n\r\nThe build failed because the test database was not migrated. I pushed a fix to the branch.\r\n",
        "Subject: Your order has shipped\r\n\r\nThank you for your order. Your parcel will arrive on Thursday. Track it in your account.\r\n",
    ];

    fn trained() -> (HashMap<String, Counts>, Totals) {
        let mut counts = HashMap::new();
        let mut totals = Totals::default();
        for i in 0..MIN_TRAINED as usize {
            let extra = format!("variation{i}\r\n");
            let spam = format!("{}{extra}", SPAM[i % SPAM.len()]);
            let ham = format!("{}{extra}", HAM[i % HAM.len()]);
            train(
                &mut counts,
                &mut totals,
                &tokenize(spam.as_bytes()),
                Class::Spam,
                Delta::Learn,
            );
            train(
                &mut counts,
                &mut totals,
                &tokenize(ham.as_bytes()),
                Class::Ham,
                Delta::Learn,
            );
        }
        (counts, totals)
    }

    #[test]
    fn too_little_training_gives_no_verdict() {
        let mut counts = HashMap::new();
        let mut totals = Totals::default();
        let t = tokenize(SPAM[0].as_bytes());
        train(&mut counts, &mut totals, &t, Class::Spam, Delta::Learn);
        assert_eq!(classify(&t, totals, &counts), None);
    }

    #[test]
    fn tiny_corpus_separates_new_messages() {
        let (counts, totals) = trained();
        let spam = tokenize(
            b"Subject: Claim your prize\r\n\r\nWinner! Click here now to claim cheap pills and money, free offer.\r\n",
        );
        let ham = tokenize(
            b"Subject: Notes for Saturday\r\n\r\nCould you review the meeting notes before dinner? The release draft is on the branch.\r\n",
        );
        let s = classify(&spam, totals, &counts).unwrap();
        let h = classify(&ham, totals, &counts).unwrap();
        assert!(s.probability > 0.9, "spam scored {s:?}");
        assert!(h.probability < 0.1, "ham scored {h:?}");
        assert!(!s.significant.is_empty());
        // Most significant first.
        let d: Vec<f64> = s.significant.iter().map(|(_, f)| (f - 0.5).abs()).collect();
        assert!(d.windows(2).all(|w| w[0] >= w[1]));
    }

    #[test]
    fn breakdown_header() {
        let b = Bayes {
            probability: 0.99871,
            significant: vec![
                ("viagra".into(), 0.9941),
                ("click here".into(), 0.94),
                ("今日".into(), 0.1),
            ],
        };
        assert_eq!(
            b.breakdown(2),
            "0.9987; \"viagra\"=0.994, \"click here\"=0.940"
        );
        assert_eq!(
            b.breakdown(10),
            "0.9987; \"viagra\"=0.994, \"click here\"=0.940,\r\n\t\"\\u{4eca}\\u{65e5}\"=0.100"
        );
        let none = Bayes {
            probability: 0.5,
            significant: vec![],
        };
        assert_eq!(none.breakdown(5), "0.5000");
    }

    #[test]
    fn unknown_tokens_are_neutral() {
        let (counts, totals) = trained();
        let t = Tokens::from_strings(["never-seen-before", "nor-this"]);
        let b = classify(&t, totals, &counts).unwrap();
        assert_eq!(b.probability, 0.5);
        assert!(b.significant.is_empty());
    }

    #[test]
    fn moving_out_of_junk() {
        let (mut counts, mut totals) = trained();
        let t = tokenize(SPAM[0].as_bytes());
        let before = counts.get("viagra").copied().unwrap();
        train(&mut counts, &mut totals, &t, Class::Spam, Delta::Unlearn);
        train(&mut counts, &mut totals, &t, Class::Ham, Delta::Learn);
        let after = counts["viagra"];
        assert_eq!(after.spam, before.spam - 1);
        assert_eq!(after.ham, before.ham + 1);
        assert_eq!(totals.spam, MIN_TRAINED - 1);
        assert_eq!(totals.ham, MIN_TRAINED + 1);
    }

    #[test]
    fn unlearn_saturates() {
        let mut counts = HashMap::new();
        let mut totals = Totals::default();
        let t = Tokens::from_strings(["a-token"]);
        train(&mut counts, &mut totals, &t, Class::Ham, Delta::Unlearn);
        assert!(counts.is_empty());
        assert_eq!(totals, Totals::default());
    }

    #[test]
    fn chi2q_limits() {
        assert!((chi2q(0.0, 2) - 1.0).abs() < 1e-12);
        assert!(chi2q(2000.0, 300) < 1e-12);
        // Q(x, 2) = e^(-x/2).
        assert!((chi2q(3.0, 2) - (-1.5f64).exp()).abs() < 1e-12);
    }

    fn counts_strategy() -> impl Strategy<Value = Counts> {
        (0u32..500, 0u32..500).prop_map(|(spam, ham)| Counts { spam, ham })
    }

    proptest! {
        #[test]
        fn probability_in_range(
            rows in proptest::collection::vec(counts_strategy(), 0..200),
            spam in MIN_TRAINED..2000u32, ham in MIN_TRAINED..2000u32,
        ) {
            let totals = Totals { spam, ham };
            let counts: HashMap<String, Counts> =
                rows.iter().enumerate().map(|(i, c)| (format!("t{i}"), *c)).collect();
            let tokens = Tokens::from_strings(counts.keys().cloned());
            let b = classify(&tokens, totals, &counts).unwrap();
            prop_assert!((0.0..=1.0).contains(&b.probability));
            prop_assert!(b.significant.len() <= MAX_SIGNIFICANT);
            for (_, f) in &b.significant {
                prop_assert!((0.0..=1.0).contains(f));
            }
        }

        /// More spam for a token never lowers its f(w); more ham never
        /// raises it.
        #[test]
        fn token_probability_is_monotone(
            c in counts_strategy(), more in 1u32..100,
            spam in 1u32..2000, ham in 1u32..2000,
        ) {
            let totals = Totals { spam: spam + 600, ham: ham + 600 };
            let f = token_probability(c, totals);
            let up = token_probability(Counts { spam: c.spam + more, ..c }, totals).unwrap();
            let down = token_probability(Counts { ham: c.ham + more, ..c }, totals).unwrap();
            let f = f.unwrap_or(X);
            prop_assert!(up >= f);
            prop_assert!(down <= f);
        }

        /// Combining is monotone in each token probability.
        #[test]
        fn combine_is_monotone(
            fs in proptest::collection::vec(0.001f64..0.999, 1..150),
            which in any::<proptest::sample::Index>(),
            raise in 0.0f64..1.0,
        ) {
            let i = which.index(fs.len());
            let mut higher = fs.clone();
            higher[i] += (0.999 - higher[i]) * raise;
            let before = combine(fs.iter().copied());
            let after = combine(higher.iter().copied());
            prop_assert!(after >= before - 1e-12, "{before} -> {after}");
        }

        /// With the same tokens deciding, more spam counts for the
        /// message's tokens never lower the probability. Here spammy
        /// tokens get more spam (they stay significant), hammy ones stay
        /// as they are and neutral ones stay out.
        #[test]
        fn classify_is_monotone_in_spam_counts(
            spammy in proptest::collection::vec((50u32..500, 0u32..5, 0u32..200), 0..50),
            hammy in proptest::collection::vec((0u32..5, 50u32..500), 0..50),
            neutral in proptest::collection::vec(0u32..500, 0..40),
        ) {
            let totals = Totals { spam: 1000, ham: 1000 };
            let mut counts = HashMap::new();
            let mut more = HashMap::new();
            for (i, (spam, ham, bump)) in spammy.iter().enumerate() {
                counts.insert(format!("s{i}"), Counts { spam: *spam, ham: *ham });
                more.insert(format!("s{i}"), Counts { spam: spam + bump, ham: *ham });
            }
            for (i, (spam, ham)) in hammy.iter().enumerate() {
                counts.insert(format!("h{i}"), Counts { spam: *spam, ham: *ham });
            }
            for (i, n) in neutral.iter().enumerate() {
                counts.insert(format!("n{i}"), Counts { spam: *n, ham: *n });
            }
            for (k, v) in &counts {
                more.entry(k.clone()).or_insert(*v);
            }
            let tokens = Tokens::from_strings(counts.keys().cloned());
            let a = classify(&tokens, totals, &counts).unwrap();
            let b = classify(&tokens, totals, &more).unwrap();
            prop_assert_eq!(a.significant.len(), spammy.len() + hammy.len());
            prop_assert_eq!(b.significant.len(), spammy.len() + hammy.len());
            prop_assert!(b.probability >= a.probability - 1e-12, "{} -> {}", a.probability, b.probability);
        }

        #[test]
        fn learn_then_unlearn_restores(
            start in proptest::collection::vec((0u32..5, counts_strategy()), 0..30),
            message in proptest::collection::vec(0u32..10, 0..20),
            spam in any::<bool>(),
        ) {
            let mut counts: HashMap<String, Counts> = start
                .into_iter()
                .filter(|(_, c)| *c != Counts::default())
                .map(|(i, c)| (format!("t{i}"), c))
                .collect();
            let mut totals = Totals { spam: 10, ham: 10 };
            let (c0, t0) = (counts.clone(), totals);
            let tokens = Tokens::from_strings(message.iter().map(|i| format!("t{i}")));
            let class = if spam { Class::Spam } else { Class::Ham };
            train(&mut counts, &mut totals, &tokens, class, Delta::Learn);
            train(&mut counts, &mut totals, &tokens, class, Delta::Unlearn);
            prop_assert_eq!(counts, c0);
            prop_assert_eq!(totals, t0);
        }
    }
}
