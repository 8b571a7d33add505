//! Mailbox/get, /changes, /query and /set (RFC 8621 §2) over the store's
//! mailboxes: a JMAP Mailbox is an IMAP mailbox, its `name` the last
//! level of the stored name (`/` separates levels), its `role` the
//! special use (RFC 6154; INBOX is `inbox`), its counts the ones the
//! store keeps.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};
use store::{MailboxId, MailboxInfo, StoreError, FLAG_SEEN};

use super::args::{get_args, Args};
use super::state::{changes_args, changes_response, parse_state, state, Change};
use super::Answer;
use crate::api::Call;
use crate::error::{MethodError, SetError};
use crate::ids;

const PROPERTIES: &[&str] = &[
    "id",
    "name",
    "parentId",
    "role",
    "sortOrder",
    "totalEmails",
    "unreadEmails",
    "totalThreads",
    "unreadThreads",
    "myRights",
    "isSubscribed",
];

/// The hierarchy separator of stored names.
const SEPARATOR: char = '/';

/// The role of a special use (RFC 8457 §2 registry names, lower case).
pub(crate) fn role_of(info: &MailboxInfo) -> Option<&'static str> {
    if info.name == "INBOX" {
        return Some("inbox");
    }
    Some(match info.special_use.as_deref()? {
        "\\All" => "all",
        "\\Archive" => "archive",
        "\\Drafts" => "drafts",
        "\\Flagged" => "flagged",
        "\\Important" => "important",
        "\\Junk" => "junk",
        "\\Sent" => "sent",
        "\\Trash" => "trash",
        _ => return None,
    })
}

/// The special use of a role.
fn special_use_of(role: &str) -> Option<&'static str> {
    Some(match role {
        "all" => "\\All",
        "archive" => "\\Archive",
        "drafts" => "\\Drafts",
        "flagged" => "\\Flagged",
        "important" => "\\Important",
        "junk" => "\\Junk",
        "sent" => "\\Sent",
        "trash" => "\\Trash",
        _ => return None,
    })
}

/// The order clients show mailboxes in: INBOX, then the special ones,
/// then the rest (§2 `sortOrder`, smaller first).
fn sort_order(info: &MailboxInfo) -> u32 {
    match role_of(info) {
        Some("inbox") => 1,
        Some("drafts") => 2,
        Some("sent") => 3,
        Some("archive") => 4,
        Some("junk") => 5,
        Some("trash") => 6,
        Some(_) => 7,
        None => 10,
    }
}

/// The last level of a stored name.
fn leaf_name(name: &str) -> &str {
    name.rsplit(SEPARATOR).next().unwrap_or(name)
}

/// The stored name of a mailbox's parent, if it has one.
fn parent_name(name: &str) -> Option<&str> {
    name.rsplit_once(SEPARATOR).map(|(parent, _)| parent)
}

/// Thread counts per mailbox: (total, unread), from the account's emails.
async fn thread_counts(call: &Call<'_>) -> Result<HashMap<MailboxId, (usize, usize)>, MethodError> {
    let emails = call
        .jmap
        .ctx
        .store
        .account_emails(call.user.account, None)
        .await?;
    let mut all: HashMap<MailboxId, HashSet<i64>> = HashMap::new();
    let mut unread: HashMap<MailboxId, HashSet<i64>> = HashMap::new();
    for e in &emails {
        let seen = e.entries.iter().all(|(_, m)| m.flags & FLAG_SEEN != 0);
        for (mailbox, _) in &e.entries {
            all.entry(*mailbox).or_default().insert(e.thread);
            if !seen {
                unread.entry(*mailbox).or_default().insert(e.thread);
            }
        }
    }
    Ok(all
        .into_iter()
        .map(|(m, t)| (m, (t.len(), unread.get(&m).map_or(0, HashSet::len))))
        .collect())
}

/// One Mailbox object with the properties asked for.
fn object(
    info: &MailboxInfo,
    by_name: &HashMap<&str, MailboxId>,
    threads: Option<&HashMap<MailboxId, (usize, usize)>>,
    properties: &[String],
) -> Value {
    let mut o = Map::new();
    let is_inbox = info.name == "INBOX";
    for p in properties {
        let v = match p.as_str() {
            "id" => ids::mailbox(info.id).into(),
            "name" => leaf_name(&info.name).into(),
            "parentId" => parent_name(&info.name)
                .and_then(|p| by_name.get(p))
                .map_or(Value::Null, |id| ids::mailbox(*id).into()),
            "role" => role_of(info).map_or(Value::Null, Value::from),
            "sortOrder" => sort_order(info).into(),
            "totalEmails" => info.messages.into(),
            "unreadEmails" => info.unseen.into(),
            "totalThreads" => threads
                .and_then(|t| t.get(&info.id))
                .map_or(0, |t| t.0)
                .into(),
            "unreadThreads" => threads
                .and_then(|t| t.get(&info.id))
                .map_or(0, |t| t.1)
                .into(),
            "myRights" => json!({
                "mayReadItems": true,
                "mayAddItems": true,
                "mayRemoveItems": true,
                "maySetSeen": true,
                "maySetKeywords": true,
                "mayCreateChild": true,
                "mayRename": !is_inbox,
                "mayDelete": !is_inbox,
                "maySubmit": true,
            }),
            "isSubscribed" => info.subscribed.into(),
            _ => continue,
        };
        o.insert(p.clone(), v);
    }
    Value::Object(o)
}

/// Mailbox/get (§2.1, RFC 8620 §5.1).
pub(super) async fn get(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "ids", "properties"])?;
    let (wanted, mut properties) = get_args(
        &args,
        call.jmap.ctx.config.max_objects_in_get,
        PROPERTIES,
        PROPERTIES,
    )?;
    if !properties.iter().any(|p| p == "id") {
        properties.insert(0, "id".into());
    }
    let store = &call.jmap.ctx.store;
    let modseq = store.account_modseq(call.user.account).await?;
    let mailboxes = store.list_mailboxes(call.user.account).await?;
    let by_name: HashMap<&str, MailboxId> =
        mailboxes.iter().map(|m| (m.name.as_str(), m.id)).collect();
    let threads = if properties
        .iter()
        .any(|p| p == "totalThreads" || p == "unreadThreads")
    {
        Some(thread_counts(call).await?)
    } else {
        None
    };
    let mut list = Vec::new();
    let mut not_found = Vec::new();
    match wanted {
        None => {
            for m in &mailboxes {
                list.push(object(m, &by_name, threads.as_ref(), &properties));
            }
        }
        Some(wanted) => {
            for id in wanted {
                let found = call
                    .resolve_id(&id)
                    .and_then(|id| ids::parse_mailbox(&id))
                    .and_then(|n| mailboxes.iter().find(|m| m.id == n));
                match found {
                    Some(m) => list.push(object(m, &by_name, threads.as_ref(), &properties)),
                    None => not_found.push(id),
                }
            }
        }
    }
    Ok(vec![(
        "Mailbox/get".into(),
        json!({
            "accountId": ids::account(call.user.account),
            "state": state(modseq),
            "list": list,
            "notFound": not_found,
        }),
    )])
}

/// Mailbox/changes (§2.2, RFC 8620 §5.2). A mailbox whose messages
/// changed but not its name, role or subscription has only its counts
/// changed: `updatedProperties` says so.
pub(super) async fn changes(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "sinceState", "maxChanges"])?;
    let store = &call.jmap.ctx.store;
    let now = store.account_modseq(call.user.account).await?;
    let (from, max) = changes_args(&args, now)?;
    let since = from.origin;
    let c = store.account_changes(call.user.account, since).await?;
    let mut changes = Vec::new();
    for m in &c.mailboxes {
        let last = m.created.max(m.meta).max(m.contents);
        if m.created > since {
            changes.push((ids::mailbox(m.id), Change::Created, last));
        } else if m.meta > since || m.contents > since {
            changes.push((ids::mailbox(m.id), Change::Updated, last));
        }
    }
    let gone_at: std::collections::HashMap<MailboxId, u64> =
        c.mailboxes_gone_at.iter().copied().collect();
    changes.extend(
        c.mailboxes_gone
            .iter()
            .filter(|(_, created)| *created <= since)
            .map(|(id, _)| {
                let at = gone_at.get(id).copied().unwrap_or(c.modseq);
                (ids::mailbox(*id), Change::Destroyed, at)
            }),
    );
    // Only the counts changed when no mailbox in the answer had its name,
    // role or subscription changed.
    let meta: std::collections::HashMap<String, bool> = c
        .mailboxes
        .iter()
        .map(|m| (ids::mailbox(m.id), m.meta > since))
        .collect();
    let mut response = changes_response(
        &ids::account(call.user.account),
        from,
        c.modseq,
        changes,
        max,
    )?;
    let updated: Vec<&str> = response["updated"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let counts_only = !updated.is_empty() && !updated.iter().any(|id| meta.get(*id) == Some(&true));
    response["updatedProperties"] = if counts_only {
        json!([
            "totalEmails",
            "unreadEmails",
            "totalThreads",
            "unreadThreads"
        ])
    } else {
        Value::Null
    };
    Ok(vec![("Mailbox/changes".into(), response)])
}

/// A Mailbox/query filter condition (§2.3).
fn matches(
    m: &MailboxInfo,
    filter: &Value,
    by_name: &HashMap<&str, MailboxId>,
) -> Result<bool, MethodError> {
    let Value::Object(f) = filter else {
        return Err(MethodError::invalid_arguments("a filter is an object"));
    };
    if let Some(op) = f.get("operator") {
        let conditions = match f.get("conditions") {
            Some(Value::Array(c)) => c,
            _ => {
                return Err(MethodError::invalid_arguments(
                    "a FilterOperator needs conditions",
                ))
            }
        };
        let results = conditions
            .iter()
            .map(|c| matches(m, c, by_name))
            .collect::<Result<Vec<_>, _>>()?;
        return match op.as_str() {
            Some("AND") => Ok(results.iter().all(|r| *r)),
            Some("OR") => Ok(results.iter().any(|r| *r)),
            Some("NOT") => Ok(!results.iter().any(|r| *r)),
            _ => Err(MethodError::unsupported_filter(
                "operator must be AND, OR or NOT",
            )),
        };
    }
    for (key, value) in f {
        let ok = match key.as_str() {
            "parentId" => {
                let parent = parent_name(&m.name).and_then(|p| by_name.get(p)).copied();
                match value {
                    Value::Null => parent.is_none(),
                    Value::String(id) => parent.is_some() && ids::parse_mailbox(id) == parent,
                    _ => return Err(MethodError::invalid_arguments("parentId is an id or null")),
                }
            }
            "name" => match value {
                Value::String(n) => leaf_name(&m.name)
                    .to_lowercase()
                    .contains(&n.to_lowercase()),
                _ => return Err(MethodError::invalid_arguments("name is a string")),
            },
            "role" => match value {
                Value::Null => role_of(m).is_none(),
                Value::String(r) => role_of(m) == Some(r.as_str()),
                _ => return Err(MethodError::invalid_arguments("role is a string or null")),
            },
            "hasAnyRole" => match value {
                Value::Bool(b) => role_of(m).is_some() == *b,
                _ => return Err(MethodError::invalid_arguments("hasAnyRole is a boolean")),
            },
            "isSubscribed" => match value {
                Value::Bool(b) => m.subscribed == *b,
                _ => return Err(MethodError::invalid_arguments("isSubscribed is a boolean")),
            },
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

/// Mailbox/query (§2.3, RFC 8620 §5.5): filters on parentId, name, role,
/// hasAnyRole and isSubscribed; sorts by sortOrder and name, or as a tree
/// (parents before their children).
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
        "sortAsTree",
        "filterAsTree",
    ])?;
    let (modseq, all) = results(call, &args).await?;
    let window = super::query::window(&args, &all)?;
    let mut response = json!({
        "accountId": ids::account(call.user.account),
        "queryState": state(modseq),
        "canCalculateChanges": !tree_dependent(&args)?,
        "position": window.position,
        "ids": all[window.start..window.end],
    });
    if args.bool("calculateTotal", false)? {
        response["total"] = all.len().into();
    }
    if let Some(limit) = window.limit {
        response["limit"] = limit.into();
    }
    Ok(vec![("Mailbox/query".into(), response)])
}

/// Whether a query's results hang on other mailboxes of the tree than
/// the ones that changed (sortAsTree, filterAsTree).
fn tree_dependent(args: &Args) -> Result<bool, MethodError> {
    Ok(args.bool("sortAsTree", false)? || args.bool("filterAsTree", false)?)
}

/// Mailbox/queryChanges (RFC 8620 §5.6), as Email/queryChanges does it:
/// the mailboxes created, renamed, moved or (un)subscribed since the
/// state are removed and, where the query finds them now, added; counts
/// are in no filter or sort.
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
        "sortAsTree",
        "filterAsTree",
    ])?;
    let since = args
        .str("sinceQueryState")?
        .ok_or_else(|| MethodError::invalid_arguments("sinceQueryState is required"))?;
    let since = parse_state(since).ok_or_else(MethodError::cannot_calculate_changes)?;
    if tree_dependent(&args)? {
        return Err(MethodError::cannot_calculate_changes());
    }
    let (modseq, all) = results(call, &args).await?;
    if since > modseq {
        return Err(MethodError::cannot_calculate_changes());
    }
    let c = call
        .jmap
        .ctx
        .store
        .account_changes(call.user.account, since)
        .await?;
    let changed: HashSet<String> = c
        .mailboxes
        .iter()
        .filter(|m| m.created > since || m.meta > since)
        .map(|m| ids::mailbox(m.id))
        .collect();
    let mut removed: Vec<String> = c
        .mailboxes
        .iter()
        .filter(|m| m.created <= since && m.meta > since)
        .map(|m| ids::mailbox(m.id))
        .chain(
            c.mailboxes_gone
                .iter()
                .filter(|(_, created)| *created <= since)
                .map(|(id, _)| ids::mailbox(*id)),
        )
        .collect();
    removed.sort();
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
    Ok(vec![("Mailbox/queryChanges".into(), response)])
}

/// Every mailbox a query finds, in order, and the state they are of.
async fn results(call: &Call<'_>, args: &Args) -> Result<(u64, Vec<String>), MethodError> {
    let store = &call.jmap.ctx.store;
    let modseq = store.account_modseq(call.user.account).await?;
    let mailboxes = store.list_mailboxes(call.user.account).await?;
    let by_name: HashMap<&str, MailboxId> =
        mailboxes.iter().map(|m| (m.name.as_str(), m.id)).collect();
    let filter = args.0.get("filter").cloned().unwrap_or(Value::Null);
    let mut kept = Vec::new();
    for m in &mailboxes {
        if filter.is_null() || matches(m, &filter, &by_name)? {
            kept.push(m);
        }
    }
    if args.bool("filterAsTree", false)? && !filter.is_null() {
        // A mailbox whose parent does not match is left out (§2.3).
        let names: HashSet<&str> = kept.iter().map(|m| m.name.as_str()).collect();
        kept.retain(|m| {
            let mut name = m.name.as_str();
            while let Some(parent) = parent_name(name) {
                if !names.contains(parent) {
                    return false;
                }
                name = parent;
            }
            true
        });
    }
    // Each comparator: (property, ascending).
    let mut comparators: Vec<(String, bool)> = Vec::new();
    if let Some(sort) = args.0.get("sort") {
        let Value::Array(items) = sort else {
            return Err(MethodError::invalid_arguments("sort is a list"));
        };
        for c in items {
            let property = c.get("property").and_then(Value::as_str);
            let ascending = c
                .get("isAscending")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            match property {
                Some(p @ ("sortOrder" | "name")) => comparators.push((p.to_string(), ascending)),
                Some(p) => return Err(MethodError::unsupported_sort(format!("no sort by {p}"))),
                None => {
                    return Err(MethodError::invalid_arguments(
                        "a comparator needs a property",
                    ))
                }
            }
        }
    }
    let info_by_name: HashMap<&str, &MailboxInfo> =
        mailboxes.iter().map(|m| (m.name.as_str(), m)).collect();
    // Without comparators, or on ties: sortOrder, then name.
    let key = |m: &MailboxInfo| (sort_order(m), leaf_name(&m.name).to_lowercase());
    let cmp_one = |a: &MailboxInfo, b: &MailboxInfo| {
        let mut ord = std::cmp::Ordering::Equal;
        for (p, asc) in &comparators {
            let o = match p.as_str() {
                "sortOrder" => sort_order(a).cmp(&sort_order(b)),
                _ => leaf_name(&a.name)
                    .to_lowercase()
                    .cmp(&leaf_name(&b.name).to_lowercase()),
            };
            let o = if *asc { o } else { o.reverse() };
            ord = ord.then(o);
        }
        ord.then_with(|| key(a).cmp(&key(b))).then(a.id.cmp(&b.id))
    };
    if args.bool("sortAsTree", false)? {
        // Parents first, each followed by its children in order: compare
        // the chains of ancestors level by level.
        let chain = |m: &MailboxInfo| -> Vec<&MailboxInfo> {
            let mut out = vec![];
            let mut name = m.name.as_str();
            loop {
                if let Some(i) = info_by_name.get(name) {
                    out.push(*i);
                }
                match parent_name(name) {
                    Some(p) => name = p,
                    None => break,
                }
            }
            out.reverse();
            out
        };
        kept.sort_by(|a, b| {
            let (ca, cb) = (chain(a), chain(b));
            for (x, y) in ca.iter().zip(&cb) {
                let o = cmp_one(x, y);
                if o != std::cmp::Ordering::Equal {
                    return o;
                }
            }
            ca.len().cmp(&cb.len())
        });
    } else {
        kept.sort_by(|a, b| cmp_one(a, b));
    }
    let all: Vec<String> = kept.iter().map(|m| ids::mailbox(m.id)).collect();
    Ok((modseq, all))
}

/// The stored name for a mailbox called `name` under `parent` (a
/// mailbox id), checked: a level may not hold the separator.
fn stored_name(
    name: &str,
    parent: Option<&str>,
    mailboxes: &[MailboxInfo],
    call: &Call<'_>,
) -> Result<String, SetError> {
    if name.is_empty() || name.contains(SEPARATOR) || name.chars().any(char::is_control) {
        return Err(SetError::invalid_properties(
            &["name"],
            format!("a name is not empty and holds no {SEPARATOR:?} or control characters"),
        ));
    }
    match parent {
        None => Ok(name.to_string()),
        Some(id) => {
            let parent = call
                .resolve_id(id)
                .and_then(|id| ids::parse_mailbox(&id))
                .and_then(|n| mailboxes.iter().find(|m| m.id == n))
                .ok_or_else(|| SetError::invalid_properties(&["parentId"], "no such mailbox"))?;
            Ok(format!("{}{SEPARATOR}{name}", parent.name))
        }
    }
}

fn parent_arg(o: &Map<String, Value>) -> Result<Option<Option<&str>>, SetError> {
    match o.get("parentId") {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(None)),
        Some(Value::String(s)) => Ok(Some(Some(s))),
        Some(_) => Err(SetError::invalid_properties(&["parentId"], "an id or null")),
    }
}

/// Mailbox/set (§2.5, RFC 8620 §5.3): create, rename or move (name,
/// parentId), subscribe, destroy (with `onDestroyRemoveEmails`).
pub(super) async fn set(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&[
        "accountId",
        "ifInState",
        "create",
        "update",
        "destroy",
        "onDestroyRemoveEmails",
    ])?;
    let store = call.jmap.ctx.store.clone();
    let account = call.user.account;
    let old = store.account_modseq(account).await?;
    if let Some(s) = args.str("ifInState")? {
        if parse_state(s) != Some(old) {
            return Err(MethodError::state_mismatch());
        }
    }
    let create = args.object("create")?.cloned().unwrap_or_default();
    let update = args.object("update")?.cloned().unwrap_or_default();
    let destroy = args.strings("destroy")?.unwrap_or_default();
    if create.len() + update.len() + destroy.len() > call.jmap.ctx.config.max_objects_in_set {
        return Err(MethodError::request_too_large(
            "more changes than maxObjectsInSet",
        ));
    }
    let remove_emails = args.bool("onDestroyRemoveEmails", false)?;
    let mut created = Map::new();
    let mut not_created = Map::new();
    // A creation whose parent is another creation of this call comes
    // after it (RFC 8620 §5.3), whatever the order of the object's keys.
    let mut order: Vec<(&String, &Value)> = Vec::new();
    let mut pending: Vec<(&String, &Value)> = create.iter().collect();
    while !pending.is_empty() {
        let placed: Vec<&String> = order.iter().map(|(c, _)| *c).collect();
        let (ready, waiting): (Vec<_>, Vec<_>) = pending.into_iter().partition(|(_, v)| {
            match v
                .get("parentId")
                .and_then(Value::as_str)
                .and_then(|p| p.strip_prefix('#'))
            {
                Some(parent) => !create.contains_key(parent) || placed.iter().any(|c| *c == parent),
                None => true,
            }
        });
        if ready.is_empty() {
            // A cycle: what is left fails on its unknown parent.
            order.extend(waiting);
            break;
        }
        order.extend(ready);
        pending = waiting;
    }
    for (cid, value) in order {
        let result: Result<MailboxInfo, SetError> = async {
            let Value::Object(o) = value else {
                return Err(SetError::invalid_properties(&[], "a Mailbox is an object"));
            };
            for k in o.keys() {
                if !["name", "parentId", "role", "isSubscribed", "sortOrder"].contains(&k.as_str())
                {
                    return Err(SetError::invalid_properties(&[k.as_str()], "not settable"));
                }
            }
            let name = o
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| SetError::invalid_properties(&["name"], "name is required"))?;
            let mailboxes = store.list_mailboxes(account).await?;
            let path = stored_name(name, parent_arg(o)?.flatten(), &mailboxes, call)?;
            let special = match o.get("role") {
                None | Some(Value::Null) => None,
                Some(Value::String(r)) => Some(special_use_of(r).ok_or_else(|| {
                    SetError::invalid_properties(&["role"], "not a role this server has")
                })?),
                Some(_) => return Err(SetError::invalid_properties(&["role"], "a string")),
            };
            if o.get("sortOrder")
                .is_some_and(|v| !v.is_null() && !v.is_u64())
            {
                return Err(SetError::invalid_properties(
                    &["sortOrder"],
                    "an unsigned integer",
                ));
            }
            let info = store.create_mailbox(account, &path, special).await?;
            if o.get("isSubscribed")
                .and_then(Value::as_bool)
                .unwrap_or(false)
            {
                store.set_subscribed(account, &path, true).await?;
            }
            Ok(info)
        }
        .await;
        match result {
            Ok(info) => {
                let id = ids::mailbox(info.id);
                call.created.insert(cid.clone(), id.clone());
                created.insert(
                    cid.clone(),
                    json!({
                        "id": id,
                        "sortOrder": sort_order(&info),
                        "totalEmails": 0, "unreadEmails": 0, "totalThreads": 0, "unreadThreads": 0,
                        "myRights": object(&info, &HashMap::new(), None, &["myRights".into()])["myRights"],
                    }),
                );
            }
            Err(e) => {
                not_created.insert(cid.clone(), e.to_json());
            }
        }
    }
    let mut updated = Map::new();
    let mut not_updated = Map::new();
    for (id, value) in &update {
        let result: Result<(), SetError> = async {
            let Value::Object(o) = value else {
                return Err(SetError::invalid_properties(&[], "a patch is an object"));
            };
            let mailboxes = store.list_mailboxes(account).await?;
            let mailbox = call
                .resolve_id(id)
                .and_then(|id| ids::parse_mailbox(&id))
                .and_then(|n| mailboxes.iter().find(|m| m.id == n))
                .ok_or_else(SetError::not_found)?
                .clone();
            for k in o.keys() {
                if !["name", "parentId", "isSubscribed", "role", "sortOrder"].contains(&k.as_str())
                {
                    return Err(SetError::invalid_properties(&[k.as_str()], "not settable"));
                }
            }
            if let Some(r) = o.get("role") {
                let now = role_of(&mailbox);
                if r.as_str() != now {
                    return Err(SetError::invalid_properties(
                        &["role"],
                        "roles are fixed here",
                    ));
                }
            }
            if let Some(v) = o.get("sortOrder") {
                if v.as_u64() != Some(u64::from(sort_order(&mailbox))) {
                    return Err(SetError::invalid_properties(
                        &["sortOrder"],
                        "the server orders mailboxes by role",
                    ));
                }
            }
            let new_name = o.get("name").map(|n| n.as_str().unwrap_or(""));
            let new_parent = parent_arg(o)?;
            if new_name.is_some() || new_parent.is_some() {
                let name = new_name.unwrap_or_else(|| leaf_name(&mailbox.name));
                let by_name: HashMap<&str, MailboxId> =
                    mailboxes.iter().map(|m| (m.name.as_str(), m.id)).collect();
                let parent_now = parent_name(&mailbox.name)
                    .and_then(|p| by_name.get(p))
                    .map(|id| ids::mailbox(*id));
                let parent = match new_parent {
                    Some(p) => p.map(str::to_string),
                    None => parent_now,
                };
                let path = stored_name(name, parent.as_deref(), &mailboxes, call)?;
                if path != mailbox.name {
                    if mailbox.name == "INBOX" {
                        return Err(SetError::new("forbidden", "INBOX keeps its name"));
                    }
                    store.rename_mailbox(account, &mailbox.name, &path).await?;
                }
            }
            if let Some(v) = o.get("isSubscribed") {
                let b = v
                    .as_bool()
                    .ok_or_else(|| SetError::invalid_properties(&["isSubscribed"], "a boolean"))?;
                let current = store
                    .list_mailboxes(account)
                    .await?
                    .into_iter()
                    .find(|m| m.id == mailbox.id)
                    .ok_or_else(SetError::not_found)?;
                if current.subscribed != b {
                    store.set_subscribed(account, &current.name, b).await?;
                }
            }
            Ok(())
        }
        .await;
        match result {
            Ok(()) => {
                updated.insert(id.clone(), Value::Null);
            }
            Err(e) => {
                not_updated.insert(id.clone(), e.to_json());
            }
        }
    }
    let mut destroyed = Vec::new();
    let mut not_destroyed = Map::new();
    for id in &destroy {
        let result: Result<(), SetError> = async {
            let mailboxes = store.list_mailboxes(account).await?;
            let mailbox = call
                .resolve_id(id)
                .and_then(|id| ids::parse_mailbox(&id))
                .and_then(|n| mailboxes.iter().find(|m| m.id == n))
                .ok_or_else(SetError::not_found)?
                .clone();
            if mailbox.name == "INBOX" {
                return Err(SetError::new("forbidden", "INBOX cannot be destroyed"));
            }
            let prefix = format!("{}{SEPARATOR}", mailbox.name);
            if mailboxes.iter().any(|m| m.name.starts_with(&prefix)) {
                return Err(SetError::new("mailboxHasChild", "the mailbox has children"));
            }
            if mailbox.messages > 0 && !remove_emails {
                return Err(SetError::new("mailboxHasEmail", "the mailbox holds emails"));
            }
            match store.delete_mailbox(account, &mailbox.name).await {
                Ok(()) => Ok(()),
                Err(StoreError::NotFound(_)) => Err(SetError::not_found()),
                Err(e) => Err(e.into()),
            }
        }
        .await;
        match result {
            Ok(()) => destroyed.push(id.clone()),
            Err(e) => {
                not_destroyed.insert(id.clone(), e.to_json());
            }
        }
    }
    let new = store.account_modseq(account).await?;
    Ok(vec![(
        "Mailbox/set".into(),
        json!({
            "accountId": ids::account(account),
            "oldState": state(old),
            "newState": state(new),
            "created": created,
            "updated": updated,
            "destroyed": destroyed,
            "notCreated": not_created,
            "notUpdated": not_updated,
            "notDestroyed": not_destroyed,
        }),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: i64, name: &str, special: Option<&str>) -> MailboxInfo {
        MailboxInfo {
            id,
            account: 1,
            name: name.into(),
            uid_validity: 1,
            uid_next: 1,
            highest_modseq: 1,
            special_use: special.map(str::to_string),
            subscribed: true,
            messages: 0,
            unseen: 0,
        }
    }

    #[test]
    fn names_roles_and_filters() {
        let inbox = info(1, "INBOX", None);
        let sent = info(2, "Sent", Some("\\Sent"));
        let child = info(3, "Work/Projects", None);
        assert_eq!(role_of(&inbox), Some("inbox"));
        assert_eq!(role_of(&sent), Some("sent"));
        assert_eq!(role_of(&child), None);
        assert_eq!(leaf_name(&child.name), "Projects");
        assert_eq!(parent_name(&child.name), Some("Work"));
        assert!(sort_order(&inbox) < sort_order(&sent));
        let by_name = HashMap::from([("Work", 4), ("INBOX", 1)]);
        let f = json!({"parentId": "M4"});
        assert!(matches(&child, &f, &by_name).unwrap());
        assert!(!matches(&inbox, &f, &by_name).unwrap());
        let f = json!({"operator": "NOT", "conditions": [{"hasAnyRole": true}]});
        assert!(matches(&child, &f, &by_name).unwrap());
        assert!(!matches(&sent, &f, &by_name).unwrap());
        assert_eq!(
            matches(&child, &json!({"colour": 1}), &by_name)
                .unwrap_err()
                .kind,
            "unsupportedFilter"
        );
        assert_eq!(special_use_of("junk"), Some("\\Junk"));
        assert_eq!(special_use_of("inbox"), None);
    }
}
