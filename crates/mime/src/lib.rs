//! The structure of a message, computed once while it streams into the
//! store, so IMAP can answer ENVELOPE, BODYSTRUCTURE and `BODY[1.2]` without
//! parsing the message again.
//!
//! [`StructureBuilder`] is fed the raw message (CRLF line ends, as stored)
//! in pieces of any size and keeps memory bounded by the header blocks, not
//! by the message: bodies are only counted. [`MessageStructure`] records for
//! every MIME part where its header and body sit in the raw message, how
//! long they are, how many lines the body has, and the parsed header fields
//! BODYSTRUCTURE needs. Strings are kept raw (encoded words are not decoded),
//! as RFC 3501 §7.4.2 asks for ENVELOPE and BODYSTRUCTURE; header bytes that
//! are not UTF-8 become U+FFFD.
//!
//! Inside: `builder` is the streaming state machine, `header` reads header
//! fields, `address` address lists, `envelope` the ENVELOPE fields, and
//! `encode` the stored form.
#![forbid(unsafe_code)]

mod address;
mod base64_lines;
mod builder;
mod content_decoder;
mod encode;
mod envelope;
mod header;
mod rewrite;
mod transfer_decode;

use serde::{Deserialize, Serialize};

pub use address::{parse_address_list, MISSING_DOMAIN, MISSING_MAILBOX};
pub use base64_lines::Base64Lines;
pub use builder::{
    StructureBuilder, MAX_BOUNDARY_LEN, MAX_DEPTH, MAX_HEADER_BYTES, MAX_PARTS,
    MAX_TOTAL_HEADER_BYTES,
};
pub use content_decoder::{ContentDecoder, TransferEncoding};
pub use rewrite::{encode_binary_parts, PartRewriter, TextLeaf, TextMark};
pub use transfer_decode::{uu_begin, uudecode_line, Base64Decoder, QpDecoder};

/// The structure of a whole message (or of a message/rfc822 part).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MessageStructure {
    /// RFC 3501 ENVELOPE fields of the top-level header.
    pub envelope: Envelope,
    /// The message as a MIME entity: its header block is the message header.
    pub root: Part,
}

/// RFC 3501 §7.4.2 ENVELOPE, with raw (undecoded) strings. `sender` and
/// `reply_to` are already defaulted to `from` when their header is absent,
/// as the RFC requires of the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Envelope {
    /// `Date:` value as written.
    pub date: Option<String>,
    /// `Subject:` value as written.
    pub subject: Option<String>,
    /// `From:` addresses.
    pub from: Vec<Address>,
    /// `Sender:` addresses (or `from`).
    pub sender: Vec<Address>,
    /// `Reply-To:` addresses (or `from`).
    pub reply_to: Vec<Address>,
    /// `To:` addresses.
    pub to: Vec<Address>,
    /// `Cc:` addresses.
    pub cc: Vec<Address>,
    /// `Bcc:` addresses.
    pub bcc: Vec<Address>,
    /// `In-Reply-To:` value as written.
    pub in_reply_to: Option<String>,
    /// `Message-ID:` value as written (with its angle brackets).
    pub message_id: Option<String>,
}

/// One RFC 3501 address structure. Group syntax is marked as the RFC does:
/// a group start has `host: None` and the group name in `mailbox`; a group
/// end has both `mailbox` and `host` `None`. Since `host: None` means group
/// syntax, an address without a domain has host [`MISSING_DOMAIN`], and one
/// without a local part mailbox [`MISSING_MAILBOX`], as Dovecot reports
/// them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Address {
    /// Display name (phrase), raw but for its quoted strings, which are
    /// unquoted; comments are dropped.
    pub name: Option<String>,
    /// Source route (obsolete), raw.
    pub adl: Option<String>,
    /// Local part as written (quotes kept), or group name.
    pub mailbox: Option<String>,
    /// Domain.
    pub host: Option<String>,
}

/// One MIME entity. Offsets count from the first byte of the whole message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Part {
    /// Where the entity's header block starts.
    pub header_offset: u64,
    /// Length of the header block, including the empty line that ends it.
    /// Without an empty line the header runs to the end of the entity (a
    /// message that is all header has an empty body). In a multipart, a
    /// boundary line takes the line end before it (RFC 2046 §5.1.1), also
    /// from a header it cuts short or whose empty line it follows at once:
    /// such a header ends without that line end. Header bytes past
    /// [`MAX_HEADER_BYTES`] are counted here but their fields are not read.
    pub header_len: u64,
    /// Where the body starts (`header_offset + header_len`).
    pub body_offset: u64,
    /// Length of the body. For a multipart child this stops before the CRLF
    /// (or bare LF) that precedes the next boundary line (RFC 2046 §5.1.1),
    /// except right after a close delimiter line, whose line end stays with
    /// it. A multipart's body holds its preamble, children, boundary lines
    /// and epilogue; a message/rfc822 part's body is the whole enclosed
    /// message (plus, when the enclosed header meets a boundary line, the
    /// line end that header gave up). These rules follow Dovecot 2.3, so
    /// sizes, line counts and `BODY[...]` sections match Dovecot's for CRLF
    /// messages (bare-LF input is measured as given, where Dovecot counts
    /// each LF as CRLF).
    pub body_len: u64,
    /// Lines in the body (RFC 3501 body-fld-lines), counted as Dovecot
    /// does: the number of LFs in the body. A last line without a line end
    /// is not counted, so `hello\r\nworld` is 1 line (Dovecot 2.3 reports
    /// exactly that), and since a multipart child's body stops before the
    /// CRLF of the next boundary line, its last line usually does not count
    /// either. Counted for every part; BODYSTRUCTURE shows it for text/* and
    /// message/rfc822.
    pub body_lines: u64,
    /// Media type, lower-case (`text` when absent or invalid; `message` for
    /// a child of multipart/digest, RFC 2046 §5.1.5).
    pub media_type: String,
    /// Media subtype, lower-case (`plain` when absent or invalid; `rfc822`
    /// in a multipart/digest).
    pub media_subtype: String,
    /// Content-Type parameters, names lower-case, values unquoted, in the
    /// order written; the first of two with the same name wins. RFC 2231
    /// parameters (`name*`, `name*0*`) are kept as written, not decoded. A
    /// text/* part without a charset gets `charset=us-ascii` appended
    /// (RFC 2046 §4.1.2), which is also what Dovecot reports.
    pub params: Vec<(String, String)>,
    /// `Content-ID:`.
    pub id: Option<String>,
    /// `Content-Description:`.
    pub description: Option<String>,
    /// `Content-Transfer-Encoding:`, as written (`7BIT` when absent).
    pub encoding: String,
    /// `Content-MD5:`.
    pub md5: Option<String>,
    /// `Content-Disposition:` value as written and parameters (as `params`,
    /// without the charset default).
    pub disposition: Option<(String, Vec<(String, String)>)>,
    /// `Content-Language:` tags.
    pub language: Vec<String>,
    /// `Content-Location:`.
    pub location: Option<String>,
    /// What is inside.
    pub kind: PartKind,
}

/// What a MIME entity contains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum PartKind {
    /// A body of its own.
    #[default]
    Leaf,
    /// multipart/*: the children in order. Empty when no child could be
    /// read: no usable boundary parameter, no boundary line in the body, or
    /// past [`MAX_DEPTH`] or [`MAX_PARTS`]. RFC 3501 requires at least one
    /// body in a multipart BODYSTRUCTURE; for an empty one, write one empty
    /// text/plain child as Dovecot does:
    /// `("text" "plain" ("charset" "us-ascii") NIL NIL "7bit" 0 0)`.
    Multipart(Vec<Part>),
    /// message/rfc822 (or message/global): the enclosed message. A message
    /// part in base64 or quoted-printable, or past [`MAX_DEPTH`] or
    /// [`MAX_PARTS`], is a [`PartKind::Leaf`] with media type `message`:
    /// write it as a basic body.
    Message(Box<MessageStructure>),
}

impl PartKind {
    /// Moves every part inside by `by` bytes.
    fn shift(&mut self, by: u64) {
        let shift_part = |p: &mut Part| {
            p.header_offset += by;
            p.body_offset += by;
            p.kind.shift(by);
        };
        match self {
            PartKind::Leaf => {}
            PartKind::Multipart(children) => children.iter_mut().for_each(shift_part),
            PartKind::Message(m) => shift_part(&mut m.root),
        }
    }
}

/// A stored structure could not be read back: the bytes are not something
/// [`MessageStructure::to_bytes`] wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored message structure is corrupt or of an unknown version")]
pub struct DecodeError;

impl MessageStructure {
    /// A compact encoding for storing next to the message (see `encode.rs`
    /// for the format).
    pub fn to_bytes(&self) -> Vec<u8> {
        encode::encode(self)
    }

    /// Reads back what [`MessageStructure::to_bytes`] wrote. The empty slice
    /// (rows stored before structures existed) gives the default structure;
    /// anything else that is not a valid encoding is an error, never a
    /// panic.
    pub fn from_bytes(bytes: &[u8]) -> Result<MessageStructure, DecodeError> {
        if bytes.is_empty() {
            return Ok(MessageStructure::default());
        }
        encode::decode(bytes)
    }

    /// The structure of the same message with `lead` bytes of header fields
    /// put in front of it (the `Authentication-Results:` field a delivery
    /// adds once the message is complete): the top-level header grows by
    /// `lead`, every offset below it moves by `lead`.
    pub fn prepend(&mut self, lead: u64) {
        self.root.header_len += lead;
        self.root.body_offset += lead;
        self.root.kind.shift(lead);
    }

    /// Reads only the envelope back from what [`MessageStructure::to_bytes`]
    /// wrote, for views that need ENVELOPE but not BODYSTRUCTURE: the
    /// envelope comes first and the parts are not decoded, which makes this
    /// several times cheaper than [`MessageStructure::from_bytes`]. The empty
    /// slice gives the default envelope.
    pub fn envelope_from_bytes(bytes: &[u8]) -> Result<Envelope, DecodeError> {
        if bytes.is_empty() {
            return Ok(Envelope::default());
        }
        encode::decode_envelope(bytes)
    }
}
