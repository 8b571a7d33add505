//! RFC 5322 §3.4 address lists (with the obsolete syntax of §4.4) turned into
//! RFC 3501 address structures for ENVELOPE.
//!
//! The value is first cut into tokens (comments dropped, quoted strings and
//! domain literals kept whole), then read leniently: whatever does not fit
//! the grammar is skipped up to the next `,`, never panicking and always
//! moving forward.
//!
//! Conventions, as Dovecot's IMAP ENVELOPE has them:
//! - the display name is the phrase with its quoted strings unquoted (and
//!   backslash escapes undone), words separated by one space where the
//!   header had whitespace or a comment between them; encoded words stay
//!   encoded;
//! - the local part is kept as written (quotes included), without the
//!   whitespace and comments obsolete syntax allows around its dots;
//! - RFC 3501 §7.4.2 reserves a NIL host for group syntax, so an address
//!   without a domain gets host [`MISSING_DOMAIN`] and one without a local
//!   part gets mailbox [`MISSING_MAILBOX`];
//! - a lone phrase with no `@` (`To: someone`) is a mailbox if it is one
//!   word, a display name if it is several;
//! - a bare address followed by a comment (`user@host (Real Name)`, the
//!   old convention) takes the comment as its display name.

use crate::Address;

/// Host of an address that has none (`To: user`): RFC 3501 keeps NIL for
/// group markers, so a placeholder is needed; this is Dovecot's.
pub const MISSING_DOMAIN: &str = "MISSING_DOMAIN";

/// Mailbox of an address that has none (`<@host>`, or a display name
/// alone); Dovecot's placeholder.
pub const MISSING_MAILBOX: &str = "MISSING_MAILBOX";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A run of atext (8-bit bytes included, for raw UTF-8 headers).
    Atom,
    /// A quoted string, quotes included.
    Quoted,
    /// A domain literal, brackets included.
    Literal,
    /// One of `<>:;@,.` or another special out of place.
    Special(u8),
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    kind: Kind,
    text: &'a [u8],
    /// Whitespace or a comment came before this token.
    spaced: bool,
}

impl Token<'_> {
    fn is(&self, c: u8) -> bool {
        self.kind == Kind::Special(c)
    }

    fn is_word(&self) -> bool {
        matches!(self.kind, Kind::Atom | Kind::Quoted)
    }
}

/// The tokens of a value, and its comments (their text inside the outer
/// parentheses) with the number of tokens before each.
fn lex(s: &[u8]) -> (Vec<Token<'_>>, Vec<(usize, &[u8])>) {
    let mut out = Vec::new();
    let mut comments = Vec::new();
    let mut i = 0;
    let mut spaced = false;
    while i < s.len() {
        let b = s[i];
        let start = i;
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => {
                spaced = true;
                i += 1;
                continue;
            }
            b'(' => {
                let mut depth = 0usize;
                let open = i;
                while i < s.len() {
                    match s[i] {
                        b'\\' => i += 1,
                        b'(' => depth += 1,
                        b')' => {
                            depth -= 1;
                            if depth == 0 {
                                i += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
                let end = i.min(s.len());
                let inner_end = if end > open + 1 && s[end - 1] == b')' {
                    end - 1
                } else {
                    end
                };
                comments.push((out.len(), &s[(open + 1).min(inner_end)..inner_end]));
                i = end;
                spaced = true;
                continue;
            }
            b'"' => {
                i += 1;
                while i < s.len() {
                    match s[i] {
                        b'\\' => i += 2,
                        b'"' => {
                            i += 1;
                            break;
                        }
                        _ => i += 1,
                    }
                }
                let end = i.min(s.len());
                out.push(Token {
                    kind: Kind::Quoted,
                    text: &s[start..end],
                    spaced,
                });
                i = end;
            }
            b'[' => {
                i = memchr::memchr(b']', &s[i..]).map_or(s.len(), |j| i + j + 1);
                out.push(Token {
                    kind: Kind::Literal,
                    text: &s[start..i],
                    spaced,
                });
            }
            b'<' | b'>' | b':' | b';' | b'@' | b',' | b'.' | b')' | b']' | b'\\' => {
                i += 1;
                out.push(Token {
                    kind: Kind::Special(b),
                    text: &s[start..i],
                    spaced,
                });
            }
            _ => {
                while i < s.len() && !is_special_or_space(s[i]) {
                    i += 1;
                }
                out.push(Token {
                    kind: Kind::Atom,
                    text: &s[start..i],
                    spaced,
                });
            }
        }
        spaced = false;
    }
    (out, comments)
}

fn is_special_or_space(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t'
            | b'\r'
            | b'\n'
            | b'('
            | b')'
            | b'<'
            | b'>'
            | b'['
            | b']'
            | b':'
            | b';'
            | b'@'
            | b'\\'
            | b','
            | b'.'
            | b'"'
    )
}

/// A comment's text as a display name: backslash escapes undone, nested
/// parentheses kept, whitespace runs made one space.
fn comment_text(text: &[u8]) -> String {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == b'\\' && i + 1 < text.len() {
            i += 1;
        }
        out.push(text[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A quoted string's content without its quotes and escapes.
fn unquote(text: &[u8]) -> Vec<u8> {
    let inner = text.strip_prefix(b"\"").unwrap_or(text);
    let inner = inner.strip_suffix(b"\"").unwrap_or(inner);
    let mut out = Vec::with_capacity(inner.len());
    let mut i = 0;
    while i < inner.len() {
        if inner[i] == b'\\' && i + 1 < inner.len() {
            i += 1;
        }
        if !matches!(inner[i], b'\r' | b'\n') {
            out.push(inner[i]);
        }
        i += 1;
    }
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The display name of a phrase: unquoted words, single spaces where the
/// header had space. `None` when empty.
fn phrase(tokens: &[Token<'_>]) -> Option<String> {
    let mut out = Vec::new();
    for (n, t) in tokens.iter().enumerate() {
        if n > 0 && t.spaced {
            out.push(b' ');
        }
        match t.kind {
            Kind::Quoted => out.extend(unquote(t.text)),
            _ => out.extend_from_slice(t.text),
        }
    }
    (!out.is_empty()).then(|| text(&out))
}

/// Tokens joined as written, without the space between them.
fn raw(tokens: &[Token<'_>]) -> Option<String> {
    let out: Vec<u8> = tokens.iter().flat_map(|t| t.text.iter().copied()).collect();
    (!out.is_empty()).then(|| text(&out))
}

/// Parses an address-list (or mailbox-list) field value.
pub fn parse_address_list(value: &[u8]) -> Vec<Address> {
    let (tokens, comments) = lex(value);
    let t = &tokens[..];
    let mut out = Vec::new();
    let mut in_group = false;
    let mut i = 0;
    while i < t.len() {
        if t[i].is(b',') {
            i += 1;
            continue;
        }
        if t[i].is(b';') {
            if in_group {
                out.push(Address::default());
                in_group = false;
            }
            i += 1;
            continue;
        }
        let start = i;
        while i < t.len() && (t[i].is_word() || t[i].is(b'.')) {
            i += 1;
        }
        let words = &t[start..i];
        match t.get(i).map(|t| t.kind) {
            Some(Kind::Special(b'<')) => {
                i += 1;
                let (addr, next) = angle_addr(t, i, phrase(words));
                out.push(addr);
                i = skip_to_separator(t, next);
            }
            Some(Kind::Special(b':')) if !in_group => {
                // RFC 5322 §3.4 group: the start marker carries the name.
                out.push(Address {
                    mailbox: Some(phrase(words).unwrap_or_default()),
                    ..Address::default()
                });
                in_group = true;
                i += 1;
            }
            Some(Kind::Special(b'@')) | Some(Kind::Literal) => {
                let (domain, next) = domain(t, i);
                // `user@domain (Real Name)`: the old convention puts the
                // name in a comment after the address; clients and
                // Dovecot read it as the display name.
                let end = skip_to_separator(t, next);
                let name = comments
                    .iter()
                    .find(|(at, _)| *at >= next && *at <= end)
                    .map(|(_, text)| comment_text(text))
                    .filter(|n| !n.is_empty());
                out.push(Address {
                    name,
                    adl: None,
                    mailbox: Some(raw(words).unwrap_or_else(|| MISSING_MAILBOX.into())),
                    host: Some(domain),
                });
                i = skip_to_separator(t, next);
            }
            _ => {
                if !words.is_empty() {
                    out.push(lone_phrase(words));
                }
                // Whatever stopped the phrase and is not a separator is
                // garbage here: step over it (progress on every turn).
                if i < t.len() && !t[i].is(b',') && !t[i].is(b';') {
                    i += 1;
                }
            }
        }
    }
    if in_group {
        out.push(Address::default());
    }
    out
}

/// `To: someone` / `To: Some One`: one word is a local part without a
/// domain; several are a display name without an address.
fn lone_phrase(words: &[Token<'_>]) -> Address {
    let single = words.iter().filter(|t| t.is_word()).count() == 1;
    if single {
        Address {
            mailbox: raw(words),
            host: Some(MISSING_DOMAIN.into()),
            ..Address::default()
        }
    } else {
        Address {
            name: phrase(words),
            mailbox: Some(MISSING_MAILBOX.into()),
            host: Some(MISSING_DOMAIN.into()),
            ..Address::default()
        }
    }
}

/// The domain after `@` at `t[i]` (if `t[i]` is `@`): atoms, dots and
/// literals joined as written. Returns the domain (or the placeholder) and
/// the index after it.
fn domain(t: &[Token<'_>], mut i: usize) -> (String, usize) {
    if i < t.len() && t[i].is(b'@') {
        i += 1;
    }
    let start = i;
    while i < t.len() && matches!(t[i].kind, Kind::Atom | Kind::Literal | Kind::Special(b'.')) {
        // Whitespace may surround the dots (obs-domain), but two labels
        // with only space between them are the domain and trailing junk.
        if i > start && t[i].spaced && !t[i].is(b'.') && !t[i - 1].is(b'.') {
            break;
        }
        i += 1;
    }
    (
        raw(&t[start..i]).unwrap_or_else(|| MISSING_DOMAIN.into()),
        i,
    )
}

/// `[obs-route] addr-spec ">"`, starting after `<`.
fn angle_addr(t: &[Token<'_>], mut i: usize, name: Option<String>) -> (Address, usize) {
    // RFC 5322 §4.4 obs-route: "@a,@b:" before the address.
    let mut adl = None;
    if i < t.len() && t[i].is(b'@') {
        let start = i;
        let mut j = i;
        // Stopping at `<` and `;` too keeps garbage like `<@<@<@...` linear.
        while j < t.len() && !matches!(t[j].kind, Kind::Special(b':' | b'>' | b'<' | b';')) {
            j += 1;
        }
        if j < t.len() && t[j].is(b':') {
            adl = raw(&t[start..j]);
            i = j + 1;
        }
    }
    let start = i;
    while i < t.len() && (t[i].is_word() || t[i].is(b'.')) {
        i += 1;
    }
    let mailbox = raw(&t[start..i]).unwrap_or_else(|| MISSING_MAILBOX.into());
    let host = if i < t.len() && t[i].is(b'@') {
        let (host, next) = domain(t, i);
        i = next;
        host
    } else {
        MISSING_DOMAIN.into()
    };
    // Up to and past the closing bracket, stopping at a separator if it
    // is missing.
    while i < t.len() && !t[i].is(b',') && !t[i].is(b';') {
        i += 1;
        if t[i - 1].is(b'>') {
            break;
        }
    }
    (
        Address {
            name,
            adl,
            mailbox: Some(mailbox),
            host: Some(host),
        },
        i,
    )
}

/// Skips what follows an address up to the next `,` or `;`: trailing
/// garbage belongs to nothing.
fn skip_to_separator(t: &[Token<'_>], mut i: usize) -> usize {
    while i < t.len() && !t[i].is(b',') && !t[i].is(b';') {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comment_after_a_bare_address_is_its_name() {
        let list =
            parse_address_list(b"user@example.org (Real  Name), b@x.test, c@y.test (C \\(x\\))");
        assert_eq!(list.len(), 3);
        assert_eq!(list[0].name.as_deref(), Some("Real Name"));
        assert_eq!(list[0].mailbox.as_deref(), Some("user"));
        assert_eq!(list[1].name, None);
        assert_eq!(list[2].name.as_deref(), Some("C (x)"));
        let angle = parse_address_list(b"Shown <s@x.test> (ignored)");
        assert_eq!(angle[0].name.as_deref(), Some("Shown"));
        assert_eq!(parse_address_list(b"(only a comment) a@b.c")[0].name, None);
        assert_eq!(parse_address_list(b"a@b.c ()")[0].name, None);
        assert_eq!(
            parse_address_list(b"a@b.c (unclosed")[0].name.as_deref(),
            Some("unclosed")
        );
    }

    fn a(
        name: Option<&str>,
        adl: Option<&str>,
        mailbox: Option<&str>,
        host: Option<&str>,
    ) -> Address {
        Address {
            name: name.map(Into::into),
            adl: adl.map(Into::into),
            mailbox: mailbox.map(Into::into),
            host: host.map(Into::into),
        }
    }

    fn p(s: &str) -> Vec<Address> {
        parse_address_list(s.as_bytes())
    }

    #[test]
    fn plain_forms() {
        assert_eq!(
            p("user@example.com"),
            vec![a(None, None, Some("user"), Some("example.com"))]
        );
        assert_eq!(
            p("John Q. Public <john.q@example.com>, \"Doe, Jane\" <jane@x.org>"),
            vec![
                a(
                    Some("John Q. Public"),
                    None,
                    Some("john.q"),
                    Some("example.com")
                ),
                a(Some("Doe, Jane"), None, Some("jane"), Some("x.org")),
            ]
        );
        assert_eq!(
            p("=?utf-8?q?J=C3=B6rg?= <j@x>"),
            vec![a(Some("=?utf-8?q?J=C3=B6rg?="), None, Some("j"), Some("x"))]
        );
    }

    #[test]
    fn comments_and_quotes() {
        assert_eq!(
            p("Pete(A nice \\) chap) <pete(his account)@silly.test(his host)>"),
            vec![a(Some("Pete"), None, Some("pete"), Some("silly.test"))]
        );
        assert_eq!(
            p("jdoe@example.org (John Doe)"),
            vec![a(Some("John Doe"), None, Some("jdoe"), Some("example.org"))]
        );
        assert_eq!(
            p("\"a \\\"b\\\"\" <\"odd local\"@[1.2.3.4]>"),
            vec![a(
                Some("a \"b\""),
                None,
                Some("\"odd local\""),
                Some("[1.2.3.4]")
            )]
        );
    }

    #[test]
    fn groups() {
        assert_eq!(
            p("Undisclosed recipients:;"),
            vec![
                a(None, None, Some("Undisclosed recipients"), None),
                Address::default()
            ]
        );
        assert_eq!(
            p("A Group:Ed Jones <c@a.test>,joe@where.test,John <jdoe@one.test>; , x@y"),
            vec![
                a(None, None, Some("A Group"), None),
                a(Some("Ed Jones"), None, Some("c"), Some("a.test")),
                a(None, None, Some("joe"), Some("where.test")),
                a(Some("John"), None, Some("jdoe"), Some("one.test")),
                Address::default(),
                a(None, None, Some("x"), Some("y")),
            ]
        );
        // An unclosed group is closed at the end.
        assert_eq!(
            p("g: a@b"),
            vec![
                a(None, None, Some("g"), None),
                a(None, None, Some("a"), Some("b")),
                Address::default()
            ]
        );
    }

    #[test]
    fn obsolete_route_and_missing_parts() {
        assert_eq!(
            p("Joe <@relay.a,@relay.b:joe@c.example>"),
            vec![a(
                Some("Joe"),
                Some("@relay.a,@relay.b"),
                Some("joe"),
                Some("c.example")
            )]
        );
        assert_eq!(
            p("user"),
            vec![a(None, None, Some("user"), Some(MISSING_DOMAIN))]
        );
        assert_eq!(
            p("<user>"),
            vec![a(None, None, Some("user"), Some(MISSING_DOMAIN))]
        );
        assert_eq!(
            p("<>"),
            vec![a(None, None, Some(MISSING_MAILBOX), Some(MISSING_DOMAIN))]
        );
        assert_eq!(
            p("Some One"),
            vec![a(
                Some("Some One"),
                None,
                Some(MISSING_MAILBOX),
                Some(MISSING_DOMAIN)
            )]
        );
        assert_eq!(
            p("@host"),
            vec![a(None, None, Some(MISSING_MAILBOX), Some("host"))]
        );
    }

    #[test]
    fn garbage_stays_linear() {
        // Each of these would be quadratic with a careless scan; 200k
        // tokens must not take long.
        for unit in ["<@", "<@a,", "\"", "(", "a:", "<", "@", ",", "a "] {
            let _ = p(&unit.repeat(100_000));
        }
    }

    #[test]
    fn garbage_terminates() {
        for s in [
            "",
            ",,,",
            ";;",
            ">>><<<",
            "\"unclosed",
            "(unclosed",
            "[x",
            "a@",
            "@",
            ":",
            "<@a,@b",
            "a b c d@ e f <g",
            "\\\\\\",
            "a:b:c;d;",
        ] {
            let _ = p(s);
        }
        assert_eq!(p(", ,a@b,"), vec![a(None, None, Some("a"), Some("b"))]);
        assert_eq!(
            p("a@b junk, c@d"),
            vec![
                a(None, None, Some("a"), Some("b")),
                a(None, None, Some("c"), Some("d"))
            ]
        );
    }
}
