//! Data types the store keeps as per-account records (Identity,
//! EmailSubmission): a JSON object each, with the kind's change number.
//! The state of such a type is its highest change number; /changes
//! (RFC 8620 §5.2) is answered from the records' numbers, with real
//! intermediate states when `maxChanges` cuts the list short.

use serde_json::{json, Map, Value};
use store::AccountRecord;

use super::args::Args;
use super::state::{parse_state, state};
use crate::api::Call;
use crate::error::{MethodError, SetError};
use crate::ids;

/// The body's field holding the change number the record was created at
/// (the store keeps only the last one).
const CREATED: &str = "_created";

/// A live record: its id, change numbers and object.
pub(crate) struct Record {
    /// The store's id of it.
    pub id: String,
    /// The change number it was created at.
    pub created: u64,
    /// The JMAP object, less its `id`.
    pub object: Map<String, Value>,
}

/// What a kind holds: its live records and its state.
pub(crate) struct Records {
    /// The live records, oldest first.
    pub live: Vec<Record>,
    /// Every record, tombstones included.
    pub all: Vec<AccountRecord>,
    /// The kind's state: its highest change number.
    pub state: u64,
}

impl Records {
    /// The live record `id`.
    pub fn get(&self, id: &str) -> Option<&Record> {
        self.live.iter().find(|r| r.id == id)
    }
}

/// The `/get` answer (RFC 8620 §5.1) over `records`: the records asked for
/// (every live one when `wanted` is None), each shown by `object` with
/// `properties`; ids that `find` does not resolve go into `notFound`.
pub(crate) fn get_answer(
    call: &Call<'_>,
    method: &str,
    records: &Records,
    wanted: Option<Vec<String>>,
    properties: &[String],
    find: impl for<'a> Fn(&'a Records, &str) -> Option<&'a Record>,
    object: impl Fn(&Record, &[String]) -> Value,
) -> super::Answer {
    let mut list = Vec::new();
    let mut not_found = Vec::new();
    match wanted {
        None => list.extend(records.live.iter().map(|r| object(r, properties))),
        Some(wanted) => {
            for id in wanted {
                match find(records, &id) {
                    Some(r) => list.push(object(r, properties)),
                    None => not_found.push(id),
                }
            }
        }
    }
    Ok(vec![(
        method.into(),
        json!({
            "accountId": ids::account(call.user.account),
            "state": state(records.state),
            "list": list,
            "notFound": not_found,
        }),
    )])
}

/// Loads the records of `kind`.
pub(crate) async fn load(call: &Call<'_>, kind: &str) -> Result<Records, MethodError> {
    let all = call
        .jmap
        .ctx
        .store
        .account_records(call.user.account, kind)
        .await?;
    let state = all.iter().map(|r| r.changed).max().unwrap_or(0);
    let mut live: Vec<Record> = all
        .iter()
        .filter_map(|r| {
            let Ok(Value::Object(mut object)) = serde_json::from_str(r.body.as_deref()?) else {
                return None;
            };
            let created = object
                .remove(CREATED)
                .and_then(|c| c.as_u64())
                .unwrap_or(r.changed);
            Some(Record {
                id: r.id.clone(),
                created,
                object,
            })
        })
        .collect();
    live.sort_by_key(|r| r.created);
    Ok(Records { live, all, state })
}

/// Writes a record: a new one when `existing` is `None` (created at the
/// change number the write takes) or a new version of `existing`.
/// Answers the id.
pub(crate) async fn put(
    call: &Call<'_>,
    kind: &str,
    id: Option<&str>,
    existing: Option<&Record>,
    object: &Map<String, Value>,
) -> Result<String, SetError> {
    let mut body = object.clone();
    body.remove("id");
    if let Some(e) = existing {
        body.insert(CREATED.into(), e.created.into());
    }
    let body = Value::Object(body).to_string();
    let (id, _) = call
        .jmap
        .ctx
        .store
        .put_account_record(call.user.account, kind, id, Some(&body))
        .await?;
    call.jmap.ctx.push.notify(call.user.account);
    Ok(id)
}

/// Destroys a record, leaving its tombstone.
pub(crate) async fn destroy(call: &Call<'_>, kind: &str, id: &str) -> Result<(), SetError> {
    call.jmap
        .ctx
        .store
        .put_account_record(call.user.account, kind, Some(id), None)
        .await?;
    call.jmap.ctx.push.notify(call.user.account);
    Ok(())
}

/// A /changes over the records of `kind` (RFC 8620 §5.2). With more
/// changes than `maxChanges`, the oldest are sent with the state just
/// after them and `hasMoreChanges`; a record written several times counts
/// once, at its last write.
pub(crate) async fn changes(
    call: &Call<'_>,
    kind: &str,
    args: &Args,
    name: &str,
    prefix: &str,
) -> Result<Vec<(String, Value)>, MethodError> {
    call.account(&args.0)?;
    args.only(&["accountId", "sinceState", "maxChanges"])?;
    let records = load(call, kind).await?;
    let since = args
        .str("sinceState")?
        .ok_or_else(|| MethodError::invalid_arguments("sinceState is required"))?;
    let since = parse_state(since)
        .filter(|s| *s <= records.state)
        .ok_or_else(MethodError::cannot_calculate_changes)?;
    let max = match args.uint("maxChanges")? {
        Some(0) => {
            return Err(MethodError::invalid_arguments(
                "maxChanges must be positive",
            ))
        }
        Some(n) => n as usize,
        None => usize::MAX,
    };
    let mut changed: Vec<&AccountRecord> =
        records.all.iter().filter(|r| r.changed > since).collect();
    changed.sort_by_key(|r| r.changed);
    let more = changed.len() > max;
    changed.truncate(max);
    let new_state = if more {
        changed.last().map_or(since, |r| r.changed)
    } else {
        records.state
    };
    let (mut created, mut updated, mut destroyed) = (Vec::new(), Vec::new(), Vec::new());
    for r in changed {
        let id = format!("{prefix}{}", r.id);
        match records.live.iter().find(|l| l.id == r.id) {
            None => destroyed.push(id),
            Some(l) if l.created > since => created.push(id),
            Some(_) => updated.push(id),
        }
    }
    Ok(vec![(
        name.into(),
        json!({
            "accountId": ids::account(call.user.account),
            "oldState": state(since),
            "newState": state(new_state),
            "hasMoreChanges": more,
            "created": created,
            "updated": updated,
            "destroyed": destroyed,
        }),
    )])
}
