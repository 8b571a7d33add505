//! SEARCH: imap-codec's search keys as the store's, and the RFC 4731
//! ESEARCH result options, which imap-codec does not parse (the `RETURN`
//! clause is taken off here before the command is decoded, and the
//! ESEARCH response is written here).

use imap_codec::imap_types::core::AString;
use imap_codec::imap_types::search::SearchKey as Key;
use store::{SearchKey, FLAG_ANSWERED, FLAG_DELETED, FLAG_DRAFT, FLAG_FLAGGED, FLAG_SEEN};

use crate::selected::{BadSequence, Selected};

fn text(s: &AString<'_>) -> String {
    String::from_utf8_lossy(s.as_ref()).into_owned()
}

fn days(d: &imap_codec::imap_types::datetime::NaiveDate) -> i64 {
    use chrono::Datelike;
    i64::from(d.as_ref().num_days_from_ce()) - 719_163
}

/// The store's form of one IMAP search key. Message sequence numbers
/// become UIDs through the session's view.
/// The messages recent in this session, as UID ranges.
fn recent(view: &Selected) -> SearchKey {
    let uids: Vec<u32> = view.recent.iter().collect();
    let mut ranges: Vec<(store::Uid, store::Uid)> = Vec::new();
    for u in uids {
        match ranges.last_mut() {
            Some((_, hi)) if *hi + 1 == u => *hi = u,
            _ => ranges.push((u, u)),
        }
    }
    SearchKey::Uids(ranges)
}

pub(crate) fn convert(key: &Key<'_>, view: &Selected) -> Result<SearchKey, BadSequence> {
    Ok(match key {
        Key::And(keys) => SearchKey::And(
            keys.as_ref()
                .iter()
                .map(|k| convert(k, view))
                .collect::<Result<_, _>>()?,
        ),
        Key::SequenceSet(set) => SearchKey::Uids(view.search_ranges(set, false)),
        Key::Uid(set) => SearchKey::Uids(view.uid_ranges(set, true)?),
        Key::All => SearchKey::All,
        Key::Answered => SearchKey::FlagsSet(FLAG_ANSWERED),
        Key::Unanswered => SearchKey::FlagsUnset(FLAG_ANSWERED),
        Key::Deleted => SearchKey::FlagsSet(FLAG_DELETED),
        Key::Undeleted => SearchKey::FlagsUnset(FLAG_DELETED),
        Key::Draft => SearchKey::FlagsSet(FLAG_DRAFT),
        Key::Undraft => SearchKey::FlagsUnset(FLAG_DRAFT),
        Key::Flagged => SearchKey::FlagsSet(FLAG_FLAGGED),
        Key::Unflagged => SearchKey::FlagsUnset(FLAG_FLAGGED),
        Key::Seen => SearchKey::FlagsSet(FLAG_SEEN),
        Key::Unseen => SearchKey::FlagsUnset(FLAG_SEEN),
        // \Recent is this session's: the UIDs it holds as recent.
        Key::Recent => recent(view),
        Key::New => SearchKey::And(vec![recent(view), SearchKey::FlagsUnset(FLAG_SEEN)]),
        Key::Old => SearchKey::Not(Box::new(recent(view))),
        Key::Keyword(k) => SearchKey::Keyword(k.inner().to_string()),
        Key::Unkeyword(k) => SearchKey::Unkeyword(k.inner().to_string()),
        Key::Bcc(s) => SearchKey::Bcc(text(s)),
        Key::Cc(s) => SearchKey::Cc(text(s)),
        Key::From(s) => SearchKey::From(text(s)),
        Key::To(s) => SearchKey::To(text(s)),
        Key::Subject(s) => SearchKey::Subject(text(s)),
        Key::Header(name, value) => SearchKey::Header(text(name), text(value)),
        Key::Body(s) => SearchKey::Body(text(s)),
        Key::Text(s) => SearchKey::Text(text(s)),
        Key::Before(d) => SearchKey::Before(days(d)),
        Key::On(d) => SearchKey::On(days(d)),
        Key::Since(d) => SearchKey::Since(days(d)),
        Key::SentBefore(d) => SearchKey::SentBefore(days(d)),
        Key::SentOn(d) => SearchKey::SentOn(days(d)),
        Key::SentSince(d) => SearchKey::SentSince(days(d)),
        Key::Larger(n) => SearchKey::Larger(u64::from(*n)),
        Key::Smaller(n) => SearchKey::Smaller(u64::from(*n)),
        Key::Not(k) => SearchKey::Not(Box::new(convert(k, view)?)),
        Key::Or(a, b) => SearchKey::Or(Box::new(convert(a, view)?), Box::new(convert(b, view)?)),
        Key::ModSequence { modseq, .. } => SearchKey::ModSeqAtLeast(*modseq),
    })
}

/// What RFC 4731 `RETURN (...)` asked for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ReturnOptions {
    pub min: bool,
    pub max: bool,
    pub all: bool,
    pub count: bool,
    /// RFC 5182 SEARCHRES: keep the result for `$`.
    pub save: bool,
}

impl ReturnOptions {
    /// Whether an ESEARCH response is due: not for SAVE alone
    /// (RFC 5182 §2.1).
    pub(crate) fn answers(&self) -> bool {
        self.min || self.max || self.all || self.count
    }

    /// Which of the matching messages SAVE keeps: with MIN or MAX but
    /// neither ALL nor COUNT, only those (RFC 5182 §2.1).
    pub(crate) fn saved(&self, numbers: &[u32]) -> Vec<u32> {
        if (self.min || self.max) && !(self.all || self.count) {
            let mut out: Vec<u32> = Vec::new();
            if let (true, Some(n)) = (self.min, numbers.first()) {
                out.push(*n);
            }
            if let (true, Some(n)) = (self.max, numbers.last()) {
                if out.last() != Some(n) {
                    out.push(*n);
                }
            }
            out
        } else {
            numbers.to_vec()
        }
    }
}

/// Takes `RETURN (...)` off a SEARCH or SORT command, returning the command
/// without it. `None` when the command has no RETURN clause; `Some(Err)`
/// for an option Sluice does not know.
pub(crate) fn take_return(cmd: &[u8]) -> Option<Result<(Vec<u8>, ReturnOptions), String>> {
    // tag SP ["UID" SP] ("SEARCH" / "SORT") SP "RETURN" SP "(" options ")"
    // SP ... (RFC 4731 §3.1, RFC 5267 §3.2)
    let text = std::str::from_utf8(cmd).ok()?;
    let lower = text.to_ascii_lowercase();
    let mut pos = text.find(' ')? + 1;
    if lower[pos..].starts_with("uid ") {
        pos += 4;
    }
    if lower[pos..].starts_with("search ") {
        pos += 7;
    } else if lower[pos..].starts_with("sort ") {
        pos += 5;
    } else {
        return None;
    }
    if !lower[pos..].starts_with("return ") {
        return None;
    }
    let rest = &text[pos + 7..];
    let rest = rest.strip_prefix('(')?;
    let close = rest.find(')')?;
    let mut opts = ReturnOptions::default();
    for o in rest[..close].split_whitespace() {
        match o.to_ascii_uppercase().as_str() {
            "MIN" => opts.min = true,
            "MAX" => opts.max = true,
            "ALL" => opts.all = true,
            "COUNT" => opts.count = true,
            "SAVE" => opts.save = true,
            other => return Some(Err(format!("Unknown SEARCH RETURN option {other}"))),
        }
    }
    // RFC 4731 §3.1: an empty list means ALL.
    if opts == ReturnOptions::default() {
        opts.all = true;
    }
    let tail = rest[close + 1..].trim_start_matches(' ');
    let mut out = text.as_bytes()[..pos].to_vec();
    out.extend_from_slice(tail.as_bytes());
    Some(Ok((out, opts)))
}

/// Numbers as an IMAP sequence set (`1:3,7`), in the order given: runs
/// that go up by one become ranges, nothing is reordered (so a SORT's
/// `ALL` stays in sort order, RFC 5267 §3.1).
pub(crate) fn compact_set(numbers: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < numbers.len() {
        let start = numbers[i];
        let mut end = start;
        while i + 1 < numbers.len() && Some(numbers[i + 1]) == end.checked_add(1) {
            i += 1;
            end = numbers[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}:{end}"));
        }
        i += 1;
    }
    out
}

/// `* ESEARCH (TAG "t") [UID] ...` (RFC 4731 §3.1), with the highest
/// mod-sequence of the matches when the search used MODSEQ (RFC 7162
/// §3.1.5). `numbers` in answer order: ascending for SEARCH, sort order
/// for a SORT with RETURN (RFC 5267 §3.1), so MIN and MAX are the first
/// and last.
pub(crate) fn esearch(
    tag: &str,
    uid: bool,
    opts: &ReturnOptions,
    numbers: &[u32],
    modseq: Option<u64>,
) -> Vec<u8> {
    let mut line = format!("* ESEARCH (TAG \"{tag}\")");
    if uid {
        line.push_str(" UID");
    }
    if let (true, Some(min)) = (opts.min, numbers.first()) {
        line.push_str(&format!(" MIN {min}"));
    }
    if let (true, Some(max)) = (opts.max, numbers.last()) {
        line.push_str(&format!(" MAX {max}"));
    }
    if opts.all && !numbers.is_empty() {
        line.push_str(&format!(" ALL {}", compact_set(numbers)));
    }
    if opts.count {
        line.push_str(&format!(" COUNT {}", numbers.len()));
    }
    if let (Some(m), false) = (modseq, numbers.is_empty()) {
        line.push_str(&format!(" MODSEQ {m}"));
    }
    line.push_str("\r\n");
    line.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_clause() {
        let (cmd, opts) = take_return(b"a SEARCH RETURN (MIN COUNT) FROM x\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(cmd, b"a SEARCH FROM x\r\n");
        assert!(opts.min && opts.count && !opts.max && !opts.all);
        let (cmd, opts) = take_return(b"a uid search return () ALL\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(cmd, b"a uid search ALL\r\n");
        assert!(opts.all);
        assert!(take_return(b"a SEARCH FROM x\r\n").is_none());
        assert!(take_return(b"a FETCH 1 FLAGS\r\n").is_none());
        let (cmd, opts) = take_return(b"a SEARCH RETURN (SAVE) ALL\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(cmd, b"a SEARCH ALL\r\n");
        assert!(opts.save && !opts.answers());
        let (cmd, opts) = take_return(b"a UID SORT RETURN (MIN MAX) (DATE) UTF-8 ALL\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(cmd, b"a UID SORT (DATE) UTF-8 ALL\r\n");
        assert!(opts.min && opts.max && !opts.all);
        assert!(take_return(b"a SORT (DATE) UTF-8 ALL\r\n").is_none());
        assert!(take_return(b"a SEARCH RETURN (FROB) ALL\r\n")
            .unwrap()
            .is_err());
    }

    #[test]
    fn esearch_lines() {
        let opts = ReturnOptions {
            min: true,
            max: true,
            all: true,
            count: true,
            save: false,
        };
        assert_eq!(
            String::from_utf8(esearch("A1", true, &opts, &[1, 2, 3, 7, 9, 10], None)).unwrap(),
            "* ESEARCH (TAG \"A1\") UID MIN 1 MAX 10 ALL 1:3,7,9:10 COUNT 6\r\n"
        );
        assert_eq!(
            String::from_utf8(esearch("A1", false, &opts, &[], Some(7))).unwrap(),
            "* ESEARCH (TAG \"A1\") COUNT 0\r\n"
        );
        let all = ReturnOptions {
            all: true,
            ..ReturnOptions::default()
        };
        // RFC 9051 §6.4.4: no matches, nothing after the tag and UID.
        assert_eq!(
            String::from_utf8(esearch("t", true, &all, &[], None)).unwrap(),
            "* ESEARCH (TAG \"t\") UID\r\n"
        );
        assert_eq!(
            String::from_utf8(esearch("t", false, &all, &[4], Some(9))).unwrap(),
            "* ESEARCH (TAG \"t\") ALL 4 MODSEQ 9\r\n"
        );
    }

    #[test]
    fn saved_subsets() {
        let minmax = ReturnOptions {
            min: true,
            max: true,
            save: true,
            ..ReturnOptions::default()
        };
        assert_eq!(minmax.saved(&[2, 5, 9]), vec![2, 9]);
        assert_eq!(minmax.saved(&[5]), vec![5]);
        let with_all = ReturnOptions {
            all: true,
            ..minmax.clone()
        };
        assert_eq!(with_all.saved(&[2, 5, 9]), vec![2, 5, 9]);
    }
}
