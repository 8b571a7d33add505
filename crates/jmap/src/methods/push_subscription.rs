//! PushSubscription/get and /set (RFC 8620 §7.2): where to POST the
//! account's StateChange objects. A subscription belongs to the
//! credentials that made it, not to an account (no `accountId`, no
//! state); it is kept with the records of the user's account. The server
//! POSTs a PushVerification to the URL on creation, and pushes nothing
//! until the client sets the code it carried (§7.2.2); `pusher` sends.
//!
//! `keys` (RFC 8291 Web Push encryption) is not offered: a subscription
//! with keys is refused with `invalidProperties`, so a client knows its
//! pushes would not be encrypted rather than finding out from a push
//! service that drops them.

use serde_json::{json, Map, Value};

use super::args::Args;
use super::records::{self, Record};
use super::Answer;
use crate::api::Call;
use crate::error::{MethodError, SetError};
use crate::message::{parse_date, utc_date};
use crate::pusher::{self, KIND, MAX_LIFETIME_SECS};

/// What a subscription's JMAP id starts with.
const PREFIX: &str = "P";
/// The server's copy of the code it sent, never shown.
const CODE: &str = "_code";

/// Every property; `url` and `keys` are never returned (§7.2.1).
const PROPERTIES: &[&str] = &[
    "id",
    "deviceClientId",
    "url",
    "keys",
    "verificationCode",
    "expires",
    "types",
];
/// What /get shows when not told.
const SHOWN: &[&str] = &[
    "id",
    "deviceClientId",
    "verificationCode",
    "expires",
    "types",
];

fn jmap_id(r: &Record) -> String {
    format!("{PREFIX}{}", r.id)
}

fn find<'a>(records: &'a records::Records, id: &str) -> Option<&'a Record> {
    records.get(id.strip_prefix(PREFIX).filter(|s| !s.is_empty())?)
}

fn object(r: &Record, properties: &[String]) -> Value {
    let mut o = Map::new();
    for p in properties {
        let v = match p.as_str() {
            "id" => jmap_id(r).into(),
            other => r.object.get(other).cloned().unwrap_or(Value::Null),
        };
        o.insert(p.clone(), v);
    }
    Value::Object(o)
}

/// PushSubscription/get (§7.2.1): the standard /get without `accountId`
/// or `state`; asking for `url` or `keys` is `forbidden`.
pub(super) async fn get(call: &mut Call<'_>, args: Args) -> Answer {
    args.only(&["ids", "properties"])?;
    let (wanted, mut properties) = super::args::get_args(
        &args,
        call.jmap.ctx.config.max_objects_in_get,
        PROPERTIES,
        SHOWN,
    )?;
    if let Some(p) = properties.iter().find(|p| *p == "url" || *p == "keys") {
        return Err(MethodError::forbidden(format!(
            "{p} is never returned (RFC 8620 §7.2.1)"
        )));
    }
    if !properties.iter().any(|p| p == "id") {
        properties.insert(0, "id".into());
    }
    let records = records::load(call, KIND).await?;
    let mut list = Vec::new();
    let mut not_found = Vec::new();
    match wanted {
        None => list.extend(records.live.iter().map(|r| object(r, &properties))),
        Some(ids) => {
            for id in ids {
                match find(&records, &id) {
                    Some(r) => list.push(object(r, &properties)),
                    None => not_found.push(Value::from(id)),
                }
            }
        }
    }
    Ok(vec![(
        "PushSubscription/get".into(),
        json!({"list": list, "notFound": not_found}),
    )])
}

/// `types`: null or a list of type names.
fn types(v: &Value) -> Result<Value, SetError> {
    match v {
        Value::Null => Ok(Value::Null),
        Value::Array(a) if a.iter().all(Value::is_string) => Ok(v.clone()),
        _ => Err(SetError::invalid_properties(
            &["types"],
            "types is null or a list of type names",
        )),
    }
}

/// `expires` as the server keeps it: at most [`MAX_LIFETIME_SECS`] from
/// now (a later or null one is cut to that), never in the past.
fn expires(v: &Value, now: i64) -> Result<String, SetError> {
    let latest = now + MAX_LIFETIME_SECS;
    let at = match v {
        Value::Null => latest,
        Value::String(s) => parse_date(s)
            .ok_or_else(|| SetError::invalid_properties(&["expires"], "expires is a UTCDate"))?,
        _ => {
            return Err(SetError::invalid_properties(
                &["expires"],
                "expires is a UTCDate",
            ))
        }
    };
    if at <= now {
        return Err(SetError::invalid_properties(
            &["expires"],
            "expires is in the past",
        ));
    }
    Ok(utc_date(at.min(latest)))
}

/// A new subscription's stored object, from the client's.
fn create_object(o: &Map<String, Value>, now: i64) -> Result<Map<String, Value>, SetError> {
    for k in o.keys() {
        if !PROPERTIES.contains(&k.as_str()) || k == "id" {
            return Err(SetError::invalid_properties(
                &[k.as_str()],
                if k == "id" {
                    "id is set by the server"
                } else {
                    "unknown property"
                },
            ));
        }
    }
    let Some(Value::String(device)) = o.get("deviceClientId") else {
        return Err(SetError::invalid_properties(
            &["deviceClientId"],
            "deviceClientId is a required string",
        ));
    };
    let Some(Value::String(url)) = o.get("url") else {
        return Err(SetError::invalid_properties(
            &["url"],
            "url is a required string",
        ));
    };
    pusher::url_allowed(url).map_err(|why| SetError::invalid_properties(&["url"], why))?;
    if !o.get("keys").unwrap_or(&Value::Null).is_null() {
        return Err(SetError::invalid_properties(
            &["keys"],
            "this server does not encrypt pushes (RFC 8291): create the subscription without keys",
        ));
    }
    if !o.get("verificationCode").unwrap_or(&Value::Null).is_null() {
        return Err(SetError::invalid_properties(
            &["verificationCode"],
            "the verification code comes from the server's PushVerification",
        ));
    }
    let code: [u8; 16] = rand::random();
    let code: String = code.iter().map(|b| format!("{b:02x}")).collect();
    let mut object = Map::new();
    object.insert("deviceClientId".into(), device.clone().into());
    object.insert("url".into(), url.clone().into());
    object.insert("keys".into(), Value::Null);
    object.insert("verificationCode".into(), Value::Null);
    object.insert(
        "expires".into(),
        expires(o.get("expires").unwrap_or(&Value::Null), now)?.into(),
    );
    object.insert(
        "types".into(),
        types(o.get("types").unwrap_or(&Value::Null))?,
    );
    object.insert(CODE.into(), code.into());
    Ok(object)
}

/// A subscription after a patch: only `verificationCode` (which must be
/// the one sent), `expires` and `types` change (§7.2).
fn patched(
    r: &Record,
    patch: &Map<String, Value>,
    now: i64,
) -> Result<Map<String, Value>, SetError> {
    let mut object = r.object.clone();
    for (k, v) in patch {
        match k.as_str() {
            "verificationCode" => {
                let sent = r.object.get(CODE).and_then(Value::as_str);
                if v.as_str().is_none() || v.as_str() != sent {
                    return Err(SetError::invalid_properties(
                        &["verificationCode"],
                        "not the code of the PushVerification sent to the url",
                    ));
                }
                object.insert(k.clone(), v.clone());
            }
            "expires" => {
                object.insert(k.clone(), expires(v, now)?.into());
            }
            "types" => {
                object.insert(k.clone(), types(v)?);
            }
            "id" if v.as_str() == Some(jmap_id(r).as_str()) => {}
            "id" | "deviceClientId" | "url" | "keys" => {
                if k == "id" || r.object.get(k).unwrap_or(&Value::Null) != v {
                    return Err(SetError::invalid_properties(&[k.as_str()], "immutable"));
                }
            }
            _ => {
                return Err(SetError::invalid_properties(
                    &[k.as_str()],
                    "unknown property",
                ))
            }
        }
    }
    Ok(object)
}

/// PushSubscription/set (§7.2.2): the standard /set without `accountId`,
/// `ifInState` or states.
pub(super) async fn set(call: &mut Call<'_>, args: Args) -> Answer {
    args.only(&["create", "update", "destroy"])?;
    let create = args.object("create")?.cloned().unwrap_or_default();
    let update = args.object("update")?.cloned().unwrap_or_default();
    let destroy = args.strings("destroy")?.unwrap_or_default();
    if create.len() + update.len() + destroy.len() > call.jmap.ctx.config.max_objects_in_set {
        return Err(MethodError::request_too_large(
            "more changes than maxObjectsInSet",
        ));
    }
    let records = records::load(call, KIND).await?;
    let now = crate::now();
    let mut created = Map::new();
    let mut not_created = Map::new();
    for (cid, spec) in &create {
        let result: Result<Value, SetError> = async {
            let Value::Object(o) = spec else {
                return Err(SetError::invalid_properties(
                    &[],
                    "a PushSubscription is an object",
                ));
            };
            let object = create_object(o, now)?;
            let id = records::put(call, KIND, None, None, &object).await?;
            let id = format!("{PREFIX}{id}");
            pusher::send_verification(
                &call.jmap.ctx,
                id.clone(),
                object["url"].as_str().unwrap_or_default().to_string(),
                object[CODE].as_str().unwrap_or_default().to_string(),
            );
            pusher::ensure(&call.jmap.ctx, call.user.account);
            Ok(json!({"id": id, "keys": null, "expires": object["expires"]}))
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
        let result: Result<Value, SetError> = async {
            let Value::Object(patch) = patch else {
                return Err(SetError::invalid_properties(&[], "a patch is an object"));
            };
            let sid = call.resolve_id(id).ok_or_else(SetError::not_found)?;
            let r = find(&records, &sid).ok_or_else(SetError::not_found)?;
            let object = patched(r, patch, now)?;
            records::put(call, KIND, Some(&r.id), Some(r), &object).await?;
            pusher::ensure(&call.jmap.ctx, call.user.account);
            // The server's own value of expires when it cut the client's.
            Ok(match patch.get("expires") {
                Some(v) if v != &object["expires"] => json!({"expires": object["expires"]}),
                _ => Value::Null,
            })
        }
        .await;
        match result {
            Ok(v) => {
                updated.insert(id.clone(), v);
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
    Ok(vec![(
        "PushSubscription/set".into(),
        json!({
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
    fn expires_is_cut_to_the_longest_lifetime() {
        let now = 1_000_000;
        assert_eq!(
            expires(&Value::Null, now).unwrap(),
            utc_date(now + MAX_LIFETIME_SECS)
        );
        assert_eq!(
            expires(&utc_date(now + 60).into(), now).unwrap(),
            utc_date(now + 60)
        );
        assert_eq!(
            expires(&utc_date(now + 10 * MAX_LIFETIME_SECS).into(), now).unwrap(),
            utc_date(now + MAX_LIFETIME_SECS)
        );
        assert_eq!(
            expires(&utc_date(now - 1).into(), now).unwrap_err().kind,
            "invalidProperties"
        );
        assert!(expires(&json!(5), now).is_err());
    }

    #[test]
    fn creation_is_checked() {
        let ok = json!({"deviceClientId": "d", "url": "https://p.example/x", "types": ["Email"]});
        let o = create_object(ok.as_object().unwrap(), 0).unwrap();
        assert_eq!(o[CODE].as_str().unwrap().len(), 32);
        assert!(o["verificationCode"].is_null());
        for (bad, property) in [
            (json!({"url": "https://p.example/x"}), "deviceClientId"),
            (json!({"deviceClientId": "d"}), "url"),
            (
                json!({"deviceClientId": "d", "url": "http://p.example/x"}),
                "url",
            ),
            (
                json!({"deviceClientId": "d", "url": "https://p.example/x",
                       "keys": {"p256dh": "x", "auth": "y"}}),
                "keys",
            ),
            (
                json!({"deviceClientId": "d", "url": "https://p.example/x", "verificationCode": "x"}),
                "verificationCode",
            ),
            (
                json!({"deviceClientId": "d", "url": "https://p.example/x", "types": "Email"}),
                "types",
            ),
            (
                json!({"deviceClientId": "d", "url": "https://p.example/x", "colour": 1}),
                "colour",
            ),
        ] {
            let e = create_object(bad.as_object().unwrap(), 0).unwrap_err();
            assert_eq!(e.kind, "invalidProperties");
            assert_eq!(e.properties, vec![property.to_string()], "{bad}");
        }
    }
}
