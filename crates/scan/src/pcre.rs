//! The regular expressions of PCRE subsignatures, without a C PCRE library.
//!
//! A pattern is compiled with the `regex` crate on bytes (Unicode off, so `.` and
//! classes work on bytes as PCRE does without its UTF mode) when that crate accepts
//! it: matching is then linear in the input and needs no limit. Patterns only a
//! backtracking engine runs (back-references, look-around, atomic groups, possessive
//! quantifiers) go to `fancy-regex`, in its byte mode, with a backtracking limit in
//! the role of clamd's `PCREMatchLimit`: a search that hits it is taken as no match
//! and counted. A pattern neither accepts is refused at load time.
//!
//! Loading only parses a pattern (to choose the engine and refuse what neither
//! reads); it is compiled the first time its trigger fires, since most never do:
//! with 5,000 PCRE subsignatures that saves most of their load time and about
//! 80 MB. A pattern that parses but then fails to compile (a program over the
//! size limit) never matches.
//!
//! Flags, as ClamAV reads them: `i` caseless, `s` dot-all, `m` multi-line, `x`
//! extended, `U` ungreedy, `A` anchored, `E` dollar-end-only (PCRE's own); `g`
//! global (count every match), `r` rolling (never anchor at the offset), `e`
//! encompass (the match must lie within `offset,shift`) (ClamAV's).

use crate::signature::Refusal;

/// Backtracking steps one `fancy-regex` search may take; clamd's `PCREMatchLimit`
/// defaults to 100,000 (`fancy-regex` counts steps a little differently, so this
/// bounds the same thing, not the same number).
pub const MATCH_LIMIT: usize = 100_000;

/// Largest compiled program a pattern may produce.
const SIZE_LIMIT: usize = 4 << 20;

#[derive(Debug)]
enum Engine {
    Linear(regex::bytes::Regex),
    Backtracking(Box<fancy_regex::Regex>),
}

/// PCRE's compile-time flags.
#[derive(Debug, Clone, Copy)]
struct Flags {
    i: bool,
    s: bool,
    m: bool,
    x: bool,
    u: bool,
}

/// A PCRE subsignature pattern with ClamAV's matcher flags, compiled on first use.
#[derive(Debug)]
pub(crate) struct Pcre {
    /// The pattern as the `regex` crate reads PCRE's (see [`translate`]).
    source: String,
    flags: Flags,
    /// The `regex` crate parses it; otherwise only `fancy-regex` does.
    linear: bool,
    engine: std::sync::OnceLock<Option<Engine>>,
    /// `g`: every match counts, not only the first.
    pub global: bool,
    /// `r`: the search is never anchored at the offset.
    pub rolling: bool,
    /// `e`: the match must lie within the offset's shift.
    pub encompass: bool,
    /// `A`: the match must start where the search starts.
    pub anchored: bool,
}

/// Outcome of one search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    At(usize, usize),
    None,
    /// The backtracking limit was hit.
    Limit,
}

impl Pcre {
    /// Compiles `pattern` with ClamAV's `flags`.
    pub fn new(pattern: &str, flags: &str) -> Result<Pcre, Refusal> {
        let (mut i, mut s, mut m, mut x, mut u, mut a, mut e) =
            (false, false, false, false, false, false, false);
        let (mut global, mut rolling, mut encompass) = (false, false, false);
        for c in flags.chars() {
            match c {
                'i' => i = true,
                's' => s = true,
                'm' => m = true,
                'x' => x = true,
                'U' => u = true,
                'A' => a = true,
                'E' => e = true,
                'g' => global = true,
                'r' => rolling = true,
                'e' => encompass = true,
                _ => return Err("ldb: unknown PCRE flag"),
            }
        }
        let source = translate(pattern, m, e);
        let flags = Flags { i, s, m, x, u };
        let linear = regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .case_insensitive(i)
            .dot_matches_new_line(s)
            .multi_line(m)
            .ignore_whitespace(x)
            .swap_greed(u)
            .build()
            .parse(&source)
            .is_ok();
        if !linear {
            fancy_regex::Expr::parse_tree(&fancy_source(&source, flags))
                .map_err(|_| "ldb: PCRE pattern neither regex engine accepts")?;
        }
        Ok(Pcre {
            source,
            flags,
            linear,
            engine: std::sync::OnceLock::new(),
            global,
            rolling,
            encompass,
            anchored: a,
        })
    }

    fn engine(&self) -> Option<&Engine> {
        self.engine
            .get_or_init(|| {
                let f = self.flags;
                if self.linear {
                    let re = regex::bytes::RegexBuilder::new(&self.source)
                        .unicode(false)
                        .case_insensitive(f.i)
                        .dot_matches_new_line(f.s)
                        .multi_line(f.m)
                        .ignore_whitespace(f.x)
                        .swap_greed(f.u)
                        .size_limit(SIZE_LIMIT)
                        .build();
                    if let Ok(re) = re {
                        return Some(Engine::Linear(re));
                    }
                }
                fancy_regex::RegexBuilder::new(&fancy_source(&self.source, f))
                    .bytes_mode(fancy_regex::BytesMode::Ascii)
                    .backtrack_limit(MATCH_LIMIT)
                    .delegate_size_limit(SIZE_LIMIT)
                    .build()
                    .ok()
                    .map(|re| Engine::Backtracking(Box::new(re)))
            })
            .as_ref()
    }

    /// Whether the pattern needs the backtracking engine.
    pub fn backtracking(&self) -> bool {
        !self.linear
    }

    /// Searches `hay` from `start`; with `anchored` the match must begin at `start`.
    /// Offsets are within `hay` (look-behind sees `hay[..start]`, as PCRE's start
    /// offset does).
    pub fn find_at(&self, hay: &[u8], start: usize, anchored: bool) -> Found {
        let anchored = anchored || self.anchored;
        let Some(engine) = self.engine() else {
            return Found::None;
        };
        match engine {
            Engine::Linear(re) => match re.find_at(hay, start) {
                // The leftmost match starts at `start` whenever one can.
                Some(m) if !anchored || m.start() == start => Found::At(m.start(), m.end()),
                _ => Found::None,
            },
            Engine::Backtracking(re) => {
                let input = fancy_regex::RegexInput::new(hay)
                    .from_pos(start)
                    .anchored(anchored);
                match re.find_input(input) {
                    Ok(Some(m)) => Found::At(m.start(), m.end()),
                    Ok(None) => Found::None,
                    Err(_) => Found::Limit,
                }
            }
        }
    }
}

/// The pattern with its flags inline, for `fancy-regex`.
fn fancy_source(source: &str, f: Flags) -> String {
    let mut flags = String::new();
    for (on, c) in [(f.i, 'i'), (f.s, 's'), (f.m, 'm'), (f.x, 'x'), (f.u, 'U')] {
        if on {
            flags.push(c);
        }
    }
    if flags.is_empty() {
        source.to_string()
    } else {
        format!("(?{flags}){source}")
    }
}

/// Rewrites what PCRE and the `regex` crate read differently: without `m` and `E`,
/// PCRE's `$` (and `\Z`) also match before a newline that ends the subject, which
/// the `regex` crate's `$` does not; `(?:\n?\z)` does (it takes the newline into the
/// match, which moves no match start).
fn translate(p: &str, multi_line: bool, dollar_end_only: bool) -> String {
    let mut out = String::with_capacity(p.len() + 8);
    let mut chars = p.chars().peekable();
    let mut in_class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(n) = chars.next() else {
                    out.push('\\');
                    break;
                };
                if n == 'Z' && !in_class {
                    out.push_str(r"(?:\n?\z)");
                } else if n == '0' {
                    // PCRE's octal `\0`, `\0n`, `\0nn` (`\1`.. stay back-references).
                    let mut v = 0u32;
                    for _ in 0..2 {
                        match chars.peek().and_then(|c| c.to_digit(8)) {
                            Some(d) => {
                                v = v * 8 + d;
                                chars.next();
                            }
                            None => break,
                        }
                    }
                    out.push_str(&format!("\\x{v:02x}"));
                } else {
                    out.push('\\');
                    out.push(n);
                }
                class_start = false;
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                class_start = true;
                out.push(c);
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                continue;
            }
            ']' if in_class && !class_start => in_class = false,
            '$' if !in_class && !multi_line => {
                out.push_str(if dollar_end_only { r"\z" } else { r"(?:\n?\z)" });
                class_start = false;
                continue;
            }
            _ => {}
        }
        class_start = false;
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(p: &str, f: &str, hay: &[u8]) -> Option<(usize, usize)> {
        match Pcre::new(p, f).unwrap().find_at(hay, 0, false) {
            Found::At(s, e) => Some((s, e)),
            _ => None,
        }
    }

    #[test]
    fn flags_and_engines() {
        assert_eq!(first("ab+c", "", b"xxabbbc"), Some((2, 7)));
        assert_eq!(first("AB+C", "i", b"xxabbbc"), Some((2, 7)));
        assert_eq!(first("a.c", "", b"a\nc"), None);
        assert_eq!(first("a.c", "s", b"a\nc"), Some((0, 3)));
        assert_eq!(first("^b", "", b"a\nb"), None);
        assert_eq!(first("^b", "m", b"a\nb"), Some((2, 3)));
        assert_eq!(first("a$", "", b"xa\n"), Some((1, 3)));
        assert_eq!(first("a$", "E", b"xa\n"), None);
        assert_eq!(first("a+", "U", b"aaa"), Some((0, 1)));
        assert_eq!(first("\\xff\\x00", "", b"\x01\xff\x00"), Some((1, 3)));
        assert_eq!(first("[^a]", "", b"a\xfe"), Some((1, 2)));
        assert_eq!(first("a\\0\\012", "", b"xa\0\n"), Some((1, 4)));
        // Only the backtracking engine has these.
        let re = Pcre::new("(ab)\\1", "").unwrap();
        assert!(re.backtracking());
        assert_eq!(re.find_at(b"xabab", 0, false), Found::At(1, 5));
        assert_eq!(first("foo(?=bar)", "", b"foobaz foobar"), Some((7, 10)));
        assert!(!Pcre::new("ab", "").unwrap().backtracking());
        assert!(Pcre::new("ab", "q").is_err());
        assert!(Pcre::new("(ab", "").is_err());
        // Anchored searches start where they are asked to.
        let re = Pcre::new("b", "").unwrap();
        assert_eq!(re.find_at(b"ab", 0, true), Found::None);
        assert_eq!(re.find_at(b"ab", 1, true), Found::At(1, 2));
    }

    #[test]
    fn the_backtracking_limit_holds() {
        let re = Pcre::new("(a|a)*(?=b)\\1c", "").unwrap();
        let hay = vec![b'a'; 40];
        assert_eq!(re.find_at(&hay, 0, false), Found::Limit);
    }
}
