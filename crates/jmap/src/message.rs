//! What an Email is made of (RFC 8621 §4.1): header fields in their
//! parsed forms (§4.1.2), the body parts from the MIME structure the
//! store computed at delivery (§4.1.4), and decoded body values. Parts
//! are read from the stored blob by byte range, one chunk at a time,
//! never the whole message.

use std::sync::Arc;

use mail_parser::{Address, HeaderForm, HeaderName, HeaderValue, MessageParser, MimeHeaders};
use mime_tree::{ContentDecoder, MessageStructure, Part, PartKind, TransferEncoding};
use serde_json::{json, Map, Value};
use store::{BlobId, Store, StoreError, CHUNK_SIZE};

/// Longest part header read for its fields.
const MAX_PART_HEADER: u64 = 16 * 1024;
/// Longest body value decoded, whatever maxBodyValueBytes asks.
pub(crate) const MAX_BODY_VALUE: usize = 16 * 1024 * 1024;
/// Characters of a preview (§4.1.4: at most 256).
const PREVIEW_CHARS: usize = 256;

/// Reads byte ranges of one blob, keeping the last chunk read.
pub(crate) struct BlobReader {
    store: Arc<dyn Store>,
    blob: BlobId,
    cached: Option<(u32, Vec<u8>)>,
}

impl BlobReader {
    pub(crate) fn new(store: Arc<dyn Store>, blob: BlobId) -> BlobReader {
        BlobReader {
            store,
            blob,
            cached: None,
        }
    }

    async fn chunk(&mut self, seq: u32) -> Result<Option<&[u8]>, StoreError> {
        if self.cached.as_ref().map(|(s, _)| *s) != Some(seq) {
            match self.store.read_chunk(self.blob, seq).await? {
                Some(data) => self.cached = Some((seq, data)),
                None => return Ok(None),
            }
        }
        Ok(self.cached.as_ref().map(|(_, d)| d.as_slice()))
    }

    /// Up to `max` bytes of `[offset, offset + len)`.
    pub(crate) async fn range(
        &mut self,
        offset: u64,
        len: u64,
        max: usize,
    ) -> Result<Vec<u8>, StoreError> {
        let want = len.min(max as u64) as usize;
        let mut out = Vec::with_capacity(want.min(CHUNK_SIZE));
        let mut at = offset;
        while out.len() < want {
            let seq = (at / CHUNK_SIZE as u64) as u32;
            let skip = (at % CHUNK_SIZE as u64) as usize;
            let Some(chunk) = self.chunk(seq).await? else {
                break;
            };
            if skip >= chunk.len() {
                break;
            }
            let take = (chunk.len() - skip).min(want - out.len());
            out.extend_from_slice(&chunk[skip..skip + take]);
            at += take as u64;
        }
        Ok(out)
    }
}

/// A parsed form of a header field (§4.1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    Raw,
    Text,
    Addresses,
    GroupedAddresses,
    MessageIds,
    Date,
    Urls,
}

/// A `header:{name}[:as{Form}][:all]` property, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderProperty {
    pub name: String,
    pub form: Form,
    pub all: bool,
}

/// Reads a `header:` property name; `None` when it is not one, or names
/// a form the field cannot take.
pub(crate) fn header_property(p: &str) -> Option<HeaderProperty> {
    let rest = p.strip_prefix("header:")?;
    let mut parts = rest.split(':');
    let name = parts.next()?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        return None;
    }
    let mut form = Form::Raw;
    let mut all = false;
    for (i, piece) in parts.enumerate() {
        match piece {
            "all" => all = true,
            _ if i == 0 => {
                form = match piece {
                    "asRaw" => Form::Raw,
                    "asText" => Form::Text,
                    "asAddresses" => Form::Addresses,
                    "asGroupedAddresses" => Form::GroupedAddresses,
                    "asMessageIds" => Form::MessageIds,
                    "asDate" => Form::Date,
                    "asURLs" => Form::Urls,
                    _ => return None,
                }
            }
            _ => return None,
        }
        if all && piece != "all" {
            return None;
        }
    }
    if !form_allowed(name, form) {
        return None;
    }
    Some(HeaderProperty {
        name: name.to_string(),
        form,
        all,
    })
}

/// §4.1.2: the forms each known field may be read as (others: any).
fn form_allowed(name: &str, form: Form) -> bool {
    let n = name.to_ascii_lowercase();
    let addresses = [
        "from",
        "sender",
        "reply-to",
        "to",
        "cc",
        "bcc",
        "resent-from",
        "resent-sender",
        "resent-reply-to",
        "resent-to",
        "resent-cc",
        "resent-bcc",
    ];
    let ids = [
        "message-id",
        "in-reply-to",
        "references",
        "resent-message-id",
    ];
    let dates = ["date", "resent-date"];
    let urls = [
        "list-help",
        "list-unsubscribe",
        "list-subscribe",
        "list-post",
        "list-owner",
        "list-archive",
    ];
    let text = ["subject", "comments", "keywords", "list-id"];
    let allowed: &[Form] = if addresses.contains(&n.as_str()) {
        &[Form::Raw, Form::Addresses, Form::GroupedAddresses]
    } else if ids.contains(&n.as_str()) {
        &[Form::Raw, Form::MessageIds]
    } else if dates.contains(&n.as_str()) {
        &[Form::Raw, Form::Date]
    } else if urls.contains(&n.as_str()) {
        &[Form::Raw, Form::Urls]
    } else if text.contains(&n.as_str()) {
        &[Form::Raw, Form::Text]
    } else {
        return true;
    };
    allowed.contains(&form)
}

/// The raw values of every instance of a field in a header block
/// (§4.1.2.1: from after the colon to before the line end, unfolded
/// nothing), in order.
pub(crate) fn raw_values(header: &[u8], name: &str) -> Vec<String> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut current: Option<usize> = None;
    for line in header.split_inclusive(|&b| b == b'\n') {
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        if content.is_empty() {
            break;
        }
        if content[0] == b' ' || content[0] == b'\t' {
            if let Some(i) = current {
                out[i].extend_from_slice(b"\r\n");
                out[i].extend_from_slice(content);
            }
            continue;
        }
        current = None;
        if let Some(colon) = content.iter().position(|&b| b == b':') {
            if content[..colon]
                .trim_ascii()
                .eq_ignore_ascii_case(name.as_bytes())
            {
                out.push(content[colon + 1..].to_vec());
                current = Some(out.len() - 1);
            }
        }
    }
    out.into_iter()
        .map(|v| String::from_utf8_lossy(&v).into_owned())
        .collect()
}

/// The instances of a field in a parsed form, as JSON values.
fn parsed_values(header: &[u8], name: &str, form: Form) -> Vec<Value> {
    if form == Form::Raw {
        return raw_values(header, name)
            .into_iter()
            .map(Value::from)
            .collect();
    }
    // mail-parser reads each instance in the form asked for.
    let Some(parsed) = MessageParser::default().parse_headers(header) else {
        return Vec::new();
    };
    let mail_form = match form {
        Form::Raw => HeaderForm::Raw,
        Form::Text => HeaderForm::Text,
        Form::Addresses => HeaderForm::Addresses,
        Form::GroupedAddresses => HeaderForm::GroupedAddresses,
        Form::MessageIds => HeaderForm::MessageIds,
        Form::Date => HeaderForm::Date,
        Form::Urls => HeaderForm::URLs,
    };
    let header_name: HeaderName = HeaderName::parse(name.to_string())
        .unwrap_or_else(|| HeaderName::Other(name.to_string().into()));
    parsed
        .header_as(header_name, mail_form)
        .iter()
        .map(|v| json_form(v, form))
        .collect()
}

fn addr_json(a: &mail_parser::Addr) -> Value {
    json!({
        "name": a.name.as_deref(),
        "email": a.address.as_deref().unwrap_or(""),
    })
}

/// A parsed header value as §4.1.2 writes each form.
fn json_form(v: &HeaderValue, form: Form) -> Value {
    match form {
        Form::Raw => Value::Null,
        Form::Text => match v {
            HeaderValue::Text(t) => t.trim().into(),
            HeaderValue::TextList(l) => l.join(",").into(),
            HeaderValue::Empty => "".into(),
            _ => Value::Null,
        },
        Form::Addresses => match v {
            HeaderValue::Address(Address::List(l)) => l.iter().map(addr_json).collect(),
            HeaderValue::Address(Address::Group(g)) => g
                .iter()
                .flat_map(|g| g.addresses.iter().map(addr_json))
                .collect(),
            _ => json!([]),
        },
        Form::GroupedAddresses => match v {
            HeaderValue::Address(Address::List(l)) => {
                json!([{"name": null, "addresses": l.iter().map(addr_json).collect::<Vec<_>>()}])
            }
            HeaderValue::Address(Address::Group(g)) => g
                .iter()
                .map(|g| {
                    json!({
                        "name": g.name.as_deref(),
                        "addresses": g.addresses.iter().map(addr_json).collect::<Vec<_>>(),
                    })
                })
                .collect(),
            _ => json!([]),
        },
        Form::MessageIds => match v {
            HeaderValue::Text(t) => json!([t]),
            HeaderValue::TextList(l) => l.iter().map(|t| Value::from(t.as_ref())).collect(),
            _ => Value::Null,
        },
        Form::Date => match v {
            HeaderValue::DateTime(d) if d.is_valid() => utc_or_offset(d).into(),
            _ => Value::Null,
        },
        Form::Urls => match v {
            HeaderValue::Address(Address::List(l)) => l
                .iter()
                .filter_map(|a| a.address.as_deref().map(Value::from))
                .collect(),
            _ => Value::Null,
        },
    }
}

/// A Date with its zone (§1.4 of RFC 8620: `Z` for UTC).
fn utc_or_offset(d: &mail_parser::DateTime) -> String {
    let s = d.to_rfc3339();
    match s.strip_suffix("+00:00") {
        Some(base) => format!("{base}Z"),
        None if s.len() == 19 => format!("{s}Z"),
        None => s,
    }
}

/// The value of a `header:` property for a header block.
pub(crate) fn header_value(header: &[u8], p: &HeaderProperty) -> Value {
    let values = parsed_values(header, &p.name, p.form);
    if p.all {
        Value::Array(values)
    } else {
        values.into_iter().last().unwrap_or(Value::Null)
    }
}

/// A UTCDate of seconds since the epoch (RFC 8620 §1.4).
pub(crate) fn utc_date(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rest = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// Seconds since the epoch of a UTCDate or Date (`...Z` or `...+hh:mm`).
pub(crate) fn parse_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" => 0,
        _ if rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && &rest[3..4] == ":" =>
        {
            let oh: i64 = rest[1..3].parse().ok()?;
            let om: i64 = rest[4..6].parse().ok()?;
            let o = oh * 3600 + om * 60;
            if rest.starts_with('-') {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    // Days from civil (inverse of utc_date).
    let (yy, mm) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + se - offset)
}

/// A leaf or multipart of the structure with its JMAP part id (IMAP's
/// section number, RFC 3501 §6.4.5).
#[derive(Debug, Clone)]
pub(crate) struct Node<'a> {
    pub part: &'a Part,
    /// `None` for a multipart (§4.1.4: multiparts have no partId).
    pub part_id: Option<String>,
    pub children: Vec<Node<'a>>,
}

/// The tree of a message's parts, numbered as IMAP sections.
pub(crate) fn tree(structure: &MessageStructure) -> Node<'_> {
    fn walk<'a>(part: &'a Part, id: String, top: bool) -> Node<'a> {
        match &part.kind {
            PartKind::Multipart(children) => Node {
                part,
                part_id: None,
                children: children
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let n = i + 1;
                        let cid = if top {
                            n.to_string()
                        } else {
                            format!("{id}.{n}")
                        };
                        walk(c, cid, false)
                    })
                    .collect(),
            },
            _ => Node {
                part,
                part_id: Some(id),
                children: Vec::new(),
            },
        }
    }
    match &structure.root.kind {
        PartKind::Multipart(_) => walk(&structure.root, String::new(), true),
        _ => walk(&structure.root, "1".into(), true),
    }
}

/// The leaf with this part id.
pub(crate) fn find<'a>(node: &'a Node<'a>, part_id: &str) -> Option<&'a Node<'a>> {
    if node.part_id.as_deref() == Some(part_id) {
        return Some(node);
    }
    node.children.iter().find_map(|c| find(c, part_id))
}

fn media_type(p: &Part) -> String {
    format!("{}/{}", p.media_type, p.media_subtype)
}

fn is_inline_media(p: &Part) -> bool {
    matches!(p.media_type.as_str(), "image" | "audio" | "video")
}

/// §4.1.4's parseStructure: the parts a client shows as the text body,
/// the HTML body, and the attachments, in order.
pub(crate) fn body_lists<'a>(
    root: &'a Node<'a>,
) -> (Vec<&'a Node<'a>>, Vec<&'a Node<'a>>, Vec<&'a Node<'a>>) {
    let mut text = Vec::new();
    let mut html = Vec::new();
    let mut attachments = Vec::new();
    parse_structure(
        &[root],
        "mixed",
        false,
        Some(&mut html),
        Some(&mut text),
        &mut attachments,
    );
    (text, html, attachments)
}

/// The RFC's function, line by line; a body list set to null there is
/// `None` here, for the rest of that call only.
fn parse_structure<'a>(
    parts: &[&'a Node<'a>],
    multipart_type: &str,
    in_alternative: bool,
    mut html_body: Option<&mut Vec<&'a Node<'a>>>,
    mut text_body: Option<&mut Vec<&'a Node<'a>>>,
    attachments: &mut Vec<&'a Node<'a>>,
) {
    let text_length = text_body.as_ref().map(|t| t.len());
    let html_length = html_body.as_ref().map(|h| h.len());
    for (i, node) in parts.iter().enumerate() {
        let p = node.part;
        let ty = media_type(p);
        let is_multipart = node.part_id.is_none();
        let attachment = p
            .disposition
            .as_ref()
            .is_some_and(|(d, _)| d.eq_ignore_ascii_case("attachment"));
        let is_inline = !attachment
            && (ty == "text/plain" || ty == "text/html" || is_inline_media(p))
            && (i == 0 || (multipart_type != "related" && (is_inline_media(p) || !has_name(p))));
        if is_multipart {
            let sub = p.media_subtype.as_str();
            let children: Vec<&Node> = node.children.iter().collect();
            parse_structure(
                &children,
                sub,
                in_alternative || sub == "alternative",
                html_body.as_deref_mut(),
                text_body.as_deref_mut(),
                attachments,
            );
        } else if is_inline {
            if multipart_type == "alternative" {
                match ty.as_str() {
                    "text/plain" => {
                        if let Some(t) = text_body.as_deref_mut() {
                            t.push(node);
                        }
                    }
                    "text/html" => {
                        if let Some(h) = html_body.as_deref_mut() {
                            h.push(node);
                        }
                    }
                    _ => attachments.push(node),
                }
                continue;
            } else if in_alternative {
                if ty == "text/plain" {
                    html_body = None;
                }
                if ty == "text/html" {
                    text_body = None;
                }
            }
            if let Some(t) = text_body.as_deref_mut() {
                t.push(node);
            }
            if let Some(h) = html_body.as_deref_mut() {
                h.push(node);
            }
            if (text_body.is_none() || html_body.is_none()) && is_inline_media(p) {
                attachments.push(node);
            }
        } else {
            attachments.push(node);
        }
    }
    if multipart_type == "alternative" {
        if let (Some(text), Some(html)) = (text_body, html_body) {
            let (tl, hl) = (text_length.unwrap_or(0), html_length.unwrap_or(0));
            if text.len() == tl && html.len() != hl {
                text.extend(html[hl..].iter().copied());
            }
            if html.len() == hl && text.len() != tl {
                html.extend(text[tl..].iter().copied());
            }
        }
    }
}

fn has_name(p: &Part) -> bool {
    let named = |params: &[(String, String)], key: &str| {
        params
            .iter()
            .any(|(k, _)| k == key || k.starts_with(&format!("{key}*")))
    };
    named(&p.params, "name")
        || p.disposition
            .as_ref()
            .is_some_and(|(_, d)| named(d, "filename"))
}

/// The fields of one part's header, read from the blob.
pub(crate) struct PartHeader {
    pub raw: Vec<u8>,
}

impl PartHeader {
    pub(crate) async fn read(reader: &mut BlobReader, p: &Part) -> Result<PartHeader, StoreError> {
        let mut raw = reader
            .range(p.header_offset, p.header_len, MAX_PART_HEADER as usize)
            .await?;
        if !raw.ends_with(b"\n\n") && !raw.ends_with(b"\r\n\r\n") {
            raw.extend_from_slice(b"\r\n\r\n");
        }
        Ok(PartHeader { raw })
    }

    /// The decoded file name (RFC 2231 and RFC 2047 undone).
    pub(crate) fn name(&self) -> Option<String> {
        MessageParser::default()
            .parse_headers(&self.raw[..])
            .and_then(|m| m.attachment_name().map(str::to_string))
    }
}

/// An EmailBodyPart object (§4.1.4) with the properties asked for.
pub(crate) async fn body_part(
    reader: &mut BlobReader,
    blob: BlobId,
    node: &Node<'_>,
    properties: &[String],
) -> Result<Value, StoreError> {
    let p = node.part;
    let needs_header = properties
        .iter()
        .any(|x| x == "name" || x == "headers" || x.starts_with("header:"));
    let header = if needs_header {
        Some(PartHeader::read(reader, p).await?)
    } else {
        None
    };
    let mut o = Map::new();
    for prop in properties {
        let v = match prop.as_str() {
            "partId" => node.part_id.clone().map_or(Value::Null, Value::from),
            "blobId" => node
                .part_id
                .as_ref()
                .map_or(Value::Null, |id| crate::ids::part_blob(blob, id).into()),
            "size" => {
                if node.part_id.is_some() {
                    decoded_size(p).into()
                } else {
                    0.into()
                }
            }
            "headers" => {
                let raw = header
                    .as_ref()
                    .map(|h| h.raw.as_slice())
                    .unwrap_or_default();
                headers_list(raw)
            }
            "name" => header
                .as_ref()
                .and_then(PartHeader::name)
                .map_or(Value::Null, Value::from),
            "type" => media_type(p).into(),
            "charset" => {
                if p.media_type == "text" {
                    p.params
                        .iter()
                        .find(|(k, _)| k == "charset")
                        .map_or(Value::from("us-ascii"), |(_, v)| v.clone().into())
                } else {
                    p.params
                        .iter()
                        .find(|(k, _)| k == "charset")
                        .map_or(Value::Null, |(_, v)| v.clone().into())
                }
            }
            "disposition" => p
                .disposition
                .as_ref()
                .map_or(Value::Null, |(d, _)| d.to_ascii_lowercase().into()),
            "cid" => p.id.as_ref().map_or(Value::Null, |c| {
                c.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .into()
            }),
            "language" => {
                if p.language.is_empty() {
                    Value::Null
                } else {
                    json!(p.language)
                }
            }
            "location" => p.location.clone().map_or(Value::Null, Value::from),
            "subParts" => {
                if node.part_id.is_some() {
                    Value::Null
                } else {
                    let mut subs = Vec::new();
                    for c in &node.children {
                        subs.push(Box::pin(body_part(reader, blob, c, properties)).await?);
                    }
                    Value::Array(subs)
                }
            }
            other => match header_property(other) {
                Some(hp) => {
                    let raw = header
                        .as_ref()
                        .map(|h| h.raw.as_slice())
                        .unwrap_or_default();
                    header_value(raw, &hp)
                }
                None => continue,
            },
        };
        o.insert(prop.clone(), v);
    }
    Ok(Value::Object(o))
}

/// Every field of a header block as `{name, value}` (§4.1.3 `headers`),
/// values raw.
pub(crate) fn headers_list(header: &[u8]) -> Value {
    let mut out = Vec::new();
    for line in header.split_inclusive(|&b| b == b'\n') {
        let content = line.strip_suffix(b"\n").unwrap_or(line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        if content.is_empty() {
            break;
        }
        if content[0] == b' ' || content[0] == b'\t' {
            if let Some(Value::Object(last)) = out.last_mut() {
                if let Some(Value::String(v)) = last.get_mut("value") {
                    v.push_str("\r\n");
                    v.push_str(&String::from_utf8_lossy(content));
                }
            }
            continue;
        }
        if let Some(colon) = content.iter().position(|&b| b == b':') {
            out.push(json!({
                "name": String::from_utf8_lossy(&content[..colon]).trim(),
                "value": String::from_utf8_lossy(&content[colon + 1..]),
            }));
        }
    }
    Value::Array(out)
}

/// The size of a part's content once its transfer encoding is undone,
/// estimated from the encoded size as §4.1.4 allows.
fn decoded_size(p: &Part) -> u64 {
    match TransferEncoding::named(Some(&p.encoding)) {
        TransferEncoding::Base64 => p.body_len * 3 / 4,
        _ => p.body_len,
    }
}

/// A text part's content, decoded to UTF-8 and cut at `max` bytes (on a
/// character boundary): (text, cut).
pub(crate) async fn text_value(
    reader: &mut BlobReader,
    p: &Part,
    max: usize,
) -> Result<(String, bool), StoreError> {
    let max = max.min(MAX_BODY_VALUE);
    let mut raw = PartHeader::read(reader, p).await?.raw;
    // Encoded text takes at most three bytes per byte of content (QP).
    let cap = max.saturating_mul(3).saturating_add(1024);
    let body = reader.range(p.body_offset, p.body_len, cap).await?;
    let cut_raw = (body.len() as u64) < p.body_len;
    raw.extend_from_slice(&body);
    let parsed = MessageParser::default().parse(&raw[..]);
    let text = parsed
        .and_then(|m| {
            let html = p.media_subtype == "html";
            if html {
                m.body_html(0).map(|t| t.into_owned())
            } else {
                m.body_text(0).map(|t| t.into_owned())
            }
        })
        .unwrap_or_default();
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        return Ok((text[..end].to_string(), true));
    }
    Ok((text, cut_raw))
}

/// The preview (§4.1.4): the start of the first text part, white space
/// folded, at most 256 characters; HTML has its tags taken out.
pub(crate) fn preview_of(text: &str, html: bool) -> String {
    let plain = if html {
        strip_tags(text)
    } else {
        text.to_string()
    };
    preview_fold(&plain).chars().take(PREVIEW_CHARS).collect()
}

/// Text with every run of white space one space, trimmed.
pub(crate) fn preview_fold(text: &str) -> String {
    let mut out = String::new();
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            space = !out.is_empty();
            continue;
        }
        if space {
            out.push(' ');
            space = false;
        }
        out.push(c);
    }
    out
}

/// HTML as text: tags, styles and scripts out, common entities undone.
pub(crate) fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    let lower = html.to_ascii_lowercase();
    let mut skip_until: Option<&str> = None;
    let mut i = 0;
    let bytes = html.as_bytes();
    while i < bytes.len() {
        if let Some(end) = skip_until {
            match lower[i..].find(end) {
                Some(at) => {
                    i += at + end.len();
                    skip_until = None;
                    continue;
                }
                None => break,
            }
        }
        let c = html[i..].chars().next().expect("in bounds");
        if in_tag {
            if c == '>' {
                in_tag = false;
                out.push(' ');
            }
        } else if c == '<' {
            if lower[i..].starts_with("<style") {
                skip_until = Some("</style>");
                continue;
            }
            if lower[i..].starts_with("<script") {
                skip_until = Some("</script>");
                continue;
            }
            in_tag = true;
        } else {
            out.push(c);
        }
        i += c.len_utf8();
    }
    out.replace("&nbsp;", " ")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// A part's content as a stream of decoded pieces, read one chunk at a
/// time (downloads of part blobs, §6.2).
pub(crate) fn part_stream(
    store: Arc<dyn Store>,
    blob: BlobId,
    p: &Part,
) -> impl futures_util::Stream<Item = Result<axum::body::Bytes, std::io::Error>> {
    let start = p.body_offset;
    let end = p.body_offset + p.body_len;
    let decoder = ContentDecoder::new(TransferEncoding::named(Some(&p.encoding)));
    futures_util::stream::unfold((Some(decoder), start), move |(decoder, at)| {
        let store = store.clone();
        async move {
            let mut decoder = decoder?;
            let mut out = Vec::new();
            if at >= end {
                decoder.finish(&mut out);
                return (!out.is_empty()).then(|| (Ok(out.into()), (None, at)));
            }
            let seq = (at / CHUNK_SIZE as u64) as u32;
            let skip = (at % CHUNK_SIZE as u64) as usize;
            match store.read_chunk(blob, seq).await {
                Ok(Some(chunk)) if skip < chunk.len() => {
                    let take = (chunk.len() - skip).min((end - at) as usize);
                    decoder.push(&chunk[skip..skip + take], &mut out);
                    Some((Ok(out.into()), (Some(decoder), at + take as u64)))
                }
                Ok(_) => {
                    decoder.finish(&mut out);
                    Some((Ok(out.into()), (None, end)))
                }
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), (None, end))),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_properties_are_read_with_their_forms() {
        let p = header_property("header:From:asAddresses:all").unwrap();
        assert_eq!(
            (p.name.as_str(), p.form, p.all),
            ("From", Form::Addresses, true)
        );
        assert_eq!(header_property("header:X-Thing").unwrap().form, Form::Raw);
        assert!(header_property("header:X-Thing:all").unwrap().all);
        for bad in [
            "header:",
            "header:From:asDate",
            "header:Subject:asAddresses",
            "header:X:asNothing",
            "header:X:all:asText",
            "from",
        ] {
            assert_eq!(header_property(bad), None, "{bad}");
        }
    }

    #[test]
    fn header_forms_follow_the_rfc() {
        let h = b"From: \"Joe Q.\" <joe@example.com>, ann@example.org\r\nSubject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe?=\r\n  again\r\nX-A: one\r\nX-A:  two\r\nTo: Friends: a@x.org, b@x.org;, c@x.org\r\nDate: Tue, 1 Jul 2003 10:52:37 +0200\r\nReferences: <a@x> <b@x>\r\nList-Post: <mailto:list@x.org>\r\n\r\n";
        let v = |p: &str| header_value(h, &header_property(p).unwrap());
        assert_eq!(
            v("header:From:asAddresses"),
            json!([{"name": "Joe Q.", "email": "joe@example.com"}, {"name": null, "email": "ann@example.org"}])
        );
        assert_eq!(v("header:Subject:asText"), json!("Grüße again"));
        assert_eq!(v("header:x-a"), json!("  two"));
        assert_eq!(v("header:X-A:all"), json!([" one", "  two"]));
        assert_eq!(
            v("header:Subject"),
            json!(" =?UTF-8?Q?Gr=C3=BC=C3=9Fe?=\r\n  again")
        );
        assert_eq!(v("header:Date:asDate"), json!("2003-07-01T10:52:37+02:00"));
        assert_eq!(v("header:References:asMessageIds"), json!(["a@x", "b@x"]));
        assert_eq!(v("header:List-Post:asURLs"), json!(["mailto:list@x.org"]));
        let grouped = v("header:To:asGroupedAddresses");
        assert_eq!(grouped[0]["name"], "Friends");
        assert_eq!(grouped[0]["addresses"][1]["email"], "b@x.org");
        assert_eq!(v("header:Missing"), Value::Null);
        assert_eq!(v("header:Missing:all"), json!([]));
    }

    #[test]
    fn dates_round_trip() {
        assert_eq!(utc_date(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_date(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(parse_date("2023-11-14T22:13:20Z"), Some(1_700_000_000));
        assert_eq!(parse_date("2023-11-15T00:13:20+02:00"), Some(1_700_000_000));
        assert_eq!(parse_date("2023-11-14T22:13:20.5Z"), Some(1_700_000_000));
        for bad in [
            "",
            "2023-11-14",
            "2023-13-14T22:13:20Z",
            "2023-11-14T22:13:20",
            "x023-11-14T22:13:20Z",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn bodies_are_listed_as_parse_structure_says() {
        let msg = b"Content-Type: multipart/mixed; boundary=M\r\n\r\n--M\r\nContent-Type: multipart/alternative; boundary=A\r\n\r\n--A\r\nContent-Type: text/plain\r\n\r\nplain\r\n--A\r\nContent-Type: text/html\r\n\r\n<p>html</p>\r\n--A--\r\n--M\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=a.pdf\r\n\r\nPDF\r\n--M--\r\n";
        let mut b = mime_tree::StructureBuilder::new();
        b.feed(msg);
        let s = b.finish();
        let t = tree(&s);
        let (text, html, att) = body_lists(&t);
        let ids = |v: &[&Node]| {
            v.iter()
                .map(|n| n.part_id.clone().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&text), ["1.1"]);
        assert_eq!(ids(&html), ["1.2"]);
        assert_eq!(ids(&att), ["2"]);
        assert!(find(&t, "1.2").is_some());
        let mut b = mime_tree::StructureBuilder::new();
        b.feed(b"Subject: x\r\n\r\nhi\r\n");
        let s = b.finish();
        let t = tree(&s);
        let (text, html, att) = body_lists(&t);
        assert_eq!(
            (ids(&text), ids(&html), att.len()),
            (vec!["1".to_string()], vec!["1".to_string()], 0)
        );
    }

    #[test]
    fn previews_fold_space_and_drop_markup() {
        assert_eq!(preview_of("  Hello\r\n\r\n  world ", false), "Hello world");
        assert_eq!(
            preview_of("<style>p{}</style><p>Hi &amp; <b>bye</b></p>", true),
            "Hi & bye"
        );
        assert_eq!(preview_of(&"x".repeat(1000), false).len(), 256);
    }
}
