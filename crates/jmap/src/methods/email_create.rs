//! Email/set creations (RFC 8621 §4.6): a message built from the
//! creation's header properties and its body, given as `bodyStructure`
//! or as `textBody`, `htmlBody` and `attachments` (§4.6's rules), with
//! text from `bodyValues` and attachments from blobs of the account;
//! written with mail-builder and stored like any delivery.

use std::collections::BTreeSet;

use mail_builder::headers::address::Address;
use mail_builder::headers::content_type::ContentType;
use mail_builder::headers::message_id::MessageId;
use mail_builder::headers::raw::Raw;
use mail_builder::headers::text::Text;
use mail_builder::mime::{BodyPart, MimePart};
use mail_builder::MessageBuilder;
use serde_json::{json, Map, Value};
use store::{Delivery, MailboxId};

use super::email_set::{creation_fields, flags_and_keywords};
use crate::api::Call;
use crate::error::{MethodError, SetError};
use crate::ids;

/// Properties a creation may set.
const SETTABLE: &[&str] = &[
    "mailboxIds",
    "keywords",
    "receivedAt",
    "messageId",
    "inReplyTo",
    "references",
    "sender",
    "from",
    "to",
    "cc",
    "bcc",
    "replyTo",
    "subject",
    "sentAt",
    "bodyStructure",
    "bodyValues",
    "textBody",
    "htmlBody",
    "attachments",
];

/// Creates every email of an Email/set `create`: (created, notCreated).
pub(super) async fn create_all(
    call: &mut Call<'_>,
    create: &Map<String, Value>,
) -> Result<(Map<String, Value>, Map<String, Value>), MethodError> {
    let mut created = Map::new();
    let mut not_created = Map::new();
    if create.is_empty() {
        return Ok((created, not_created));
    }
    let known: Vec<MailboxId> = call
        .jmap
        .ctx
        .store
        .list_mailboxes(call.user.account)
        .await?
        .iter()
        .map(|m| m.id)
        .collect();
    for (cid, value) in create {
        match create_one(call, value, &known).await {
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
    Ok((created, not_created))
}

fn invalid(property: &str, why: &str) -> SetError {
    SetError::invalid_properties(&[property], why)
}

/// EmailAddress[] as mail-builder's address list.
fn addresses(v: &Value, property: &str) -> Result<Address<'static>, SetError> {
    let Value::Array(items) = v else {
        return Err(invalid(property, "an array of EmailAddress"));
    };
    let mut list = Vec::new();
    for item in items {
        let email = item
            .get("email")
            .and_then(Value::as_str)
            .filter(|e| !e.is_empty() && !e.contains(['\r', '\n', '<', '>']))
            .ok_or_else(|| invalid(property, "an EmailAddress needs an email"))?;
        let name = match item.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(n)) => Some(n.clone()),
            Some(_) => return Err(invalid(property, "a name is a string")),
        };
        list.push(Address::new_address(name, email.to_string()));
    }
    Ok(Address::new_list(list))
}

fn message_ids(v: &Value, property: &str) -> Result<MessageId<'static>, SetError> {
    let Value::Array(items) = v else {
        return Err(invalid(property, "an array of message ids"));
    };
    let ids = items
        .iter()
        .map(|i| {
            i.as_str()
                .filter(|s| !s.is_empty() && !s.contains(['<', '>', ' ', '\r', '\n']))
                .map(str::to_string)
                .ok_or_else(|| invalid(property, "a message id is msg-id without brackets"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MessageId::new_list(ids.into_iter()))
}

async fn create_one(
    call: &Call<'_>,
    value: &Value,
    known: &[MailboxId],
) -> Result<Value, SetError> {
    let Value::Object(o) = value else {
        return Err(SetError::invalid_properties(&[], "an Email is an object"));
    };
    for k in o.keys() {
        let header = crate::message::header_property(k);
        if !SETTABLE.contains(&k.as_str()) && header.is_none() {
            return Err(invalid(k, "not settable on creation"));
        }
        if let Some(h) = header {
            if h.name.to_ascii_lowercase().starts_with("content-") {
                return Err(invalid(k, "Content-* fields are made from the body"));
            }
        }
    }
    let (mailboxes, keywords) = creation_fields(call, o, known)?;
    let received = match o.get("receivedAt") {
        None | Some(Value::Null) => None,
        Some(Value::String(d)) => {
            Some(crate::message::parse_date(d).ok_or_else(|| invalid("receivedAt", "a UTCDate"))?)
        }
        Some(_) => return Err(invalid("receivedAt", "a UTCDate")),
    };
    let mut b = MessageBuilder::new();
    for (property, header) in [
        ("from", "From"),
        ("sender", "Sender"),
        ("to", "To"),
        ("cc", "Cc"),
        ("bcc", "Bcc"),
        ("replyTo", "Reply-To"),
    ] {
        if let Some(v) = o.get(property).filter(|v| !v.is_null()) {
            b = b.header(header, addresses(v, property)?);
        }
    }
    for (property, header) in [
        ("messageId", "Message-ID"),
        ("inReplyTo", "In-Reply-To"),
        ("references", "References"),
    ] {
        if let Some(v) = o.get(property).filter(|v| !v.is_null()) {
            b = b.header(header, message_ids(v, property)?);
        }
    }
    if let Some(v) = o.get("subject").filter(|v| !v.is_null()) {
        let s = v.as_str().ok_or_else(|| invalid("subject", "a string"))?;
        b = b.header("Subject", Text::new(s.to_string()));
    }
    if let Some(v) = o.get("sentAt").filter(|v| !v.is_null()) {
        let d = v
            .as_str()
            .and_then(crate::message::parse_date)
            .ok_or_else(|| invalid("sentAt", "a Date"))?;
        b = b.date(d);
    }
    for (k, v) in o {
        let Some(h) = crate::message::header_property(k) else {
            continue;
        };
        if h.all {
            return Err(invalid(k, "one value per header field"));
        }
        let text = match (h.form, v) {
            (crate::message::Form::Raw, Value::String(s)) => {
                if s.contains(['\r', '\n']) && !s.contains("\r\n ") && !s.contains("\r\n\t") {
                    return Err(invalid(k, "a raw value folds with CRLF and white space"));
                }
                b = b.header(h.name.clone(), Raw::new(s.clone()));
                continue;
            }
            (crate::message::Form::Text, Value::String(s)) => s.clone(),
            (crate::message::Form::Addresses, v) => {
                b = b.header(h.name.clone(), addresses(v, k)?);
                continue;
            }
            (crate::message::Form::MessageIds, v) => {
                b = b.header(h.name.clone(), message_ids(v, k)?);
                continue;
            }
            _ => return Err(invalid(k, "this form cannot be set here")),
        };
        b = b.header(h.name.clone(), Text::new(text));
    }
    let values = match o.get("bodyValues") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(v)) => v.clone(),
        Some(_) => return Err(invalid("bodyValues", "an object")),
    };
    let mut budget = call.jmap.ctx.config.max_size_upload;
    let body = if let Some(structure) = o.get("bodyStructure").filter(|v| !v.is_null()) {
        if ["textBody", "htmlBody", "attachments"]
            .iter()
            .any(|p| o.get(*p).is_some_and(|v| !v.is_null()))
        {
            return Err(invalid(
                "bodyStructure",
                "bodyStructure or textBody/htmlBody/attachments, not both",
            ));
        }
        part(call, structure, &values, &mut budget, 0).await?
    } else {
        let list = |name: &str| -> Result<Vec<Value>, SetError> {
            match o.get(name) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(a)) => Ok(a.clone()),
                Some(_) => Err(invalid(name, "an array of EmailBodyPart")),
            }
        };
        let (text, html, attachments) =
            (list("textBody")?, list("htmlBody")?, list("attachments")?);
        if text.len() > 1 || html.len() > 1 {
            return Err(invalid("textBody", "at most one text and one HTML part"));
        }
        let mut alternatives = Vec::new();
        for (p, ty) in text
            .iter()
            .map(|p| (p, "text/plain"))
            .chain(html.iter().map(|p| (p, "text/html")))
        {
            if p.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| !t.eq_ignore_ascii_case(ty))
            {
                return Err(invalid(
                    "textBody",
                    "textBody is text/plain, htmlBody text/html",
                ));
            }
            let mut with_type = p.clone();
            with_type["type"] = ty.into();
            alternatives.push(part(call, &with_type, &values, &mut budget, 0).await?);
        }
        let main = match alternatives.len() {
            0 => MimePart::new(ContentType::new("text/plain"), BodyPart::Text("".into())),
            1 => alternatives.remove(0),
            _ => MimePart::new(
                ContentType::new("multipart/alternative"),
                BodyPart::Multipart(alternatives),
            ),
        };
        if attachments.is_empty() {
            main
        } else {
            let mut parts = vec![main];
            for a in &attachments {
                parts.push(part(call, a, &values, &mut budget, 0).await?);
            }
            MimePart::new(
                ContentType::new("multipart/mixed"),
                BodyPart::Multipart(parts),
            )
        }
    };
    let bytes = b
        .body(body)
        .write_to_vec()
        .map_err(|e| SetError::new("serverFail", e.to_string()))?;
    let store = &call.jmap.ctx.store;
    let mut writer = store.message_writer();
    if let Err(e) = writer.write(&bytes).await {
        writer.abort().await;
        return Err(e.into());
    }
    let (flags, words) = flags_and_keywords(&keywords);
    let receipt = writer
        .deliver(Delivery {
            mailboxes: mailboxes
                .iter()
                .copied()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
            internal_date: received,
            flags,
            keywords: words,
            ..Default::default()
        })
        .await?;
    let email = store
        .account_emails(call.user.account, Some(&[receipt.blob]))
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| SetError::new("serverFail", "the new message is gone"))?;
    Ok(json!({
        "id": ids::email(email.blob),
        "blobId": ids::blob(email.blob),
        "threadId": ids::thread(email.thread),
        "size": receipt.size,
    }))
}

/// Deepest bodyStructure accepted.
const MAX_DEPTH: usize = 16;

/// One EmailBodyPart of a creation as a MIME part: a multipart with
/// `subParts`, text from `bodyValues` by `partId`, or content from a blob.
async fn part(
    call: &Call<'_>,
    p: &Value,
    values: &Map<String, Value>,
    budget: &mut u64,
    depth: usize,
) -> Result<MimePart<'static>, SetError> {
    let Value::Object(o) = p else {
        return Err(invalid("bodyStructure", "an EmailBodyPart is an object"));
    };
    if depth > MAX_DEPTH {
        return Err(invalid("bodyStructure", "nested too deep"));
    }
    for k in o.keys() {
        let ok = matches!(
            k.as_str(),
            "partId"
                | "blobId"
                | "type"
                | "charset"
                | "name"
                | "disposition"
                | "cid"
                | "language"
                | "location"
                | "subParts"
                | "size"
        ) || crate::message::header_property(k).is_some_and(|h| {
            !h.name
                .to_ascii_lowercase()
                .starts_with("content-transfer-encoding")
        });
        if !ok {
            return Err(invalid(
                "bodyStructure",
                &format!("{k} cannot be set on a part"),
            ));
        }
    }
    let ty = o
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    let mut mime = if let Some(Value::Array(subs)) = o.get("subParts") {
        let ty = ty.unwrap_or_else(|| "multipart/mixed".into());
        if !ty.starts_with("multipart/") {
            return Err(invalid(
                "bodyStructure",
                "a part with subParts is multipart/*",
            ));
        }
        let mut children = Vec::new();
        for s in subs {
            children.push(Box::pin(part(call, s, values, budget, depth + 1)).await?);
        }
        MimePart::new(ContentType::new(ty), BodyPart::Multipart(children))
    } else if let Some(id) = o.get("partId").and_then(Value::as_str) {
        let value = values
            .get(id)
            .and_then(|v| v.get("value"))
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("bodyValues", &format!("no value for part {id}")))?;
        if o.contains_key("blobId") {
            return Err(invalid("bodyStructure", "a part has a partId or a blobId"));
        }
        let ty = ty.unwrap_or_else(|| "text/plain".into());
        if !ty.starts_with("text/") {
            return Err(invalid("bodyStructure", "a part from bodyValues is text/*"));
        }
        MimePart::new(
            ContentType::new(ty).attribute("charset", "utf-8"),
            BodyPart::Text(value.to_string().into()),
        )
    } else if let Some(blob_id) = o.get("blobId").and_then(Value::as_str) {
        let content = read_blob(call, blob_id, budget).await?;
        let ty = ty.unwrap_or_else(|| "application/octet-stream".into());
        let mut ct = ContentType::new(ty);
        if let Some(c) = o.get("charset").and_then(Value::as_str) {
            ct = ct.attribute("charset", c.to_string());
        }
        MimePart::new(ct, BodyPart::Binary(content.into()))
    } else {
        return Err(invalid(
            "bodyStructure",
            "a part needs subParts, partId or blobId",
        ));
    };
    let disposition = o.get("disposition").and_then(Value::as_str);
    let name = o.get("name").and_then(Value::as_str);
    match (disposition, name) {
        (Some(d), _) if d.eq_ignore_ascii_case("inline") => mime = mime.inline(),
        (_, Some(n)) => mime = mime.attachment(n.to_string()),
        (Some(d), None) if d.eq_ignore_ascii_case("attachment") => {
            mime = mime.header("Content-Disposition", Raw::new("attachment"))
        }
        _ => {}
    }
    if let Some(cid) = o.get("cid").and_then(Value::as_str) {
        mime = mime.cid(cid.to_string());
    }
    if let Some(l) = o.get("location").and_then(Value::as_str) {
        mime = mime.location(l.to_string());
    }
    Ok(mime)
}

/// The content of a blob of the account (whole, or one part decoded),
/// counted against what one creation may read.
async fn read_blob(call: &Call<'_>, blob_id: &str, budget: &mut u64) -> Result<Vec<u8>, SetError> {
    let store = call.jmap.ctx.store.clone();
    let blob_id = call.resolve_id(blob_id).unwrap_or_default();
    let (blob, section) = ids::parse_blob(&blob_id)
        .ok_or_else(|| SetError::new("blobNotFound", format!("no blob {blob_id}")))?;
    let found = store
        .account_blob(call.user.account, blob)
        .await?
        .ok_or_else(|| SetError::new("blobNotFound", format!("no blob {blob_id}")))?;
    let too_large = || SetError::new("tooLarge", "the attachments are larger than maxSizeUpload");
    if found.size > *budget {
        return Err(too_large());
    }
    let mut out = Vec::new();
    match section {
        None => {
            let mut seq = 0;
            while let Some(chunk) = store.read_chunk(blob, seq).await? {
                out.extend_from_slice(&chunk);
                seq += 1;
            }
        }
        Some(section) => {
            use futures_util::StreamExt;
            let Some(p) = crate::blob::find_part(call.jmap, call.user, blob, &section).await?
            else {
                return Err(SetError::new("blobNotFound", format!("no blob {blob_id}")));
            };
            let mut s = Box::pin(crate::message::part_stream(store.clone(), blob, &p));
            while let Some(piece) = s.next().await {
                let piece = piece.map_err(|e| SetError::new("serverFail", e.to_string()))?;
                out.extend_from_slice(&piece);
                if out.len() as u64 > *budget {
                    return Err(too_large());
                }
            }
        }
    }
    *budget -= (out.len() as u64).min(*budget);
    Ok(out)
}
