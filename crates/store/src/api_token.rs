//! Bearer tokens an account creates for its clients (JMAP's
//! `Authorization: Bearer`, RFC 6750 §2.1), and revokes, in the webmail's
//! Settings.
//!
//! A token is `sluice.<account>.<id>.<secret>`: the account's row id,
//! the token's id (16 hex digits) and 256 random bits in hex. The store
//! keeps only the SHA-256 of the whole token, so a copy of the database
//! gives nobody a usable token; the account and id in it let one record
//! be looked up instead of every account's. The records live in the
//! per-account records (`account_records`) both back ends already have,
//! under [`API_TOKEN_KIND`]: a token is a small document of one account,
//! created and destroyed whole, which is what that table holds, and it
//! needs no migration. The time a token was last used is a record of its
//! own kind beside it, so that noting a use can never bring a revoked
//! token back.

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::error::{Result, StoreError};
use crate::model::{AccountId, AccountRecord};
use crate::Store;

/// The records kind holding an account's tokens.
pub const API_TOKEN_KIND: &str = "api-token";
/// The records kind holding when each token was last used.
const USED_KIND: &str = "api-token-used";
/// A use this long after the one recorded is written down; closer ones
/// are not, so a busy client does not write on every request.
const USE_GRANULARITY: i64 = 60;
/// The longest name a token may have, in characters.
pub const MAX_NAME: usize = 100;

/// One of an account's tokens, as Settings lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    /// The token's id (also part of the token itself).
    pub id: String,
    /// The name its owner gave it.
    pub name: String,
    /// When it was created, in seconds since the Unix epoch.
    pub created: i64,
    /// When it was last used (to the minute), if ever.
    pub last_used: Option<i64>,
    hash: [u8; 32],
    /// The record's change number: tokens are written once, so this
    /// orders them as they were made.
    made: u64,
}

/// The parts of a token a client presents.
struct Presented {
    account: AccountId,
    id: String,
    hash: [u8; 32],
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn parse(token: &str) -> Option<Presented> {
    let mut parts = token.split('.');
    let (Some("sluice"), Some(account), Some(id), Some(secret), None) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return None;
    };
    let hex_of = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex_of(id, 16) || !hex_of(secret, 64) {
        return None;
    }
    Some(Presented {
        account: account.parse().ok()?,
        id: id.to_string(),
        hash: digest(token),
    })
}

impl ApiToken {
    fn from_record(r: &AccountRecord) -> Option<ApiToken> {
        let body: serde_json::Value = serde_json::from_str(r.body.as_deref()?).ok()?;
        let hash = hex::decode(body.get("hash")?.as_str()?).ok()?;
        Some(ApiToken {
            id: r.id.clone(),
            name: body.get("name")?.as_str()?.to_string(),
            created: body.get("created")?.as_i64()?,
            last_used: None,
            hash: hash.try_into().ok()?,
            made: r.changed,
        })
    }

    /// Whether `hash` is this token's, compared in constant time.
    fn matches(&self, hash: &[u8; 32]) -> bool {
        self.hash.ct_eq(hash).into()
    }
}

/// Creates a token named `name` for `account`: the token itself (shown to
/// its owner once, kept nowhere) and its id. `Invalid` for an empty or
/// over-long name; `NotFound` for an unknown account.
pub async fn create_api_token(
    store: &dyn Store,
    account: AccountId,
    name: &str,
) -> Result<(String, String)> {
    let name: String = name.trim().chars().filter(|c| !c.is_control()).collect();
    if name.is_empty() {
        return Err(StoreError::Invalid("a token needs a name".into()));
    }
    if name.chars().count() > MAX_NAME {
        return Err(StoreError::Invalid(format!(
            "a token's name has at most {MAX_NAME} characters"
        )));
    }
    let mut id = [0u8; 8];
    let mut secret = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut id);
    rand::thread_rng().fill_bytes(&mut secret);
    let id = hex::encode(id);
    let token = format!("sluice.{account}.{id}.{}", hex::encode(secret));
    let body = serde_json::json!({
        "name": name,
        "created": crate::clock::now(),
        "hash": hex::encode(digest(&token)),
    });
    store
        .put_account_record(account, API_TOKEN_KIND, Some(&id), Some(&body.to_string()))
        .await?;
    Ok((token, id))
}

/// The account's live tokens, oldest first.
pub async fn api_tokens(store: &dyn Store, account: AccountId) -> Result<Vec<ApiToken>> {
    let used = store.account_records(account, USED_KIND).await?;
    let mut tokens: Vec<ApiToken> = store
        .account_records(account, API_TOKEN_KIND)
        .await?
        .iter()
        .filter_map(ApiToken::from_record)
        .map(|mut t| {
            t.last_used = used
                .iter()
                .find(|u| u.id == t.id)
                .and_then(|u| u.body.as_deref()?.parse().ok());
            t
        })
        .collect();
    tokens.sort_by_key(|t| t.made);
    Ok(tokens)
}

/// Revokes the account's token `id`; whether it was there.
pub async fn revoke_api_token(store: &dyn Store, account: AccountId, id: &str) -> Result<bool> {
    let live = api_tokens(store, account).await?.iter().any(|t| t.id == id);
    if live {
        store
            .put_account_record(account, API_TOKEN_KIND, Some(id), None)
            .await?;
        store
            .put_account_record(account, USED_KIND, Some(id), None)
            .await?;
    }
    Ok(live)
}

/// The account a presented token stands for, if it is one of that
/// account's live tokens; notes the use. Throttling failures is the
/// caller's part ([`crate::Authenticator::token_login`]).
pub async fn check_api_token(store: &dyn Store, token: &str) -> Result<Option<AccountId>> {
    let Some(p) = parse(token) else {
        return Ok(None);
    };
    let records = match store.account_records(p.account, API_TOKEN_KIND).await {
        Ok(r) => r,
        Err(StoreError::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(found) = records
        .iter()
        .filter(|r| r.id == p.id)
        .find_map(ApiToken::from_record)
    else {
        return Ok(None);
    };
    if !found.matches(&p.hash) {
        return Ok(None);
    }
    let now = crate::clock::now();
    let used = store.account_records(p.account, USED_KIND).await?;
    let last: Option<i64> = used
        .iter()
        .find(|u| u.id == p.id)
        .and_then(|u| u.body.as_deref()?.parse().ok());
    if last.is_none_or(|t| now - t >= USE_GRANULARITY) {
        store
            .put_account_record(p.account, USED_KIND, Some(&p.id), Some(&now.to_string()))
            .await?;
    }
    Ok(Some(p.account))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_parse_only_in_their_one_shape() {
        let good = format!("sluice.7.{}.{}", "a1".repeat(8), "0f".repeat(32));
        let p = parse(&good).expect("a well-formed token");
        assert_eq!(p.account, 7);
        assert_eq!(p.id, "a1".repeat(8));
        assert_eq!(p.hash, digest(&good));
        for bad in [
            String::new(),
            "sluice".into(),
            format!("sluice.7.{}", "a1".repeat(8)),
            format!("other.7.{}.{}", "a1".repeat(8), "0f".repeat(32)),
            format!("sluice.x.{}.{}", "a1".repeat(8), "0f".repeat(32)),
            format!("sluice.7.{}.{}", "a1".repeat(7), "0f".repeat(32)),
            format!("sluice.7.{}.{}", "a1".repeat(8), "0g".repeat(32)),
            format!("sluice.7.{}.{}.x", "a1".repeat(8), "0f".repeat(32)),
        ] {
            assert!(parse(&bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_record_matches_only_its_own_hash() {
        let token = format!("sluice.1.{}.{}", "00".repeat(8), "11".repeat(32));
        let r = AccountRecord {
            id: "00".repeat(8),
            changed: 1,
            body: Some(
                serde_json::json!({"name": "phone", "created": 5, "hash": hex::encode(digest(&token))})
                    .to_string(),
            ),
        };
        let t = ApiToken::from_record(&r).expect("a token record");
        assert_eq!(t.name, "phone");
        assert!(t.matches(&digest(&token)));
        assert!(!t.matches(&digest("sluice.1.x.y")));
        let gone = AccountRecord { body: None, ..r };
        assert!(ApiToken::from_record(&gone).is_none());
    }
}
