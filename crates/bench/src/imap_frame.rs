//! IMAP response framing without I/O: which lines end in a literal and
//! how long it is, what kind of response a line starts, and the few
//! untagged data the workload reads (SEARCH hits, EXISTS, STATUS).
//!
//! The workload needs framing, not a full parse: `imap-codec` would build
//! every FETCH response's syntax tree, putting the client's CPU into the
//! measured time of a 21,000-message header fetch. So the framing is ours
//! (RFC 3501 §4.3 literals, §7 responses) and property-tested.

/// The length of the literal a response line ends with (`{123}`, or the
/// non-synchronising `{123+}` of RFC 7888), if any.
pub fn trailing_literal(line: &[u8]) -> Option<u64> {
    let rest = line.strip_suffix(b"}")?;
    let open = rest.iter().rposition(|&b| b == b'{')?;
    let mut digits = &rest[open + 1..];
    if let Some(d) = digits.strip_suffix(b"+") {
        digits = d;
    }
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// What a line from the server starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start<'a> {
    /// `* ...`: untagged data.
    Untagged,
    /// `+ ...`: the server waits for a literal's bytes.
    Continuation,
    /// `TAG OK|NO|BAD text`: the end of a command.
    Tagged {
        /// The tag.
        tag: &'a [u8],
        /// Whether the status is OK.
        ok: bool,
    },
}

/// Classifies a line (without CRLF).
pub fn start(line: &[u8]) -> Option<Start<'_>> {
    if line.starts_with(b"* ") || line == b"*" {
        return Some(Start::Untagged);
    }
    if line.starts_with(b"+") {
        return Some(Start::Continuation);
    }
    let sp = line.iter().position(|&b| b == b' ')?;
    let (tag, rest) = (&line[..sp], &line[sp + 1..]);
    let word = rest.split(|&b| b == b' ').next().unwrap_or_default();
    let ok = word.eq_ignore_ascii_case(b"OK");
    if ok || word.eq_ignore_ascii_case(b"NO") || word.eq_ignore_ascii_case(b"BAD") {
        Some(Start::Tagged { tag, ok })
    } else {
        None
    }
}

/// The numbers of a `* SEARCH n n n` line, if it is one.
pub fn search_hits(line: &[u8]) -> Option<Vec<u32>> {
    let rest = strip_prefix_ci(line, b"* SEARCH")?;
    Some(
        std::str::from_utf8(rest)
            .ok()?
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect(),
    )
}

/// The count of a `* n EXISTS` line, if it is one.
pub fn exists(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"* ")?;
    let text = std::str::from_utf8(rest).ok()?;
    let (n, word) = text.split_once(' ')?;
    word.trim()
        .eq_ignore_ascii_case("EXISTS")
        .then(|| n.parse().ok())?
}

/// The sequence number of a `* n EXPUNGE` line.
pub fn expunged(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"* ")?;
    let text = std::str::from_utf8(rest).ok()?;
    let (n, word) = text.split_once(' ')?;
    word.trim()
        .eq_ignore_ascii_case("EXPUNGE")
        .then(|| n.parse().ok())?
}

/// The MESSAGES count of a `* STATUS mailbox (MESSAGES n ...)` line.
pub fn status_messages(line: &[u8]) -> Option<u64> {
    strip_prefix_ci(line, b"* STATUS")?;
    let text = std::str::from_utf8(line).ok()?.to_ascii_uppercase();
    let at = text.find("MESSAGES ")? + "MESSAGES ".len();
    text[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Whether a line is a `* n FETCH` or `* n EXPUNGE` response, and which.
pub fn numbered(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"* ")?;
    let sp = rest.iter().position(|&b| b == b' ')?;
    if !rest[..sp].iter().all(u8::is_ascii_digit) || sp == 0 {
        return None;
    }
    let word = rest[sp + 1..].split(|&b| b == b' ').next()?;
    Some(word)
}

fn strip_prefix_ci<'a>(line: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    if line.len() >= prefix.len() && line[..prefix.len()].eq_ignore_ascii_case(prefix) {
        let rest = &line[prefix.len()..];
        if rest.is_empty() || rest[0] == b' ' {
            return Some(rest);
        }
    }
    None
}

/// A quoted string (RFC 3501 §4.3) for a login name, password or search key.
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// A sequence set (RFC 3501 §9) from sorted numbers, runs collapsed:
/// `1:3,7,9:10`.
pub fn sequence_set(sorted: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j > i {
            out.push_str(&format!("{}:{}", sorted[i], sorted[j]));
        } else {
            out.push_str(&sorted[i].to_string());
        }
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn literals() {
        assert_eq!(
            trailing_literal(b"* 1 FETCH (BODY[HEADER] {342}"),
            Some(342)
        );
        assert_eq!(trailing_literal(b"A1 APPEND INBOX {10+}"), Some(10));
        assert_eq!(trailing_literal(b"* 1 FETCH (FLAGS ())"), None);
        assert_eq!(trailing_literal(b"* OK {x}"), None);
        assert_eq!(trailing_literal(b"{}"), None);
    }

    #[test]
    fn starts() {
        assert_eq!(start(b"* 3 EXISTS"), Some(Start::Untagged));
        assert_eq!(start(b"+ go ahead"), Some(Start::Continuation));
        assert_eq!(
            start(b"a7 OK done"),
            Some(Start::Tagged {
                tag: b"a7",
                ok: true
            })
        );
        assert_eq!(
            start(b"a7 no way"),
            Some(Start::Tagged {
                tag: b"a7",
                ok: false
            })
        );
        assert_eq!(start(b"garbage"), None);
    }

    #[test]
    fn untagged_data() {
        assert_eq!(expunged(b"* 7 EXPUNGE\r\n"), Some(7));
        assert_eq!(expunged(b"* 7 EXISTS\r\n"), None);
        assert_eq!(exists(b"* 7 expunge\r\n"), None);
        assert_eq!(search_hits(b"* SEARCH 2 5 9"), Some(vec![2, 5, 9]));
        assert_eq!(search_hits(b"* SEARCH"), Some(vec![]));
        assert_eq!(search_hits(b"* SEARCHING"), None);
        assert_eq!(exists(b"* 21282 EXISTS"), Some(21282));
        assert_eq!(exists(b"* 3 RECENT"), None);
        assert_eq!(
            status_messages(b"* STATUS INBOX (MESSAGES 12 UIDNEXT 13)"),
            Some(12)
        );
        assert_eq!(numbered(b"* 4 FETCH (FLAGS ())"), Some(&b"FETCH"[..]));
        assert_eq!(numbered(b"* 4 EXPUNGE"), Some(&b"EXPUNGE"[..]));
        assert_eq!(numbered(b"* OK hi"), None);
        assert_eq!(quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }

    proptest! {
        #[test]
        fn literal_round_trip(prefix in "[ -z]{0,40}", n: u32, plus: bool) {
            let line = format!("{prefix} {{{n}{}}}", if plus { "+" } else { "" });
            prop_assert_eq!(trailing_literal(line.as_bytes()), Some(n as u64));
        }

        #[test]
        fn framing_never_panics(line in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = trailing_literal(&line);
            let _ = start(&line);
            let _ = search_hits(&line);
            let _ = exists(&line);
            let _ = status_messages(&line);
            let _ = numbered(&line);
        }

        #[test]
        fn sequence_sets_cover_exactly(mut v in proptest::collection::btree_set(1u32..500, 0..100)) {
            let sorted: Vec<u32> = std::mem::take(&mut v).into_iter().collect();
            let set = sequence_set(&sorted);
            let mut back = Vec::new();
            for part in set.split(',').filter(|p| !p.is_empty()) {
                match part.split_once(':') {
                    Some((a, b)) => back.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
                    None => back.push(part.parse::<u32>().unwrap()),
                }
            }
            prop_assert_eq!(back, sorted);
        }
    }
}
