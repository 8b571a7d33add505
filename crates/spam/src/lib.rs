//! Sluice's per-user Bayesian spam classifier.
//!
//! The engine only computes; it does no I/O. The store keeps each user's
//! token counts and hands them in:
//!
//! - [`tokenize`] turns a raw message into a bounded, deduplicated set of
//!   [`Tokens`] (words, word pairs, CJK character pairs, header and URL
//!   tokens).
//! - [`train`] is the arithmetic of learning and unlearning a message; the
//!   store applies the same deltas in SQL.
//! - [`classify`] combines the per-token evidence (Robinson's f(w), Fisher's
//!   chi-square) into a spam probability, [`Bayes`].
//! - [`score`] adds the verdicts Sluice already has (DNSBL, SPF, DKIM,
//!   DMARC, virus scan) to the Bayes result and gives one [`Score`] with
//!   SpamAssassin-style headers and the RFC 5235 spamtest value.
//! - [`prune`] decides which tokens a model that grew too big drops.
#![forbid(unsafe_code)]

mod bayes;
mod error;
mod header;
mod prune;
mod score;
mod tokens;

pub use bayes::{classify, train, Bayes, Class, Counts, Delta, Totals, MIN_TRAINED};
pub use error::Error;
pub use prune::{prune, DEFAULT_MAX_TOKENS};
pub use score::{score, AuthResult, Evidence, Reason, Score, DEFAULT_THRESHOLD};
pub use tokens::{tokenize, Tokens, MAX_TEXT, MAX_TOKENS};
