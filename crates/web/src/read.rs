//! Reading a stored message for display: only the parts a page shows,
//! found through the MIME structure computed at delivery, read by byte
//! range from the blob's chunks. Attachments and the source are streamed,
//! decoded on the fly, never held whole.

use std::sync::Arc;

use axum::body::Bytes;
use base64::Engine as _;
use futures_util::{Stream, StreamExt};
use mail_parser::{MessageParser, MimeHeaders};
use mime_tree::{Part, PartKind};
use store::{BlobId, Store, StoreError, CHUNK_SIZE};

/// A leaf of the MIME tree, numbered in document order.
#[derive(Debug, Clone)]
pub(crate) struct Leaf {
    /// 1-based number used in URLs.
    pub number: usize,
    pub part: Part,
    /// An attachment (rather than a body to show).
    pub attachment: bool,
}

impl Leaf {
    /// `type/subtype`, lower-case tokens only (safe in a header).
    pub(crate) fn content_type(&self) -> String {
        let ok = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
        };
        if ok(&self.part.media_type) && ok(&self.part.media_subtype) {
            format!("{}/{}", self.part.media_type, self.part.media_subtype)
        } else {
            "application/octet-stream".into()
        }
    }

    /// The Content-ID without angle brackets.
    pub(crate) fn content_id(&self) -> Option<&str> {
        self.part
            .id
            .as_deref()
            .map(|i| i.trim().trim_start_matches('<').trim_end_matches('>'))
    }
}

/// The leaves of a message, with attachments told apart from bodies.
pub(crate) fn leaves(root: &Part) -> Vec<Leaf> {
    fn walk(p: &Part, out: &mut Vec<Leaf>) {
        match &p.kind {
            PartKind::Multipart(children) => children.iter().for_each(|c| walk(c, out)),
            PartKind::Leaf | PartKind::Message(_) => {
                let disposition = p
                    .disposition
                    .as_ref()
                    .map(|(d, _)| d.to_ascii_lowercase())
                    .unwrap_or_default();
                let named = p.params.iter().any(|(k, _)| k.starts_with("name"))
                    || p.disposition
                        .as_ref()
                        .is_some_and(|(_, ps)| ps.iter().any(|(k, _)| k.starts_with("filename")));
                let text_body =
                    p.media_type == "text" && matches!(p.media_subtype.as_str(), "plain" | "html");
                let attachment = matches!(p.kind, PartKind::Message(_))
                    || disposition == "attachment"
                    || (!text_body && (named || p.media_type != "text"))
                    || (text_body && named && disposition != "inline");
                out.push(Leaf {
                    number: out.len() + 1,
                    part: p.clone(),
                    attachment,
                });
            }
        }
    }
    let mut out = Vec::new();
    walk(root, &mut out);
    out
}

/// Reads `len` bytes of a blob from `offset`, at most `cap` of them.
pub(crate) async fn read_range(
    store: &dyn Store,
    blob: BlobId,
    offset: u64,
    len: u64,
    cap: usize,
) -> Result<Vec<u8>, StoreError> {
    let want = len.min(cap as u64) as usize;
    let mut out = Vec::with_capacity(want.min(CHUNK_SIZE));
    let mut seq = (offset / CHUNK_SIZE as u64) as u32;
    let mut skip = (offset % CHUNK_SIZE as u64) as usize;
    while out.len() < want {
        let Some(chunk) = store.read_chunk(blob, seq).await? else {
            break;
        };
        let piece = chunk.get(skip..).unwrap_or_default();
        let take = piece.len().min(want - out.len());
        out.extend_from_slice(&piece[..take]);
        skip = 0;
        seq += 1;
    }
    Ok(out)
}

/// What the read view shows of a body part, decoded to text.
pub(crate) struct Body {
    pub text: String,
    /// Cut at the display limit.
    pub truncated: bool,
}

/// Decodes one text leaf (transfer encoding and charset) by handing its
/// header and the first `cap` bytes of its body to mail-parser.
pub(crate) async fn body_text(
    store: &dyn Store,
    blob: BlobId,
    leaf: &Leaf,
    cap: usize,
    html: bool,
) -> Result<Body, StoreError> {
    let p = &leaf.part;
    let mut raw = read_range(store, blob, p.header_offset, p.header_len, 64 * 1024).await?;
    if !raw.ends_with(b"\r\n\r\n") && !raw.ends_with(b"\n\n") {
        raw.extend_from_slice(b"\r\n");
    }
    let body = read_range(store, blob, p.body_offset, p.body_len, cap).await?;
    let truncated = (body.len() as u64) < p.body_len;
    raw.extend_from_slice(&body);
    let parsed = MessageParser::default().parse(&raw[..]);
    let text = parsed
        .and_then(|m| {
            if html {
                m.body_html(0).map(|t| t.into_owned())
            } else {
                m.body_text(0).map(|t| t.into_owned())
            }
        })
        .unwrap_or_default();
    Ok(Body { text, truncated })
}

/// The decoded file name of a leaf (RFC 2231 parameters and RFC 2047
/// words decoded by mail-parser from the part's header).
pub(crate) async fn file_name(
    store: &dyn Store,
    blob: BlobId,
    leaf: &Leaf,
) -> Result<Option<String>, StoreError> {
    let p = &leaf.part;
    let mut raw = read_range(store, blob, p.header_offset, p.header_len, 16 * 1024).await?;
    raw.extend_from_slice(b"\r\n\r\n");
    Ok(MessageParser::default()
        .parse_headers(&raw[..])
        .and_then(|m| m.attachment_name().map(str::to_string))
        .map(|n| n.replace(['/', '\\', '\r', '\n', '\0'], "_")))
}

/// Transfer decoding done piece by piece, keeping only what a piece cut
/// in the middle of a unit (a base64 quadruple, a `=XX` escape) left over.
#[derive(Debug)]
pub(crate) enum Decoder {
    Identity,
    Base64 { carry: Vec<u8> },
    QuotedPrintable { carry: Vec<u8> },
}

impl Decoder {
    pub(crate) fn for_encoding(encoding: &str) -> Decoder {
        match encoding.to_ascii_lowercase().as_str() {
            "base64" => Decoder::Base64 { carry: Vec::new() },
            "quoted-printable" => Decoder::QuotedPrintable { carry: Vec::new() },
            _ => Decoder::Identity,
        }
    }

    /// Decodes a piece; `last` flushes what is left.
    pub(crate) fn decode(&mut self, input: &[u8], last: bool) -> Vec<u8> {
        match self {
            Decoder::Identity => input.to_vec(),
            Decoder::Base64 { carry } => {
                carry.extend(
                    input
                        .iter()
                        .copied()
                        .filter(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/'),
                );
                let whole = if last {
                    carry.len()
                } else {
                    carry.len() / 4 * 4
                };
                let mut quad: Vec<u8> = carry.drain(..whole).collect();
                // Padding is optional in practice; the decoder wants none.
                if quad.len() % 4 == 1 {
                    quad.pop();
                }
                base64::engine::general_purpose::STANDARD_NO_PAD
                    .decode(&quad)
                    .unwrap_or_default()
            }
            Decoder::QuotedPrintable { carry } => {
                carry.extend_from_slice(input);
                // Keep a possibly cut escape or soft line break for later.
                let keep = if last {
                    0
                } else {
                    carry
                        .iter()
                        .rev()
                        .take(3)
                        .position(|b| *b == b'=')
                        .map_or(0, |i| i + 1)
                };
                let upto = carry.len() - keep;
                let data: Vec<u8> = carry.drain(..upto).collect();
                qp_decode(&data)
            }
        }
    }
}

fn qp_decode(data: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(data.len());
    let mut i = 0;
    while i < data.len() {
        if data[i] == b'=' {
            match (data.get(i + 1), data.get(i + 2)) {
                (Some(b'\r'), Some(b'\n')) => i += 3,
                (Some(b'\n'), _) => i += 2,
                (Some(&a), Some(&b)) if hex(a).is_some() && hex(b).is_some() => {
                    out.push(hex(a).unwrap_or(0) * 16 + hex(b).unwrap_or(0));
                    i += 3;
                }
                _ => {
                    out.push(b'=');
                    i += 1;
                }
            }
        } else {
            out.push(data[i]);
            i += 1;
        }
    }
    out
}

/// A byte range of a blob as a stream of decoded pieces. Fused: a body
/// wrapper (the gzip encoder) may poll once more after the end, which an
/// unfused `unfold` answers with a panic.
pub(crate) fn stream_range(
    store: Arc<dyn Store>,
    blob: BlobId,
    offset: u64,
    len: u64,
    decoder: Decoder,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send {
    struct State {
        store: Arc<dyn Store>,
        seq: u32,
        skip: usize,
        left: u64,
        decoder: Decoder,
        done: bool,
    }
    let state = State {
        store,
        seq: (offset / CHUNK_SIZE as u64) as u32,
        skip: (offset % CHUNK_SIZE as u64) as usize,
        left: len,
        decoder,
        done: false,
    };
    futures_util::stream::unfold(state, move |mut s| async move {
        if s.done {
            return None;
        }
        let chunk = match s.store.read_chunk(blob, s.seq).await {
            Ok(c) => c,
            Err(e) => return Some((Err(std::io::Error::other(e)), State { done: true, ..s })),
        };
        let piece = match &chunk {
            Some(c) if s.left > 0 => {
                let p = c.get(s.skip..).unwrap_or_default();
                &p[..p.len().min(s.left as usize)]
            }
            _ => &[][..],
        };
        s.left -= piece.len() as u64;
        s.seq += 1;
        s.skip = 0;
        let last = s.left == 0 || chunk.is_none() || piece.is_empty();
        let out = s.decoder.decode(piece, last);
        s.done = last;
        Some((Ok(Bytes::from(out)), s))
    })
    .fuse()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_pieces(mut d: Decoder, input: &[u8], size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let pieces: Vec<&[u8]> = input.chunks(size.max(1)).collect();
        for (i, p) in pieces.iter().enumerate() {
            out.extend(d.decode(p, i + 1 == pieces.len()));
        }
        if pieces.is_empty() {
            out.extend(d.decode(&[], true));
        }
        out
    }

    #[test]
    fn quoted_printable_across_pieces() {
        let qp = b"caf=C3=A9 au lait=\r\n, s'il vous pla=C3=AEt=3D";
        for size in 1..qp.len() {
            let out = in_pieces(Decoder::for_encoding("Quoted-Printable"), qp, size);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "café au lait, s'il vous plaît=",
                "{size}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn base64_across_any_pieces(data in proptest::collection::vec(proptest::num::u8::ANY, 0..600), size in 1usize..100) {
            let enc = base64::engine::general_purpose::STANDARD.encode(&data);
            let wrapped: Vec<u8> = enc.as_bytes().chunks(76).flat_map(|l| l.iter().copied().chain(*b"\r\n")).collect();
            proptest::prop_assert_eq!(in_pieces(Decoder::for_encoding("base64"), &wrapped, size), data);
        }
    }
}
