//! Email/set updates and destroys, and Email/import (RFC 8621 §4.6,
//! §4.8): keywords become IMAP flags and keywords on every entry of the
//! email, mailboxIds become copies into and expunges from mailboxes (the
//! entries share the one stored message).

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};
use store::{AccountEmail, Delivery, FlagChange, MailboxId, FLAG_DELETED};

use super::args::Args;
use super::email::flag_of;
use super::state::{parse_state, state};
use super::Answer;
use crate::api::Call;
use crate::error::{MethodError, SetError};
use crate::ids;

/// Whether a keyword is one JMAP allows (§4.1.1: 1-255 of %x21-%x7e
/// less `( ) { ] % * " \`).
fn valid_keyword(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 255
        && k.bytes().all(|b| {
            (0x21..=0x7e).contains(&b)
                && !matches!(b, b'(' | b')' | b'{' | b']' | b'%' | b'*' | b'"' | b'\\')
        })
}

/// A JSON pointer token, unescaped (RFC 6901).
fn unescape(token: &str) -> Option<String> {
    crate::reference::unescape(token)
}

/// Reads a keywords object: every value `true` (§4.1.1).
fn keyword_set(v: &Value) -> Result<BTreeSet<String>, SetError> {
    let Value::Object(o) = v else {
        return Err(SetError::invalid_properties(&["keywords"], "an object"));
    };
    o.iter()
        .map(|(k, v)| {
            if v != &Value::Bool(true) || !valid_keyword(k) {
                Err(SetError::invalid_properties(
                    &["keywords"],
                    format!("{k:?} is not a keyword set to true"),
                ))
            } else {
                Ok(k.to_ascii_lowercase())
            }
        })
        .collect()
}

/// Reads a mailboxIds object: every value `true`, ids of the account's
/// mailboxes (or creation ids of this request).
fn mailbox_set(
    call: &Call<'_>,
    v: &Value,
    known: &[MailboxId],
) -> Result<BTreeSet<MailboxId>, SetError> {
    let Value::Object(o) = v else {
        return Err(SetError::invalid_properties(&["mailboxIds"], "an object"));
    };
    o.iter()
        .map(|(k, v)| mailbox_id(call, k, v, known))
        .collect()
}

fn mailbox_id(
    call: &Call<'_>,
    id: &str,
    v: &Value,
    known: &[MailboxId],
) -> Result<MailboxId, SetError> {
    if v != &Value::Bool(true) {
        return Err(SetError::invalid_properties(
            &["mailboxIds"],
            "values are true",
        ));
    }
    call.resolve_id(id)
        .and_then(|id| ids::parse_mailbox(&id))
        .filter(|m| known.contains(m))
        .ok_or_else(|| SetError::invalid_properties(&["mailboxIds"], format!("no mailbox {id}")))
}

/// What an update patch asks for: the new keywords and mailboxes.
pub(crate) struct Wanted {
    pub keywords: BTreeSet<String>,
    pub mailboxes: BTreeSet<MailboxId>,
}

/// Applies a patch (RFC 8620 §5.3 PatchObject) to an email's keywords
/// and mailboxes; the only properties an Email may change.
pub(crate) fn apply_patch(
    call: &Call<'_>,
    patch: &Map<String, Value>,
    keywords: BTreeSet<String>,
    mailboxes: BTreeSet<MailboxId>,
    known: &[MailboxId],
) -> Result<Wanted, SetError> {
    let mut w = Wanted {
        keywords,
        mailboxes,
    };
    for (path, value) in patch {
        let (head, rest) = match path.split_once('/') {
            Some((h, r)) => (h, Some(r)),
            None => (path.as_str(), None),
        };
        match (head, rest) {
            ("keywords", None) => w.keywords = keyword_set(value)?,
            ("mailboxIds", None) => w.mailboxes = mailbox_set(call, value, known)?,
            ("keywords", Some(k)) => {
                let k = unescape(k)
                    .filter(|k| valid_keyword(k))
                    .ok_or_else(|| SetError::invalid_properties(&[path.as_str()], "not a keyword"))?
                    .to_ascii_lowercase();
                match value {
                    Value::Bool(true) => {
                        w.keywords.insert(k);
                    }
                    Value::Null => {
                        w.keywords.remove(&k);
                    }
                    _ => {
                        return Err(SetError::invalid_properties(
                            &[path.as_str()],
                            "true or null",
                        ))
                    }
                }
            }
            ("mailboxIds", Some(id)) => {
                let id = unescape(id).ok_or_else(|| {
                    SetError::invalid_properties(&[path.as_str()], "not a mailbox id")
                })?;
                match value {
                    Value::Null => {
                        if let Some(m) = call.resolve_id(&id).and_then(|id| ids::parse_mailbox(&id))
                        {
                            w.mailboxes.remove(&m);
                        }
                    }
                    v => {
                        w.mailboxes.insert(mailbox_id(call, &id, v, known)?);
                    }
                }
            }
            _ => {
                return Err(SetError::invalid_properties(
                    &[path.as_str()],
                    "an Email's keywords and mailboxIds are all that may change",
                ))
            }
        }
    }
    if w.mailboxes.is_empty() {
        return Err(SetError::invalid_properties(
            &["mailboxIds"],
            "an email is in at least one mailbox",
        ));
    }
    Ok(w)
}

/// The IMAP flags and keywords of a JMAP keyword set.
pub(crate) fn flags_and_keywords(keywords: &BTreeSet<String>) -> (u32, Vec<String>) {
    let mut flags = 0;
    let mut words = Vec::new();
    for k in keywords {
        match flag_of(k) {
            Some(f) => flags |= f,
            None => words.push(k.clone()),
        }
    }
    (flags, words)
}

/// Makes an email's entries what `w` asks: copies into the new
/// mailboxes first, so the message never leaves the account, then
/// expunges from the ones left, then sets the keywords on every entry.
async fn update_email(call: &Call<'_>, email: &AccountEmail, w: &Wanted) -> Result<(), SetError> {
    let store = &call.jmap.ctx.store;
    let now: BTreeSet<MailboxId> = email.entries.iter().map(|(m, _)| *m).collect();
    let (from, first) = &email.entries[0];
    for &target in w.mailboxes.difference(&now) {
        store.copy_messages(*from, &[first.uid], target).await?;
    }
    for (mailbox, entry) in &email.entries {
        if !w.mailboxes.contains(mailbox) {
            store.expunge(*mailbox, &[entry.uid]).await?;
        }
    }
    let current = store
        .account_emails(call.user.account, Some(&[email.blob]))
        .await?;
    let (flags, words) = flags_and_keywords(&w.keywords);
    for e in &current {
        for (mailbox, entry) in &e.entries {
            let mine: BTreeSet<String> = super::email::keywords(&[(*mailbox, entry.clone())])
                .into_keys()
                .collect();
            if mine != w.keywords {
                // \Deleted is IMAP's alone: kept as it is.
                store
                    .update_flags(
                        *mailbox,
                        &[entry.uid],
                        FlagChange::Replace,
                        flags | (entry.flags & FLAG_DELETED),
                        &words,
                        None,
                    )
                    .await?;
            }
        }
    }
    Ok(())
}

/// Email/set (§4.6) updates and destroys. Creations are handed to
/// `create` (email_create.rs).
pub(super) async fn set(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "ifInState", "create", "update", "destroy"])?;
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
    let (created, not_created) = super::email_create::create_all(call, &create).await?;
    let known: Vec<MailboxId> = store
        .list_mailboxes(account)
        .await?
        .iter()
        .map(|m| m.id)
        .collect();
    let mut updated = Map::new();
    let mut not_updated = Map::new();
    for (id, patch) in &update {
        let result: Result<(), SetError> = async {
            let Value::Object(patch) = patch else {
                return Err(SetError::invalid_properties(&[], "a patch is an object"));
            };
            let blob = call
                .resolve_id(id)
                .and_then(|id| ids::parse_email(&id))
                .ok_or_else(SetError::not_found)?;
            let email = store
                .account_emails(account, Some(&[blob]))
                .await?
                .into_iter()
                .next()
                .ok_or_else(SetError::not_found)?;
            let keywords: BTreeSet<String> =
                super::email::keywords(&email.entries).into_keys().collect();
            let mailboxes: BTreeSet<MailboxId> = email.entries.iter().map(|(m, _)| *m).collect();
            let w = apply_patch(call, patch, keywords, mailboxes, &known)?;
            update_email(call, &email, &w).await
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
            let blob = call
                .resolve_id(id)
                .and_then(|id| ids::parse_email(&id))
                .ok_or_else(SetError::not_found)?;
            let email = store
                .account_emails(account, Some(&[blob]))
                .await?
                .into_iter()
                .next()
                .ok_or_else(SetError::not_found)?;
            for (mailbox, entry) in &email.entries {
                store.expunge(*mailbox, &[entry.uid]).await?;
            }
            Ok(())
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
        "Email/set".into(),
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

/// Email/import (§4.8): messages from uploaded blobs, filed into
/// mailboxes with keywords and a received date; each is copied into a
/// message of its own as it streams from the upload.
pub(super) async fn import(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "ifInState", "emails"])?;
    let store = call.jmap.ctx.store.clone();
    let account = call.user.account;
    let old = store.account_modseq(account).await?;
    if let Some(s) = args.str("ifInState")? {
        if parse_state(s) != Some(old) {
            return Err(MethodError::state_mismatch());
        }
    }
    let emails = args
        .object("emails")?
        .cloned()
        .ok_or_else(|| MethodError::invalid_arguments("emails is required"))?;
    if emails.len() > call.jmap.ctx.config.max_objects_in_set {
        return Err(MethodError::request_too_large(
            "more emails than maxObjectsInSet",
        ));
    }
    let known: Vec<MailboxId> = store
        .list_mailboxes(account)
        .await?
        .iter()
        .map(|m| m.id)
        .collect();
    let mut created = Map::new();
    let mut not_created = Map::new();
    for (cid, spec) in &emails {
        let result: Result<Value, SetError> = async {
            let Value::Object(o) = spec else {
                return Err(SetError::invalid_properties(
                    &[],
                    "an EmailImport is an object",
                ));
            };
            for k in o.keys() {
                if !["blobId", "mailboxIds", "keywords", "receivedAt"].contains(&k.as_str()) {
                    return Err(SetError::invalid_properties(
                        &[k.as_str()],
                        "unknown property",
                    ));
                }
            }
            let blob_id = o
                .get("blobId")
                .and_then(Value::as_str)
                .and_then(|b| call.resolve_id(b))
                .ok_or_else(|| SetError::invalid_properties(&["blobId"], "blobId is required"))?;
            let mailboxes = mailbox_set(call, o.get("mailboxIds").unwrap_or(&Value::Null), &known)?;
            if mailboxes.is_empty() {
                return Err(SetError::invalid_properties(
                    &["mailboxIds"],
                    "at least one mailbox",
                ));
            }
            let keywords = match o.get("keywords") {
                None | Some(Value::Null) => BTreeSet::new(),
                Some(v) => keyword_set(v)?,
            };
            let received = match o.get("receivedAt") {
                None | Some(Value::Null) => None,
                Some(Value::String(d)) => Some(crate::message::parse_date(d).ok_or_else(|| {
                    SetError::invalid_properties(&["receivedAt"], "not a UTCDate")
                })?),
                Some(_) => return Err(SetError::invalid_properties(&["receivedAt"], "a UTCDate")),
            };
            let stored = copy_blob(call, &blob_id, &mailboxes, &keywords, received).await?;
            let email = store
                .account_emails(account, Some(&[stored]))
                .await?
                .into_iter()
                .next()
                .ok_or_else(|| SetError::new("serverFail", "the imported message is gone"))?;
            Ok(json!({
                "id": ids::email(email.blob),
                "blobId": ids::blob(email.blob),
                "threadId": ids::thread(email.thread),
                "size": email.entries[0].1.size,
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
    Ok(vec![(
        "Email/import".into(),
        json!({
            "accountId": ids::account(account),
            "oldState": state(old),
            "newState": state(new),
            "created": created,
            "notCreated": not_created,
        }),
    )])
}

/// Writes the account's blob `blob_id` into a new message filed in
/// `mailboxes`; returns the new message's blob.
async fn copy_blob(
    call: &Call<'_>,
    blob_id: &str,
    mailboxes: &BTreeSet<MailboxId>,
    keywords: &BTreeSet<String>,
    received: Option<i64>,
) -> Result<store::BlobId, SetError> {
    let store = &call.jmap.ctx.store;
    let (blob, section) = ids::parse_blob(blob_id)
        .ok_or_else(|| SetError::new("blobNotFound", format!("no blob {blob_id}")))?;
    let found = store.account_blob(call.user.account, blob).await?;
    if found.is_none() || section.is_some() {
        return Err(SetError::new("blobNotFound", format!("no blob {blob_id}")));
    }
    let mut writer = store.message_writer();
    let mut seq = 0;
    while let Some(chunk) = store.read_chunk(blob, seq).await? {
        if let Err(e) = writer.write(&chunk).await {
            writer.abort().await;
            return Err(e.into());
        }
        seq += 1;
    }
    let (flags, words) = flags_and_keywords(keywords);
    let receipt = writer
        .deliver(Delivery {
            mailboxes: mailboxes.iter().copied().collect(),
            internal_date: received,
            flags,
            keywords: words,
            ..Default::default()
        })
        .await?;
    Ok(receipt.blob)
}

/// The keywords and mailboxes of a creation, checked (Email/set create).
pub(crate) fn creation_fields(
    call: &Call<'_>,
    o: &Map<String, Value>,
    known: &[MailboxId],
) -> Result<(BTreeSet<MailboxId>, BTreeSet<String>), SetError> {
    let mailboxes = mailbox_set(call, o.get("mailboxIds").unwrap_or(&Value::Null), known)?;
    if mailboxes.is_empty() {
        return Err(SetError::invalid_properties(
            &["mailboxIds"],
            "at least one mailbox",
        ));
    }
    let keywords = match o.get("keywords") {
        None | Some(Value::Null) => BTreeSet::new(),
        Some(v) => keyword_set(v)?,
    };
    Ok((mailboxes, keywords))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_follow_the_rfc_grammar() {
        assert!(valid_keyword("$seen") && valid_keyword("NonJunk"));
        for bad in ["", "a b", "x(", "é", "a\"", "a]", &"x".repeat(256)] {
            assert!(!valid_keyword(bad), "{bad:?}");
        }
        let (flags, words) = flags_and_keywords(
            &["$seen", "$draft", "$forwarded", "work"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
        assert_eq!(flags, store::FLAG_SEEN | store::FLAG_DRAFT);
        assert_eq!(words, ["$forwarded", "work"]);
        assert_eq!(unescape("a~1b~0c").unwrap(), "a/b~c");
        assert!(keyword_set(&json!({"$seen": false})).is_err());
        assert_eq!(
            keyword_set(&json!({"$Seen": true})).unwrap(),
            BTreeSet::from(["$seen".to_string()])
        );
    }
}
