//! Scalar SQL functions the store's own queries call, registered on every
//! connection it opens. They are deterministic and never used by the
//! schema (triggers, indexes), so a database opened without them (the
//! `sqlite3` shell) stays fully readable.
//!
//! - `sluice_contains(text, folded_needle)`: case-insensitive substring
//!   test; the needle is passed already [`fold`]ed.
//! - `sluice_header(header_block, name, folded_value)`: whether the raw
//!   header block has a field `name` whose value contains the needle.
//! - `sluice_keywords(stored, op, list)`: a message's keywords after a
//!   flag change ([`crate::keyword::merge`]).

use rusqlite::functions::FunctionFlags;
use rusqlite::types::ValueRef;
use rusqlite::Connection;

use crate::keyword;

/// Case folding for text searches: simple Unicode lowercase, one
/// character at a time (no locale, no context: `Σ` is always `σ`), so a
/// needle and a haystack fold the same way wherever they sit.
pub(crate) fn fold(s: &str) -> String {
    if s.is_ascii() {
        return s.to_ascii_lowercase();
    }
    s.chars().flat_map(char::to_lowercase).collect()
}

/// Whether `hay` contains `folded_needle` after folding `hay`. An empty
/// needle is in every string.
pub(crate) fn contains_folded(hay: &str, folded_needle: &str) -> bool {
    if folded_needle.is_empty() {
        return true;
    }
    if hay.is_ascii() && folded_needle.is_ascii() {
        let (h, n) = (hay.as_bytes(), folded_needle.as_bytes());
        return h
            .windows(n.len())
            .any(|w| w.iter().zip(n).all(|(a, b)| a.to_ascii_lowercase() == *b));
    }
    fold(hay).contains(folded_needle)
}

/// The unfolded values of every field called `name` (case-insensitive) in
/// a raw header block (RFC 5322 §2.2.3: a line starting with white space
/// continues the field before it). Values are trimmed of surrounding white
/// space; bytes that are not UTF-8 are replaced.
pub(crate) fn header_values(block: &[u8], name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<Vec<u8>> = None;
    for line in block.split_inclusive(|&b| b == b'\n') {
        let text = line
            .strip_suffix(b"\n")
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
            .unwrap_or(line);
        if text.is_empty() {
            break; // the empty line that ends the header
        }
        if matches!(text[0], b' ' | b'\t') {
            if let Some(value) = current.as_mut() {
                value.extend_from_slice(text);
            }
            continue;
        }
        if let Some(value) = current.take() {
            out.push(finish_value(&value));
        }
        if let Some(colon) = text.iter().position(|&b| b == b':') {
            let field = text[..colon].trim_ascii();
            if field.eq_ignore_ascii_case(name.as_bytes()) {
                current = Some(text[colon + 1..].to_vec());
            }
        }
    }
    if let Some(value) = current {
        out.push(finish_value(&value));
    }
    out
}

fn finish_value(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw.trim_ascii()).into_owned()
}

/// `sluice_header`: a field `name` exists and, unless the needle is empty,
/// one of its values contains it (RFC 3501 §6.4.4 HEADER).
pub(crate) fn header_contains(block: &[u8], name: &str, folded_value: &str) -> bool {
    header_values(block, name)
        .iter()
        .any(|v| contains_folded(v, folded_value))
}

fn text_arg<'a>(v: ValueRef<'a>) -> &'a str {
    match v {
        ValueRef::Text(t) => std::str::from_utf8(t).unwrap_or(""),
        _ => "",
    }
}

fn bytes_arg<'a>(v: ValueRef<'a>) -> &'a [u8] {
    match v {
        ValueRef::Text(t) | ValueRef::Blob(t) => t,
        _ => &[],
    }
}

/// Registers the functions on `conn`.
pub(crate) fn register(conn: &Connection) -> rusqlite::Result<()> {
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("sluice_contains", 2, flags, |ctx| {
        Ok(contains_folded(
            text_arg(ctx.get_raw(0)),
            text_arg(ctx.get_raw(1)),
        ))
    })?;
    conn.create_scalar_function("sluice_header", 3, flags, |ctx| {
        Ok(header_contains(
            bytes_arg(ctx.get_raw(0)),
            text_arg(ctx.get_raw(1)),
            text_arg(ctx.get_raw(2)),
        ))
    })?;
    conn.create_scalar_function("sluice_header_block", 2, flags, |ctx| {
        // NULL (a blob stored before header blocks were kept) stays NULL.
        let Some(data) = ctx.get_raw(1).as_blob_or_null().ok().flatten() else {
            return Ok(None);
        };
        crate::chunk_codec::unpack_header(ctx.get::<i64>(0)?, data, 0)
            .map(|header| Some(header.into_owned()))
            .map_err(|e| rusqlite::Error::UserFunctionError(Box::new(e)))
    })?;
    conn.create_scalar_function("sluice_keywords", 3, flags, |ctx| {
        Ok(keyword::merge(
            text_arg(ctx.get_raw(0)),
            ctx.get::<i64>(1)?,
            text_arg(ctx.get_raw(2)),
        ))
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_unicode_per_character() {
        assert_eq!(fold("ÉCOLE Zürich"), "école zürich");
        assert_eq!(fold("ΟΔΟΣ"), "οδοσ");
        assert!(contains_folded("Re: Café PLANS", &fold("café plans")));
        assert!(contains_folded(
            "Alice <ALICE@Example.org>",
            "alice@example"
        ));
        assert!(!contains_folded("abc", "abd"));
        assert!(contains_folded("", ""));
    }

    #[test]
    fn header_lookup_unfolds_and_ignores_case() {
        let block = b"Subject: one\r\nX-Tag: alpha\r\n\tbeta\r\nBCC: a@b.test\r\nx-tag:gamma \r\n\r\nX-Tag: body\r\n";
        assert_eq!(header_values(block, "x-TAG"), ["alpha\tbeta", "gamma"]);
        assert!(header_contains(block, "bcc", "a@b"));
        assert!(header_contains(block, "X-Tag", ""));
        assert!(!header_contains(block, "X-Tag", "body"));
        assert!(!header_contains(block, "Cc", ""));
        // LF-only mail and a field that is the last line.
        assert!(header_contains(b"A: 1\nB: two\n", "b", "two"));
        assert!(header_contains(b"A: 1\r\nB: two", "b", "tw"));
        assert!(!header_contains(b"", "a", ""));
    }

    #[test]
    fn registered_functions_answer_in_sql() {
        let c = Connection::open_in_memory().unwrap();
        register(&c).unwrap();
        let hit: bool = c
            .query_row(
                "SELECT sluice_contains('Hello World', 'lo wo') AND sluice_header(CAST('To: x\r\n\r\n' AS BLOB), 'TO', '')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(hit);
        let merged: String = c
            .query_row("SELECT sluice_keywords('A b', 0, 'B c')", [], |r| r.get(0))
            .unwrap();
        assert_eq!(merged, "A b c");
    }
}
