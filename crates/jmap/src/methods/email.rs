//! Email/get and Email/changes (RFC 8621 §4.2, §4.3). An Email is a
//! stored message of the account, whichever mailboxes hold it (see the
//! crate doc); its keywords are its entries' IMAP flags and keywords
//! (§4.1.1: `$seen` is `\Seen`, `$flagged` `\Flagged`, `$answered`
//! `\Answered`, `$draft` `\Draft`, other keywords as IMAP keywords).

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Map, Value};
use store::{
    AccountEmail, BlobId, MailboxId, MessageData, MessageEntry, FLAG_ANSWERED, FLAG_DRAFT,
    FLAG_FLAGGED, FLAG_SEEN,
};

use super::args::Args;
use super::state::{changes_args, changes_response, state, Change};
use super::Answer;
use crate::api::Call;
use crate::error::MethodError;
use crate::ids;
use crate::message::{self, BlobReader};

/// The properties of an Email (§4.1), less the `header:` ones.
pub(crate) const PROPERTIES: &[&str] = &[
    "id",
    "blobId",
    "threadId",
    "mailboxIds",
    "keywords",
    "size",
    "receivedAt",
    "headers",
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
    "hasAttachment",
    "preview",
];

/// What Email/get gives when `properties` is not asked (§4.2).
const DEFAULT_PROPERTIES: &[&str] = &[
    "id",
    "blobId",
    "threadId",
    "mailboxIds",
    "keywords",
    "size",
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
    "hasAttachment",
    "preview",
    "bodyValues",
    "textBody",
    "htmlBody",
    "attachments",
];

const BODY_PROPERTIES: &[&str] = &[
    "partId",
    "blobId",
    "size",
    "headers",
    "name",
    "type",
    "charset",
    "disposition",
    "cid",
    "language",
    "location",
    "subParts",
];

const DEFAULT_BODY_PROPERTIES: &[&str] = &[
    "partId",
    "blobId",
    "size",
    "name",
    "type",
    "charset",
    "disposition",
    "cid",
    "language",
    "location",
];

/// The IMAP flag of a system keyword.
pub(crate) fn flag_of(keyword: &str) -> Option<u32> {
    match keyword.to_ascii_lowercase().as_str() {
        "$seen" => Some(FLAG_SEEN),
        "$flagged" => Some(FLAG_FLAGGED),
        "$answered" => Some(FLAG_ANSWERED),
        "$draft" => Some(FLAG_DRAFT),
        _ => None,
    }
}

/// The keywords of an email: those of all its entries (an entry's flags
/// and IMAP keywords), lower case (§4.1.1: keywords are case-insensitive).
pub(crate) fn keywords(entries: &[(MailboxId, MessageEntry)]) -> BTreeMap<String, bool> {
    let mut out = BTreeMap::new();
    for (_, e) in entries {
        for (flag, name) in [
            (FLAG_SEEN, "$seen"),
            (FLAG_FLAGGED, "$flagged"),
            (FLAG_ANSWERED, "$answered"),
            (FLAG_DRAFT, "$draft"),
        ] {
            if e.flags & flag != 0 {
                out.insert(name.to_string(), true);
            }
        }
        for k in &e.keywords {
            out.insert(k.to_ascii_lowercase(), true);
        }
    }
    out
}

/// A property list for an Email or a body part, checked.
fn checked(
    list: Option<Vec<String>>,
    known: &[&str],
    default: &[&str],
) -> Result<Vec<String>, MethodError> {
    let list = list.unwrap_or_else(|| default.iter().map(|p| p.to_string()).collect());
    for p in &list {
        if !known.contains(&p.as_str()) && message::header_property(p).is_none() {
            return Err(MethodError::invalid_arguments(format!(
                "unknown property {p}"
            )));
        }
    }
    Ok(list)
}

/// How body values are fetched (§4.2).
pub(crate) struct Fetch {
    text: bool,
    html: bool,
    all: bool,
    max: usize,
}

/// The body value arguments of Email/get and Email/parse.
fn fetch_args(args: &Args) -> Result<Fetch, MethodError> {
    Ok(Fetch {
        text: args.bool("fetchTextBodyValues", false)?,
        html: args.bool("fetchHTMLBodyValues", false)?,
        all: args.bool("fetchAllBodyValues", false)?,
        max: match args.uint("maxBodyValueBytes")? {
            Some(0) => {
                return Err(MethodError::invalid_arguments(
                    "maxBodyValueBytes must be positive",
                ))
            }
            Some(n) => (n as usize).min(message::MAX_BODY_VALUE),
            None => message::MAX_BODY_VALUE,
        },
    })
}

/// Email/get (§4.2).
pub(super) async fn get(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&[
        "accountId",
        "ids",
        "properties",
        "bodyProperties",
        "fetchTextBodyValues",
        "fetchHTMLBodyValues",
        "fetchAllBodyValues",
        "maxBodyValueBytes",
    ])?;
    let store = call.jmap.ctx.store.clone();
    let account = call.user.account;
    let modseq = store.account_modseq(account).await?;
    let wanted = args.strings("ids")?;
    let max = call.jmap.ctx.config.max_objects_in_get;
    let mut properties = checked(args.strings("properties")?, PROPERTIES, DEFAULT_PROPERTIES)?;
    if !properties.iter().any(|p| p == "id") {
        properties.insert(0, "id".into());
    }
    let body_properties = checked(
        args.strings("bodyProperties")?,
        BODY_PROPERTIES,
        DEFAULT_BODY_PROPERTIES,
    )?;
    let fetch = fetch_args(&args)?;
    let emails: Vec<AccountEmail> = match &wanted {
        Some(ids_asked) => {
            if ids_asked.len() > max {
                return Err(MethodError::request_too_large(format!(
                    "at most {max} ids per /get (maxObjectsInGet)"
                )));
            }
            let blobs: Vec<BlobId> = ids_asked
                .iter()
                .filter_map(|id| call.resolve_id(id).and_then(|id| ids::parse_email(&id)))
                .collect();
            if blobs.is_empty() {
                Vec::new()
            } else {
                store.account_emails(account, Some(&blobs)).await?
            }
        }
        None => {
            let all = store.account_emails(account, None).await?;
            if all.len() > max {
                return Err(MethodError::request_too_large(format!(
                    "the account has more than {max} emails: ask for ids"
                )));
            }
            all
        }
    };
    let by_blob: HashMap<BlobId, &AccountEmail> = emails.iter().map(|e| (e.blob, e)).collect();
    // What is read beyond the entries: the header block and structure,
    // one read per mailbox.
    let needs_data = properties.iter().any(|p| {
        !matches!(
            p.as_str(),
            "id" | "blobId" | "threadId" | "mailboxIds" | "keywords" | "size" | "receivedAt"
        )
    });
    let mut data: HashMap<BlobId, MessageData> = HashMap::new();
    if needs_data {
        let mut by_mailbox: HashMap<MailboxId, Vec<u32>> = HashMap::new();
        for e in &emails {
            if let Some((m, entry)) = e.entries.first() {
                by_mailbox.entry(*m).or_default().push(entry.uid);
            }
        }
        for (mailbox, uids) in by_mailbox {
            for d in store.message_data(mailbox, &uids).await? {
                data.insert(d.entry.blob, d);
            }
        }
    }
    let mut list = Vec::new();
    let mut not_found = Vec::new();
    let order: Vec<(String, Option<BlobId>)> = match wanted {
        Some(asked) => asked
            .into_iter()
            .map(|id| {
                let blob = call.resolve_id(&id).and_then(|id| ids::parse_email(&id));
                (id, blob)
            })
            .collect(),
        None => emails
            .iter()
            .map(|e| (ids::email(e.blob), Some(e.blob)))
            .collect(),
    };
    for (asked, blob) in order {
        let Some(email) = blob.and_then(|b| by_blob.get(&b)) else {
            not_found.push(asked);
            continue;
        };
        let d = data.get(&email.blob);
        let source = Source {
            email: Some(email),
            blob: email.blob,
            blob_id: ids::blob(email.blob),
            size: email.entries[0].1.size,
            header: d.map(|d| d.header.as_slice()).unwrap_or_default(),
            structure: d.map(|d| &d.structure),
        };
        list.push(object(call, &source, &properties, &body_properties, &fetch).await?);
    }
    Ok(vec![(
        "Email/get".into(),
        json!({
            "accountId": ids::account(account),
            "state": state(modseq),
            "list": list,
            "notFound": not_found,
        }),
    )])
}

/// What an Email object is made from: an email of the account, or (for
/// Email/parse) a message in a blob, which has no id, mailboxes,
/// keywords, thread or received date (§4.9).
pub(crate) struct Source<'a> {
    pub email: Option<&'a AccountEmail>,
    /// The stored blob the message's bytes are in.
    pub blob: BlobId,
    /// The message's blob id as the client knows it.
    pub blob_id: String,
    pub size: u64,
    pub header: &'a [u8],
    pub structure: Option<&'a mime_tree::MessageStructure>,
}

pub(crate) async fn object(
    call: &Call<'_>,
    src: &Source<'_>,
    properties: &[String],
    body_properties: &[String],
    fetch: &Fetch,
) -> Result<Value, MethodError> {
    let store = call.jmap.ctx.store.clone();
    let mut reader = BlobReader::new(store, src.blob);
    let header = src.header;
    let tree = src.structure.map(message::tree);
    let lists = tree.as_ref().map(message::body_lists);
    let email = src.email;
    let blob = src.blob;
    let mut o = Map::new();
    let header_of = |name: &str, form: &str| {
        message::header_value(
            header,
            &message::header_property(&format!("header:{name}:{form}")).expect("known form"),
        )
    };
    for p in properties {
        let v = match p.as_str() {
            "id" => email.map_or(Value::Null, |e| ids::email(e.blob).into()),
            "blobId" => src.blob_id.clone().into(),
            "threadId" => email.map_or(Value::Null, |e| ids::thread(e.thread).into()),
            "mailboxIds" => match email {
                Some(e) => {
                    let mut m = Map::new();
                    for (mailbox, _) in &e.entries {
                        m.insert(ids::mailbox(*mailbox), true.into());
                    }
                    Value::Object(m)
                }
                None => Value::Null,
            },
            "keywords" => email.map_or(Value::Null, |e| json!(keywords(&e.entries))),
            "size" => src.size.into(),
            "receivedAt" => email.map_or(Value::Null, |e| {
                message::utc_date(e.entries[0].1.internal_date).into()
            }),
            "headers" => message::headers_list(header),
            "messageId" => header_of("Message-ID", "asMessageIds"),
            "inReplyTo" => header_of("In-Reply-To", "asMessageIds"),
            "references" => header_of("References", "asMessageIds"),
            "sender" => null_if_empty(header_of("Sender", "asAddresses")),
            "from" => null_if_empty(header_of("From", "asAddresses")),
            "to" => null_if_empty(header_of("To", "asAddresses")),
            "cc" => null_if_empty(header_of("Cc", "asAddresses")),
            "bcc" => null_if_empty(header_of("Bcc", "asAddresses")),
            "replyTo" => null_if_empty(header_of("Reply-To", "asAddresses")),
            "subject" => header_of("Subject", "asText"),
            "sentAt" => header_of("Date", "asDate"),
            "bodyStructure" => match &tree {
                Some(t) => {
                    let mut props = body_properties.to_vec();
                    if !props.iter().any(|p| p == "subParts") {
                        props.push("subParts".into());
                    }
                    message::body_part(&mut reader, blob, t, &props).await?
                }
                None => Value::Null,
            },
            "textBody" | "htmlBody" | "attachments" => {
                let Some((text, html, attachments)) = &lists else {
                    o.insert(p.clone(), Value::Null);
                    continue;
                };
                let nodes = match p.as_str() {
                    "textBody" => text,
                    "htmlBody" => html,
                    _ => attachments,
                };
                let mut out = Vec::new();
                for n in nodes {
                    out.push(message::body_part(&mut reader, blob, n, body_properties).await?);
                }
                Value::Array(out)
            }
            "hasAttachment" => lists
                .as_ref()
                .is_some_and(|(_, _, a)| {
                    a.iter().any(|n| {
                        !(n.part.disposition.is_none()
                            && n.part.media_type == "image"
                            && n.part.id.is_some())
                    })
                })
                .into(),
            "preview" => match &lists {
                Some((text, html, _)) => {
                    let first_text = text
                        .iter()
                        .chain(html.iter())
                        .find(|n| n.part.media_type == "text");
                    match first_text {
                        Some(n) => {
                            let (t, _) = message::text_value(&mut reader, n.part, 4096).await?;
                            message::preview_of(&t, n.part.media_subtype == "html").into()
                        }
                        None => "".into(),
                    }
                }
                None => "".into(),
            },
            "bodyValues" => {
                let mut values = Map::new();
                if let (Some((text, html, _)), Some(t)) = (&lists, &tree) {
                    let mut wanted: Vec<&message::Node> = Vec::new();
                    if fetch.all {
                        let mut stack = vec![t];
                        while let Some(n) = stack.pop() {
                            if n.part_id.is_some() && n.part.media_type == "text" {
                                wanted.push(n);
                            }
                            stack.extend(n.children.iter().rev());
                        }
                    } else {
                        if fetch.text {
                            wanted.extend(text.iter().copied());
                        }
                        if fetch.html {
                            wanted.extend(html.iter().copied());
                        }
                    }
                    for n in wanted {
                        let Some(id) = &n.part_id else { continue };
                        if values.contains_key(id) || n.part.media_type != "text" {
                            continue;
                        }
                        let (value, cut) =
                            message::text_value(&mut reader, n.part, fetch.max).await?;
                        values.insert(
                            id.clone(),
                            json!({"value": value, "isEncodingProblem": false, "isTruncated": cut}),
                        );
                    }
                }
                Value::Object(values)
            }
            other => match message::header_property(other) {
                Some(hp) => message::header_value(header, &hp),
                None => continue,
            },
        };
        o.insert(p.clone(), v);
    }
    Ok(Value::Object(o))
}

fn null_if_empty(v: Value) -> Value {
    match &v {
        Value::Array(a) if a.is_empty() => Value::Null,
        _ => v,
    }
}

/// Email/changes (§4.3, RFC 8620 §5.2): from the account's changes since
/// the state, whoever made them (IMAP, SMTP delivery, JMAP).
pub(super) async fn changes(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "sinceState", "maxChanges"])?;
    let store = &call.jmap.ctx.store;
    let now = store.account_modseq(call.user.account).await?;
    let (from, max) = changes_args(&args, now)?;
    let since = from.origin;
    let c = store.account_changes(call.user.account, since).await?;
    let at: std::collections::HashMap<BlobId, u64> = c.email_modseqs.iter().copied().collect();
    let last = |blob: &BlobId| at.get(blob).copied().unwrap_or(c.modseq);
    let mut changes = Vec::new();
    for (blob, arrived) in &c.emails {
        let kind = if *arrived > since {
            Change::Created
        } else {
            Change::Updated
        };
        changes.push((ids::email(*blob), kind, last(blob)));
    }
    let present: std::collections::HashSet<BlobId> = c.emails.iter().map(|(b, _)| *b).collect();
    changes.extend(
        c.emails_gone
            .iter()
            // Come and gone since the state: the client never knew it.
            .filter(|(blob, arrived)| *arrived <= since && !present.contains(blob))
            .map(|(blob, _)| (ids::email(*blob), Change::Destroyed, last(blob))),
    );
    let response = changes_response(
        &ids::account(call.user.account),
        from,
        c.modseq,
        changes,
        max,
    )?;
    Ok(vec![("Email/changes".into(), response)])
}

/// Email/parse (§4.9): messages in blobs (an upload, a message of the
/// account, or one of its message/rfc822 parts) as Email objects, with
/// no id, mailboxes, keywords, thread or received date.
pub(super) async fn parse(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&[
        "accountId",
        "blobIds",
        "properties",
        "bodyProperties",
        "fetchTextBodyValues",
        "fetchHTMLBodyValues",
        "fetchAllBodyValues",
        "maxBodyValueBytes",
    ])?;
    let blob_ids = args
        .strings("blobIds")?
        .ok_or_else(|| MethodError::invalid_arguments("blobIds is required"))?;
    if blob_ids.len() > call.jmap.ctx.config.max_objects_in_get {
        return Err(MethodError::request_too_large(
            "more blobIds than maxObjectsInGet",
        ));
    }
    const PARSE_DEFAULT: &[&str] = &[
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
        "hasAttachment",
        "preview",
        "bodyValues",
        "textBody",
        "htmlBody",
        "attachments",
    ];
    let properties = checked(args.strings("properties")?, PROPERTIES, PARSE_DEFAULT)?;
    let body_properties = checked(
        args.strings("bodyProperties")?,
        BODY_PROPERTIES,
        DEFAULT_BODY_PROPERTIES,
    )?;
    let fetch = fetch_args(&args)?;
    let store = call.jmap.ctx.store.clone();
    let mut parsed = Map::new();
    let mut not_parsable = Vec::new();
    let mut not_found = Vec::new();
    for id in blob_ids {
        let Some((blob, section)) = call.resolve_id(&id).and_then(|b| ids::parse_blob(&b)) else {
            not_found.push(id);
            continue;
        };
        let Some(found) = store.account_blob(call.user.account, blob).await? else {
            not_found.push(id);
            continue;
        };
        let Some((structure, header)) = store.blob_structure(blob).await? else {
            not_found.push(id);
            continue;
        };
        let (message, header, size) = match section {
            None => (structure, header, found.size),
            Some(section) => {
                let tree = message::tree(&structure);
                let Some(node) = message::find(&tree, &section) else {
                    not_found.push(id);
                    continue;
                };
                let mime_tree::PartKind::Message(inner) = &node.part.kind else {
                    // Not a message/rfc822 part (§4.9: notParsable).
                    not_parsable.push(id);
                    continue;
                };
                let inner = (**inner).clone();
                let mut reader = BlobReader::new(store.clone(), blob);
                let head = reader
                    .range(
                        inner.root.header_offset,
                        inner.root.header_len,
                        store::INDEX_WINDOW,
                    )
                    .await?;
                (inner, head, node.part.body_len)
            }
        };
        // Bytes without a single header field are no message.
        if message::headers_list(&header)
            .as_array()
            .is_none_or(Vec::is_empty)
        {
            not_parsable.push(id);
            continue;
        }
        let source = Source {
            email: None,
            blob,
            blob_id: id.clone(),
            size,
            header: &header,
            structure: Some(&message),
        };
        let v = object(call, &source, &properties, &body_properties, &fetch).await?;
        parsed.insert(id, v);
    }
    Ok(vec![(
        "Email/parse".into(),
        json!({
            "accountId": ids::account(call.user.account),
            "parsed": parsed,
            "notParsable": not_parsable,
            "notFound": not_found,
        }),
    )])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(flags: u32, keywords: &[&str]) -> (MailboxId, MessageEntry) {
        (
            1,
            MessageEntry {
                uid: 1,
                blob: 1,
                size: 1,
                flags,
                internal_date: 0,
                modseq: 1,
                keywords: keywords.iter().map(|k| k.to_string()).collect(),
            },
        )
    }

    #[test]
    fn keywords_are_the_imap_flags_as_rfc_8621_maps_them() {
        let k = keywords(&[
            entry(
                FLAG_SEEN | FLAG_ANSWERED | store::FLAG_DELETED,
                &["$Forwarded"],
            ),
            entry(FLAG_FLAGGED | FLAG_DRAFT, &["Work"]),
        ]);
        let names: Vec<&str> = k.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "$answered",
                "$draft",
                "$flagged",
                "$forwarded",
                "$seen",
                "work"
            ]
        );
        assert_eq!(flag_of("$Seen"), Some(FLAG_SEEN));
        assert_eq!(flag_of("$junk"), None);
    }
}
