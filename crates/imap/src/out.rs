//! Responses on their way to the client, encoded by imap-codec.

use imap_codec::encode::Encoder;
use imap_codec::imap_types::core::Tag;
use imap_codec::imap_types::response::{Code, Data, Response, Status};
use imap_codec::ResponseCodec;

/// Buffered output of one session.
#[derive(Default)]
pub(crate) struct Out {
    pub(crate) buf: Vec<u8>,
}

/// Response text must be one line of printable text, never empty.
fn clean(text: &str) -> String {
    let t: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let t = t.trim();
    if t.is_empty() {
        "done".into()
    } else {
        t.to_string()
    }
}

impl Out {
    /// Any response.
    pub(crate) fn response(&mut self, response: &Response<'_>) {
        self.buf
            .extend(ResponseCodec::default().encode(response).dump());
    }

    /// An untagged data response.
    pub(crate) fn data(&mut self, data: Data<'_>) {
        self.response(&Response::Data(data));
    }

    fn status(&mut self, kind: Kind, tag: Option<&Tag<'_>>, code: Option<Code<'_>>, text: &str) {
        let text = clean(text);
        let tag = tag.cloned();
        let status = match kind {
            Kind::Ok => Status::ok(tag, code, text.as_str()),
            Kind::No => Status::no(tag, code, text.as_str()),
            Kind::Bad => Status::bad(tag, code, text.as_str()),
            Kind::Bye => Status::bye(code, text.as_str()),
        };
        match status {
            Ok(s) => self.response(&Response::Status(s)),
            // Unreachable with cleaned text; never panic on a reply.
            Err(_) => self.buf.extend_from_slice(b"* BAD Internal error\r\n"),
        }
    }

    /// `tag OK [code] text` (untagged without a tag).
    pub(crate) fn ok(&mut self, tag: Option<&Tag<'_>>, code: Option<Code<'_>>, text: &str) {
        self.status(Kind::Ok, tag, code, text);
    }

    /// `tag NO [code] text`.
    pub(crate) fn no(&mut self, tag: Option<&Tag<'_>>, code: Option<Code<'_>>, text: &str) {
        self.status(Kind::No, tag, code, text);
    }

    /// `tag BAD [code] text`.
    pub(crate) fn bad(&mut self, tag: Option<&Tag<'_>>, code: Option<Code<'_>>, text: &str) {
        self.status(Kind::Bad, tag, code, text);
    }

    /// `* BYE [code] text`.
    pub(crate) fn bye(&mut self, code: Option<Code<'_>>, text: &str) {
        self.status(Kind::Bye, None, code, text);
    }

    /// Bytes imap-codec has no type for (ESEARCH, streamed literals).
    pub(crate) fn raw(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
}

enum Kind {
    Ok,
    No,
    Bad,
    Bye,
}
