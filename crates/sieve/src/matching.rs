//! Match types (RFC 5228 §2.7.1, RFC 5231, the regex draft) and
//! comparators (RFC 5228 §2.7.3, RFC 4790).

use std::cmp::Ordering;

/// A comparator (RFC 4790 §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Comparator {
    /// `i;octet`: bytes as they are.
    Octet,
    /// `i;ascii-casemap`: ASCII letters folded; the default (RFC 5228 §2.7.3).
    AsciiCasemap,
    /// `i;ascii-numeric`: the leading decimal digits as a number; no
    /// digits is positive infinity (RFC 4790 §9.1).
    AsciiNumeric,
}

impl Comparator {
    pub(crate) fn from_name(name: &str) -> Option<Comparator> {
        match name.to_ascii_lowercase().as_str() {
            "i;octet" => Some(Comparator::Octet),
            "i;ascii-casemap" => Some(Comparator::AsciiCasemap),
            "i;ascii-numeric" => Some(Comparator::AsciiNumeric),
            _ => None,
        }
    }

    /// Orders `a` against `b`.
    pub(crate) fn compare(self, a: &str, b: &str) -> Ordering {
        match self {
            Comparator::Octet => a.as_bytes().cmp(b.as_bytes()),
            Comparator::AsciiCasemap => a
                .bytes()
                .map(|c| c.to_ascii_lowercase())
                .cmp(b.bytes().map(|c| c.to_ascii_lowercase())),
            Comparator::AsciiNumeric => numeric(a).cmp(&numeric(b)),
        }
    }

    fn eq_char(self, a: char, b: char) -> bool {
        match self {
            Comparator::AsciiCasemap => a.eq_ignore_ascii_case(&b),
            _ => a == b,
        }
    }

    /// Substring match; only the octet and casemap comparators have one.
    fn contains(self, hay: &str, needle: &str) -> bool {
        match self {
            Comparator::AsciiCasemap => hay
                .to_ascii_lowercase()
                .contains(&needle.to_ascii_lowercase()),
            _ => hay.contains(needle),
        }
    }
}

/// RFC 4790 §9.1.1: the value of a string under i;ascii-numeric; None is
/// positive infinity, which sorts after every number.
fn numeric(s: &str) -> NumVal {
    let digits: &str = &s[..s.bytes().take_while(u8::is_ascii_digit).count()];
    if digits.is_empty() {
        return NumVal::Infinity;
    }
    let d = digits.trim_start_matches('0');
    NumVal::Num(d.len(), d.to_string())
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum NumVal {
    /// Number of significant digits, then the digits: orders like the number.
    Num(usize, String),
    Infinity,
}

/// A relational operator (RFC 5231 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rel {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

impl Rel {
    pub(crate) fn from_name(name: &str) -> Option<Rel> {
        Some(match name.to_ascii_lowercase().as_str() {
            "gt" => Rel::Gt,
            "ge" => Rel::Ge,
            "lt" => Rel::Lt,
            "le" => Rel::Le,
            "eq" => Rel::Eq,
            "ne" => Rel::Ne,
            _ => return None,
        })
    }

    fn holds(self, o: Ordering) -> bool {
        match self {
            Rel::Gt => o == Ordering::Greater,
            Rel::Ge => o != Ordering::Less,
            Rel::Lt => o == Ordering::Less,
            Rel::Le => o != Ordering::Greater,
            Rel::Eq => o == Ordering::Equal,
            Rel::Ne => o != Ordering::Equal,
        }
    }
}

/// A match type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatchType {
    Is,
    Contains,
    Matches,
    Regex,
    Count(Rel),
    Value(Rel),
}

/// What one comparison found: whether it matched, and the match variables
/// (RFC 5229 §3.2) when the match type sets them.
pub(crate) type Captures = Vec<String>;

/// Compares one value against one key with a match type other than
/// `:count` and `:regex`. On a `:matches` success the captures are the whole
/// value and then what each wildcard matched.
pub(crate) fn compare(mt: MatchType, cmp: Comparator, value: &str, key: &str) -> Option<Captures> {
    match mt {
        MatchType::Is => (cmp.compare(value, key) == Ordering::Equal).then(Vec::new),
        MatchType::Contains => cmp.contains(value, key).then(Vec::new),
        MatchType::Matches => wildcard(cmp, value, key),
        MatchType::Value(rel) => rel.holds(cmp.compare(value, key)).then(Vec::new),
        MatchType::Count(_) | MatchType::Regex => None,
    }
}

/// `:count`: the number of values against the key (RFC 5231 §4.2).
pub(crate) fn count(rel: Rel, cmp: Comparator, n: usize, key: &str) -> bool {
    rel.holds(cmp.compare(&n.to_string(), key))
}

#[derive(Debug, Clone, PartialEq)]
enum Pat {
    Char(char),
    One,
    Any,
}

/// RFC 5228 §2.7.1 `:matches`: `*` is any sequence, `?` any one character,
/// a backslash quotes the next. Each `*` takes as little as it can, which
/// decides what the match variables hold (as Pigeonhole does).
pub(crate) fn wildcard(cmp: Comparator, value: &str, pattern: &str) -> Option<Captures> {
    let mut pat = Vec::new();
    let mut it = pattern.chars();
    while let Some(c) = it.next() {
        pat.push(match c {
            '*' => Pat::Any,
            '?' => Pat::One,
            '\\' => match it.next() {
                Some(c) => Pat::Char(c),
                None => Pat::Char('\\'),
            },
            c => Pat::Char(c),
        });
    }
    let text: Vec<char> = value.chars().collect();
    // Glob matching that backtracks only into the latest `*`: when what
    // follows a `*` fails for every length of it, no longer earlier `*` can
    // help, so the first match found is the one a full search in
    // shortest-first order would find. Linear memory, quadratic time at worst.
    let mut caps: Vec<(usize, usize)> = Vec::new();
    // (pattern index of the `*`, its capture index, where it starts, its end)
    let mut back: Option<(usize, usize, usize, usize)> = None;
    let (mut p, mut t) = (0usize, 0usize);
    loop {
        if p == pat.len() {
            if t == text.len() {
                break;
            }
        } else {
            match &pat[p] {
                Pat::Any => {
                    back = Some((p, caps.len(), t, t));
                    caps.push((t, t));
                    p += 1;
                    continue;
                }
                Pat::One if t < text.len() => {
                    caps.push((t, t + 1));
                    p += 1;
                    t += 1;
                    continue;
                }
                Pat::Char(c) if t < text.len() && cmp.eq_char(text[t], *c) => {
                    p += 1;
                    t += 1;
                    continue;
                }
                _ => {}
            }
        }
        // The latest `*` takes one more character, or there is no match.
        let (sp, ci, start, end) = back?;
        if end >= text.len() {
            return None;
        }
        caps.truncate(ci);
        caps.push((start, end + 1));
        back = Some((sp, ci, start, end + 1));
        p = sp + 1;
        t = end + 1;
    }
    let mut out = Vec::with_capacity(caps.len() + 1);
    out.push(value.to_string());
    out.extend(caps.iter().map(|(a, b)| text[*a..*b].iter().collect()));
    Some(out)
}

/// Builds a `:regex` key: POSIX extended syntax as far as the `regex` crate
/// shares it; `i;ascii-casemap` makes it case-insensitive (draft-ietf-sieve-regex §3).
pub(crate) fn build_regex(pattern: &str, cmp: Comparator) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(pattern)
        .case_insensitive(cmp == Comparator::AsciiCasemap)
        .size_limit(1 << 20)
        .build()
}

/// `:regex` against one value: unanchored; the captures are the whole
/// match and then each group (empty when a group took no part).
pub(crate) fn regex_match(re: &regex::Regex, value: &str) -> Option<Captures> {
    let c = re.captures(value)?;
    Some(
        c.iter()
            .map(|g| g.map_or(String::new(), |g| g.as_str().to_string()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(v: &str, p: &str) -> Option<Vec<String>> {
        wildcard(Comparator::Octet, v, p)
    }

    #[test]
    fn wildcards_take_as_little_as_they_can() {
        assert_eq!(m("a.b.cb.d", "*.*").unwrap(), ["a.b.cb.d", "a", "b.cb.d"]);
        assert_eq!(
            m("a.b.cb.d", "**b*").unwrap(),
            ["a.b.cb.d", "", "a.", ".cb.d"]
        );
        assert_eq!(
            m("a.b.cb.d", "*?*").unwrap(),
            ["a.b.cb.d", "", "a", ".b.cb.d"]
        );
        assert!(m("abc", "a?").is_none());
        assert!(m("a*c", "a\\*c").is_some());
        assert!(m("abc", "a\\*c").is_none());
        assert!(m("", "*").is_some());
        assert!(m("", "?").is_none());
        assert!(wildcard(Comparator::AsciiCasemap, "HeLLo", "h*O").is_some());
    }

    #[test]
    fn numeric_comparator() {
        let c = Comparator::AsciiNumeric;
        assert_eq!(c.compare("10", "9"), Ordering::Greater);
        assert_eq!(c.compare("007", "7"), Ordering::Equal);
        assert_eq!(c.compare("abc", "99999"), Ordering::Greater);
        assert_eq!(c.compare("abc", "x"), Ordering::Equal);
        assert_eq!(c.compare("12abc", "12"), Ordering::Equal);
    }

    #[test]
    fn relational() {
        assert!(count(Rel::Eq, Comparator::AsciiNumeric, 2, "2"));
        assert!(compare(
            MatchType::Value(Rel::Gt),
            Comparator::AsciiNumeric,
            "10",
            "9"
        )
        .is_some());
        assert!(compare(MatchType::Value(Rel::Gt), Comparator::Octet, "10", "9").is_none());
    }

    fn naive(v: &[char], p: &[char]) -> bool {
        match p.split_first() {
            None => v.is_empty(),
            Some(('*', rest)) => (0..=v.len()).any(|i| naive(&v[i..], rest)),
            Some(('?', rest)) => !v.is_empty() && naive(&v[1..], rest),
            Some((c, rest)) => v.first() == Some(c) && naive(&v[1..], rest),
        }
    }

    proptest! {
        #[test]
        fn wildcard_agrees_with_naive(v in "[ab.]{0,8}", p in "[ab.*?]{0,6}") {
            let vc: Vec<char> = v.chars().collect();
            let pc: Vec<char> = p.chars().collect();
            let got = m(&v, &p);
            prop_assert_eq!(got.is_some(), naive(&vc, &pc));
            if let Some(caps) = got {
                prop_assert_eq!(caps.len(), 1 + p.chars().filter(|c| *c == '*' || *c == '?').count());
            }
        }
    }
}
