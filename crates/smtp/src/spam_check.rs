//! The spam classifier at delivery: each recipient's model (or the
//! global one while the recipient's has too little training) scores the
//! message with the verdicts the session already has (DNSBL, SPF, DKIM,
//! DMARC). The score files the message to Junk above the threshold and
//! feeds Sieve's `spamtest` (RFC 5235).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;
use store::{AccountId, Store};

/// The `[spam]` section.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpamConfig {
    /// Score mail from other servers and file spam to Junk.
    pub enabled: bool,
    /// Points at or above which a message is spam, for accounts without
    /// a threshold of their own (`sluice spam threshold`, the webmail).
    pub threshold: f32,
    /// Tokens a model keeps; past it the least useful go (pruning).
    pub max_tokens: usize,
}

impl Default for SpamConfig {
    fn default() -> Self {
        SpamConfig {
            enabled: true,
            threshold: spam::DEFAULT_THRESHOLD,
            max_tokens: 200_000,
        }
    }
}

/// A message's score for one recipient.
#[derive(Debug, Clone)]
pub(crate) struct Judgement {
    pub score: spam::Score,
    /// At or above the threshold.
    pub spam: bool,
    /// `X-Spam-Status:` and `X-Spam-Score:` fields, CRLF-terminated.
    pub fields: String,
}

/// What is known of a message before any model looks at it.
pub(crate) struct Known {
    /// Zones that list the client.
    pub dnsbl: Vec<String>,
    /// Our `Authentication-Results:` field, if the checks ran.
    pub auth_results: Option<String>,
}

/// How long a model's totals are trusted without asking the store again.
/// Most mail is for accounts whose model has not trained enough, and
/// asking for that with every message would cost more than scoring.
const TOTALS_FRESH: Duration = Duration::from_secs(2);

/// The models' totals, remembered for [`TOTALS_FRESH`].
#[derive(Default)]
pub(crate) struct TotalsCache {
    seen: Mutex<HashMap<Option<AccountId>, (Instant, spam::Totals)>>,
}

impl TotalsCache {
    async fn get(
        &self,
        store: &Arc<dyn Store>,
        owner: Option<AccountId>,
    ) -> store::Result<spam::Totals> {
        if let Some((at, totals)) = self.seen.lock().expect("not poisoned").get(&owner) {
            if at.elapsed() < TOTALS_FRESH {
                return Ok(*totals);
            }
        }
        let model = store.spam_model(owner, Vec::new()).await?;
        let totals = spam::Totals {
            spam: model.spam_messages,
            ham: model.ham_messages,
        };
        self.seen
            .lock()
            .expect("not poisoned")
            .insert(owner, (Instant::now(), totals));
        Ok(totals)
    }
}

/// A message's tokens, worked out the first time a model needs them.
pub(crate) struct MessageTokens {
    head: Arc<Vec<u8>>,
    tokens: Option<Arc<spam::Tokens>>,
}

impl MessageTokens {
    pub(crate) fn new(head: Arc<Vec<u8>>) -> MessageTokens {
        MessageTokens { head, tokens: None }
    }

    async fn get(&mut self) -> Arc<spam::Tokens> {
        if let Some(tokens) = &self.tokens {
            return Arc::clone(tokens);
        }
        let head = Arc::clone(&self.head);
        let tokens = Arc::new(
            tokio::task::spawn_blocking(move || spam::tokenize(&head))
                .await
                .unwrap_or_default(),
        );
        self.tokens = Some(Arc::clone(&tokens));
        tokens
    }
}

/// Scores a message for an account: with the account's model when it
/// has trained enough, else the global one, else without Bayes; spam at
/// `threshold` points (the account's own, or the site's).
pub(crate) async fn judge(
    store: &Arc<dyn Store>,
    threshold: f32,
    totals: &TotalsCache,
    account: AccountId,
    tokens: &mut MessageTokens,
    known: &Known,
) -> store::Result<Judgement> {
    let mut bayes = None;
    for owner in [Some(account), None] {
        let t = totals.get(store, owner).await?;
        if t.spam < spam::MIN_TRAINED || t.ham < spam::MIN_TRAINED {
            continue;
        }
        let tokens = tokens.get().await;
        let words: Vec<String> = tokens.iter().map(str::to_string).collect();
        let model = store.spam_model(owner, words).await?;
        let counts: HashMap<String, spam::Counts> = model
            .counts
            .into_iter()
            .map(|(t, (spam, ham))| (t, spam::Counts { spam, ham }))
            .collect();
        let t = spam::Totals {
            spam: model.spam_messages,
            ham: model.ham_messages,
        };
        bayes = spam::classify(&tokens, t, &counts);
        break;
    }
    let evidence = evidence(known, bayes);
    let score = spam::score(&evidence);
    let spam = score.is_spam(threshold);
    let fields = format!(
        "X-Spam-Score: {}\r\nX-Spam-Status: {}\r\n",
        score.score_header(),
        score.status_header(threshold)
    );
    Ok(Judgement {
        score,
        spam,
        fields,
    })
}

fn evidence(known: &Known, bayes: Option<spam::Bayes>) -> spam::Evidence {
    let result = |method: &str| {
        known
            .auth_results
            .as_deref()
            .and_then(|field| method_result(field, method))
    };
    spam::Evidence {
        bayes,
        dnsbl: known.dnsbl.clone(),
        spf: result("spf"),
        dkim: result("dkim"),
        dmarc: result("dmarc"),
        virus: false,
    }
}

/// The first result of `method` in an `Authentication-Results:` field
/// (RFC 8601 §2.2: `method=result`).
fn method_result(field: &str, method: &str) -> Option<spam::AuthResult> {
    let lower = field.to_ascii_lowercase();
    let needle = format!("{method}=");
    let mut from = 0;
    while let Some(at) = lower[from..].find(&needle) {
        let start = from + at;
        let before = lower[..start].chars().last();
        if before.is_none_or(|c| c == ';' || c.is_whitespace()) {
            let value: String = lower[start + needle.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphabetic())
                .collect();
            return value.parse().ok();
        }
        from = start + needle.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_read_from_the_field() {
        let field = "Authentication-Results: mx.example.org;\r\n\tdkim=pass header.d=a.test;\r\n\tspf=softfail smtp.mailfrom=b.test; dmarc=fail header.from=a.test\r\n";
        assert_eq!(method_result(field, "dkim"), Some(spam::AuthResult::Pass));
        assert_eq!(
            method_result(field, "spf"),
            Some(spam::AuthResult::SoftFail)
        );
        assert_eq!(method_result(field, "dmarc"), Some(spam::AuthResult::Fail));
        assert_eq!(method_result(field, "arc"), None);
        // `header.dkim=` is not the method.
        assert_eq!(method_result("x; header.dkim=pass", "dkim"), None);
    }
}
