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
//! as RFC 3501 §7.4.2 asks for ENVELOPE and BODYSTRUCTURE.
#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};

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
/// end has both `mailbox` and `host` `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Address {
    /// Display name (phrase), raw.
    pub name: Option<String>,
    /// Source route (obsolete), raw.
    pub adl: Option<String>,
    /// Local part, or group name.
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
    pub header_len: u64,
    /// Where the body starts (`header_offset + header_len`).
    pub body_offset: u64,
    /// Length of the body. For a multipart child this stops before the CRLF
    /// that precedes the next boundary line (RFC 2046 §5.1.1).
    pub body_len: u64,
    /// Lines in the body (RFC 3501 body-fld-lines).
    pub body_lines: u64,
    /// Media type, lower-case (`text` when absent).
    pub media_type: String,
    /// Media subtype, lower-case (`plain` when absent).
    pub media_subtype: String,
    /// Content-Type parameters, names lower-case, values unquoted.
    pub params: Vec<(String, String)>,
    /// `Content-ID:`.
    pub id: Option<String>,
    /// `Content-Description:`.
    pub description: Option<String>,
    /// `Content-Transfer-Encoding:`, as written (`7BIT` when absent).
    pub encoding: String,
    /// `Content-MD5:`.
    pub md5: Option<String>,
    /// `Content-Disposition:` value and parameters.
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
    /// multipart/*: the children in order.
    Multipart(Vec<Part>),
    /// message/rfc822 (or message/global): the enclosed message.
    Message(Box<MessageStructure>),
}

/// Computes a [`MessageStructure`] from a message streamed in pieces.
#[derive(Debug, Default)]
pub struct StructureBuilder {}

impl StructureBuilder {
    /// A builder for a new message.
    pub fn new() -> Self {
        StructureBuilder {}
    }

    /// Feeds the next bytes of the raw message.
    pub fn feed(&mut self, data: &[u8]) {
        let _ = data;
    }

    /// The structure of everything fed so far.
    pub fn finish(self) -> MessageStructure {
        MessageStructure::default()
    }
}

/// A stored structure could not be read back.
#[derive(Debug)]
pub struct DecodeError;

impl MessageStructure {
    /// A compact encoding for storing next to the message.
    pub fn to_bytes(&self) -> Vec<u8> {
        Vec::new()
    }

    /// Reads back what [`MessageStructure::to_bytes`] wrote.
    pub fn from_bytes(bytes: &[u8]) -> Result<MessageStructure, DecodeError> {
        if bytes.is_empty() {
            return Ok(MessageStructure::default());
        }
        Err(DecodeError)
    }
}
