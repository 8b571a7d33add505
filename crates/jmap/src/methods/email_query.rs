//! Email/query (RFC 8621 §4.4): every filter condition of §4.4.1 and
//! sort property of §4.4.2. Conditions on what the account's entries say
//! (mailboxes, dates, sizes, keywords, threads) are tested on them; text
//! conditions are the store's searches (the full-text and header
//! indexes IMAP SEARCH uses), one per mailbox.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};
use store::{AccountEmail, BlobId, MailboxId, SearchKey};

use super::args::Args;
use super::query::window;
use super::state::state;
use super::Answer;
use crate::api::Call;
use crate::error::MethodError;
use crate::ids;

/// The account's emails with what the conditions look at.
struct Emails {
    list: Vec<AccountEmail>,
    /// Each email's keywords (lower case).
    keywords: Vec<HashSet<String>>,
    /// The emails of each thread, by index.
    threads: HashMap<i64, Vec<usize>>,
    mailboxes: Vec<MailboxId>,
    /// Blobs found by each text condition, as searched.
    found: HashMap<String, HashSet<BlobId>>,
    /// Blobs with an attachment, once asked.
    with_attachment: Option<HashSet<BlobId>>,
}

fn bad(why: impl Into<String>) -> MethodError {
    MethodError::invalid_arguments(why)
}

/// The store search a text condition is, if it is one.
fn text_key(name: &str, value: &Value) -> Result<Option<SearchKey>, MethodError> {
    let s = || {
        value
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| bad(format!("{name} is a string")))
    };
    Ok(Some(match name {
        "text" => SearchKey::Text(s()?),
        "from" => SearchKey::From(s()?),
        "to" => SearchKey::To(s()?),
        "cc" => SearchKey::Cc(s()?),
        "bcc" => SearchKey::Bcc(s()?),
        "subject" => SearchKey::Subject(s()?),
        "body" => SearchKey::Body(s()?),
        "header" => {
            let parts: Vec<&str> = match value {
                Value::Array(a) => a
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .ok_or_else(|| bad("header is [name] or [name, value]"))
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(bad("header is [name] or [name, value]")),
            };
            match parts.as_slice() {
                [n] if !n.is_empty() => SearchKey::Header(n.to_string(), String::new()),
                [n, v] if !n.is_empty() => SearchKey::Header(n.to_string(), v.to_string()),
                _ => return Err(bad("header is [name] or [name, value]")),
            }
        }
        _ => return Ok(None),
    }))
}

impl Emails {
    /// Runs the text searches a filter holds, before it is tested.
    async fn prepare(
        &mut self,
        call: &Call<'_>,
        filter: &Value,
        depth: usize,
    ) -> Result<(), MethodError> {
        if depth > 32 {
            return Err(bad("the filter is nested too deep"));
        }
        let Value::Object(f) = filter else {
            return Err(bad("a filter is an object"));
        };
        if let Some(Value::Array(conditions)) = f.get("conditions") {
            for c in conditions {
                Box::pin(self.prepare(call, c, depth + 1)).await?;
            }
            return Ok(());
        }
        for (name, value) in f {
            if name == "hasAttachment" && self.with_attachment.is_none() {
                self.with_attachment = Some(attachments(call, &self.list).await?);
            }
            let Some(key) = text_key(name, value)? else {
                continue;
            };
            let cache = format!("{name}\u{0}{value}");
            if self.found.contains_key(&cache) {
                continue;
            }
            let mut blobs = HashSet::new();
            for &mailbox in &self.mailboxes {
                let uids = call.jmap.ctx.store.search(mailbox, &key).await?;
                let uids: HashSet<u32> = uids.into_iter().collect();
                for e in &self.list {
                    if e.entries
                        .iter()
                        .any(|(m, en)| *m == mailbox && uids.contains(&en.uid))
                    {
                        blobs.insert(e.blob);
                    }
                }
            }
            self.found.insert(cache, blobs);
        }
        Ok(())
    }

    /// Whether email `i` matches a filter (a FilterOperator or a
    /// FilterCondition).
    fn matches(&self, i: usize, filter: &Value) -> Result<bool, MethodError> {
        let Value::Object(f) = filter else {
            return Err(bad("a filter is an object"));
        };
        if let Some(op) = f.get("operator") {
            let Some(Value::Array(conditions)) = f.get("conditions") else {
                return Err(bad("a FilterOperator needs conditions"));
            };
            let mut results = conditions.iter().map(|c| self.matches(i, c));
            return match op.as_str() {
                Some("AND") => results.try_fold(true, |acc, r| Ok(acc && r?)),
                Some("OR") => results.try_fold(false, |acc, r| Ok(acc || r?)),
                Some("NOT") => {
                    results.try_fold(true, |acc, r: Result<bool, MethodError>| Ok(acc && !r?))
                }
                _ => Err(MethodError::unsupported_filter(
                    "operator is AND, OR or NOT",
                )),
            };
        }
        let e = &self.list[i];
        let first = &e.entries[0].1;
        for (name, value) in f {
            let keyword = || -> Result<String, MethodError> {
                value
                    .as_str()
                    .map(str::to_ascii_lowercase)
                    .ok_or_else(|| bad(format!("{name} is a keyword")))
            };
            let date = || -> Result<i64, MethodError> {
                value
                    .as_str()
                    .and_then(crate::message::parse_date)
                    .ok_or_else(|| bad(format!("{name} is a UTCDate")))
            };
            let size = || -> Result<u64, MethodError> {
                value
                    .as_u64()
                    .ok_or_else(|| bad(format!("{name} is a number")))
            };
            let in_thread = |k: &str| -> Vec<bool> {
                self.threads
                    .get(&e.thread)
                    .map(|t| t.iter().map(|&j| self.keywords[j].contains(k)).collect())
                    .unwrap_or_default()
            };
            let ok = match name.as_str() {
                "inMailbox" => {
                    let m = value
                        .as_str()
                        .and_then(ids::parse_mailbox)
                        .ok_or_else(|| bad("inMailbox is a mailbox id"))?;
                    e.entries.iter().any(|(x, _)| *x == m)
                }
                "inMailboxOtherThan" => {
                    let not: Vec<MailboxId> = match value {
                        Value::Array(a) => a
                            .iter()
                            .map(|v| v.as_str().and_then(ids::parse_mailbox))
                            .collect::<Option<_>>()
                            .ok_or_else(|| bad("inMailboxOtherThan is a list of mailbox ids"))?,
                        _ => return Err(bad("inMailboxOtherThan is a list of mailbox ids")),
                    };
                    e.entries.iter().any(|(x, _)| !not.contains(x))
                }
                "before" => first.internal_date < date()?,
                "after" => first.internal_date >= date()?,
                "minSize" => first.size >= size()?,
                "maxSize" => first.size < size()?,
                "hasKeyword" => self.keywords[i].contains(&keyword()?),
                "notKeyword" => !self.keywords[i].contains(&keyword()?),
                "allInThreadHaveKeyword" => in_thread(&keyword()?).iter().all(|b| *b),
                "someInThreadHaveKeyword" => in_thread(&keyword()?).iter().any(|b| *b),
                "noneInThreadHaveKeyword" => !in_thread(&keyword()?).iter().any(|b| *b),
                "hasAttachment" => {
                    let want = value
                        .as_bool()
                        .ok_or_else(|| bad("hasAttachment is a boolean"))?;
                    self.with_attachment
                        .as_ref()
                        .is_some_and(|s| s.contains(&e.blob))
                        == want
                }
                "text" | "from" | "to" | "cc" | "bcc" | "subject" | "body" | "header" => self
                    .found
                    .get(&format!("{name}\u{0}{value}"))
                    .is_some_and(|s| s.contains(&e.blob)),
                other => {
                    return Err(MethodError::unsupported_filter(format!(
                        "no filter condition {other}"
                    )))
                }
            };
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// The emails with an attachment (§4.1.4 `hasAttachment`), from their
/// stored structures.
async fn attachments(
    call: &Call<'_>,
    list: &[AccountEmail],
) -> Result<HashSet<BlobId>, MethodError> {
    let mut by_mailbox: HashMap<MailboxId, Vec<u32>> = HashMap::new();
    for e in list {
        let (m, entry) = &e.entries[0];
        by_mailbox.entry(*m).or_default().push(entry.uid);
    }
    let mut out = HashSet::new();
    for (mailbox, uids) in by_mailbox {
        for d in call.jmap.ctx.store.message_data(mailbox, &uids).await? {
            let tree = crate::message::tree(&d.structure);
            let (_, _, attachments) = crate::message::body_lists(&tree);
            if !attachments.is_empty() {
                out.insert(d.entry.blob);
            }
        }
    }
    Ok(out)
}

/// RFC 5256 §2.1's base subject, roughly: leading `Re:`, `Fwd:`, `Fw:`
/// (and `[list]` tags before them) and a trailing `(fwd)` taken off.
fn base_subject(s: &str) -> String {
    let mut s = s.trim().to_lowercase();
    loop {
        let before = s.len();
        for prefix in ["re:", "fwd:", "fw:"] {
            if let Some(rest) = s.strip_prefix(prefix) {
                s = rest.trim_start().to_string();
            }
        }
        if s.starts_with('[') {
            if let Some(end) = s.find(']') {
                let rest = s[end + 1..].trim_start();
                if rest.starts_with("re:") || rest.starts_with("fwd:") || rest.starts_with("fw:") {
                    s = rest.to_string();
                }
            }
        }
        if let Some(rest) = s.strip_suffix("(fwd)") {
            s = rest.trim_end().to_string();
        }
        if s.len() == before {
            return s;
        }
    }
}

/// Email/query (§4.4).
pub(super) async fn query(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&[
        "accountId",
        "filter",
        "sort",
        "position",
        "anchor",
        "anchorOffset",
        "limit",
        "calculateTotal",
        "collapseThreads",
    ])?;
    let (modseq, all) = results(call, &args).await?;
    let window = window(&args, &all)?;
    let mut response = json!({
        "accountId": ids::account(call.user.account),
        "queryState": state(modseq),
        "canCalculateChanges": !thread_dependent(&args),
        "position": window.position,
        "ids": all[window.start..window.end],
        "collapseThreads": args.bool("collapseThreads", false)?,
    });
    if args.bool("calculateTotal", false)? {
        response["total"] = all.len().into();
    }
    if let Some(limit) = window.limit {
        response["limit"] = limit.into();
    }
    Ok(vec![("Email/query".into(), response)])
}

/// Whether what a query finds, or its order, hangs on other emails of
/// each email's thread: its changes cannot then be told from the
/// emails that changed alone.
fn thread_dependent(args: &Args) -> bool {
    fn in_filter(f: &Value, depth: usize) -> bool {
        let Value::Object(o) = f else { return false };
        if depth > 32 {
            return true;
        }
        if let Some(Value::Array(c)) = o.get("conditions") {
            return c.iter().any(|c| in_filter(c, depth + 1));
        }
        [
            "allInThreadHaveKeyword",
            "someInThreadHaveKeyword",
            "noneInThreadHaveKeyword",
        ]
        .iter()
        .any(|k| o.contains_key(*k))
    }
    let sorted_by_thread = match args.0.get("sort") {
        Some(Value::Array(items)) => items.iter().any(|c| {
            matches!(
                c.get("property").and_then(Value::as_str),
                Some("allInThreadHaveKeyword" | "someInThreadHaveKeyword")
            )
        }),
        _ => false,
    };
    args.bool("collapseThreads", false).unwrap_or(true)
        || sorted_by_thread
        || args.0.get("filter").is_some_and(|f| in_filter(f, 0))
}

/// Email/queryChanges (RFC 8620 §5.6): every email that changed since
/// the state is removed, and those of them the query finds now are added
/// at their places; a client that applies that has the new results.
/// Queries that hang on threads cannot be followed so
/// (`cannotCalculateChanges`).
pub(super) async fn query_changes(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&[
        "accountId",
        "filter",
        "sort",
        "sinceQueryState",
        "maxChanges",
        "upToId",
        "calculateTotal",
        "collapseThreads",
    ])?;
    let since = args
        .str("sinceQueryState")?
        .ok_or_else(|| MethodError::invalid_arguments("sinceQueryState is required"))?;
    let since =
        super::state::parse_state(since).ok_or_else(MethodError::cannot_calculate_changes)?;
    if thread_dependent(&args) {
        return Err(MethodError::cannot_calculate_changes());
    }
    let (modseq, all) = results(call, &args).await?;
    if since > modseq {
        return Err(MethodError::cannot_calculate_changes());
    }
    let changes = call
        .jmap
        .ctx
        .store
        .account_changes(call.user.account, since)
        .await?;
    let changed: HashSet<String> = changes.emails.iter().map(|(b, _)| ids::email(*b)).collect();
    let mut removed: Vec<String> = changes
        .emails
        .iter()
        .filter(|(_, arrived)| *arrived <= since)
        .chain(
            changes
                .emails_gone
                .iter()
                .filter(|(_, arrived)| *arrived <= since),
        )
        .map(|(b, _)| ids::email(*b))
        .collect();
    removed.sort();
    removed.dedup();
    let added: Vec<Value> = all
        .iter()
        .enumerate()
        .filter(|(_, id)| changed.contains(*id))
        .map(|(index, id)| json!({"id": id, "index": index}))
        .collect();
    if let Some(max) = args.uint("maxChanges")? {
        if max == 0 {
            return Err(MethodError::invalid_arguments(
                "maxChanges must be positive",
            ));
        }
        if (removed.len() + added.len()) as u64 > max {
            return Err(MethodError::too_many_changes());
        }
    }
    let mut response = json!({
        "accountId": ids::account(call.user.account),
        "oldQueryState": state(since),
        "newQueryState": state(modseq),
        "removed": removed,
        "added": added,
    });
    if args.bool("calculateTotal", false)? {
        response["total"] = all.len().into();
    }
    Ok(vec![("Email/queryChanges".into(), response)])
}

/// Every email a query finds, in order, and the state they are of.
async fn results(call: &Call<'_>, args: &Args) -> Result<(u64, Vec<String>), MethodError> {
    let store = call.jmap.ctx.store.clone();
    let account = call.user.account;
    let modseq = store.account_modseq(account).await?;
    let list = store.account_emails(account, None).await?;
    let keywords = list
        .iter()
        .map(|e| super::email::keywords(&e.entries).into_keys().collect())
        .collect();
    let mut threads: HashMap<i64, Vec<usize>> = HashMap::new();
    for (i, e) in list.iter().enumerate() {
        threads.entry(e.thread).or_default().push(i);
    }
    let mailboxes = store
        .list_mailboxes(account)
        .await?
        .iter()
        .map(|m| m.id)
        .collect();
    let mut emails = Emails {
        list,
        keywords,
        threads,
        mailboxes,
        found: HashMap::new(),
        with_attachment: None,
    };
    let filter = args.0.get("filter").cloned().unwrap_or(Value::Null);
    if !filter.is_null() {
        emails.prepare(call, &filter, 0).await?;
    }
    let mut kept = Vec::new();
    for i in 0..emails.list.len() {
        if filter.is_null() || emails.matches(i, &filter)? {
            kept.push(i);
        }
    }
    // Comparators (§4.4.2): (property, ascending, keyword).
    let mut comparators: Vec<(String, bool, Option<String>)> = Vec::new();
    match args.0.get("sort") {
        None | Some(Value::Null) => comparators.push(("receivedAt".into(), false, None)),
        Some(Value::Array(items)) => {
            for c in items {
                let Value::Object(c) = c else {
                    return Err(bad("a Comparator is an object"));
                };
                let property = c
                    .get("property")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("a Comparator needs a property"))?;
                let ascending = match c.get("isAscending") {
                    None => true,
                    Some(Value::Bool(b)) => *b,
                    Some(_) => return Err(bad("isAscending is a boolean")),
                };
                if let Some(collation) = c.get("collation").and_then(Value::as_str) {
                    if !["i;ascii-casemap", "i;unicode-casemap", "i;octet"].contains(&collation) {
                        return Err(MethodError::unsupported_sort(format!(
                            "no collation {collation}"
                        )));
                    }
                }
                let keyword = c
                    .get("keyword")
                    .and_then(Value::as_str)
                    .map(str::to_ascii_lowercase);
                match property {
                    "receivedAt" | "size" | "from" | "to" | "subject" | "sentAt" => {}
                    "hasKeyword" | "allInThreadHaveKeyword" | "someInThreadHaveKeyword" => {
                        if keyword.is_none() {
                            return Err(bad(format!("sorting by {property} needs a keyword")));
                        }
                    }
                    other => {
                        return Err(MethodError::unsupported_sort(format!("no sort by {other}")))
                    }
                }
                comparators.push((property.to_string(), ascending, keyword));
            }
        }
        Some(_) => return Err(bad("sort is a list of Comparators")),
    }
    let e = &emails;
    let in_thread = |i: usize, k: &str, all: bool| -> bool {
        let t = &e.threads[&e.list[i].thread];
        if all {
            t.iter().all(|&j| e.keywords[j].contains(k))
        } else {
            t.iter().any(|&j| e.keywords[j].contains(k))
        }
    };
    kept.sort_by(|&a, &b| {
        let (x, y) = (&e.list[a], &e.list[b]);
        for (property, ascending, keyword) in &comparators {
            let k = keyword.as_deref().unwrap_or_default();
            let o = match property.as_str() {
                "receivedAt" => x.entries[0]
                    .1
                    .internal_date
                    .cmp(&y.entries[0].1.internal_date),
                "size" => x.entries[0].1.size.cmp(&y.entries[0].1.size),
                "from" => x
                    .headers
                    .from
                    .to_lowercase()
                    .cmp(&y.headers.from.to_lowercase()),
                "to" => x
                    .headers
                    .to
                    .to_lowercase()
                    .cmp(&y.headers.to.to_lowercase()),
                "subject" => {
                    base_subject(&x.headers.subject).cmp(&base_subject(&y.headers.subject))
                }
                "sentAt" => x.headers.date.cmp(&y.headers.date),
                "hasKeyword" => e.keywords[a].contains(k).cmp(&e.keywords[b].contains(k)),
                "allInThreadHaveKeyword" => in_thread(a, k, true).cmp(&in_thread(b, k, true)),
                _ => in_thread(a, k, false).cmp(&in_thread(b, k, false)),
            };
            let o = if *ascending { o } else { o.reverse() };
            if o != Ordering::Equal {
                return o;
            }
        }
        // Ties in the first comparator's direction, by arrival: every
        // query's order is stable.
        let by_arrival = x.blob.cmp(&y.blob);
        if comparators.first().is_some_and(|c| !c.1) {
            by_arrival.reverse()
        } else {
            by_arrival
        }
    });
    if args.bool("collapseThreads", false)? {
        let mut seen = HashSet::new();
        kept.retain(|&i| seen.insert(e.list[i].thread));
    }
    let all: Vec<String> = kept.iter().map(|&i| ids::email(e.list[i].blob)).collect();
    Ok((modseq, all))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_subjects_lose_reply_marks() {
        assert_eq!(base_subject("Re: RE: Fwd: Hello"), "hello");
        assert_eq!(base_subject("[list] Re: topic (fwd)"), "topic");
        assert_eq!(base_subject("Plain"), "plain");
    }

    #[test]
    fn text_conditions_are_store_searches() {
        assert_eq!(
            text_key("from", &json!("bob")).unwrap(),
            Some(SearchKey::From("bob".into()))
        );
        assert_eq!(
            text_key("header", &json!(["X-Spam"])).unwrap(),
            Some(SearchKey::Header("X-Spam".into(), String::new()))
        );
        assert!(text_key("header", &json!([])).is_err());
        assert!(text_key("subject", &json!(1)).is_err());
        assert_eq!(text_key("inMailbox", &json!("M1")).unwrap(), None);
    }
}
