//! EmailSubmission/get, /changes, /query and /set (RFC 8621 §7): sending
//! an Email of the account, through the same checks as SMTP submission
//! and the webmail, onto the same outbound queue (which signs with DKIM
//! as it sends).
//!
//! The queue starts sending at once, so a submission's `undoStatus` is
//! `final` from the start and canceling one is `cannotUnsend`; no
//! `maxDelayedSend` is offered. `deliveryStatus` says what was known at
//! submission: `yes` for local recipients (filed at once), `queued` for
//! remote ones.

use std::collections::BTreeSet;

use serde_json::{json, Map, Value};

use super::args::Args;
use super::records::{self, Record};
use super::Answer;
use crate::api::Call;
use crate::error::{MethodError, SetError};
use crate::ids;
use crate::message::{self, BlobReader};

/// The kind the store keeps submissions under.
const KIND: &str = "EmailSubmission";
/// What a submission's JMAP id starts with.
const PREFIX: &str = "S";
/// The most of a message's header read for its addresses.
const MAX_HEADER: u64 = 64 * 1024;

const PROPERTIES: &[&str] = &[
    "id",
    "identityId",
    "emailId",
    "threadId",
    "envelope",
    "sendAt",
    "undoStatus",
    "deliveryStatus",
    "dsnBlobIds",
    "mdnBlobIds",
];

fn jmap_id(r: &Record) -> String {
    format!("{PREFIX}{}", r.id)
}

fn find<'a>(records: &'a records::Records, id: &str) -> Option<&'a Record> {
    records.get(id.strip_prefix(PREFIX)?)
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

/// EmailSubmission/get (§7.1).
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
    let records = records::load(call, KIND).await?;
    records::get_answer(
        call,
        "EmailSubmission/get",
        &records,
        wanted,
        &properties,
        find,
        object,
    )
}

/// EmailSubmission/changes (§7.2).
pub(super) async fn changes(call: &mut Call<'_>, args: Args) -> Answer {
    records::changes(call, KIND, &args, "EmailSubmission/changes", PREFIX).await
}

/// Whether a submission matches a FilterCondition (§7.3).
fn matches(filter: &Value, r: &Record) -> Result<bool, MethodError> {
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
            .map(|c| matches(c, r))
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
    let field = |k: &str| r.object.get(k).and_then(Value::as_str).unwrap_or("");
    for (k, v) in f {
        let in_list = |property: &str| -> Result<bool, MethodError> {
            let Value::Array(list) = v else {
                return Err(MethodError::invalid_arguments(format!("{k} is a list")));
            };
            Ok(list.iter().any(|x| x.as_str() == Some(field(property))))
        };
        let ok = match k.as_str() {
            "identityIds" => in_list("identityId")?,
            "emailIds" => in_list("emailId")?,
            "threadIds" => in_list("threadId")?,
            "undoStatus" => v.as_str() == Some(field("undoStatus")),
            "before" | "after" => {
                let at = v
                    .as_str()
                    .and_then(message::parse_date)
                    .ok_or_else(|| MethodError::invalid_arguments(format!("{k} is a UTCDate")))?;
                let sent = message::parse_date(field("sendAt")).unwrap_or(0);
                if k == "before" {
                    sent < at
                } else {
                    sent >= at
                }
            }
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

/// EmailSubmission/query (§7.3).
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
    let records = records::load(call, KIND).await?;
    let all = results(&args, &records)?;
    let window = super::query::window(&args, &all)?;
    let mut response = json!({
        "accountId": ids::account(call.user.account),
        "queryState": super::state::state(records.state),
        "canCalculateChanges": true,
        "position": window.position,
        "ids": all[window.start..window.end],
    });
    if let Some(limit) = window.limit {
        response["limit"] = limit.into();
    }
    if args.bool("calculateTotal", false)? {
        response["total"] = all.len().into();
    }
    Ok(vec![("EmailSubmission/query".into(), response)])
}

/// EmailSubmission/queryChanges (RFC 8620 §5.6). The query state is the
/// kind's state, and every property a filter or sort reads is the
/// record's own, so whatever moved a submission in or out of the results
/// or along them changed its record: the records changed since the state
/// are `removed` (tombstones included; §5.6 lets `removed` name ids that
/// were not in the old results) and, where the query finds them now,
/// `added` at their index.
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
    ])?;
    let records = records::load(call, KIND).await?;
    let since = args
        .str("sinceQueryState")?
        .ok_or_else(|| MethodError::invalid_arguments("sinceQueryState is required"))?;
    let since = super::state::parse_state(since)
        .filter(|s| *s <= records.state)
        .ok_or_else(MethodError::cannot_calculate_changes)?;
    let max = match args.uint("maxChanges")? {
        Some(0) => {
            return Err(MethodError::invalid_arguments(
                "maxChanges must be positive",
            ))
        }
        m => m.map(|m| m as usize),
    };
    let up_to = args.str("upToId")?;
    let all = results(&args, &records)?;
    let mut changed: Vec<&store::AccountRecord> =
        records.all.iter().filter(|r| r.changed > since).collect();
    changed.sort_by_key(|r| r.changed);
    let removed: Vec<String> = changed
        .iter()
        .map(|r| format!("{PREFIX}{}", r.id))
        .collect();
    let mut added = Vec::new();
    for (index, id) in all.iter().enumerate() {
        if removed.contains(id) {
            added.push(json!({"id": id, "index": index}));
        }
        // §5.6: nothing after upToId need be told.
        if up_to == Some(id.as_str()) {
            break;
        }
    }
    if max.is_some_and(|m| removed.len() + added.len() > m) {
        return Err(MethodError::too_many_changes());
    }
    let mut response = json!({
        "accountId": ids::account(call.user.account),
        "oldQueryState": super::state::state(since),
        "newQueryState": super::state::state(records.state),
        "removed": removed,
        "added": added,
    });
    if args.bool("calculateTotal", false)? {
        response["total"] = all.len().into();
    }
    Ok(vec![("EmailSubmission/queryChanges".into(), response)])
}

/// The ids a query's `filter` and `sort` find, in order.
fn results(args: &Args, records: &records::Records) -> Result<Vec<String>, MethodError> {
    let mut found: Vec<&Record> = Vec::new();
    for r in &records.live {
        let keep = match args.0.get("filter") {
            None | Some(Value::Null) => true,
            Some(f) => matches(f, r)?,
        };
        if keep {
            found.push(r);
        }
    }
    let mut sort: Vec<(String, bool)> = Vec::new();
    if let Some(Value::Array(list)) = args.0.get("sort") {
        for c in list {
            let property = c
                .get("property")
                .and_then(Value::as_str)
                .ok_or_else(|| MethodError::invalid_arguments("a Comparator needs a property"))?;
            let property = match property {
                "emailId" | "threadId" => property,
                "sentAt" => "sendAt",
                p => return Err(MethodError::unsupported_sort(format!("no sort by {p}"))),
            };
            let ascending = c
                .get("isAscending")
                .and_then(Value::as_bool)
                .unwrap_or(true);
            sort.push((property.to_string(), ascending));
        }
    }
    found.sort_by(|a, b| {
        for (p, ascending) in &sort {
            let key = |r: &Record| -> (i64, String) {
                let s = r.object.get(p).and_then(Value::as_str).unwrap_or("");
                match p.as_str() {
                    "sendAt" => (message::parse_date(s).unwrap_or(0), String::new()),
                    _ => (0, s.to_string()),
                }
            };
            let o = key(a).cmp(&key(b));
            let o = if *ascending { o } else { o.reverse() };
            if o.is_ne() {
                return o;
            }
        }
        a.created.cmp(&b.created)
    });
    Ok(found.iter().map(|r| jmap_id(r)).collect())
}

/// One address of an envelope (§7.1 Address), read.
fn envelope_address(v: &Value, property: &str) -> Result<String, SetError> {
    let bad = || SetError::invalid_properties(&[property], "an Address with an email");
    let o = v.as_object().ok_or_else(bad)?;
    if o.keys().any(|k| k != "email" && k != "parameters") {
        return Err(bad());
    }
    // SMTP parameters (SIZE, NOTIFY, ...) are not offered
    // (submissionExtensions is empty).
    if o.get("parameters").is_some_and(|p| !p.is_null()) {
        return Err(SetError::invalid_properties(
            &[property],
            "no SMTP parameters are supported",
        ));
    }
    let email = o.get("email").and_then(Value::as_str).ok_or_else(bad)?;
    store::normalize_address(email).ok_or_else(bad)
}

/// The addresses of every instance of `field` in a header block.
fn header_addresses(header: &[u8], field: &str) -> Vec<String> {
    let Some(p) = message::header_property(&format!("header:{field}:asAddresses:all")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Value::Array(instances) = message::header_value(header, &p) {
        for list in instances {
            if let Value::Array(list) = list {
                for a in list {
                    if let Some(e) = a.get("email").and_then(Value::as_str) {
                        out.extend(store::normalize_address(e));
                    }
                }
            }
        }
    }
    out
}

/// What one creation sends: the Email and its envelope.
struct Outgoing {
    email: store::AccountEmail,
    mail_from: String,
    rcpt_to: Vec<String>,
    identity_id: String,
}

/// Reads and checks a creation (§7.5): the identity, the Email, the
/// envelope (given, or from the header), and that the account may send
/// as the header's `From` and the envelope's sender.
async fn prepare(call: &Call<'_>, o: &Map<String, Value>) -> Result<Outgoing, SetError> {
    for k in o.keys() {
        if !["identityId", "emailId", "envelope"].contains(&k.as_str()) {
            return Err(SetError::invalid_properties(
                &[k.as_str()],
                "not settable on create",
            ));
        }
    }
    let identity_id = o
        .get("identityId")
        .and_then(Value::as_str)
        .and_then(|i| call.resolve_id(i))
        .ok_or_else(|| SetError::invalid_properties(&["identityId"], "identityId is required"))?;
    let identities = super::identity::load(call)
        .await
        .map_err(|e| SetError::new("serverFail", e.to_json().to_string()))?;
    let identity = super::identity::find(&identities, &identity_id)
        .ok_or_else(|| SetError::invalid_properties(&["identityId"], "no such identity"))?;
    let identity_email = identity
        .object
        .get("email")
        .and_then(Value::as_str)
        .and_then(store::normalize_address)
        .unwrap_or_default();
    let email_id = o
        .get("emailId")
        .and_then(Value::as_str)
        .and_then(|e| call.resolve_id(e))
        .ok_or_else(|| SetError::invalid_properties(&["emailId"], "emailId is required"))?;
    let store = &call.jmap.ctx.store;
    let email = match ids::parse_email(&email_id) {
        Some(blob) => store
            .account_emails(call.user.account, Some(&[blob]))
            .await?
            .into_iter()
            .next(),
        None => None,
    }
    .ok_or_else(|| SetError::new("invalidEmail", format!("no Email {email_id}")))?;
    let mut reader = BlobReader::new(store.clone(), email.blob);
    let header = reader.range(0, MAX_HEADER, MAX_HEADER as usize).await?;
    let from = header_addresses(&header, "From");
    if from.is_empty() {
        return Err(SetError::new(
            "invalidEmail",
            "the Email has no From address",
        ));
    }
    // §7.5: the message is sent as it is; a Bcc field would tell every
    // recipient who else got it, and removing it means another message.
    if !message::raw_values(&header, "Bcc").is_empty() {
        return Err(SetError::new(
            "invalidEmail",
            "the Email has a Bcc header field; name those recipients in the envelope",
        ));
    }
    // The submission checks: the header's From and the envelope's sender
    // must be addresses the account may send as, and the identity's.
    if let Some(a) = from.iter().find(|a| !super::identity::may_send_as(call, a)) {
        return Err(SetError::new(
            "forbiddenFrom",
            format!("{} may not send as {a}", call.user.address),
        ));
    }
    let sender = header_addresses(&header, "Sender");
    if !from.contains(&identity_email) && !sender.contains(&identity_email) {
        return Err(SetError::new(
            "forbiddenFrom",
            format!("the Email is not from the identity's address {identity_email}"),
        ));
    }
    let (mail_from, rcpt_to) = match o.get("envelope") {
        None | Some(Value::Null) => {
            // §7.5: mailFrom from Sender, else From; rcptTo from To and Cc
            // (a Bcc field is refused above), without duplicates.
            let mail_from = sender.first().or(from.first()).cloned().unwrap_or_default();
            let mut rcpt: Vec<String> = Vec::new();
            for field in ["To", "Cc"] {
                for a in header_addresses(&header, field) {
                    if !rcpt.contains(&a) {
                        rcpt.push(a);
                    }
                }
            }
            (mail_from, rcpt)
        }
        Some(Value::Object(env)) => {
            if env.keys().any(|k| k != "mailFrom" && k != "rcptTo") {
                return Err(SetError::invalid_properties(
                    &["envelope"],
                    "an Envelope has mailFrom and rcptTo",
                ));
            }
            let mail_from = envelope_address(
                env.get("mailFrom").unwrap_or(&Value::Null),
                "envelope/mailFrom",
            )?;
            let Some(Value::Array(list)) = env.get("rcptTo") else {
                return Err(SetError::invalid_properties(
                    &["envelope/rcptTo"],
                    "a list of Addresses",
                ));
            };
            let mut rcpt: Vec<String> = Vec::new();
            for a in list {
                let a = envelope_address(a, "envelope/rcptTo")?;
                if !rcpt.contains(&a) {
                    rcpt.push(a);
                }
            }
            (mail_from, rcpt)
        }
        Some(_) => {
            return Err(SetError::invalid_properties(
                &["envelope"],
                "an Envelope or null",
            ))
        }
    };
    if mail_from.is_empty()
        || mail_from != identity_email
        || !super::identity::may_send_as(call, &mail_from)
    {
        return Err(SetError::new(
            "forbiddenMailFrom",
            format!("the envelope sender must be the identity's address {identity_email}"),
        ));
    }
    if rcpt_to.is_empty() {
        return Err(SetError::new("noRecipients", "no recipient to send to"));
    }
    Ok(Outgoing {
        email,
        mail_from,
        rcpt_to,
        identity_id,
    })
}

/// Sends a prepared creation: scanned, counted against the hourly
/// limits, filed for local recipients and queued for remote ones.
/// Answers each recipient's delivery status.
async fn send(call: &Call<'_>, out: &Outgoing) -> Result<Map<String, Value>, SetError> {
    let ctx = &call.jmap.ctx;
    let directory = ctx.directory.get();
    let mut unknown = Vec::new();
    let mut inboxes: BTreeSet<store::MailboxId> = BTreeSet::new();
    let mut remote: Vec<String> = Vec::new();
    let mut status = Map::new();
    for r in &out.rcpt_to {
        match directory.resolve(r) {
            store::Resolution::Deliver {
                mailboxes,
                remote: far,
            } => {
                inboxes.extend(mailboxes);
                remote.extend(far);
                status.insert(
                    r.clone(),
                    json!({"smtpReply": "250 2.1.5 delivered", "delivered": "yes", "displayed": "unknown"}),
                );
            }
            store::Resolution::NotLocal => {
                remote.push(r.clone());
                status.insert(
                    r.clone(),
                    json!({"smtpReply": "250 2.0.0 queued", "delivered": "queued", "displayed": "unknown"}),
                );
            }
            store::Resolution::UnknownUser => unknown.push(r.clone()),
        }
    }
    if !unknown.is_empty() {
        let mut e = SetError::new("invalidRecipients", "no such local recipient");
        e.extra.insert("invalidRecipients".into(), json!(unknown));
        return Err(e);
    }
    let blob = out.email.blob;
    if let Some(scan) = &ctx.scan {
        match scan(blob).await {
            Ok(None) => {}
            Ok(Some(why)) => {
                tracing::warn!(account = %call.user.address, reason = %why, "JMAP submission refused");
                return Err(SetError::new("forbiddenToSend", why));
            }
            Err(e) => {
                tracing::error!(error = %e, "JMAP submission could not be scanned");
                return Err(SetError::new(
                    "serverFail",
                    "the message could not be scanned",
                ));
            }
        }
    }
    // The same hourly limits as SMTP submission and the webmail.
    if let Some(limit) = &ctx.send_limit {
        if !limit(call.user.account, out.rcpt_to.len() as u32) {
            return Err(SetError::new(
                "forbiddenToSend",
                "this account reached its hourly sending limit",
            ));
        }
    }
    remote.sort_unstable();
    remote.dedup();
    let store = &ctx.store;
    if !remote.is_empty() {
        store.queue_message(blob, &out.mail_from, &remote).await?;
    }
    let (from_mailbox, entry) = &out.email.entries[0];
    for inbox in inboxes {
        for (_, new) in store
            .copy_messages(*from_mailbox, &[entry.uid], inbox)
            .await?
        {
            // New mail for the recipient: unread, not a draft.
            store
                .update_flags(inbox, &[new], store::FlagChange::Replace, 0, &[], None)
                .await?;
        }
    }
    tracing::info!(account = %call.user.address, sender = %out.mail_from, recipients = out.rcpt_to.len(), "JMAP submission sent");
    Ok(status)
}

/// The submission an `onSuccess*` key or id names: a submission id or
/// `#creationId` of one created in this call.
fn success_target(
    key: &str,
    created: &Map<String, Value>,
    emails: &Map<String, Value>,
) -> Option<String> {
    let id = match key.strip_prefix('#') {
        Some(cid) => created.get(cid)?.get("id")?.as_str()?.to_string(),
        None => key.to_string(),
    };
    emails.get(&id)?.as_str().map(str::to_string)
}

/// EmailSubmission/set (§7.5), with `onSuccessUpdateEmail` and
/// `onSuccessDestroyEmail` run as an Email/set after it.
pub(super) async fn set(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&[
        "accountId",
        "ifInState",
        "create",
        "update",
        "destroy",
        "onSuccessUpdateEmail",
        "onSuccessDestroyEmail",
    ])?;
    let records = records::load(call, KIND).await?;
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
    let on_update = args.object("onSuccessUpdateEmail")?.cloned();
    let on_destroy = args.strings("onSuccessDestroyEmail")?;
    // Submission id to Email id, for the onSuccess arguments.
    let mut emails: Map<String, Value> = records
        .live
        .iter()
        .map(|r| {
            (
                jmap_id(r),
                r.object.get("emailId").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    let mut created = Map::new();
    let mut not_created = Map::new();
    for (cid, spec) in &create {
        let result: Result<Value, SetError> = async {
            let Value::Object(o) = spec else {
                return Err(SetError::invalid_properties(
                    &[],
                    "an EmailSubmission is an object",
                ));
            };
            let out = prepare(call, o).await?;
            let status = send(call, &out).await?;
            let send_at = message::utc_date(crate::now());
            let object = json!({
                "identityId": out.identity_id,
                "emailId": ids::email(out.email.blob),
                "threadId": ids::thread(out.email.thread),
                "envelope": {
                    "mailFrom": {"email": out.mail_from, "parameters": null},
                    "rcptTo": out.rcpt_to.iter()
                        .map(|r| json!({"email": r, "parameters": null}))
                        .collect::<Vec<_>>(),
                },
                "sendAt": send_at,
                "undoStatus": "final",
                "deliveryStatus": status,
                "dsnBlobIds": [],
                "mdnBlobIds": [],
            });
            let Value::Object(object) = object else {
                return Err(SetError::new("serverFail", "not an object"));
            };
            let id = records::put(call, KIND, None, None, &object).await?;
            Ok(json!({
                "id": format!("{PREFIX}{id}"),
                "threadId": object["threadId"],
                "sendAt": send_at,
                "undoStatus": "final",
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
    for (cid, v) in &created {
        if let (Some(id), Some(spec)) = (v["id"].as_str(), create.get(cid)) {
            let email = spec
                .get("emailId")
                .and_then(Value::as_str)
                .and_then(|e| call.resolve_id(e));
            emails.insert(id.to_string(), email.map_or(Value::Null, Value::from));
        }
    }
    let mut updated = Map::new();
    let mut not_updated = Map::new();
    for (id, patch) in &update {
        let result: Result<(), SetError> = (|| {
            let id = call.resolve_id(id).ok_or_else(SetError::not_found)?;
            find(&records, &id).ok_or_else(SetError::not_found)?;
            let Value::Object(patch) = patch else {
                return Err(SetError::invalid_properties(&[], "a patch is an object"));
            };
            for (k, v) in patch {
                match (k.as_str(), v.as_str()) {
                    // Sent already: the queue starts at once.
                    ("undoStatus", Some("canceled")) => {
                        return Err(SetError::new(
                            "cannotUnsend",
                            "the message was already handed to the queue",
                        ))
                    }
                    ("undoStatus", Some("final")) => {}
                    _ => {
                        return Err(SetError::invalid_properties(
                            &[k.as_str()],
                            "only undoStatus may change",
                        ))
                    }
                }
            }
            Ok(())
        })();
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
    let mut answers = vec![(
        "EmailSubmission/set".to_string(),
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
    )];
    // §7.5: the Email/set runs only for the submissions that succeeded.
    let succeeded = |key: &str| {
        let sid = match key.strip_prefix('#') {
            Some(cid) => created.get(cid).and_then(|v| v["id"].as_str()),
            None => Some(key),
        };
        sid.is_some_and(|s| updated.contains_key(s) || created.values().any(|v| v["id"] == s))
    };
    let mut email_update = Map::new();
    for (key, patch) in on_update.iter().flatten() {
        if succeeded(key) {
            if let Some(email) = success_target(key, &created, &emails) {
                email_update.insert(email, patch.clone());
            }
        }
    }
    let mut email_destroy = Vec::new();
    for key in on_destroy.iter().flatten() {
        if succeeded(key) {
            if let Some(email) = success_target(key, &created, &emails) {
                email_destroy.push(Value::from(email));
            }
        }
    }
    if on_update.is_some() || on_destroy.is_some() {
        let mut email_args = Map::new();
        email_args.insert("accountId".into(), ids::account(call.user.account).into());
        email_args.insert("update".into(), Value::Object(email_update));
        email_args.insert("destroy".into(), Value::Array(email_destroy));
        answers.extend(super::email_set::set(call, Args(email_args)).await?);
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_addresses_take_no_parameters() {
        assert_eq!(
            envelope_address(&json!({"email": "A@Example.org"}), "x").unwrap(),
            "a@example.org"
        );
        assert!(
            envelope_address(&json!({"email": "a@b.c", "parameters": {"SIZE": "1"}}), "x").is_err()
        );
        assert!(envelope_address(&json!({"mail": "a@b.c"}), "x").is_err());
        assert!(envelope_address(&json!("a@b.c"), "x").is_err());
    }

    #[test]
    fn header_addresses_are_read_from_every_instance() {
        let h = b"From: Ann <ann@example.org>\r\nTo: b@example.net, \"C\" <c@example.net>\r\nTo: d@example.net\r\n\r\nTo: body@x\r\n";
        assert_eq!(header_addresses(h, "From"), ["ann@example.org"]);
        assert_eq!(
            header_addresses(h, "To"),
            ["b@example.net", "c@example.net", "d@example.net"]
        );
        assert!(header_addresses(h, "Cc").is_empty());
    }
}
