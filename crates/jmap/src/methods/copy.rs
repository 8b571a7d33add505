//! Email/copy (RFC 8621 §4.7) and Blob/copy (RFC 8620 §6.3). A session
//! offers only the user's own account, so the only account one may copy
//! from is the same one: any other is `fromAccountNotFound`. Within the
//! account a blob is already there (Blob/copy answers its id), and an
//! Email copied into mailboxes is the same Email filed in them as well
//! (single-copy storage: its id is the blob's), so a copy is an Email/set
//! update that adds mailboxes and, if given, sets keywords.

use serde_json::{json, Map, Value};

use super::args::Args;
use super::Answer;
use crate::api::Call;
use crate::error::{MethodError, SetError};
use crate::ids;

/// Checks `fromAccountId` names the user's account.
fn from_account(call: &Call<'_>, args: &Args) -> Result<(), MethodError> {
    match args.str("fromAccountId")? {
        Some(id) if ids::parse_account(id) == Some(call.user.account) => Ok(()),
        Some(_) => Err(MethodError::from_account_not_found()),
        None => Err(MethodError::invalid_arguments("fromAccountId is required")),
    }
}

/// Blob/copy (RFC 8620 §6.3).
pub(super) async fn blob_copy(call: &mut Call<'_>, args: Args) -> Answer {
    args.only(&["fromAccountId", "accountId", "blobIds"])?;
    from_account(call, &args)?;
    call.account(&args.0)?;
    let blob_ids = args
        .strings("blobIds")?
        .ok_or_else(|| MethodError::invalid_arguments("blobIds is required"))?;
    if blob_ids.len() > call.jmap.ctx.config.max_objects_in_set {
        return Err(MethodError::request_too_large(
            "more blobs than maxObjectsInSet",
        ));
    }
    let mut copied = Map::new();
    let mut not_copied = Map::new();
    for id in blob_ids {
        let found = match ids::parse_blob(&id) {
            Some((blob, _)) => call
                .jmap
                .ctx
                .store
                .account_blob(call.user.account, blob)
                .await?
                .is_some(),
            None => false,
        };
        if found {
            copied.insert(id.clone(), id.into());
        } else {
            not_copied.insert(
                id.clone(),
                SetError::new("blobNotFound", format!("no blob {id}")).to_json(),
            );
        }
    }
    let account = ids::account(call.user.account);
    Ok(vec![(
        "Blob/copy".into(),
        json!({
            "fromAccountId": account,
            "accountId": account,
            "copied": copied,
            "notCopied": not_copied,
        }),
    )])
}

/// Email/copy (RFC 8621 §4.7).
pub(super) async fn email_copy(call: &mut Call<'_>, args: Args) -> Answer {
    args.only(&[
        "fromAccountId",
        "ifFromInState",
        "accountId",
        "ifInState",
        "create",
        "onSuccessDestroyOriginal",
        "destroyFromIfInState",
    ])?;
    from_account(call, &args)?;
    call.account(&args.0)?;
    if args.bool("onSuccessDestroyOriginal", false)? {
        return Err(MethodError::invalid_arguments(
            "within one account the copy is the original: it cannot be destroyed",
        ));
    }
    let store = call.jmap.ctx.store.clone();
    let account = call.user.account;
    let old = store.account_modseq(account).await?;
    for key in ["ifInState", "ifFromInState"] {
        if let Some(s) = args.str(key)? {
            if super::state::parse_state(s) != Some(old) {
                return Err(MethodError::state_mismatch());
            }
        }
    }
    let create = args
        .object("create")?
        .cloned()
        .ok_or_else(|| MethodError::invalid_arguments("create is required"))?;
    if create.len() > call.jmap.ctx.config.max_objects_in_set {
        return Err(MethodError::request_too_large(
            "more copies than maxObjectsInSet",
        ));
    }
    let mut created = Map::new();
    let mut not_created = Map::new();
    for (cid, spec) in &create {
        let result: Result<Value, SetError> = async {
            let Value::Object(o) = spec else {
                return Err(SetError::invalid_properties(&[], "an Email is an object"));
            };
            for k in o.keys() {
                if !["id", "mailboxIds", "keywords", "receivedAt"].contains(&k.as_str()) {
                    return Err(SetError::invalid_properties(
                        &[k.as_str()],
                        "not settable in a copy",
                    ));
                }
            }
            let id = o
                .get("id")
                .and_then(Value::as_str)
                .and_then(|i| call.resolve_id(i))
                .ok_or_else(|| SetError::invalid_properties(&["id"], "id is required"))?;
            let Some(Value::Object(mailboxes)) = o.get("mailboxIds") else {
                return Err(SetError::invalid_properties(
                    &["mailboxIds"],
                    "at least one mailbox",
                ));
            };
            // The Email keeps its received date: it is the same message.
            if o.get("receivedAt").is_some_and(|v| !v.is_null()) {
                return Err(SetError::invalid_properties(
                    &["receivedAt"],
                    "a copy within the account keeps its date",
                ));
            }
            let mut patch = Map::new();
            for (m, on) in mailboxes {
                if on != &Value::Bool(true) {
                    return Err(SetError::invalid_properties(
                        &["mailboxIds"],
                        "a set of mailbox ids",
                    ));
                }
                patch.insert(format!("mailboxIds/{m}"), true.into());
            }
            if let Some(k) = o.get("keywords").filter(|k| !k.is_null()) {
                patch.insert("keywords".into(), k.clone());
            }
            let mut set_args = Map::new();
            set_args.insert("accountId".into(), ids::account(account).into());
            set_args.insert("update".into(), json!({ id.clone(): patch }));
            let answer = super::email_set::set(call, Args(set_args))
                .await
                .map_err(|e| SetError::new("serverFail", e.to_json().to_string()))?;
            let response = &answer[0].1;
            if let Some(e) = response["notUpdated"].get(&id) {
                let kind = match e["type"].as_str() {
                    Some("notFound") => "notFound",
                    Some("invalidProperties") => "invalidProperties",
                    _ => "serverFail",
                };
                return Err(SetError::new(
                    kind,
                    e["description"]
                        .as_str()
                        .unwrap_or("not copied")
                        .to_string(),
                ));
            }
            let blob = ids::parse_email(&id).ok_or_else(SetError::not_found)?;
            let email = store
                .account_emails(account, Some(&[blob]))
                .await?
                .into_iter()
                .next()
                .ok_or_else(SetError::not_found)?;
            Ok(json!({
                "id": id,
                "blobId": ids::blob(email.blob),
                "threadId": ids::thread(email.thread),
                "size": email.entries.first().map_or(0, |(_, e)| e.size),
            }))
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
    let new = store.account_modseq(account).await?;
    let account = ids::account(account);
    Ok(vec![(
        "Email/copy".into(),
        json!({
            "fromAccountId": account,
            "accountId": account,
            "oldState": super::state::state(old),
            "newState": super::state::state(new),
            "created": created,
            "notCreated": not_created,
        }),
    )])
}
