//! Where a FETCH section (RFC 3501 §6.4.5) lies in the stored message,
//! found from the structure computed at delivery.

use std::num::NonZeroU32;

use mime_tree::{Part, PartKind};

/// The part a section's part number names. The top-level message's parts
/// are its multipart children, or the message itself as part 1; a
/// message/rfc822 part's parts are those of the message it encloses.
pub(crate) fn find_part<'a>(root: &'a Part, path: &[NonZeroU32]) -> Option<&'a Part> {
    let mut current = root;
    for (depth, n) in path.iter().enumerate() {
        let n = n.get() as usize;
        let container = if depth == 0 {
            current
        } else {
            match &current.kind {
                PartKind::Message(inner) => &inner.root,
                PartKind::Multipart(_) => current,
                PartKind::Leaf => return None,
            }
        };
        current = match &container.kind {
            PartKind::Multipart(children) => children.get(n - 1)?,
            _ if n == 1 => container,
            _ => return None,
        };
    }
    Some(current)
}

/// The message a HEADER or TEXT section with a part number refers to:
/// the part must be message/rfc822.
pub(crate) fn enclosed(part: &Part) -> Option<&Part> {
    match &part.kind {
        PartKind::Message(inner) => Some(&inner.root),
        _ => None,
    }
}

/// Header fields of a header block whose names are (or, with `not`, are
/// not) in `names`, followed by the empty line (RFC 3501 §6.4.5).
pub(crate) fn header_fields(block: &[u8], names: &[String], not: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut keep = false;
    let mut pos = 0;
    while pos < block.len() {
        let end = block[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(block.len(), |p| pos + p + 1);
        let line = &block[pos..end];
        pos = end;
        if line == b"\r\n" || line == b"\n" {
            break;
        }
        let continuation = matches!(line.first(), Some(b' ' | b'\t'));
        if !continuation {
            let name = line
                .iter()
                .position(|&b| b == b':')
                .map(|c| line[..c].trim_ascii())
                .unwrap_or(&[]);
            let listed = names
                .iter()
                .any(|n| n.as_bytes().eq_ignore_ascii_case(name));
            keep = !name.is_empty() && listed != not;
        }
        if keep {
            out.extend_from_slice(line);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(n: u64) -> Part {
        Part {
            body_offset: n,
            ..Part::default()
        }
    }

    fn nz(v: &[u32]) -> Vec<NonZeroU32> {
        v.iter().map(|&n| NonZeroU32::new(n).unwrap()).collect()
    }

    #[test]
    fn part_numbers() {
        let inner = mime_tree::MessageStructure {
            root: Part {
                kind: PartKind::Multipart(vec![leaf(30), leaf(31)]),
                ..Part::default()
            },
            ..Default::default()
        };
        let root = Part {
            kind: PartKind::Multipart(vec![
                leaf(10),
                Part {
                    body_offset: 20,
                    kind: PartKind::Message(Box::new(inner)),
                    ..Part::default()
                },
            ]),
            ..Part::default()
        };
        assert_eq!(find_part(&root, &nz(&[1])).unwrap().body_offset, 10);
        assert_eq!(find_part(&root, &nz(&[2])).unwrap().body_offset, 20);
        assert_eq!(find_part(&root, &nz(&[2, 2])).unwrap().body_offset, 31);
        assert!(find_part(&root, &nz(&[3])).is_none());
        assert!(find_part(&root, &nz(&[1, 1])).is_none());
        let single = leaf(5);
        assert_eq!(find_part(&single, &nz(&[1])).unwrap().body_offset, 5);
        assert!(find_part(&single, &nz(&[2])).is_none());
    }

    #[test]
    fn fields() {
        let block = b"From: a\r\nSubject: hi\r\n there\r\nTo: b\r\n\r\n";
        assert_eq!(
            header_fields(block, &["subject".into()], false),
            b"Subject: hi\r\n there\r\n\r\n"
        );
        assert_eq!(
            header_fields(block, &["SUBJECT".into(), "from".into()], true),
            b"To: b\r\n\r\n"
        );
        assert_eq!(header_fields(block, &["x".into()], false), b"\r\n");
    }
}
