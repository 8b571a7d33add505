//! Identity/get, /changes and /set (RFC 8621 §6): the addresses the
//! account sends as, each with a name, reply-to, bcc and signatures.
//!
//! Every address the directory leads to the account (its own and the
//! aliases that deliver to it) has an identity, made on first use with
//! the webmail's display name and signature; more can be created for any
//! address the account may send as (the rule SMTP submission applies),
//! and any may be destroyed. An identity for an address the account may
//! not use is refused with `forbiddenFrom` (§6.3).

use serde_json::{json, Map, Value};

use super::args::Args;
use super::records::{self, Record};
use super::Answer;
use crate::api::Call;
use crate::error::{MethodError, SetError};
use crate::ids;

/// The kind the store keeps identities under.
pub(crate) const KIND: &str = store::IDENTITY_KIND;
/// What an identity's JMAP id starts with.
const PREFIX: &str = "I";

const PROPERTIES: &[&str] = &[
    "id",
    "name",
    "email",
    "replyTo",
    "bcc",
    "textSignature",
    "htmlSignature",
    "mayDelete",
];

/// Whether the account may send as `address`: its own address, a `+tag`
/// form of it, or an alias that delivers to it (as SMTP submission's
/// sender check decides).
pub(crate) fn may_send_as(call: &Call<'_>, address: &str) -> bool {
    match call.jmap.ctx.directory.get().resolve(address) {
        store::Resolution::Deliver { mailboxes, .. } => mailboxes.contains(&call.user.inbox),
        _ => false,
    }
}

/// The store id of the identity made for one of the account's addresses
/// (shared with the webmail, which sets signatures on the same records).
fn seeded_id(address: &str) -> String {
    store::identity_record_id(address)
}

/// The identities, after making those of addresses that never had one.
pub(crate) async fn load(call: &Call<'_>) -> Result<records::Records, MethodError> {
    let records = records::load(call, KIND).await?;
    let directory = call.jmap.ctx.directory.get();
    let Some(entry) = directory.account(&call.user.address) else {
        return Ok(records);
    };
    let missing: Vec<String> = directory
        .addresses_of(entry)
        .into_iter()
        .filter(|a| !records.all.iter().any(|r| r.id == seeded_id(a)))
        .collect();
    if missing.is_empty() {
        return Ok(records);
    }
    let settings = call.jmap.ctx.store.web_settings(call.user.account).await?;
    for address in missing {
        let object = json!({
            "name": settings.display_name,
            "email": address,
            "replyTo": null,
            "bcc": null,
            "textSignature": settings.signature,
            "htmlSignature": "",
        });
        let Value::Object(object) = object else {
            continue;
        };
        records::put(call, KIND, Some(&seeded_id(&address)), None, &object)
            .await
            .map_err(|e| MethodError::server_fail(e.description.unwrap_or_default()))?;
    }
    records::load(call, KIND).await
}

/// The JMAP id of a record.
fn jmap_id(r: &Record) -> String {
    format!("{PREFIX}{}", r.id)
}

/// The store id of a JMAP id.
pub(crate) fn store_id(id: &str) -> Option<&str> {
    id.strip_prefix(PREFIX).filter(|s| !s.is_empty())
}

/// The identity `id` (a JMAP id), if the account has it.
pub(crate) fn find<'a>(records: &'a records::Records, id: &str) -> Option<&'a Record> {
    records.get(store_id(id)?)
}

fn object(r: &Record, properties: &[String]) -> Value {
    let mut o = Map::new();
    for p in properties {
        let v = match p.as_str() {
            "id" => jmap_id(r).into(),
            "mayDelete" => true.into(),
            "replyTo" | "bcc" => r.object.get(p).cloned().unwrap_or(Value::Null),
            other => r.object.get(other).cloned().unwrap_or_else(|| "".into()),
        };
        o.insert(p.clone(), v);
    }
    Value::Object(o)
}

/// Identity/get (§6.1).
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
    let records = load(call).await?;
    records::get_answer(
        call,
        "Identity/get",
        &records,
        wanted,
        &properties,
        find,
        object,
    )
}

/// Identity/changes (§6.2).
pub(super) async fn changes(call: &mut Call<'_>, args: Args) -> Answer {
    load(call).await?;
    records::changes(call, KIND, &args, "Identity/changes", PREFIX).await
}

/// An EmailAddress[] or null (§4.1.2.3).
fn addresses(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(list) => list.iter().all(|a| {
            a.as_object().is_some_and(|o| {
                o.get("email").is_some_and(Value::is_string)
                    && o.get("name").is_none_or(|n| n.is_null() || n.is_string())
                    && o.keys().all(|k| k == "email" || k == "name")
            })
        }),
        _ => false,
    }
}

/// Checks the settable properties of `o` and writes them over `into`.
fn apply(o: &Map<String, Value>, into: &mut Map<String, Value>) -> Result<(), SetError> {
    for (k, v) in o {
        let ok = match k.as_str() {
            "name" | "textSignature" | "htmlSignature" => v.is_string(),
            "replyTo" | "bcc" => addresses(v),
            "email" => v.is_string(),
            "id" | "mayDelete" => {
                return Err(SetError::invalid_properties(
                    &[k.as_str()],
                    "set by the server",
                ))
            }
            _ => {
                return Err(SetError::invalid_properties(
                    &[k.as_str()],
                    "unknown property",
                ))
            }
        };
        if !ok {
            return Err(SetError::invalid_properties(&[k.as_str()], "wrong type"));
        }
        into.insert(k.clone(), v.clone());
    }
    Ok(())
}

/// Identity/set (§6.3).
pub(super) async fn set(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "ifInState", "create", "update", "destroy"])?;
    let records = load(call).await?;
    let old = records.state;
    if let Some(s) = args.str("ifInState")? {
        if super::state::parse_state(s) != Some(old) {
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
    let mut created = Map::new();
    let mut not_created = Map::new();
    for (cid, spec) in &create {
        let result: Result<Value, SetError> = async {
            let Value::Object(o) = spec else {
                return Err(SetError::invalid_properties(
                    &[],
                    "an Identity is an object",
                ));
            };
            let mut object = Map::new();
            object.insert("name".into(), "".into());
            object.insert("replyTo".into(), Value::Null);
            object.insert("bcc".into(), Value::Null);
            object.insert("textSignature".into(), "".into());
            object.insert("htmlSignature".into(), "".into());
            apply(o, &mut object)?;
            let Some(email) = object.get("email").and_then(Value::as_str) else {
                return Err(SetError::invalid_properties(
                    &["email"],
                    "email is required",
                ));
            };
            if !may_send_as(call, email) {
                return Err(SetError::new(
                    "forbiddenFrom",
                    format!("{} may not send as {email}", call.user.address),
                ));
            }
            let id = records::put(call, KIND, None, None, &object).await?;
            Ok(json!({"id": format!("{PREFIX}{id}"), "mayDelete": true}))
        }
        .await;
        match result {
            Ok(v) => {
                if let Some(id) = v["id"].as_str() {
                    call.created.insert(cid.clone(), id.to_string());
                }
                created.insert(cid.clone(), v);
            }
            Err(e) => {
                not_created.insert(cid.clone(), e.to_json());
            }
        }
    }
    let mut updated = Map::new();
    let mut not_updated = Map::new();
    for (id, patch) in &update {
        let result: Result<(), SetError> = async {
            let Value::Object(patch) = patch else {
                return Err(SetError::invalid_properties(&[], "a patch is an object"));
            };
            let id = call.resolve_id(id).ok_or_else(SetError::not_found)?;
            let r = find(&records, &id).ok_or_else(SetError::not_found)?;
            let mut object = r.object.clone();
            apply(patch, &mut object)?;
            // §6.1: email is immutable.
            if object.get("email") != r.object.get("email") {
                return Err(SetError::invalid_properties(&["email"], "immutable"));
            }
            records::put(call, KIND, Some(&r.id), Some(r), &object).await?;
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
            let sid = call.resolve_id(id).ok_or_else(SetError::not_found)?;
            let r = find(&records, &sid).ok_or_else(SetError::not_found)?;
            records::destroy(call, KIND, &r.id).await
        }
        .await;
        match result {
            Ok(()) => destroyed.push(id.clone()),
            Err(e) => {
                not_destroyed.insert(id.clone(), e.to_json());
            }
        }
    }
    let new = records::load(call, KIND).await?.state;
    Ok(vec![(
        "Identity/set".into(),
        json!({
            "accountId": ids::account(call.user.account),
            "oldState": super::state::state(old),
            "newState": super::state::state(new),
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

    #[test]
    fn seeded_ids_are_stable_and_valid_jmap_ids() {
        let a = seeded_id("ann@example.org");
        assert_eq!(a, seeded_id("Ann@Example.org"));
        assert_ne!(a, seeded_id("bob@example.org"));
        assert!(a.bytes().all(|b| b.is_ascii_alphanumeric()));
        assert_eq!(a.len(), 17);
    }

    #[test]
    fn address_lists_are_checked() {
        assert!(addresses(&Value::Null));
        assert!(addresses(
            &json!([{"email": "a@b"}, {"name": "A", "email": "a@b"}])
        ));
        assert!(!addresses(&json!([{"name": "A"}])));
        assert!(!addresses(&json!("a@b")));
        assert!(!addresses(&json!([{"email": "a@b", "x": 1}])));
    }
}
