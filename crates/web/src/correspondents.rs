//! Address suggestions for the compose form's To, Cc and Bcc: the people
//! the user wrote to (Sent: To, Cc) and who wrote to the user (INBOX:
//! From), ranked by how often and how lately, from the store's indexed
//! header columns only (no message text is read). Served as JSON to the
//! logged-in account alone; the form's script offers them as a combobox.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use crate::error::WebError;
use crate::routes::App;
use crate::session::User;

/// Messages looked at per mailbox (the newest).
const RECENT: usize = 1000;
/// Suggestions in one answer at most.
const MAX_ANSWER: usize = 10;
/// Longest prefix looked for.
const MAX_PREFIX: usize = 254;
/// A message this many seconds old counts half as much as one of now.
const HALF_LIFE: f64 = 30.0 * 86_400.0;

/// One past correspondent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Correspondent {
    /// The address, normalised (lower case).
    pub address: String,
    /// The display name last seen with it, if any.
    pub name: String,
    /// Frequency weighted by recency: each message adds
    /// `2^(-age / HALF_LIFE)`.
    #[serde(skip)]
    pub score: f64,
}

/// The address and display name of each item of a `Name <addr>, ...`
/// column.
fn entries(column: &str) -> impl Iterator<Item = (String, String)> + '_ {
    column.split(", ").filter_map(|item| {
        let (name, addr) = match item.rsplit_once('<') {
            Some((n, a)) => (n.trim().trim_matches('"').trim(), a.trim_end_matches('>')),
            None => ("", item),
        };
        let addr = store::normalize_address(addr)?;
        // A name that could not be written back into the field as it is.
        let name = if name.contains([',', ';', '<', '>', '"']) || name.chars().any(char::is_control)
        {
            ""
        } else {
            name
        };
        Some((addr, name.to_string()))
    })
}

/// Folds one message's addresses into `tally`.
fn count(tally: &mut HashMap<String, Correspondent>, column: &str, weight: f64, me: &str) {
    for (address, name) in entries(column) {
        if address == me {
            continue;
        }
        let c = tally.entry(address.clone()).or_insert(Correspondent {
            address,
            name: String::new(),
            score: 0.0,
        });
        c.score += weight;
        if !name.is_empty() {
            c.name = name;
        }
    }
}

/// The account's correspondents, best first.
pub(crate) async fn ranked(app: &App, user: &User) -> Result<Vec<Correspondent>, WebError> {
    let store = &*app.ctx.store;
    let me = user.address.to_ascii_lowercase();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let mut tally = HashMap::new();
    for b in store.list_mailboxes(user.account).await? {
        let sent = b
            .special_use
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("\\Sent"));
        if !sent && b.name != "INBOX" {
            continue;
        }
        let mut uids: Vec<_> = store
            .list_messages(b.id)
            .await?
            .into_iter()
            .map(|e| e.uid)
            .collect();
        let uids = uids.split_off(uids.len().saturating_sub(RECENT));
        for d in store.message_data(b.id, &uids).await? {
            let age = (now - d.entry.internal_date).max(0) as f64;
            let weight = (-age / HALF_LIFE).exp2();
            if sent {
                count(&mut tally, &d.headers.to, weight, &me);
                count(&mut tally, &d.headers.cc, weight, &me);
            } else {
                count(&mut tally, &d.headers.from, weight, &me);
            }
        }
    }
    let mut all: Vec<Correspondent> = tally.into_values().collect();
    all.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.address.cmp(&b.address))
    });
    Ok(all)
}

/// Whether `c` is what someone typing `prefix` means: the address, or a
/// word of the name, starts with it (case-insensitive).
fn matches(c: &Correspondent, prefix: &str) -> bool {
    c.address.starts_with(prefix)
        || c.name
            .to_lowercase()
            .split_whitespace()
            .any(|w| w.starts_with(prefix))
        || c.name.to_lowercase().starts_with(prefix)
}

#[derive(Deserialize)]
pub(crate) struct SuggestQuery {
    /// What was typed since the last comma.
    #[serde(default)]
    q: String,
}

/// `GET /compose/addresses?q=PREFIX`: up to ten of the account's
/// correspondents whose address or name starts with `PREFIX`, best first,
/// as `[{"address": ..., "name": ...}]`.
pub(crate) async fn suggest(
    State(app): State<Arc<App>>,
    user: User,
    Query(q): Query<SuggestQuery>,
) -> Result<Response, WebError> {
    let prefix = q.q.trim().to_lowercase();
    if prefix.len() > MAX_PREFIX {
        return Err(WebError::BadRequest("the prefix is too long".into()));
    }
    let found: Vec<Correspondent> = if prefix.is_empty() {
        Vec::new()
    } else {
        ranked(&app, &user)
            .await?
            .into_iter()
            .filter(|c| matches(c, &prefix))
            .take(MAX_ANSWER)
            .collect()
    };
    let body = serde_json::to_string(&found)
        .map_err(|e| WebError::BadRequest(format!("suggestions: {e}")))?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "application/json; charset=utf-8",
        )],
        body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_give_addresses_and_clean_names() {
        let got: Vec<_> =
            entries("Bob Smith <Bob@Example.org>, carol@example.net, Ann; Co <ab@x.org>, Nobody")
                .collect();
        assert_eq!(
            got,
            [
                ("bob@example.org".to_string(), "Bob Smith".to_string()),
                ("carol@example.net".to_string(), String::new()),
                ("ab@x.org".to_string(), String::new()),
            ]
        );
    }

    #[test]
    fn frequency_and_recency_rank_and_the_user_is_left_out() {
        let mut t = HashMap::new();
        for _ in 0..3 {
            count(&mut t, "old@x.org", 0.2, "me@x.org");
        }
        count(&mut t, "new@x.org, Me <me@x.org>", 1.0, "me@x.org");
        assert!(!t.contains_key("me@x.org"));
        assert!(t["new@x.org"].score > t["old@x.org"].score);
        count(&mut t, "old@x.org", 0.5, "me@x.org");
        assert!(t["old@x.org"].score > t["new@x.org"].score);
    }

    #[test]
    fn a_prefix_matches_the_address_or_a_word_of_the_name() {
        let c = Correspondent {
            address: "bob@example.org".into(),
            name: "Robert Smith".into(),
            score: 1.0,
        };
        assert!(matches(&c, "bo"));
        assert!(matches(&c, "smi"));
        assert!(matches(&c, "robert s"));
        assert!(!matches(&c, "example"));
    }
}
