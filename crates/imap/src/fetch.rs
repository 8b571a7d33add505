//! FETCH (RFC 3501 §6.4.5) from what the store computed at delivery:
//! flags, sizes and dates from the message rows, ENVELOPE and
//! BODYSTRUCTURE from the stored structure, `BODY[HEADER]` and
//! `HEADER.FIELDS` from the stored header block, and sections as byte
//! ranges of the stored text. Large sections are streamed from the store
//! as a literal imap-codec does not hold (it would need the bytes in
//! memory): the rest of the FETCH response is still encoded by imap-codec.

use std::num::{NonZeroU32, NonZeroU64};

use imap_codec::encode::Encoder;
use imap_codec::imap_types::command::FetchModifier;
use imap_codec::imap_types::core::{IString, Literal, NString, Vec1};
use imap_codec::imap_types::datetime::DateTime;
use imap_codec::imap_types::fetch::{
    MacroOrMessageDataItemNames, MessageDataItem, MessageDataItemName, Section,
};
use imap_codec::imap_types::response::{Code, Data, Response};
use imap_codec::imap_types::sequence::SequenceSet;
use imap_codec::imap_types::IntoStatic;
use imap_codec::ResponseCodec;
use store::{MessageData, MessageEntry, Uid, CHUNK_SIZE, FLAG_SEEN};

use crate::convert;
use crate::cte::{Decoder, Encoding};
use crate::flags::flag_list;
use crate::preparse::ObjectItems;
use crate::reply::Reply;
use crate::section::{enclosed, find_part, header_fields};
use crate::session::Session;

/// Sections larger than this are streamed from the store.
const STREAM_THRESHOLD: u64 = 256 * 1024;
/// Messages whose data is read from the store at a time.
const BATCH: usize = 500;
/// Output buffered before it is sent.
const FLUSH_AT: usize = 256 * 1024;
/// How long one write to the client may take.
const SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Bytes of a section: in hand, or a range of the stored message.
enum Bytes {
    Inline(Vec<u8>),
    Range { start: u64, len: u64 },
}

/// What a literal written after the encoded part of a FETCH response
/// holds.
enum Payload {
    /// A range of the stored message, streamed as it is.
    Stored {
        blob: store::BlobId,
        start: u64,
        len: u64,
    },
    /// Bytes in hand (small decoded BINARY data).
    Ready(Vec<u8>),
    /// A range of the stored message decoded on the way (large BINARY
    /// data): of the decoded bytes, `skip` are dropped and `take` sent.
    Decoded {
        blob: store::BlobId,
        start: u64,
        len: u64,
        encoding: Encoding,
        skip: u64,
        take: u64,
    },
}

impl Payload {
    fn len(&self) -> u64 {
        match self {
            Payload::Stored { len, .. } => *len,
            Payload::Ready(v) => v.len() as u64,
            Payload::Decoded { take, .. } => *take,
        }
    }
}

/// A literal written by hand after the encoded part of a FETCH response:
/// a large section streamed from the store, or BINARY data (whose
/// `<origin>` and literal8 imap-codec does not write).
struct Deferred {
    label: Vec<u8>,
    /// RFC 3516 literal8 (`~{n}`): the data has NUL.
    literal8: bool,
    payload: Payload,
}

/// Where a BINARY section's encoded bytes are and how to decode them.
struct Source {
    start: u64,
    len: u64,
    encoding: Encoding,
}

/// The source of `BINARY[section]`; `None` when the part's
/// Content-Transfer-Encoding is one Sluice cannot decode. A part that
/// does not exist is empty. Multiparts and messages are not decoded
/// (their encoding can only be 7bit, 8bit or binary).
fn binary_source(d: &MessageData, section: &[NonZeroU32]) -> Option<Source> {
    if section.is_empty() {
        return Some(Source {
            start: 0,
            len: d.entry.size,
            encoding: Encoding::Identity,
        });
    }
    let Some(part) = find_part(&d.structure.root, section) else {
        return Some(Source {
            start: 0,
            len: 0,
            encoding: Encoding::Identity,
        });
    };
    let encoding = match part.kind {
        mime_tree::PartKind::Leaf => Encoding::from_name(&part.encoding)?,
        _ => Encoding::Identity,
    };
    Some(Source {
        start: part.body_offset,
        len: part.body_len,
        encoding,
    })
}

/// `BINARY[1.2]<origin>`.
fn binary_label(section: &[NonZeroU32], origin: Option<u32>) -> Vec<u8> {
    let parts: Vec<String> = section.iter().map(|n| n.to_string()).collect();
    let mut label = format!("BINARY[{}]", parts.join("."));
    if let Some(o) = origin {
        label.push_str(&format!("<{o}>"));
    }
    label.into_bytes()
}

/// The part of decoded bytes `[pos, pos + n)` inside the window
/// `[skip, skip + take)`, as a range of those `n` bytes.
fn window(pos: u64, n: usize, skip: u64, take: u64) -> std::ops::Range<usize> {
    let end = pos + n as u64;
    let from = skip.clamp(pos, end);
    let to = skip.saturating_add(take).clamp(pos, end);
    (from - pos) as usize..(to - pos) as usize
}

fn unknown_cte() -> Reply {
    Reply::no("Cannot decode the part's Content-Transfer-Encoding").code(Code::UnknownCte)
}

fn literal(mut bytes: Vec<u8>) -> NString<'static> {
    replace_nul(&mut bytes);
    let lit = match Literal::try_from(bytes.clone()) {
        Ok(l) => l,
        Err(_) => Literal::unvalidated(bytes),
    };
    NString(Some(IString::Literal(lit)))
}

/// An ordinary literal may not carry a NUL (RFC 3501 §4.3), and a message
/// that came by SMTP may hold one: it goes out as 0x80, as Dovecot sends
/// it, so the literal keeps its announced length (and RFC822.SIZE stays
/// true). BINARY[...] gives the real bytes, in a literal8. Mail APPENDed
/// as a literal8 has no NUL left to replace (see `append.rs`).
fn replace_nul(bytes: &mut [u8]) {
    if bytes.contains(&0) {
        for b in bytes.iter_mut().filter(|b| **b == 0) {
            *b = 0x80;
        }
    }
}

fn internal_date(secs: i64) -> Option<DateTime> {
    let utc = chrono::DateTime::from_timestamp(secs, 0)?;
    DateTime::try_from(utc.fixed_offset()).ok()
}

fn needs_data(name: &MessageDataItemName<'_>) -> bool {
    !matches!(
        name,
        MessageDataItemName::Flags
            | MessageDataItemName::Uid
            | MessageDataItemName::InternalDate
            | MessageDataItemName::Rfc822Size
            | MessageDataItemName::ModSeq
    )
}

fn marks_seen(name: &MessageDataItemName<'_>) -> bool {
    matches!(
        name,
        MessageDataItemName::BodyExt { peek: false, .. }
            | MessageDataItemName::Binary { peek: false, .. }
            | MessageDataItemName::Rfc822
            | MessageDataItemName::Rfc822Text
    )
}

/// The label imap-codec writes before a section's data (`BODY[1.2]<0>`),
/// taken from an encoding with a placeholder.
fn label_of(item: MessageDataItem<'static>) -> Vec<u8> {
    let data = Data::Fetch {
        seq: NonZeroU32::MIN,
        items: Vec1::from(item),
    };
    let bytes = ResponseCodec::default()
        .encode(&Response::Data(data))
        .dump();
    // "* 1 FETCH (" LABEL " \"\")\r\n"
    let start = b"* 1 FETCH (".len();
    let end = bytes.len() - b" \"\")\r\n".len();
    bytes[start..end].to_vec()
}

fn empty() -> NString<'static> {
    NString(Some(IString::try_from("").expect("empty quoted string")))
}

impl Session<'_> {
    pub(crate) async fn fetch(
        &mut self,
        set: &SequenceSet,
        names: MacroOrMessageDataItemNames<'_>,
        uid: bool,
        modifiers: &[FetchModifier],
    ) -> store::Result<Reply> {
        let done = if uid {
            "UID FETCH completed"
        } else {
            "FETCH completed"
        };
        let mut names: Vec<MessageDataItemName<'_>> = match names {
            MacroOrMessageDataItemNames::Macro(m) => m
                .expand()
                .into_iter()
                .map(IntoStatic::into_static)
                .collect(),
            MacroOrMessageDataItemNames::MessageDataItemNames(n) => n,
        };
        let changed_since = modifiers.iter().find_map(|m| match m {
            FetchModifier::ChangedSince(n) => Some(n.get()),
            FetchModifier::Vanished => None,
        });
        if changed_since.is_some() || names.contains(&MessageDataItemName::ModSeq) {
            self.enable_condstore();
            if !names.contains(&MessageDataItemName::ModSeq) {
                names.push(MessageDataItemName::ModSeq);
            }
        }
        // RFC 8474 §6: EMAILID and THREADID, taken out of the list before
        // imap-codec read it.
        let objects = std::mem::take(&mut self.fetch_objects);
        if objects.only && !uid {
            names.retain(|n| *n != MessageDataItemName::Uid);
        }
        if uid && !names.contains(&MessageDataItemName::Uid) {
            names.insert(0, MessageDataItemName::Uid);
        }
        let sel = self.selected.as_ref().expect("selected state");
        let messages = match sel.resolve(set, uid) {
            Ok(m) => m,
            Err(_) => {
                let r = Reply::bad("Invalid message sequence number");
                return Ok(if uid { r } else { r.no_expunge() });
            }
        };
        let mailbox = sel.info.id;
        let read_only = sel.read_only;
        let with_data = names.iter().any(needs_data);
        let set_seen = !read_only && names.iter().any(marks_seen);
        let store = std::sync::Arc::clone(&self.ctx.store);

        // Without body data, the rows alone answer (one query).
        let rows: Vec<MessageEntry> = if with_data {
            Vec::new()
        } else {
            store.list_messages(mailbox).await?
        };
        // Messages of the view whose content could not be read any more.
        let mut unreadable = 0usize;
        for batch in messages.chunks(BATCH) {
            let uids: Vec<Uid> = batch.iter().map(|(_, u)| *u).collect();
            let mut datas: Vec<MessageData> = if with_data {
                store.message_data(mailbox, &uids).await?
            } else {
                Vec::new()
            };
            if with_data {
                unreadable += uids.len() - datas.len();
            }
            let mut entries: Vec<MessageEntry> = if with_data {
                datas.iter().map(|d| d.entry.clone()).collect()
            } else {
                let (mut found, mut gone) = (Vec::new(), Vec::new());
                for &u in &uids {
                    match rows.binary_search_by_key(&u, |e| e.uid) {
                        Ok(i) => found.push(rows[i].clone()),
                        Err(_) => gone.push(u),
                    }
                }
                if !gone.is_empty() {
                    // Expunged by another session, still in this view: the
                    // tombstones keep what they were (RFC 2180 §4.1.1).
                    let kept = store.message_data(mailbox, &gone).await?;
                    unreadable += gone.len() - kept.len();
                    found.extend(kept.into_iter().map(|d| d.entry));
                    found.sort_by_key(|e| e.uid);
                }
                found
            };
            let threads: std::collections::HashMap<store::BlobId, i64> = if objects.thread_id {
                let blobs: Vec<store::BlobId> = entries.iter().map(|e| e.blob).collect();
                store
                    .account_emails(self.account_id(), Some(&blobs))
                    .await?
                    .into_iter()
                    .map(|e| (e.blob, e.thread))
                    .collect()
            } else {
                Default::default()
            };
            let mut now_seen: Vec<Uid> = Vec::new();
            if set_seen {
                let unseen: Vec<Uid> = entries
                    .iter()
                    .filter(|e| e.flags & FLAG_SEEN == 0)
                    .map(|e| e.uid)
                    .collect();
                if !unseen.is_empty() {
                    let changed = store
                        .update_flags(
                            mailbox,
                            &unseen,
                            store::FlagChange::Add,
                            FLAG_SEEN,
                            &[],
                            None,
                        )
                        .await?;
                    for c in changed {
                        if let Ok(i) = entries.binary_search_by_key(&c.uid, |e| e.uid) {
                            entries[i] = c.clone();
                        }
                        if let Ok(i) = datas.binary_search_by_key(&c.uid, |d| d.entry.uid) {
                            datas[i].entry = c.clone();
                        }
                        if let Some(sel) = self.selected.as_mut() {
                            sel.saw(&c);
                        }
                        now_seen.push(c.uid);
                    }
                }
            }
            for (i, entry) in entries.iter().enumerate() {
                if changed_since.is_some_and(|n| entry.modseq <= n) {
                    continue;
                }
                let Some(seq) = self
                    .selected
                    .as_ref()
                    .and_then(|s| s.seq_of(entry.uid))
                    .and_then(NonZeroU32::new)
                else {
                    continue;
                };
                let data = if with_data { datas.get(i) } else { None };
                let extra = object_items(objects, entry.blob, threads.get(&entry.blob));
                if let Some(reply) = self
                    .fetch_one(
                        seq,
                        entry,
                        data,
                        &names,
                        now_seen.contains(&entry.uid),
                        &extra,
                    )
                    .await?
                {
                    return Ok(reply);
                }
                if self.out.buf.len() > FLUSH_AT && !self.flush().await {
                    return Ok(Reply::no("Connection lost").close());
                }
            }
        }
        if unreadable > 0 {
            // RFC 2180 §4.1.2: what was answered stands; the rest is gone.
            tracing::warn!(
                unreadable,
                "FETCH named messages that can no longer be read"
            );
            return Ok(Reply::no("Some of the requested messages no longer exist"));
        }
        let reply = Reply::ok(done);
        Ok(if uid { reply } else { reply.no_expunge() })
    }

    async fn fetch_one(
        &mut self,
        seq: NonZeroU32,
        entry: &MessageEntry,
        data: Option<&MessageData>,
        names: &[MessageDataItemName<'_>],
        seen_now: bool,
        extra: &[u8],
    ) -> store::Result<Option<Reply>> {
        // FLAGS names every keyword before this response uses one, also
        // one another session set since this view last caught up.
        if let Some(sel) = self.selected.as_mut() {
            sel.announce_keywords(entry.keywords.iter(), &mut self.out);
        }
        let flags_now = match self.selected.as_ref() {
            Some(sel) => sel.flags_of(entry),
            None => flag_list(entry),
        };
        let mut items: Vec<MessageDataItem<'static>> = Vec::with_capacity(names.len() + 1);
        let mut deferred: Vec<Deferred> = Vec::new();
        let mut flags_sent = false;
        for name in names {
            match name {
                MessageDataItemName::Flags => {
                    flags_sent = true;
                    items.push(MessageDataItem::Flags(flags_now.clone()));
                }
                MessageDataItemName::Uid => items.push(MessageDataItem::Uid(
                    NonZeroU32::new(entry.uid).unwrap_or(NonZeroU32::MIN),
                )),
                MessageDataItemName::InternalDate => {
                    if let Some(d) = internal_date(entry.internal_date) {
                        items.push(MessageDataItem::InternalDate(d));
                    }
                }
                MessageDataItemName::Rfc822Size => items.push(MessageDataItem::Rfc822Size(
                    entry.size.min(u64::from(u32::MAX)) as u32,
                )),
                MessageDataItemName::ModSeq => {
                    if let Some(m) = NonZeroU64::new(entry.modseq) {
                        items.push(MessageDataItem::ModSeq(m));
                    }
                }
                MessageDataItemName::Envelope => {
                    if let Some(d) = data {
                        items.push(MessageDataItem::Envelope(convert::envelope(
                            &d.structure.envelope,
                        )));
                    }
                }
                MessageDataItemName::BodyStructure => {
                    if let Some(d) = data {
                        items.push(MessageDataItem::BodyStructure(convert::body_structure(
                            &d.structure,
                            true,
                        )));
                    }
                }
                MessageDataItemName::Body => {
                    if let Some(d) = data {
                        items.push(MessageDataItem::Body(convert::body_structure(
                            &d.structure,
                            false,
                        )));
                    }
                }
                MessageDataItemName::BodyExt {
                    section, partial, ..
                } => {
                    let Some(d) = data else { continue };
                    let bytes = self.section(d, section.as_ref()).await?;
                    let origin = partial.map(|(start, _)| start);
                    let bytes = match (bytes, partial) {
                        (b, None) => b,
                        (Bytes::Inline(v), Some((start, len))) => {
                            let s = (*start as usize).min(v.len());
                            let e = s.saturating_add(len.get() as usize).min(v.len());
                            Bytes::Inline(v[s..e].to_vec())
                        }
                        (Bytes::Range { start: rs, len: rl }, Some((start, len))) => {
                            let s = u64::from(*start).min(rl);
                            let l = u64::from(len.get()).min(rl - s);
                            Bytes::Range {
                                start: rs + s,
                                len: l,
                            }
                        }
                    };
                    let section = section.clone().map(|s| s.into_static_section());
                    match self.materialise(d, bytes).await? {
                        Bytes::Inline(v) => items.push(MessageDataItem::BodyExt {
                            section,
                            origin,
                            data: literal(v),
                        }),
                        Bytes::Range { start, len } => deferred.push(Deferred {
                            label: label_of(MessageDataItem::BodyExt {
                                section,
                                origin,
                                data: empty(),
                            }),
                            literal8: false,
                            payload: Payload::Stored {
                                blob: d.entry.blob,
                                start,
                                len,
                            },
                        }),
                    }
                }
                MessageDataItemName::Rfc822
                | MessageDataItemName::Rfc822Header
                | MessageDataItemName::Rfc822Text => {
                    let Some(d) = data else { continue };
                    let section = match name {
                        MessageDataItemName::Rfc822 => None,
                        MessageDataItemName::Rfc822Header => Some(Section::Header(None)),
                        _ => Some(Section::Text(None)),
                    };
                    let bytes = self.section(d, section.as_ref()).await?;
                    let make = |v: NString<'static>| match name {
                        MessageDataItemName::Rfc822 => MessageDataItem::Rfc822(v),
                        MessageDataItemName::Rfc822Header => MessageDataItem::Rfc822Header(v),
                        _ => MessageDataItem::Rfc822Text(v),
                    };
                    match self.materialise(d, bytes).await? {
                        Bytes::Inline(v) => items.push(make(literal(v))),
                        Bytes::Range { start, len } => deferred.push(Deferred {
                            label: label_of(make(empty())),
                            literal8: false,
                            payload: Payload::Stored {
                                blob: d.entry.blob,
                                start,
                                len,
                            },
                        }),
                    }
                }
                MessageDataItemName::Binary {
                    section, partial, ..
                } => {
                    let Some(d) = data else { continue };
                    let Some(source) = binary_source(d, section) else {
                        return Ok(Some(unknown_cte()));
                    };
                    let label = binary_label(section, partial.map(|(o, _)| o));
                    let window = partial.map(|(o, n)| (u64::from(o), u64::from(n.get())));
                    deferred.push(self.binary(d, &source, window, label).await?);
                }
                MessageDataItemName::BinarySize { section } => {
                    let Some(d) = data else { continue };
                    let Some(source) = binary_source(d, section) else {
                        return Ok(Some(unknown_cte()));
                    };
                    let size = if source.encoding == Encoding::Identity {
                        source.len
                    } else {
                        self.decoded_stats(d.entry.blob, &source, 0, u64::MAX)
                            .await?
                            .0
                    };
                    items.push(MessageDataItem::BinarySize {
                        section: section.clone(),
                        size: size.min(u64::from(u32::MAX)) as u32,
                    });
                }
            }
        }
        if seen_now && !flags_sent {
            items.push(MessageDataItem::Flags(flags_now));
        }
        self.write_fetch(seq, items, extra, deferred).await?;
        Ok(None)
    }

    /// `BINARY[...]` data (RFC 3516 §4.2): decoded in memory when the
    /// encoded part is small, else measured by one decoding pass and
    /// decoded again while it is sent, so no large part is held whole.
    async fn binary(
        &self,
        d: &MessageData,
        source: &Source,
        partial: Option<(u64, u64)>,
        label: Vec<u8>,
    ) -> store::Result<Deferred> {
        let (skip, take) = partial.unwrap_or((0, u64::MAX));
        if source.len <= STREAM_THRESHOLD {
            let encoded = self
                .inline(
                    d,
                    Bytes::Range {
                        start: source.start,
                        len: source.len,
                    },
                )
                .await?;
            let mut decoder = Decoder::new(source.encoding);
            let mut decoded = Vec::with_capacity(encoded.len());
            decoder.push(&encoded, &mut decoded);
            decoder.finish(&mut decoded);
            let data = decoded[window(0, decoded.len(), skip, take)].to_vec();
            return Ok(Deferred {
                label,
                literal8: data.contains(&0),
                payload: Payload::Ready(data),
            });
        }
        let (total, nul) = self.decoded_stats(d.entry.blob, source, skip, take).await?;
        Ok(Deferred {
            label,
            literal8: nul,
            payload: Payload::Decoded {
                blob: d.entry.blob,
                start: source.start,
                len: source.len,
                encoding: source.encoding,
                skip,
                take: take.min(total.saturating_sub(skip)),
            },
        })
    }

    /// One decoding pass over a stored range: the decoded length, and
    /// whether the window `[skip, skip + take)` of it has a NUL.
    async fn decoded_stats(
        &self,
        blob: store::BlobId,
        source: &Source,
        skip: u64,
        take: u64,
    ) -> store::Result<(u64, bool)> {
        let mut decoder = Decoder::new(source.encoding);
        let mut buf = Vec::new();
        let mut pos = 0u64;
        let mut nul = false;
        for (seq, from, to) in pieces(source.start, source.len) {
            let data = self.stored_piece(blob, seq, from, to).await?;
            buf.clear();
            decoder.push(&data[..], &mut buf);
            nul = nul || buf[window(pos, buf.len(), skip, take)].contains(&0);
            pos += buf.len() as u64;
        }
        buf.clear();
        decoder.finish(&mut buf);
        nul = nul || buf[window(pos, buf.len(), skip, take)].contains(&0);
        pos += buf.len() as u64;
        Ok((pos, nul))
    }

    /// Where a section is, from the stored structure and header block.
    async fn section(
        &self,
        d: &MessageData,
        section: Option<&Section<'_>>,
    ) -> store::Result<Bytes> {
        let root = &d.structure.root;
        let size = d.entry.size;
        let header_of = |p: &mime_tree::Part| Bytes::Range {
            start: p.header_offset,
            len: p.header_len,
        };
        let body_of = |p: &mime_tree::Part| Bytes::Range {
            start: p.body_offset,
            len: p.body_len,
        };
        let top_header = || {
            let len = root.header_len.min(size);
            if (len as usize) <= d.header.len() {
                Bytes::Inline(d.header[..len as usize].to_vec())
            } else {
                Bytes::Range { start: 0, len }
            }
        };
        let nothing = Bytes::Inline(Vec::new());
        Ok(match section {
            None => Bytes::Range {
                start: 0,
                len: size,
            },
            Some(Section::Header(None)) => top_header(),
            Some(Section::Text(None)) => Bytes::Range {
                start: root.body_offset.min(size),
                len: size.saturating_sub(root.body_offset),
            },
            Some(Section::HeaderFields(None, fields))
            | Some(Section::HeaderFieldsNot(None, fields)) => {
                let not = matches!(section, Some(Section::HeaderFieldsNot(..)));
                let block = self.inline(d, top_header()).await?;
                Bytes::Inline(header_fields(&block, &field_names(fields.as_ref()), not))
            }
            Some(Section::Part(p)) => match find_part(root, p.0.as_ref()) {
                Some(part) => body_of(part),
                None => nothing,
            },
            Some(Section::Mime(p)) => match find_part(root, p.0.as_ref()) {
                Some(part) => header_of(part),
                None => nothing,
            },
            Some(Section::Header(Some(p))) => {
                match find_part(root, p.0.as_ref()).and_then(enclosed) {
                    Some(inner) => header_of(inner),
                    None => nothing,
                }
            }
            Some(Section::Text(Some(p))) => {
                match find_part(root, p.0.as_ref()).and_then(enclosed) {
                    Some(inner) => body_of(inner),
                    None => nothing,
                }
            }
            Some(Section::HeaderFields(Some(p), fields))
            | Some(Section::HeaderFieldsNot(Some(p), fields)) => {
                let not = matches!(section, Some(Section::HeaderFieldsNot(..)));
                match find_part(root, p.0.as_ref()).and_then(enclosed) {
                    Some(inner) => {
                        let block = self.inline(d, header_of(inner)).await?;
                        Bytes::Inline(header_fields(&block, &field_names(fields.as_ref()), not))
                    }
                    None => nothing,
                }
            }
        })
    }

    /// Small ranges are read now; large ones stay ranges, to be streamed.
    async fn materialise(&self, d: &MessageData, bytes: Bytes) -> store::Result<Bytes> {
        match bytes {
            Bytes::Range { len, .. } if len > STREAM_THRESHOLD => Ok(bytes),
            other => Ok(Bytes::Inline(self.inline(d, other).await?)),
        }
    }

    async fn inline(&self, d: &MessageData, bytes: Bytes) -> store::Result<Vec<u8>> {
        match bytes {
            Bytes::Inline(v) => Ok(v),
            Bytes::Range { start, len } => {
                let mut out = Vec::with_capacity(len as usize);
                for (seq, from, to) in pieces(start, len) {
                    let data = self.stored_piece(d.entry.blob, seq, from, to).await?;
                    out.extend_from_slice(&data);
                }
                Ok(out)
            }
        }
    }

    /// Writes one FETCH response: imap-codec's items, then `extra` (items
    /// imap-codec cannot encode, already in wire form), then the deferred
    /// literals.
    async fn write_fetch(
        &mut self,
        seq: NonZeroU32,
        items: Vec<MessageDataItem<'static>>,
        extra: &[u8],
        deferred: Vec<Deferred>,
    ) -> store::Result<()> {
        if deferred.is_empty() && extra.is_empty() {
            if let Ok(items) = Vec1::try_from(items) {
                self.out.data(Data::Fetch { seq, items });
            }
            return Ok(());
        }
        let mut first = match Vec1::try_from(items) {
            Ok(items) => {
                let mut head = ResponseCodec::default()
                    .encode(&Response::Data(Data::Fetch { seq, items }))
                    .dump();
                head.truncate(head.len() - b")\r\n".len());
                self.out.raw(&head);
                false
            }
            Err(_) => {
                self.out.raw(format!("* {seq} FETCH (").as_bytes());
                true
            }
        };
        if !extra.is_empty() {
            if !first {
                self.out.raw(b" ");
            }
            self.out.raw(extra);
            first = false;
        }
        for d in deferred {
            if !first {
                self.out.raw(b" ");
            }
            first = false;
            self.out.raw(&d.label);
            let tilde = if d.literal8 { "~" } else { "" };
            self.out
                .raw(format!(" {tilde}{{{}}}\r\n", d.payload.len()).as_bytes());
            let sent = match d.payload {
                Payload::Ready(data) => {
                    self.out.raw(&data);
                    true
                }
                Payload::Stored { blob, start, len } => {
                    self.flush().await && self.send_stored(blob, start, len).await?
                }
                Payload::Decoded {
                    blob,
                    start,
                    len,
                    encoding,
                    skip,
                    take,
                } => {
                    let source = Source {
                        start,
                        len,
                        encoding,
                    };
                    self.flush().await && self.send_decoded(blob, &source, skip, take).await?
                }
            };
            if !sent {
                return Ok(());
            }
        }
        self.out.raw(b")\r\n");
        Ok(())
    }
}

impl Session<'_> {
    /// Bytes `from..to` of stored chunk `seq` of a blob (fewer when the
    /// chunk is shorter or gone).
    async fn stored_piece(
        &self,
        blob: store::BlobId,
        seq: u32,
        from: usize,
        to: usize,
    ) -> store::Result<Vec<u8>> {
        let mut data = self
            .ctx
            .store
            .read_chunk(blob, seq)
            .await?
            .unwrap_or_default();
        data.truncate(to);
        data.drain(..from.min(data.len()));
        Ok(data)
    }

    /// Sends a stored range as it is; false if the connection failed.
    async fn send_stored(
        &mut self,
        blob: store::BlobId,
        start: u64,
        len: u64,
    ) -> store::Result<bool> {
        for (seq, from, to) in pieces(start, len) {
            let mut piece = self.stored_piece(blob, seq, from, to).await?;
            if piece.len() < to - from {
                // The literal's length is promised: keep the stream in
                // step even if the stored text came up short.
                tracing::error!(blob, seq, "stored message shorter than its size");
                piece.resize(to - from, b' ');
            }
            replace_nul(&mut piece);
            if !net::send(&mut self.stream, &piece, SEND_TIMEOUT).await {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Sends `take` bytes from `skip` of a stored range's decoding, one
    /// chunk at a time; false if the connection failed.
    async fn send_decoded(
        &mut self,
        blob: store::BlobId,
        source: &Source,
        skip: u64,
        take: u64,
    ) -> store::Result<bool> {
        let mut decoder = Decoder::new(source.encoding);
        let mut buf = Vec::new();
        let mut pos = 0u64;
        let mut sent = 0u64;
        let mut chunks = pieces(source.start, source.len);
        loop {
            buf.clear();
            let last = match chunks.next() {
                Some((seq, from, to)) => {
                    let data = self.stored_piece(blob, seq, from, to).await?;
                    decoder.push(&data[..], &mut buf);
                    false
                }
                None => {
                    decoder.finish(&mut buf);
                    true
                }
            };
            let part = &buf[window(pos, buf.len(), skip, take)];
            pos += buf.len() as u64;
            if !part.is_empty() {
                sent += part.len() as u64;
                if !net::send(&mut self.stream, part, SEND_TIMEOUT).await {
                    return Ok(false);
                }
            }
            if last || sent >= take {
                break;
            }
        }
        if sent < take {
            // Measured before, so this is a bug; keep the stream in step.
            tracing::error!(blob, "decoded part shorter than measured");
            let pad = vec![b' '; (take - sent) as usize];
            return Ok(net::send(&mut self.stream, &pad, SEND_TIMEOUT).await);
        }
        Ok(true)
    }
}

/// The RFC 8474 §6 FETCH items asked for, in wire form: the ids JMAP
/// gives the same email and thread ([`store::ids`]); THREADID NIL when
/// the store knows no thread for it.
fn object_items(objects: ObjectItems, blob: store::BlobId, thread: Option<&i64>) -> Vec<u8> {
    let mut out = Vec::new();
    if objects.email_id {
        out.extend_from_slice(format!("EMAILID ({})", store::ids::email(blob)).as_bytes());
    }
    if objects.thread_id {
        if !out.is_empty() {
            out.push(b' ');
        }
        match thread {
            Some(t) => {
                out.extend_from_slice(format!("THREADID ({})", store::ids::thread(*t)).as_bytes())
            }
            None => out.extend_from_slice(b"THREADID NIL"),
        }
    }
    out
}

fn field_names(fields: &[imap_codec::imap_types::core::AString<'_>]) -> Vec<String> {
    fields
        .iter()
        .map(|f| String::from_utf8_lossy(f.as_ref()).into_owned())
        .collect()
}

/// The pieces of stored chunks that make up `len` bytes from `start`:
/// `(chunk number, from, to)` within each chunk.
fn pieces(start: u64, len: u64) -> impl Iterator<Item = (u32, usize, usize)> {
    let chunk = CHUNK_SIZE as u64;
    let end = start + len;
    let first = start / chunk;
    let last = if len == 0 {
        first
    } else {
        (end - 1) / chunk + 1
    };
    (first..last).map(move |seq| {
        let base = seq * chunk;
        let from = start.max(base) - base;
        let to = end.min(base + chunk) - base;
        (seq as u32, from as usize, to as usize)
    })
}

trait IntoStaticSection {
    fn into_static_section(self) -> Section<'static>;
}

impl IntoStaticSection for Section<'_> {
    fn into_static_section(self) -> Section<'static> {
        use imap_codec::imap_types::IntoStatic;
        self.into_static()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_cover_ranges() {
        let c = CHUNK_SIZE;
        assert_eq!(pieces(0, 10).collect::<Vec<_>>(), vec![(0, 0, 10)]);
        assert_eq!(
            pieces(c as u64 - 5, 10).collect::<Vec<_>>(),
            vec![(0, c - 5, c), (1, 0, 5)]
        );
        assert_eq!(pieces(7, 0).count(), 0);
        assert_eq!(
            pieces(0, 2 * c as u64).collect::<Vec<_>>(),
            vec![(0, 0, c), (1, 0, c)]
        );
    }
}
