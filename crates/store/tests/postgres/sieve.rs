//! PostgreSQL: sieve.

#[allow(unused_imports)]
use super::{open, open_with_account};
