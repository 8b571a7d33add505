//! Quota/get, /changes and /query (RFC 9425): the account's storage
//! limit, the one the store keeps for IMAP's QUOTA (RFC 9208), as a Quota
//! of octets over the whole account. An account without a limit has no
//! Quota object.

use serde_json::{json, Value};
use store::Quota;

use super::args::Args;
use super::Answer;
use crate::api::Call;
use crate::error::MethodError;
use crate::ids;

/// The id of the account's storage quota.
const ID: &str = "Qoctets";

const PROPERTIES: &[&str] = &[
    "id",
    "resourceType",
    "used",
    "hardLimit",
    "scope",
    "name",
    "types",
    "warnLimit",
    "softLimit",
    "description",
];

/// The state: the account's modseq (every change of use takes one) and
/// the limit (which the command line sets without one).
fn state(modseq: u64, q: &Quota) -> String {
    match q.limit_bytes {
        Some(l) => format!("{modseq}-{l}"),
        None => format!("{modseq}-u"),
    }
}

/// A state this server gave: (modseq, limit).
fn parse_state(s: &str) -> Option<(u64, Option<u64>)> {
    let (m, l) = s.split_once('-')?;
    let m = super::state::parse_state(m)?;
    let l = match l {
        "u" => None,
        _ => Some(super::state::parse_state(l)?),
    };
    Some((m, l))
}

async fn current(call: &Call<'_>) -> Result<(u64, Quota), MethodError> {
    let store = &call.jmap.ctx.store;
    let modseq = store.account_modseq(call.user.account).await?;
    let quota = store.quota(call.user.account).await?;
    Ok((modseq, quota))
}

fn object(call: &Call<'_>, q: &Quota, limit: u64, properties: &[String]) -> Value {
    let mut o = serde_json::Map::new();
    for p in properties {
        let v = match p.as_str() {
            "id" => ID.into(),
            "resourceType" => "octets".into(),
            "used" => q.used_bytes.into(),
            "hardLimit" => limit.into(),
            "scope" => "account".into(),
            "name" => format!("{} storage", call.user.address).into(),
            "types" => json!(["Mail"]),
            "warnLimit" | "softLimit" | "description" => Value::Null,
            _ => continue,
        };
        o.insert(p.clone(), v);
    }
    Value::Object(o)
}

/// Quota/get (RFC 9425 §4.1).
pub(super) async fn get(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "ids", "properties"])?;
    let (wanted, mut properties) = super::args::get_args(
        &args,
        call.jmap.ctx.config.max_objects_in_get,
        PROPERTIES,
        PROPERTIES,
    )?;
    if !properties.iter().any(|p| p == "id") {
        properties.insert(0, "id".into());
    }
    let (modseq, q) = current(call).await?;
    let mut list = Vec::new();
    let mut not_found = Vec::new();
    let exists = q.limit_bytes;
    match wanted {
        None => {
            if let Some(limit) = exists {
                list.push(object(call, &q, limit, &properties));
            }
        }
        Some(wanted) => {
            for id in wanted {
                match exists {
                    Some(limit) if id == ID => list.push(object(call, &q, limit, &properties)),
                    _ => not_found.push(id),
                }
            }
        }
    }
    Ok(vec![(
        "Quota/get".into(),
        json!({
            "accountId": ids::account(call.user.account),
            "state": state(modseq, &q),
            "list": list,
            "notFound": not_found,
        }),
    )])
}

/// Quota/changes (RFC 9425 §4.2).
pub(super) async fn changes(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "sinceState", "maxChanges"])?;
    if args.uint("maxChanges")? == Some(0) {
        return Err(MethodError::invalid_arguments(
            "maxChanges must be positive",
        ));
    }
    let (modseq, q) = current(call).await?;
    let since = args
        .str("sinceState")?
        .ok_or_else(|| MethodError::invalid_arguments("sinceState is required"))?;
    let (old_modseq, old_limit) = parse_state(since)
        .filter(|(m, _)| *m <= modseq)
        .ok_or_else(MethodError::cannot_calculate_changes)?;
    let id = || vec![ID.to_string()];
    let (created, updated, destroyed) = match (old_limit, q.limit_bytes) {
        (None, Some(_)) => (id(), vec![], vec![]),
        (Some(_), None) => (vec![], vec![], id()),
        (Some(a), Some(b)) if a != b || old_modseq != modseq => (vec![], id(), vec![]),
        _ => (vec![], vec![], vec![]),
    };
    Ok(vec![(
        "Quota/changes".into(),
        json!({
            "accountId": ids::account(call.user.account),
            "oldState": since,
            "newState": state(modseq, &q),
            "hasMoreChanges": false,
            "created": created,
            "updated": updated,
            "destroyed": destroyed,
        }),
    )])
}

/// Whether the quota matches a filter (RFC 9425 §4.3).
fn matches(filter: &Value, name: &str) -> Result<bool, MethodError> {
    let Value::Object(f) = filter else {
        return Err(MethodError::invalid_arguments("a filter is an object"));
    };
    if let Some(op) = f.get("operator") {
        let Some(Value::Array(c)) = f.get("conditions") else {
            return Err(MethodError::invalid_arguments(
                "a FilterOperator needs conditions",
            ));
        };
        let r = c
            .iter()
            .map(|c| matches(c, name))
            .collect::<Result<Vec<_>, _>>()?;
        return match op.as_str() {
            Some("AND") => Ok(r.iter().all(|b| *b)),
            Some("OR") => Ok(r.iter().any(|b| *b)),
            Some("NOT") => Ok(!r.iter().any(|b| *b)),
            _ => Err(MethodError::unsupported_filter(
                "operator is AND, OR or NOT",
            )),
        };
    }
    for (k, v) in f {
        let s = v
            .as_str()
            .ok_or_else(|| MethodError::invalid_arguments(format!("{k} is a string")))?;
        let ok = match k.as_str() {
            "name" => name.to_lowercase().contains(&s.to_lowercase()),
            "scope" => s == "account",
            "resourceType" => s == "octets",
            "type" => s == "Mail",
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

/// Quota/query (RFC 9425 §4.3); with one quota there is nothing to sort.
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
    ])?;
    if let Some(Value::Array(sort)) = args.0.get("sort") {
        for c in sort {
            match c.get("property").and_then(Value::as_str) {
                Some("name" | "used") => {}
                Some(p) => return Err(MethodError::unsupported_sort(format!("no sort by {p}"))),
                None => {
                    return Err(MethodError::invalid_arguments(
                        "a Comparator needs a property",
                    ))
                }
            }
        }
    }
    let (modseq, q) = current(call).await?;
    let name = format!("{} storage", call.user.address);
    let mut all = Vec::new();
    if q.limit_bytes.is_some() {
        let keep = match args.0.get("filter") {
            None | Some(Value::Null) => true,
            Some(f) => matches(f, &name)?,
        };
        if keep {
            all.push(ID.to_string());
        }
    }
    let window = super::query::window(&args, &all)?;
    let mut response = json!({
        "accountId": ids::account(call.user.account),
        "queryState": state(modseq, &q),
        "canCalculateChanges": false,
        "position": window.position,
        "ids": all[window.start..window.end],
    });
    if args.bool("calculateTotal", false)? {
        response["total"] = all.len().into();
    }
    Ok(vec![("Quota/query".into(), response)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_carry_the_limit() {
        let q = Quota {
            used_bytes: 5,
            limit_bytes: Some(100),
            messages: 1,
        };
        assert_eq!(parse_state(&state(7, &q)), Some((7, Some(100))));
        let unlimited = Quota::default();
        assert_eq!(parse_state(&state(7, &unlimited)), Some((7, None)));
        assert_eq!(parse_state("7"), None);
        assert!(matches(&json!({"resourceType": "octets", "type": "Mail"}), "x").unwrap());
        assert!(!matches(&json!({"scope": "domain"}), "x").unwrap());
    }
}
