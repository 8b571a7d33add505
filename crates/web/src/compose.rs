//! Writing mail: the compose form (new, reply, reply-all, forward inline
//! or as attachment) and its upload, parsed as a stream. The message is
//! written into the store while the upload arrives, attachments base64
//! encoded piece by piece: an upload is never held whole in memory, and no
//! temp file is used. The result is a draft in Drafts; sending hands that
//! draft to [`crate::outgoing::send`].
//!
//! A draft in Drafts opens in this form again, attachments included;
//! saving or sending it replaces the stored draft. A form that cannot be
//! sent (an address that is not one, no recipient, an unknown local
//! user) comes back whole, with the error beside its field; when files
//! were uploaded with it, they are kept in a draft so nothing is lost.

use std::sync::Arc;

use axum::extract::{Multipart, Query, State};
use axum::http::HeaderMap;
use axum::response::{Html, IntoResponse, Redirect, Response};
use base64::Engine as _;
use mime_tree::Base64Lines;
use serde::Deserialize;
use store::{Delivery, MailboxId, MessageWriter, Uid, FLAG_DRAFT, FLAG_SEEN};

use crate::error::WebError;
use crate::pages::{self, ComposeView};
use crate::routes::{self, App};
use crate::session::{self, User};

/// Largest text field of the form (the body); other fields are far smaller.
const MAX_TEXT_FIELD: usize = 1024 * 1024;
/// Attachments per message.
const MAX_FILES: usize = 50;

/// The header and text of a message being written.
#[derive(Debug, Default, Clone)]
pub(crate) struct Draft {
    /// The identity's address it is sent from ("" for the account's own).
    pub from: String,
    pub to: String,
    pub cc: String,
    pub bcc: String,
    pub subject: String,
    pub body: String,
    pub in_reply_to: String,
    pub references: String,
    /// `mailbox/uid` of a message to attach whole (forward as attachment).
    pub attach: String,
    /// `mailbox/uid` of the message replied to (flagged `\Answered`).
    pub replied: String,
}

/// The stored draft a compose form edits.
#[derive(Debug, Clone)]
pub(crate) struct StoredDraft {
    /// Its UID in Drafts.
    pub uid: Uid,
    /// Its attachments: leaf number, file name, size.
    pub attachments: Vec<(usize, String, u64)>,
}

/// Why a form is shown again instead of sent: the message, and the field
/// it is about.
struct FormError {
    field: Option<&'static str>,
    message: String,
}

/// Splits an address field into addresses, refusing anything that is not
/// one (`Name <a@b>` or `a@b`, separated by commas or semicolons).
pub(crate) fn parse_addresses(field: &str) -> Result<Vec<String>, WebError> {
    let mut out = Vec::new();
    for item in field.split([',', ';']) {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let addr = match (item.rfind('<'), item.rfind('>')) {
            (Some(a), Some(b)) if a < b => &item[a + 1..b],
            _ => item,
        };
        let addr = addr.trim();
        let ok = addr.len() <= 254
            && addr
                .split_once('@')
                .is_some_and(|(l, d)| !l.is_empty() && d.contains('.') || d == "localhost")
            && !addr.contains(|c: char| {
                c.is_whitespace() || c.is_control() || "<>()[]\\,;:\"".contains(c)
            });
        if !ok {
            return Err(WebError::BadRequest(format!(
                "{item:?} is not an email address"
            )));
        }
        out.push(addr.to_string());
    }
    Ok(out)
}

/// An RFC 2047 encoded word for header text that is not plain ASCII.
fn encode_words(text: &str) -> String {
    let clean: String = text.chars().filter(|c| !c.is_control()).collect();
    if clean.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return clean;
    }
    // Encoded words of at most 75 characters (RFC 2047 §2), split on
    // character boundaries.
    let mut words = Vec::new();
    let mut piece = String::new();
    for c in clean.chars() {
        if piece.len() + c.len_utf8() > 45 {
            words.push(std::mem::take(&mut piece));
        }
        piece.push(c);
    }
    words.push(piece);
    words
        .iter()
        .map(|w| {
            format!(
                "=?utf-8?b?{}?=",
                base64::engine::general_purpose::STANDARD.encode(w)
            )
        })
        .collect::<Vec<_>>()
        .join("\r\n ")
}

/// An address field; in a draft (`as_typed`) a value that is not a list
/// of addresses is kept as typed (as header text, so it cannot add
/// fields), for the user to fix later.
fn address_header(name: &str, field: &str, as_typed: bool) -> Result<String, WebError> {
    let addrs = match parse_addresses(field) {
        Ok(a) => a,
        Err(_) if as_typed => return Ok(format!("{name}: {}\r\n", encode_words(field.trim()))),
        Err(e) => return Err(e),
    };
    if addrs.is_empty() {
        return Ok(String::new());
    }
    Ok(format!("{name}: {}\r\n", addrs.join(",\r\n ")))
}

/// A `<...>` message id list, kept only if it is one.
fn id_list(s: &str) -> String {
    s.split_whitespace()
        .filter(|id| {
            id.starts_with('<')
                && id.ends_with('>')
                && id.len() < 1000
                && id.is_ascii()
                && !id[1..id.len() - 1].contains(['<', '>'])
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The header block and the text part; `with_bcc` for drafts only (a sent
/// message never shows its Bcc, RFC 5322 §3.6.3), whose address fields
/// are also kept as typed when they are not addresses yet.
pub(crate) fn head(
    d: &Draft,
    from_name: &str,
    from: &str,
    message_id: &str,
    boundary: &str,
    with_bcc: bool,
) -> Result<Vec<u8>, WebError> {
    let mut h = String::new();
    if from_name.trim().is_empty() {
        h.push_str(&format!("From: {from}\r\n"));
    } else {
        let name = encode_words(from_name.trim());
        let name = if name.starts_with("=?") {
            name
        } else {
            format!("\"{}\"", name.replace(['"', '\\'], ""))
        };
        h.push_str(&format!("From: {name} <{from}>\r\n"));
    }
    h.push_str(&address_header("To", &d.to, with_bcc)?);
    h.push_str(&address_header("Cc", &d.cc, with_bcc)?);
    if with_bcc {
        h.push_str(&address_header("Bcc", &d.bcc, true)?);
    }
    h.push_str(&format!("Subject: {}\r\n", encode_words(&d.subject)));
    let date = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc2822)
        .unwrap_or_default();
    h.push_str(&format!("Date: {date}\r\nMessage-ID: <{message_id}>\r\n"));
    let irt = id_list(&d.in_reply_to);
    if !irt.is_empty() {
        h.push_str(&format!("In-Reply-To: {irt}\r\n"));
    }
    let refs = id_list(&d.references);
    if !refs.is_empty() {
        h.push_str(&format!("References: {refs}\r\n"));
    }
    h.push_str(&format!(
        "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"{boundary}\"\r\n\r\n"
    ));
    h.push_str(&format!(
        "--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    ));
    let mut out = h.into_bytes();
    let text = d.body.replace("\r\n", "\n").replace('\n', "\r\n");
    let mut enc = Base64Lines::default();
    enc.push(text.as_bytes(), &mut out);
    enc.finish_line(&mut out);
    Ok(out)
}

/// A media type from a browser, kept only if it is one.
fn upload_type(t: Option<&str>) -> String {
    let t = t.unwrap_or("").trim().to_ascii_lowercase();
    let ok = t.split_once('/').is_some_and(|(a, b)| {
        let tok = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&c))
        };
        tok(a) && tok(b)
    });
    if ok {
        t
    } else {
        "application/octet-stream".into()
    }
}

fn attachment_header(boundary: &str, ctype: &str, name: &str) -> Vec<u8> {
    let plain = name
        .bytes()
        .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\' || b == b' ');
    let (type_name, disposition) = if plain {
        (format!("\"{name}\""), format!("filename=\"{name}\""))
    } else {
        // RFC 2231 in Content-Disposition (UTF-8, percent-encoded), and an
        // RFC 2047 word in Content-Type's `name`, as common clients write.
        let mut encoded = String::new();
        for b in name.bytes() {
            if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
                encoded.push(b as char);
            } else {
                encoded.push_str(&format!("%{b:02X}"));
            }
        }
        (
            format!("\"{}\"", encode_words(name).replace("\r\n ", " ")),
            format!("filename*=utf-8''{encoded}"),
        )
    };
    format!(
        "\r\n--{boundary}\r\nContent-Type: {ctype}; name={type_name}\r\nContent-Disposition: attachment; {disposition}\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    )
    .into_bytes()
}

#[derive(Deserialize)]
pub(crate) struct ComposeQuery {
    /// `reply`, `all`, `forward`, `attach`.
    mode: Option<String>,
    mailbox: Option<MailboxId>,
    uid: Option<Uid>,
}

fn quote(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                ">".to_string()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn prefixed(prefix: &str, subject: &str) -> String {
    let s = subject.trim();
    if s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix) {
        s.to_string()
    } else {
        format!("{prefix} {s}")
    }
}

/// `GET /compose`: an empty form, or one filled in for a reply or forward.
pub(crate) async fn form(
    State(app): State<Arc<App>>,
    user: User,
    Query(q): Query<ComposeQuery>,
) -> Result<Html<String>, WebError> {
    let identities = crate::identities::load(&app, &user).await?;
    let mut d = Draft::default();
    let mut stored = None;
    if let Some(i) = identities.first() {
        d.from = i.email.clone();
        d.body = crate::identities::signature_block(&i.text_signature);
    }
    if let (Some("draft"), Some(mailbox), Some(uid)) = (q.mode.as_deref(), q.mailbox, q.uid) {
        let (draft, s) = reopen(&app, &user, mailbox, uid).await?;
        d = draft;
        stored = Some(s);
    } else if let (Some(mode), Some(mailbox), Some(uid)) = (q.mode.as_deref(), q.mailbox, q.uid) {
        let o = routes::open(&app, &user, mailbox, uid).await?;
        let h = &o.data.headers;
        let msgid = if h.message_id.is_empty() {
            String::new()
        } else {
            format!("<{}>", h.message_id)
        };
        let original_refs = routes::header_field(&o.data.header, "references");
        let text = routes::text_of(&app, &o).await?;
        match mode {
            "reply" | "all" => {
                let reply_to = routes::header_field(&o.data.header, "reply-to");
                d.to = if reply_to.is_empty() {
                    h.from.clone()
                } else {
                    reply_to
                };
                if mode == "all" {
                    let me = user.address.to_ascii_lowercase();
                    let others: Vec<String> = [h.to.as_str(), h.cc.as_str()]
                        .iter()
                        .flat_map(|f| f.split(", "))
                        .filter(|a| !a.is_empty() && !a.to_ascii_lowercase().contains(&me))
                        .map(str::to_string)
                        .collect();
                    d.cc = others.join(", ");
                }
                d.subject = prefixed("Re:", &h.subject);
                d.in_reply_to = msgid.clone();
                d.references = format!("{original_refs} {msgid}").trim().to_string();
                d.replied = format!("{mailbox}/{uid}");
                d.body = format!(
                    "\n\nOn {}, {} wrote:\n{}{}",
                    routes::display_date(o.data.entry.internal_date),
                    h.from,
                    quote(&text),
                    d.body
                );
            }
            "forward" => {
                d.subject = prefixed("Fwd:", &h.subject);
                d.body = format!(
                    "\n\n---------- Forwarded message ----------\nFrom: {}\nDate: {}\nSubject: {}\nTo: {}\n\n{}{}",
                    h.from, routes::display_date(o.data.entry.internal_date), h.subject, h.to, text, d.body
                );
            }
            "attach" => {
                d.subject = prefixed("Fwd:", &h.subject);
                d.attach = format!("{mailbox}/{uid}");
            }
            _ => return Err(WebError::BadRequest("unknown compose mode".into())),
        }
    }
    let boxes = routes::mailboxes(&app, &user).await?;
    let folders = routes::folder_list(&boxes);
    let chrome = pages::Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &folders,
        current: None,
        view: "compose",
        query: "",
        since: None,
    };
    let suggestions = crate::settings::correspondents(&app, &user).await?;
    Ok(pages::compose(
        &chrome,
        &ComposeView {
            draft: d,
            error: None,
            error_field: None,
            stored,
            suggestions,
            identities: senders(&identities),
        },
    ))
}

/// The From choices of the form: each identity's address and the text
/// its signature adds.
fn senders(identities: &[crate::identities::Identity]) -> Vec<(String, String)> {
    identities
        .iter()
        .map(|i| {
            (
                i.email.clone(),
                crate::identities::signature_block(&i.text_signature),
            )
        })
        .collect()
}

/// The Drafts folder of the account.
fn drafts_of(boxes: &[store::MailboxInfo]) -> Result<MailboxId, WebError> {
    crate::actions::special(boxes, "\\Drafts").ok_or(WebError::NotFound)
}

/// A draft's attachments as the form lists them.
async fn attachments_of(
    app: &App,
    o: &routes::Opened,
) -> Result<Vec<(usize, String, u64)>, WebError> {
    let mut out = Vec::new();
    for l in o.leaves.iter().filter(|l| l.attachment) {
        let name = crate::read::file_name(&*app.ctx.store, o.data.entry.blob, l)
            .await?
            .unwrap_or_else(|| format!("part-{}", l.number));
        out.push((l.number, name, l.part.body_len));
    }
    Ok(out)
}

/// A stored draft, read back into the form's fields.
async fn reopen(
    app: &App,
    user: &User,
    mailbox: MailboxId,
    uid: Uid,
) -> Result<(Draft, StoredDraft), WebError> {
    let boxes = routes::mailboxes(app, user).await?;
    if drafts_of(&boxes)? != mailbox {
        return Err(WebError::BadRequest("only a draft can be edited".into()));
    }
    let o = routes::open(app, user, mailbox, uid).await?;
    let h = &o.data.headers;
    let raw = |name: &str| routes::header_field(&o.data.header, name);
    let or_raw = |indexed: &str, name: &str| {
        if indexed.is_empty() {
            raw(name)
        } else {
            indexed.to_string()
        }
    };
    let from = routes::header_field(&o.data.header, "from");
    let from = match (from.rfind('<'), from.rfind('>')) {
        (Some(a), Some(b)) if a < b => from[a + 1..b].to_string(),
        _ => from,
    };
    let mut d = Draft {
        from,
        to: or_raw(&h.to, "to"),
        cc: or_raw(&h.cc, "cc"),
        bcc: raw("bcc"),
        subject: h.subject.clone(),
        body: routes::text_of(app, &o).await?.replace("\r\n", "\n"),
        in_reply_to: raw("in-reply-to"),
        references: raw("references"),
        ..Default::default()
    };
    d.replied = answered(app, &boxes, mailbox, &d.in_reply_to)
        .await?
        .unwrap_or_default();
    let attachments = attachments_of(app, &o).await?;
    Ok((d, StoredDraft { uid, attachments }))
}

/// The message a reopened draft answers, as `mailbox/uid`: found by the
/// Message-ID its In-Reply-To names (RFC 5322 §3.6.4), in any of the
/// account's mailboxes but Drafts, so that sending the draft marks that
/// message `\Answered` as sending the reply at once would have.
async fn answered(
    app: &App,
    boxes: &[store::MailboxInfo],
    drafts: MailboxId,
    in_reply_to: &str,
) -> Result<Option<String>, WebError> {
    let ids = id_list(in_reply_to);
    let Some(id) = ids.split_whitespace().next() else {
        return Ok(None);
    };
    for b in boxes.iter().filter(|b| b.id != drafts) {
        let key = store::SearchKey::Header("Message-ID".into(), id.to_string());
        if let Some(uid) = app.ctx.store.search(b.id, &key).await?.first() {
            return Ok(Some(format!("{}/{uid}", b.id)));
        }
    }
    Ok(None)
}

/// Reads one text field, refusing one longer than `max`.
async fn text_field(
    field: axum::extract::multipart::Field<'_>,
    max: usize,
) -> Result<String, WebError> {
    let mut field = field;
    let mut buf = Vec::new();
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|e| WebError::BadRequest(e.to_string()))?
    {
        if buf.len() + chunk.len() > max {
            return Err(WebError::BadRequest("a form field is too long".into()));
        }
        buf.extend_from_slice(&chunk);
    }
    String::from_utf8(buf).map_err(|_| WebError::BadRequest("a form field is not UTF-8".into()))
}

/// Everything decided before the first byte is stored.
struct Prepared {
    sending: bool,
    /// The form cannot be sent as it is: it is shown again.
    error: Option<FormError>,
    /// The stored draft the form edits (replaced once this one is
    /// stored), and its attachments kept in the new message.
    old: Option<routes::Opened>,
    kept: Vec<crate::read::Leaf>,
    recipients: Vec<String>,
    drafts: MailboxId,
    boxes: Vec<store::MailboxInfo>,
    attach: Option<routes::Opened>,
    boundary: String,
    message_id: String,
}

/// The recipients of a form to send, or what to fix first.
fn recipients_of(app: &App, d: &Draft) -> Result<Vec<String>, FormError> {
    let mut all = Vec::new();
    for (field, value) in [("to", &d.to), ("cc", &d.cc), ("bcc", &d.bcc)] {
        match parse_addresses(value) {
            Ok(a) => all.extend(a),
            Err(WebError::BadRequest(why)) => {
                return Err(FormError {
                    field: Some(field),
                    message: format!("{why}; nothing was sent. Fix it and send again."),
                })
            }
            Err(e) => {
                return Err(FormError {
                    field: Some(field),
                    message: e.to_string(),
                })
            }
        }
    }
    if all.is_empty() {
        return Err(FormError {
            field: Some("to"),
            message: "Add at least one recipient.".into(),
        });
    }
    crate::outgoing::check_recipients(&app.ctx, &all).map_err(|why| FormError {
        field: Some("to"),
        message: why,
    })?;
    Ok(all)
}

/// Checks the form's text fields. A form that cannot be sent is stored
/// as a draft instead, with the reason in [`Prepared::error`].
async fn prepare(
    app: &App,
    user: &User,
    d: &Draft,
    action: &str,
    old: Option<Uid>,
    keep: &[usize],
) -> Result<(Prepared, Vec<u8>), WebError> {
    let mut sending = match action {
        "send" => true,
        "draft" => false,
        _ => return Err(WebError::BadRequest("send or save?".into())),
    };
    let boxes = routes::mailboxes(app, user).await?;
    let drafts = drafts_of(&boxes)?;
    let mut error = None;
    let recipients = if sending {
        match recipients_of(app, d) {
            Ok(r) => r,
            Err(e) => {
                error = Some(e);
                sending = false;
                Vec::new()
            }
        }
    } else {
        Vec::new()
    };
    let old = match old {
        Some(uid) => routes::open(app, user, drafts, uid).await.ok(),
        None => None,
    };
    let kept = old
        .as_ref()
        .map(|o| {
            o.leaves
                .iter()
                .filter(|l| l.attachment && keep.contains(&l.number))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    let attach = match d.attach.split_once('/') {
        Some((m, u)) => {
            let m = m.parse().map_err(|_| WebError::NotFound)?;
            let u = u.parse().map_err(|_| WebError::NotFound)?;
            Some(routes::open(app, user, m, u).await?)
        }
        None => None,
    };
    let settings = app.ctx.store.web_settings(user.account).await?;
    let identities = crate::identities::load(app, user).await?;
    let identity = if d.from.trim().is_empty() {
        identities.first()
    } else {
        identities
            .iter()
            .find(|i| i.email.eq_ignore_ascii_case(d.from.trim()))
    };
    let (from_name, from) = match identity {
        Some(i) if !i.name.trim().is_empty() => (i.name.clone(), i.email.clone()),
        Some(i) => (settings.display_name.clone(), i.email.clone()),
        None if d.from.trim().is_empty() => (settings.display_name.clone(), user.address.clone()),
        None => {
            return Err(WebError::BadRequest(format!(
                "{:?} is not an address this account sends from",
                d.from
            )))
        }
    };
    let domain = user
        .address
        .rsplit_once('@')
        .map_or("localhost", |(_, d)| d);
    let message_id = format!("{}@{domain}", session::new_token());
    let boundary = format!("=_{}", &session::new_token()[..24]);
    let head = head(d, &from_name, &from, &message_id, &boundary, !sending)?;
    Ok((
        Prepared {
            sending,
            error,
            old,
            kept,
            recipients,
            drafts,
            boxes,
            attach,
            boundary,
            message_id,
        },
        head,
    ))
}

/// Streams one uploaded file into the message as a base64 part.
async fn write_file(
    writer: &mut dyn MessageWriter,
    field: &mut axum::extract::multipart::Field<'_>,
    boundary: &str,
) -> Result<bool, WebError> {
    let name = field
        .file_name()
        .unwrap_or("")
        .replace(['\r', '\n', '/', '\\'], "_");
    if name.is_empty() {
        // An empty file input.
        while field
            .chunk()
            .await
            .map_err(|e| WebError::BadRequest(e.to_string()))?
            .is_some()
        {}
        return Ok(false);
    }
    let ctype = upload_type(field.content_type());
    writer
        .write(&attachment_header(boundary, &ctype, &name))
        .await?;
    let mut enc = Base64Lines::default();
    let mut encoded = Vec::new();
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|e| WebError::BadRequest(e.to_string()))?
    {
        encoded.clear();
        enc.push(&chunk, &mut encoded);
        writer.write(&encoded).await?;
    }
    encoded.clear();
    enc.finish_line(&mut encoded);
    writer.write(&encoded).await?;
    Ok(true)
}

/// The attachments kept from the draft this one replaces, the forwarded
/// original, byte for byte, and the closing boundary.
async fn write_end(
    app: &App,
    writer: &mut dyn MessageWriter,
    p: &Prepared,
) -> Result<(), WebError> {
    if let Some(old) = &p.old {
        for leaf in &p.kept {
            // The part as stored: its header and its still-encoded body.
            writer
                .write(format!("\r\n--{}\r\n", p.boundary).as_bytes())
                .await?;
            let mut bytes = std::pin::pin!(crate::read::stream_range(
                Arc::clone(&app.ctx.store),
                old.data.entry.blob,
                leaf.part.header_offset,
                leaf.part.header_len + leaf.part.body_len,
                crate::read::Decoder::Identity,
            ));
            while let Some(piece) = futures_util::StreamExt::next(&mut bytes).await {
                let piece = piece.map_err(|e| {
                    WebError::Store(store::StoreError::Invalid(format!(
                        "reading a draft's attachment: {e}"
                    )))
                })?;
                writer.write(&piece).await?;
            }
        }
    }
    if let Some(o) = &p.attach {
        let subject = if o.data.headers.subject.is_empty() {
            "message".to_string()
        } else {
            o.data.headers.subject.clone()
        };
        let fname: String = subject
            .chars()
            .filter(|c| !c.is_control() && *c != '"' && *c != '\\')
            .take(60)
            .collect();
        let fname = encode_words(&fname);
        writer
            .write(format!("\r\n--{}\r\nContent-Type: message/rfc822\r\nContent-Disposition: attachment; filename=\"{fname}.eml\"\r\n\r\n", p.boundary).as_bytes())
            .await?;
        let mut seq = 0;
        while let Some(chunk) = app.ctx.store.read_chunk(o.data.entry.blob, seq).await? {
            writer.write(&chunk).await?;
            seq += 1;
        }
    }
    writer
        .write(format!("\r\n--{}--\r\n", p.boundary).as_bytes())
        .await?;
    Ok(())
}

/// `POST /compose`: saves a draft or sends, streaming the upload.
pub(crate) async fn submit(
    State(app): State<Arc<App>>,
    user: User,
    headers: HeaderMap,
    mut form: Multipart,
) -> Result<Response, WebError> {
    session::check_same_origin(&headers)?;
    let bad = |e: axum::extract::multipart::MultipartError| WebError::BadRequest(e.to_string());
    let mut d = Draft::default();
    let mut action = String::new();
    let mut old: Option<Uid> = None;
    let mut keep: Vec<usize> = Vec::new();
    let mut csrf_ok = false;
    let mut files = 0;
    let mut uploaded = 0;
    let mut open: Option<(Prepared, Box<dyn MessageWriter>)> = None;
    // Text fields come first (the form puts the file input last); the
    // CSRF token must be the very first field, before anything is stored.
    loop {
        let next = form.next_field().await;
        let mut field = match next {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) => {
                if let Some((_, w)) = open.take() {
                    w.abort().await;
                }
                return Err(bad(e));
            }
        };
        let name = field.name().unwrap_or("").to_string();
        if !csrf_ok {
            if name != "csrf" {
                return Err(WebError::Forbidden("the form's security token is missing"));
            }
            user.check_csrf(Some(&text_field(field, 256).await?))?;
            csrf_ok = true;
            continue;
        }
        if field.file_name().is_some() {
            if open.is_none() {
                open = Some(start(&app, &user, &d, &action, old, &keep).await?);
            }
            let Some((p, w)) = open.as_mut() else {
                continue;
            };
            files += 1;
            let result = if files > MAX_FILES {
                Err(WebError::BadRequest("too many attachments".into()))
            } else {
                write_file(&mut **w, &mut field, &p.boundary).await
            };
            match result {
                Ok(written) => uploaded += usize::from(written),
                Err(e) => {
                    if let Some((_, w)) = open.take() {
                        w.abort().await;
                    }
                    return Err(e);
                }
            }
            continue;
        }
        if open.is_some() {
            if let Some((_, w)) = open.take() {
                w.abort().await;
            }
            return Err(WebError::BadRequest("form fields after the files".into()));
        }
        let max = if name == "body" {
            MAX_TEXT_FIELD
        } else {
            64 * 1024
        };
        let value = text_field(field, max).await?;
        match name.as_str() {
            "from" => d.from = value,
            "to" => d.to = value,
            "cc" => d.cc = value,
            "bcc" => d.bcc = value,
            "subject" => d.subject = value,
            "body" => d.body = value,
            "in_reply_to" => d.in_reply_to = value,
            "references" => d.references = value,
            "attach" => d.attach = value,
            "replied" => d.replied = value,
            "action" => action = value,
            "draft" => old = value.parse().ok(),
            "keep" => keep.extend(value.parse::<usize>().ok()),
            _ => {}
        }
    }
    if !csrf_ok {
        return Err(WebError::Forbidden("the form's security token is missing"));
    }
    let (p, mut writer) = match open.take() {
        Some(o) => o,
        None => start(&app, &user, &d, &action, old, &keep).await?,
    };
    if let Some(error) = &p.error {
        // Nothing uploaded would be lost: the form alone comes back, and
        // nothing is stored.
        if uploaded == 0 && p.kept.is_empty() && p.attach.is_none() {
            writer.abort().await;
            let stored = p.old.as_ref().map(|o| StoredDraft {
                uid: o.data.entry.uid,
                attachments: Vec::new(),
            });
            return compose_error(&app, &user, d, error, stored).await;
        }
    }
    if let Err(e) = write_end(&app, &mut *writer, &p).await {
        writer.abort().await;
        return Err(e);
    }
    let receipt = writer
        .deliver(Delivery {
            sender: user.address.clone(),
            mailboxes: vec![p.drafts],
            flags: FLAG_DRAFT | FLAG_SEEN,
            ..Default::default()
        })
        .await?;
    let uid = receipt
        .entries
        .first()
        .map(|e| e.1)
        .ok_or(WebError::NotFound)?;
    // The new draft replaces the one this form edited.
    if let Some(o) = &p.old {
        app.ctx.store.expunge(p.drafts, &[o.data.entry.uid]).await?;
    }
    if let Some(error) = &p.error {
        // The uploads are kept in the new draft, which the form now edits.
        let o = routes::open(&app, &user, p.drafts, uid).await?;
        let attachments = attachments_of(&app, &o).await?;
        let mut d = d;
        d.attach.clear();
        return compose_error(
            &app,
            &user,
            d,
            error,
            Some(StoredDraft { uid, attachments }),
        )
        .await;
    }
    if !p.sending {
        return Ok(Redirect::to(&format!(
            "/compose?mode=draft&mailbox={}&uid={uid}",
            p.drafts
        ))
        .into_response());
    }
    let sent = crate::outgoing::send(&app.ctx, &user, p.drafts, uid, &p.recipients).await?;
    let replied = d
        .replied
        .split_once('/')
        .and_then(|(m, u)| Some((m.parse::<MailboxId>().ok()?, u.parse::<Uid>().ok()?)));
    if let Some((m, u)) = replied {
        if routes::owned(&p.boxes, m).is_ok() {
            app.ctx
                .store
                .update_flags(
                    m,
                    &[u],
                    store::FlagChange::Add,
                    store::FLAG_ANSWERED,
                    &[],
                    None,
                )
                .await?;
        }
    }
    tracing::info!(account = %user.address, recipients = p.recipients.len(), message_id = %p.message_id, "webmail sent");
    Ok(Redirect::to(&format!("/mail/{}/{}", sent.0, sent.1)).into_response())
}

/// Opens the message being written: checks the form and writes its
/// header and text.
async fn start(
    app: &App,
    user: &User,
    d: &Draft,
    action: &str,
    old: Option<Uid>,
    keep: &[usize],
) -> Result<(Prepared, Box<dyn MessageWriter>), WebError> {
    let (p, head) = prepare(app, user, d, action, old, keep).await?;
    let mut w = app.ctx.store.message_writer();
    if let Err(e) = w.write(&head).await {
        w.abort().await;
        return Err(e.into());
    }
    Ok((p, w))
}

/// The form again, whole, with what to fix (422).
async fn compose_error(
    app: &App,
    user: &User,
    draft: Draft,
    error: &FormError,
    stored: Option<StoredDraft>,
) -> Result<Response, WebError> {
    let boxes = routes::mailboxes(app, user).await?;
    let folders = routes::folder_list(&boxes);
    let chrome = pages::Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &folders,
        current: None,
        view: "compose",
        query: "",
        since: None,
    };
    let suggestions = crate::settings::correspondents(app, user).await?;
    let identities = senders(&crate::identities::load(app, user).await?);
    Ok((
        axum::http::StatusCode::UNPROCESSABLE_ENTITY,
        pages::compose(
            &chrome,
            &ComposeView {
                draft,
                error: Some(error.message.clone()),
                error_field: error.field,
                stored,
                suggestions,
                identities,
            },
        ),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_checked() {
        assert_eq!(
            parse_addresses("Bob <bob@example.org>, carol@example.net;").unwrap(),
            ["bob@example.org", "carol@example.net"]
        );
        assert!(parse_addresses("bob").is_err());
        assert!(parse_addresses("a@b.c\r\nBcc: x@y.z").is_err());
        assert!(parse_addresses("<a b@c.d>").is_err());
    }

    #[test]
    fn header_text_is_encoded_and_cannot_inject_fields() {
        let d = Draft {
            to: "b@example.org".into(),
            subject: "héllo\r\nBcc: x@evil.test".into(),
            ..Default::default()
        };
        let h = String::from_utf8(head(&d, "Zoë", "a@example.org", "id@x", "B", false).unwrap())
            .unwrap();
        assert!(h.contains("Subject: =?utf-8?b?"), "{h}");
        assert!(!h.contains("Bcc:"), "{h}");
        assert!(
            h.contains("From: =?utf-8?b?Wm/Dqw==?= <a@example.org>"),
            "{h}"
        );
        let d = Draft {
            bcc: "hidden@example.org".into(),
            ..d
        };
        assert!(
            !String::from_utf8(head(&d, "", "a@example.org", "i@x", "B", false).unwrap())
                .unwrap()
                .contains("hidden")
        );
        assert!(
            String::from_utf8(head(&d, "", "a@example.org", "i@x", "B", true).unwrap())
                .unwrap()
                .contains("Bcc: hidden@example.org")
        );
    }

    #[test]
    fn a_draft_keeps_an_address_as_typed_but_a_sent_message_does_not() {
        let d = Draft {
            to: "bob at example.org\r\nBcc: x@evil.test".into(),
            ..Default::default()
        };
        let h =
            String::from_utf8(head(&d, "", "a@example.org", "i@x", "B", true).unwrap()).unwrap();
        assert!(
            h.contains("To: bob at example.orgBcc: x@evil.test\r\n"),
            "{h}"
        );
        assert!(!h.contains("\r\nBcc: x@"), "{h}");
        assert!(head(&d, "", "a@example.org", "i@x", "B", false).is_err());
    }

    proptest::proptest! {
        #[test]
        fn base64_lines_decode_back(data in proptest::collection::vec(proptest::num::u8::ANY, 0..1000), size in 1usize..200) {
            let mut enc = Base64Lines::default();
            let mut out = Vec::new();
            for piece in data.chunks(size) { enc.push(piece, &mut out); }
            enc.finish_line(&mut out);
            let text = String::from_utf8(out).unwrap();
            proptest::prop_assert!(text.split("\r\n").all(|l| l.len() <= 76));
            let joined: String = text.split("\r\n").collect();
            proptest::prop_assert_eq!(base64::engine::general_purpose::STANDARD.decode(joined).unwrap(), data);
        }
    }
}
