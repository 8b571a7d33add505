//! The structure stored at delivery ([`mime_tree`]) as imap-codec's
//! ENVELOPE and BODYSTRUCTURE types: no message is parsed to answer them.

use imap_codec::imap_types::body::{
    BasicFields, Body, BodyStructure, Disposition, Language, Location, MultiPartExtensionData,
    SinglePartExtensionData, SpecificFields,
};
use imap_codec::imap_types::core::{IString, NString, Vec1};
use imap_codec::imap_types::envelope::{Address, Envelope};
use mime_tree::{MessageStructure, Part, PartKind};

/// An IMAP string for any text: quoted when it can be, a literal otherwise.
/// NUL cannot travel in either, so it is dropped.
pub(crate) fn istring(s: &str) -> IString<'static> {
    match IString::try_from(s.to_string()) {
        Ok(v) => v,
        Err(_) => IString::try_from(s.replace('\0', "")).unwrap_or_else(|_| {
            IString::try_from(String::new()).expect("the empty string is a valid quoted string")
        }),
    }
}

/// NIL for `None`.
pub(crate) fn nstring(s: Option<&str>) -> NString<'static> {
    NString(s.map(istring))
}

fn addresses(list: &[mime_tree::Address]) -> Vec<Address<'static>> {
    list.iter()
        .map(|a| Address {
            name: nstring(a.name.as_deref()),
            adl: nstring(a.adl.as_deref()),
            mailbox: nstring(a.mailbox.as_deref()),
            host: nstring(a.host.as_deref()),
        })
        .collect()
}

/// RFC 3501 §7.4.2 ENVELOPE.
pub(crate) fn envelope(e: &mime_tree::Envelope) -> Envelope<'static> {
    Envelope {
        date: nstring(e.date.as_deref()),
        subject: nstring(e.subject.as_deref()),
        from: addresses(&e.from),
        sender: addresses(&e.sender),
        reply_to: addresses(&e.reply_to),
        to: addresses(&e.to),
        cc: addresses(&e.cc),
        bcc: addresses(&e.bcc),
        in_reply_to: nstring(e.in_reply_to.as_deref()),
        message_id: nstring(e.message_id.as_deref()),
    }
}

fn params(list: &[(String, String)]) -> Vec<(IString<'static>, IString<'static>)> {
    list.iter()
        .map(|(k, v)| (istring(&k.to_ascii_uppercase()), istring(v)))
        .collect()
}

fn disposition(part: &Part) -> Disposition<'static> {
    Disposition {
        disposition: part
            .disposition
            .as_ref()
            .map(|(value, p)| (istring(value), params(p))),
        tail: Some(Language {
            language: part.language.iter().map(|l| istring(l)).collect(),
            tail: Some(Location {
                location: nstring(part.location.as_deref()),
                extensions: Vec::new(),
            }),
        }),
    }
}

/// BODYSTRUCTURE (with extension data) or BODY (`extended = false`).
pub(crate) fn body_structure(s: &MessageStructure, extended: bool) -> BodyStructure<'static> {
    part_structure(&s.root, extended)
}

fn part_structure(part: &Part, extended: bool) -> BodyStructure<'static> {
    if let PartKind::Multipart(children) = &part.kind {
        let bodies: Vec<BodyStructure<'static>> = if children.is_empty() {
            // The grammar needs at least one body: a multipart without
            // parts gets an empty text part, as Dovecot writes it.
            vec![part_structure(&empty_text_part(), extended)]
        } else {
            children
                .iter()
                .map(|c| part_structure(c, extended))
                .collect()
        };
        return BodyStructure::Multi {
            bodies: Vec1::unvalidated(bodies),
            subtype: istring(&part.media_subtype.to_ascii_uppercase()),
            extension_data: extended.then(|| MultiPartExtensionData {
                parameter_list: params(&part.params),
                tail: Some(disposition(part)),
            }),
        };
    }
    let lines = part.body_lines.min(u64::from(u32::MAX)) as u32;
    let specific = match &part.kind {
        PartKind::Message(inner) => SpecificFields::Message {
            envelope: Box::new(envelope(&inner.envelope)),
            body_structure: Box::new(part_structure(&inner.root, extended)),
            number_of_lines: lines,
        },
        _ if part.media_type.eq_ignore_ascii_case("text") => SpecificFields::Text {
            subtype: istring(&part.media_subtype.to_ascii_uppercase()),
            number_of_lines: lines,
        },
        _ => SpecificFields::Basic {
            r#type: istring(&part.media_type.to_ascii_uppercase()),
            subtype: istring(&part.media_subtype.to_ascii_uppercase()),
        },
    };
    BodyStructure::Single {
        body: Body {
            basic: BasicFields {
                parameter_list: params(&part.params),
                id: nstring(part.id.as_deref()),
                description: nstring(part.description.as_deref()),
                content_transfer_encoding: istring(&part.encoding.to_ascii_uppercase()),
                size: part.body_len.min(u64::from(u32::MAX)) as u32,
            },
            specific,
        },
        extension_data: extended.then(|| SinglePartExtensionData {
            md5: nstring(part.md5.as_deref()),
            tail: Some(disposition(part)),
        }),
    }
}

fn empty_text_part() -> Part {
    Part {
        media_type: "text".into(),
        media_subtype: "plain".into(),
        params: vec![("charset".into(), "us-ascii".into())],
        encoding: "7bit".into(),
        ..Part::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use imap_codec::encode::Encoder;
    use imap_codec::imap_types::fetch::MessageDataItem;
    use imap_codec::imap_types::response::{Data, Response};
    use imap_codec::ResponseCodec;
    use std::num::NonZeroU32;

    fn encode(item: MessageDataItem<'static>) -> String {
        let data = Data::Fetch {
            seq: NonZeroU32::new(1).unwrap(),
            items: Vec1::from(item),
        };
        String::from_utf8(
            ResponseCodec::default()
                .encode(&Response::Data(data))
                .dump(),
        )
        .unwrap()
    }

    #[test]
    fn text_part_bodystructure() {
        let s = MessageStructure {
            root: Part {
                media_type: "text".into(),
                media_subtype: "plain".into(),
                params: vec![("charset".into(), "utf-8".into())],
                encoding: "7bit".into(),
                body_len: 12,
                body_lines: 2,
                ..Part::default()
            },
            ..MessageStructure::default()
        };
        assert_eq!(
            encode(MessageDataItem::BodyStructure(body_structure(&s, true))),
            "* 1 FETCH (BODYSTRUCTURE (\"TEXT\" \"PLAIN\" (\"CHARSET\" \"utf-8\") NIL NIL \"7BIT\" 12 2 NIL NIL NIL NIL))\r\n"
        );
        assert_eq!(
            encode(MessageDataItem::Body(body_structure(&s, false))),
            "* 1 FETCH (BODY (\"TEXT\" \"PLAIN\" (\"CHARSET\" \"utf-8\") NIL NIL \"7BIT\" 12 2))\r\n"
        );
    }

    #[test]
    fn envelope_with_group_and_odd_text() {
        let e = mime_tree::Envelope {
            subject: Some("a \"quoted\" \\ subject".into()),
            from: vec![mime_tree::Address {
                name: Some("Al".into()),
                mailbox: Some("al".into()),
                host: Some("example.org".into()),
                ..Default::default()
            }],
            to: vec![
                mime_tree::Address {
                    mailbox: Some("undisclosed".into()),
                    ..Default::default()
                },
                mime_tree::Address::default(),
            ],
            ..Default::default()
        };
        let out = encode(MessageDataItem::Envelope(envelope(&e)));
        assert_eq!(
            out,
            "* 1 FETCH (ENVELOPE (NIL \"a \\\"quoted\\\" \\\\ subject\" ((\"Al\" NIL \"al\" \"example.org\")) NIL NIL ((NIL NIL \"undisclosed\" NIL)(NIL NIL NIL NIL)) NIL NIL NIL NIL))\r\n"
        );
    }

    #[test]
    fn multipart_without_parts_gets_an_empty_text_part() {
        let s = MessageStructure {
            root: Part {
                media_type: "multipart".into(),
                media_subtype: "mixed".into(),
                kind: PartKind::Multipart(Vec::new()),
                ..Part::default()
            },
            ..MessageStructure::default()
        };
        assert_eq!(
            encode(MessageDataItem::Body(body_structure(&s, false))),
            "* 1 FETCH (BODY ((\"TEXT\" \"PLAIN\" (\"CHARSET\" \"us-ascii\") NIL NIL \"7BIT\" 0 0) \"MIXED\"))\r\n"
        );
    }

    #[test]
    fn strings_with_line_breaks_become_literals() {
        let out = encode(MessageDataItem::Envelope(envelope(&mime_tree::Envelope {
            subject: Some("two\r\nlines".into()),
            ..Default::default()
        })));
        assert!(out.contains("{10}\r\ntwo\r\nlines"), "{out}");
    }
}
