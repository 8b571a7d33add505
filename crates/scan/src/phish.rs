//! ClamAV's phishing URL check (`PhishingScanURLs`): the links of a mail's text parts
//! ([`crate::links`]) are checked as pairs of the URL a link really goes to and the
//! text it shows, against the protected domains of `.pdb` files and the allowed
//! pairs of `.wdb` files.
//!
//! The formats (ClamAV's PhishSigs documentation):
//! - `.pdb`: `R[Filter]:RealURL:DisplayedURL[:FuncLevel]`, a POSIX extended regular
//!   expression searched (not anchored, whatever the documentation says) in
//!   `real:displayed/` where its literal end occurs ([`literal_tail`]), and `H[Filter]:DisplayedHostname[:FuncLevel]`,
//!   a host shown in a link text, or any subdomain of it. The filter is ignored, as
//!   in ClamAV.
//! - `.wdb`: `X:RealURL:DisplayedURL[:FuncLevel]`, a regular expression, and
//!   `M:RealHostname:DisplayedHostname[:FuncLevel]`, a literal pair of hosts (the
//!   real one or a subdomain of it): links that are fine. `Y` lines are read as
//!   `X` lines, as ClamAV 1.4 (the `clamscan` the cross-checks run) reads them;
//!   ClamAV 1.5 matches them against the real URL alone.
//! - `.gdb`: `S:F:`, `S1:F:`, `S2:F:` and `S:W:` lines, SHA-256 hashes of canonical
//!   URLs in the manner of Google Safe Browsing: the real URL of every link (and,
//!   in a part with no link tags, every `http:`/`ftp:` URL of its text) is looked
//!   up (host suffixes with path prefixes), `S:W:` hashes allowed. The `:P:` host key
//!   prefixes are read and counted as not used, as ClamAV no longer reads them
//!   either. With any full hash loaded, a link whose real URL has no `:` is fine, as
//!   in ClamAV.
//!
//! A functionality level is the last field and only when it has a `-`
//! (`20-`, `20-30`), as ClamAV reads it; a line for another engine level is
//! skipped. The check follows ClamAV's order: a link whose real URL is not a URL,
//! or whose text does not look like one, is fine; an allowed pair is fine; a link
//! whose text shows a protected domain (`H`) or whose pair an `R` line matches is
//! phishing when its real URL holds a `%00` (`Cloaked.Null`), when the text is
//! `https:` and the real URL not (`SSL-Spoof`), or when the two hosts are in
//! different domains (`SpoofedDomain`). ClamAV's `Cloaked.NumericIP` and
//! `Cloaked.Username` cannot come out of its check (the host it tests starts with
//! a `.`), so they are not given here either. Without a `.pdb` or `.gdb` nothing
//! is found, as in ClamAV with its default options (`--phishing-ssl` and
//! `--phishing-cloak` off). A finding is a heuristic: the mail's verdict only when
//! no signature matched it.

use crate::logical::FLEVEL;
use crate::signature::Refusal;

/// The name ClamAV gives a link whose text shows a protected domain it does not go to.
pub(crate) const SPOOFED_DOMAIN: &str = "Heuristics.Phishing.Email.SpoofedDomain";
/// The name ClamAV gives a protected link shown as `https:` that is not.
pub(crate) const SSL_SPOOF: &str = "Heuristics.Phishing.Email.SSL-Spoof";
/// The name ClamAV gives a protected link whose real URL holds a `%00`.
pub(crate) const CLOAKED_NULL: &str = "Heuristics.Phishing.Email.Cloaked.Null";
/// Names of the `.gdb` hash kinds: `S:`, `S1:`, `S2:`.
const HASH_MALWARE: &str = "Heuristics.Safebrowsing.Suspected-malware_safebrowsing.clamav.net";
const HASH_BLOCKED: &str = "Heuristics.Phishing.URL.Blocked";
const HASH_PHISHING: &str = "Heuristics.Safebrowsing.Suspected-phishing_safebrowsing.clamav.net";

/// Text parts bigger than this (decoded) are not checked, as ClamAV skips them.
pub(crate) const MAX_PART: u64 = 100 * 1024;

/// One pattern of a phishing list: a regular expression over the pair, or a
/// literal host suffix (the pattern ends with `/`, as ClamAV appends one).
#[derive(Debug, Clone)]
pub(crate) enum Pattern {
    Regex(Box<LazyRegex>),
    Static(String),
}

/// A regular expression line, checked when loaded but compiled only the first
/// time its literal end occurs in a looked-up text: a list of thousands of lines
/// (ClamAV's `daily.wdb`) then costs little memory until links need them.
#[derive(Debug)]
pub(crate) struct LazyRegex {
    source: String,
    /// The literal text the expression ends with ([`literal_tail`]), which must be
    /// in the looked-up text too.
    tail: String,
    re: std::sync::OnceLock<Option<regex::Regex>>,
}

impl Clone for LazyRegex {
    fn clone(&self) -> Self {
        Self {
            source: self.source.clone(),
            tail: self.tail.clone(),
            re: std::sync::OnceLock::new(),
        }
    }
}

impl LazyRegex {
    fn is_match(&self, text: &str) -> bool {
        text.contains(self.tail.as_str())
            && self
                .re
                .get_or_init(|| {
                    regex::RegexBuilder::new(&self.source)
                        .size_limit(1 << 20)
                        .build()
                        .ok()
                })
                .as_ref()
                .is_some_and(|re| re.is_match(text))
    }
}

/// Whether the group whose `)` ends `before` (exclusive) has a `|` of its own.
fn group_has_alternatives(before: &[u8]) -> bool {
    let mut depth = 0usize;
    for i in (0..before.len()).rev() {
        if i > 0 && before[i - 1] == b'\\' {
            continue;
        }
        match before[i] {
            b')' => depth += 1,
            b'(' if depth == 0 => return false,
            b'(' => depth -= 1,
            b'|' => return true,
            _ => {}
        }
    }
    false
}

/// The literal text a regular expression line ends with, as ClamAV's regex list
/// reads it to index the line: from the end back to the first `.`, bracket,
/// alternation or repetition, groups of literal text included; `^`, `{` and `}`
/// are literal to it. ClamAV tries the expression only where that text occurs, so
/// a line whose literal end holds a `^` (`^http://host`) never matches there.
fn literal_tail(pattern: &str) -> String {
    let b = pattern.as_bytes();
    // ClamAV's index stops reading the expression at a `$`.
    let b = &b[..b.iter().position(|&c| c == b'$').unwrap_or(b.len())];
    let mut out = Vec::new();
    let mut i = b.len();
    while i > 0 {
        let c = b[i - 1];
        if i >= 2 && b[i - 2] == b'\\' {
            out.push(c);
            i -= 2;
            continue;
        }
        match c {
            // A group with alternatives ends in more than one way.
            b')' if group_has_alternatives(&b[..i - 1]) => break,
            b'(' | b')' => {}
            b'.' | b'[' | b']' | b'|' | b'*' | b'?' | b'+' | b'\\' => break,
            _ => out.push(c),
        }
        i -= 1;
    }
    out.reverse();
    String::from_utf8_lossy(&out).into_owned()
}

/// The phishing lists loaded from `.pdb`, `.wdb` and `.gdb` files.
#[derive(Debug, Default, Clone)]
pub(crate) struct PhishDb {
    /// `.pdb` `R` and `H` lines: protected domains.
    pub protected: Vec<Pattern>,
    /// `.wdb` `X`, `Y` and `M` lines: allowed pairs.
    pub allowed: Vec<Pattern>,
    /// `.gdb` full hashes (and `S:W:` lines of `.wdb`): SHA-256 → the kind
    /// (`b'W'` allowed, `b'1'`, `b'2'`, or `b'S'`).
    pub url_hashes: std::collections::HashMap<[u8; 32], u8>,
}

impl PhishDb {
    /// Whether links are checked at all: ClamAV finds nothing without a `.pdb` or
    /// a `.gdb`.
    pub fn active(&self) -> bool {
        !self.protected.is_empty() || self.url_hashes.values().any(|&k| k != b'W')
    }

    /// Adds a full URL hash; an allowed one (`W`) wins over any other.
    pub fn add_hash(&mut self, digest: [u8; 32], kind: u8) {
        let e = self.url_hashes.entry(digest).or_insert(kind);
        if kind == b'W' {
            *e = b'W';
        }
    }
}

/// Which list a file feeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// `.pdb` and `.gdb` (ClamAV loads both into its domain list).
    Protected,
    /// `.wdb`.
    Allowed,
}

/// What one line of a phishing list is.
#[derive(Debug)]
pub(crate) enum PhishLine {
    Protected(Pattern),
    Allowed(Pattern),
    /// A full URL hash and its kind (`W`, `1`, `2` or `S`).
    Hash([u8; 32], u8),
    /// A host key prefix (`:P:`), not used.
    Prefix,
    /// A line for another engine level.
    OtherLevel,
}

/// Strips a trailing functionality level (`:min-`, `:min-max`) and says whether
/// this engine takes the line, as ClamAV reads it: only a last field with a `-`
/// and digits around it is a level.
fn level(line: &str) -> Option<Result<&str, ()>> {
    let Some((body, last)) = line.rsplit_once(':') else {
        return Some(Ok(line));
    };
    let Some((min, max)) = last.split_once('-') else {
        return Some(Ok(line));
    };
    if !min.bytes().all(|b| b.is_ascii_digit()) || !max.bytes().all(|b| b.is_ascii_digit()) {
        return Some(Ok(line));
    }
    let min: u64 = min.parse().unwrap_or(0);
    let max: u64 = if max.is_empty() {
        u64::MAX
    } else {
        max.parse().unwrap_or(u64::MAX)
    };
    if min > u64::from(FLEVEL) || max < u64::from(FLEVEL) {
        return Some(Err(()));
    }
    Some(Ok(body))
}

/// Compiles a regular expression line: ClamAV drops a trailing `([/?].*)?/` or
/// `([/?].*)/` (only the host is kept of each URL) and searches the rest anywhere
/// in `real:displayed/`.
fn compile(pattern: &str) -> Result<Pattern, Refusal> {
    let mut p = format!("{pattern}/");
    for end in ["([/?].*)?/", "([/?].*)/"] {
        if p.len() > end.len() + 1 && p.ends_with(end) {
            p.truncate(p.len() - end.len());
            p.push('/');
        }
    }
    if regex_syntax::Parser::new().parse(&p).is_err() {
        return Err("phishing list: bad regular expression");
    }
    Ok(Pattern::Regex(Box::new(LazyRegex {
        tail: literal_tail(&p),
        source: p,
        re: std::sync::OnceLock::new(),
    })))
}

/// Parses one line (not blank, not a comment) of a `.pdb`/`.gdb` (`Protected`) or
/// `.wdb` (`Allowed`) file.
pub(crate) fn parse_line(line: &str, kind: ListKind) -> Result<PhishLine, Refusal> {
    let line = match level(line) {
        Some(Ok(l)) => l,
        _ => return Ok(PhishLine::OtherLevel),
    };
    let Some((flags, pattern)) = line.split_once(':') else {
        return Err("phishing list: no ':' in the line");
    };
    let first = flags.as_bytes().first().copied().unwrap_or(0);
    match (first, kind) {
        (b'R', ListKind::Protected) => compile(pattern).map(PhishLine::Protected),
        (b'X' | b'Y', ListKind::Allowed) => compile(pattern).map(PhishLine::Allowed),
        (b'H', ListKind::Protected) | (b'M', ListKind::Allowed) => {
            if pattern.is_empty() {
                return Err("phishing list: empty host");
            }
            let p = Pattern::Static(format!("{pattern}/"));
            Ok(if kind == ListKind::Protected {
                PhishLine::Protected(p)
            } else {
                PhishLine::Allowed(p)
            })
        }
        (b'S', _) => {
            let (which, hash) = pattern.split_once(':').unwrap_or(("", ""));
            let ok_kind = match kind {
                ListKind::Protected => matches!(which, "W" | "F" | "P"),
                ListKind::Allowed => which == "W",
            };
            let want = if which == "P" { 8 } else { 64 };
            if !ok_kind {
                return Err("phishing list: bad hash line kind");
            }
            if hash.len() != want || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err("phishing list: bad hash");
            }
            if which == "P" {
                return Ok(PhishLine::Prefix);
            }
            let mut digest = [0u8; 32];
            for (i, d) in digest.iter_mut().enumerate() {
                *d = u8::from_str_radix(&hash[2 * i..2 * i + 2], 16).unwrap_or(0);
            }
            let kind = match (which, flags.as_bytes().get(1)) {
                ("W", _) => b'W',
                (_, Some(b'1')) => b'1',
                (_, Some(b'2')) => b'2',
                _ => b'S',
            };
            Ok(PhishLine::Hash(digest, kind))
        }
        _ => Err("phishing list: unknown line type"),
    }
}

/// What a link is, as ClamAV's HTML scanner tags it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkKind {
    /// An `<a href>` and its text.
    Href,
    /// An `<a href>` and its `title`.
    Title,
    /// An `<img src>` (or `dynsrc`) inside an `<a>` or a `<form>`.
    Image,
    /// An `<iframe src>` inside an `<a>`, or a link inside a `<form>`.
    Other,
}

/// The top-level domains ClamAV's URL check knows (its IANA list), besides the
/// country codes below.
const GENERIC_TLDS: &[&str] = &[
    "aero",
    "arpa",
    "asia",
    "biz",
    "cat",
    "com",
    "coop",
    "edu",
    "gov",
    "info",
    "int",
    "jobs",
    "mil",
    "mobi",
    "museum",
    "name",
    "net",
    "org",
    "pro",
    "tel",
    "travel",
    "xn--0zwm56d",
    "xn--11b5bs3a9aj6g",
    "xn--80akhbyknj4f",
    "xn--9t4b11yi5a",
    "xn--deba0ad",
    "xn--g6w251d",
    "xn--hgbk6aj7f53bba",
    "xn--hlcj6aya9esc7a",
    "xn--jxalpdlp",
    "xn--kgbechtv",
    "xn--zckzah",
];

/// The two-letter country codes ClamAV knows; the last four of them are not in
/// its list of top-level domains.
const COUNTRY_CODES: &str = "ac ad ae af ag ai al am an ao aq ar as at au aw ax az ba bb bd be bf bg \
bh bi bj bm bn bo br bs bt bv bw by bz ca cc cd cf cg ch ci ck cl cm cn co cr cu cv cx cy cz de dj dk \
dm do dz ec ee eg er es et eu fi fj fk fm fo fr ga gb gd ge gf gg gh gi gl gm gn gp gq gr gs gt gu gw \
gy hk hm hn hr ht hu id ie il im in io iq ir is it je jm jo jp ke kg kh ki km kn kp kr kw ky kz la lb \
lc li lk lr ls lt lu lv ly ma mc md me mg mh mk ml mm mn mo mp mq mr ms mt mu mv mw mx my mz na nc ne \
nf ng ni nl no np nr nu nz om pa pe pf pg ph pk pl pm pn pr ps pt pw py qa re ro rs ru rw sa sb sc sd \
se sg sh si sj sk sl sm sn so sr st su sv sy sz tc td tf tg th tj tk tl tm tn to tp tr tt tv tw tz ua \
ug uk us uy uz va vc ve vg vi vn vu wf ws ye yt yu za zm zw bl eh mf um";

fn in_cctld(s: &[u8]) -> bool {
    s.len() == 2 && COUNTRY_CODES.split(' ').any(|c| c.as_bytes() == s)
}

fn in_tld(s: &[u8]) -> bool {
    if s.len() == 2 {
        return in_cctld(s) && !matches!(s, b"bl" | b"eh" | b"mf" | b"um");
    }
    GENERIC_TLDS.iter().any(|t| t.as_bytes() == s)
}

/// `!"#$%&'()*+,-0-9@A-Z_a-z`: what a label of a URL may hold.
fn xpalpha(b: u8) -> bool {
    b.is_ascii_alphanumeric() || (b'!'..=b'-').contains(&b) || b == b'@' || b == b'_'
}

/// The same without `#` and `+`.
fn xalpha(b: u8) -> bool {
    xpalpha(b) && b != b'#' && b != b'+'
}

fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

fn find(s: &[u8], from: usize, b: u8) -> Option<usize> {
    s.get(from..)?
        .iter()
        .position(|&c| c == b)
        .map(|i| i + from)
}

/// Whether `url` looks like a URL ClamAV can check; with `any_scheme` (the displayed
/// text), a text whose last label is no top-level domain is cut after the last one
/// that is, as ClamAV does.
fn is_url(url: &mut Vec<u8>, any_scheme: bool) -> bool {
    let base = url.iter().position(|&b| b != b' ').unwrap_or(url.len());
    let u = &url[..];
    let rest = &u[base..];
    let mut start = None;
    for (scheme, len) in [
        (&b"https:"[..], 6),
        (b"http:", 5),
        (b"ftp:", 4),
        (b"mailto://", 9),
    ] {
        if rest.starts_with(scheme) {
            start = Some(base + len - 1);
            break;
        }
    }
    if let Some(s) = start {
        if at(u, s + 1) == b'/' && at(u, s + 2) == b'/' {
            return true;
        }
    }
    if any_scheme {
        start = find(u, base, b':');
    }
    let mut has_proto = false;
    let start = match start {
        Some(s)
            if s > base
                && u[base].is_ascii_alphabetic()
                && u[base + 1..s].iter().all(|&b| xalpha(b)) =>
        {
            has_proto = true;
            if at(u, s + 1) == b'/' {
                if at(u, s + 2) == b'/' {
                    s + 3
                } else {
                    s + 2
                }
            } else {
                s + 1
            }
        }
        _ => base,
    };
    let mut p = start;
    let end = find(u, p, b'/').unwrap_or(u.len());
    if !has_proto {
        if let Some(q) = u
            .get(p..end)
            .and_then(|s| s.iter().position(|&b| b == b'@'))
        {
            let q = p + q;
            let mut q2 = q.saturating_sub(1);
            while q2 > p && u[q2] != b'.' {
                q2 -= 1;
            }
            if q2 == p || !in_tld(&u[q2 + 1..q]) {
                return false;
            }
        }
    }
    let mut last_tld_end = None;
    while let Some(q) = find(u, p, b'.') {
        if q > end {
            break;
        }
        if q == p || !u[p..q].iter().all(|&b| xpalpha(b)) {
            return false;
        }
        if any_scheme && in_tld(&u[p..q]) {
            last_tld_end = Some(q);
        }
        p = q + 1;
    }
    if p == start {
        return false;
    }
    let mut end = end.max(p);
    while at(u, end) == b' ' && end > p {
        end -= 1;
    }
    if in_tld(u.get(p..end).unwrap_or(b"")) {
        return true;
    }
    if !any_scheme {
        return false;
    }
    match last_tld_end {
        Some(t) => {
            url.truncate(t);
            true
        }
        None => false,
    }
}

/// Decodes `%xx` escapes (`%00` becomes 0x01, as ClamAV keeps it visible to its
/// cloaking check), again while a decoded byte is a `%`.
fn unescape(s: &mut Vec<u8>) {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    loop {
        let mut again = false;
        let mut out = Vec::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            // Past the first byte, ClamAV decodes an escape only when a byte follows it.
            if s[i] == b'%' && (i + 3 < s.len() || (i == 0 && s.len() >= 3)) {
                if let (Some(h), Some(l)) = (hex(s[i + 1]), hex(s[i + 2])) {
                    let v = if s[i + 1] == b'0' && s[i + 2] == b'0' {
                        1
                    } else {
                        h << 4 | l
                    };
                    again |= v == b'%';
                    out.push(v);
                    i += 3;
                    continue;
                }
            }
            out.push(s[i]);
            i += 1;
        }
        *s = out;
        if !again {
            return;
        }
    }
}

fn remove_all(s: &mut Vec<u8>, what: &[u8]) {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i..].starts_with(what) {
            i += what.len();
        } else {
            out.push(s[i]);
            i += 1;
        }
    }
    *s = out;
}

/// A URL cleaned up as ClamAV does before comparing: 7-bit, control characters as
/// spaces, cut after the host, host lower-cased, `%xx` decoded, spaces removed
/// (the displayed text also loses leading and trailing punctuation). `None` when
/// nothing is left. For the displayed text, also the text before spaces were
/// removed.
fn cleanup(url: &[u8], real: bool) -> Option<(Vec<u8>, Vec<u8>)> {
    let s: Vec<u8> = url
        .iter()
        .map(|&b| {
            let b = b & 0x7f;
            if b < 32 {
                32
            } else {
                b
            }
        })
        .collect();
    let begin = s.iter().position(|&b| b != b' ')?;
    let mut end = s.len() - 1;
    if begin >= end {
        return None;
    }
    while s[end] == b' ' {
        end -= 1;
    }
    let rest = &s[begin..];
    if rest.starts_with(b".net") || rest.starts_with(b"ado.net") || rest.starts_with(b"asp.net") {
        return None;
    }
    let mut s = s;
    for b in &mut s[begin..=end] {
        if *b == b'\\' {
            *b = b'/';
        }
    }
    let host_begin = match find(&s, begin, b':') {
        Some(mut h) => {
            while h < end && at(&s, h + 1) == b'/' {
                h += 1;
            }
            h + 1
        }
        None => begin,
    };
    let host_len = s[host_begin.min(s.len())..]
        .iter()
        .position(|b| b":/?".contains(b))
        .unwrap_or(s.len().saturating_sub(host_begin));
    let host_end = if host_begin + host_len > end + 1 {
        end + 1
    } else {
        end = (host_begin + host_len).saturating_sub(1);
        host_begin + host_len
    };
    if host_begin < host_end {
        s[host_begin..host_end].make_ascii_lowercase();
    }
    if end < begin {
        return None;
    }
    let mut v: Vec<u8> = s[begin..=end]
        .iter()
        .map(|&b| if b"<>\";".contains(&b) { b' ' } else { b })
        .collect();
    remove_all(&mut v, b"&lt");
    remove_all(&mut v, b"&gt");
    unescape(&mut v);
    if real {
        v.retain(|&b| b != b' ');
        return Some((v, Vec::new()));
    }
    let a = v.iter().position(|&b| b != b' ').unwrap_or(v.len());
    let z = v.iter().rposition(|&b| b != b' ').map_or(a, |z| z + 1);
    let pre = v[a..z.max(a)].to_vec();
    let mut fixed: Vec<u8> = pre.iter().copied().filter(|&b| b != b' ').collect();
    let a = fixed
        .iter()
        .position(u8::is_ascii_alphanumeric)
        .unwrap_or(fixed.len());
    let z = fixed
        .iter()
        .rposition(u8::is_ascii_alphanumeric)
        .map_or(a, |z| z + 1);
    fixed = fixed[a..z.max(a)].to_vec();
    Some((fixed, pre))
}

/// The host of a URL, with the `.` ClamAV puts in front; `None` when the link
/// cannot be checked (no host, a `mailto:`, spaces or `..` in the host).
fn host(url: &[u8], real: bool, real_mailto: &mut bool) -> Option<(Vec<u8>, usize, usize)> {
    let mut mailto = 0;
    let mut start;
    let mut end = None;
    match url.windows(3).position(|w| w == b"://") {
        Some(i) => start = i + 3,
        None if url.starts_with(b"mailto:") => {
            start = 7;
            mailto = 1;
        }
        None if !real && *real_mailto => {
            // Any `to:` prefix is skipped, as a displayed address need not say `mailto:`.
            start = url
                .iter()
                .position(|b| b": ".contains(b))
                .map_or(0, |i| i + 1);
            end = Some(url.len());
            mailto = 1;
        }
        None => {
            start = 0;
            if !real {
                mailto = 2;
            }
        }
    }
    let stop = |from: usize| {
        from + url.get(from..).map_or(0, |s| {
            s.iter().position(|b| b":/?".contains(b)).unwrap_or(s.len())
        })
    };
    if mailto == 0 || !real {
        loop {
            let e = stop(start);
            end = Some(e);
            match find(url, start, b'@') {
                Some(at) if start == e || at <= e => start = at + 1,
                _ => break,
            }
        }
    } else {
        *real_mailto = true;
    }
    let end = end.unwrap_or_else(|| stop(start)).min(url.len());
    let start = start.min(end);
    let mut h = b".".to_vec();
    h.extend_from_slice(&url[start..end]);
    if (real && h.windows(2).any(|w| w == b"..")) || *real_mailto || h.contains(&b' ') {
        return None;
    }
    Some((h, start, end))
}

/// The registered domain of a host (with its leading `.`): the last two labels, or
/// three under a country code whose second level is a top-level domain
/// (`example.co.uk`).
fn domain(host: &[u8]) -> &[u8] {
    let Some(mut tld) = host.iter().rposition(|&b| b == b'.') else {
        return host;
    };
    if in_cctld(&host[tld + 1..]) {
        let Some(t2) = host[..tld].iter().rposition(|&b| b == b'.') else {
            return host;
        };
        if !in_tld(&host[t2 + 1..tld]) {
            return &host[t2 + 1..];
        }
        tld = t2;
    }
    match host[..tld].iter().rposition(|&b| b == b'.') {
        Some(d) => &host[d + 1..],
        None => host,
    }
}

/// The displayed text before its spaces were removed, and where its host starts
/// and ends in the cleaned text: a protected host matches after a space there too
/// (`secure paypal.com`).
struct PreFixup<'a> {
    pre: &'a [u8],
    host_start: usize,
}

/// The character before position `pos` (1-based) of the looked-up text, found in
/// the text before its spaces were removed, as ClamAV does.
fn char_before(pre: Option<&PreFixup<'_>>, buffer: &[u8], pos: usize) -> u8 {
    let Some(info) = pre else {
        return if pos <= buffer.len() {
            at(buffer, pos.saturating_sub(1))
        } else {
            0
        };
    };
    let s = info.pre;
    let mut pos = pos + info.host_start;
    let mut i = 0;
    while at(s, i) != 0 && !at(s, i).is_ascii_alphanumeric() {
        i += 1;
    }
    while at(s, i) != 0 && pos > 0 {
        while at(s, i) == b' ' {
            i += 1;
        }
        i += 1;
        pos -= 1;
    }
    while at(s, i) == b' ' {
        i += 1;
    }
    if pos > 0 && at(s, i) == 0 {
        0
    } else {
        at(s, i.saturating_sub(1))
    }
}

/// Looks a pair up in a list, as ClamAV's regex list does: `real:displayed/` (or
/// `real/` for host-only lookups of the domain list), searched
/// by the regular expressions, and ended by a literal pattern on a label boundary.
/// `Some(Some(n))` when a literal pattern of `n` bytes matched, `Some(None)` when
/// a regular expression did.
fn list_find(
    list: &[Pattern],
    real: &[u8],
    display: &[u8],
    pre: Option<&PreFixup<'_>>,
    buffer_kind: Buffer,
) -> Option<Option<usize>> {
    let real = real.strip_prefix(b".").unwrap_or(real);
    let display = display.strip_prefix(b".").unwrap_or(display);
    let mut buffer = real.to_vec();
    if buffer_kind == Buffer::Pair {
        buffer.push(b':');
        buffer.extend_from_slice(display);
    }
    buffer.push(b'/');
    if buffer.len() < 3 {
        return None;
    }
    let text = String::from_utf8_lossy(&buffer);
    let n = buffer.len();
    list.iter().find_map(|p| match p {
        Pattern::Regex(re) => re.is_match(&text).then_some(None),
        Pattern::Static(s) => {
            let m = s.len();
            (text.ends_with(s.as_str())
                && matches!(char_before(pre, &buffer, n + 1), b' ' | 0 | b'/' | b'?')
                && (m == n || (m < n && matches!(char_before(pre, &buffer, n - m), b'.' | b' '))))
            .then_some(Some(m - 1))
        }
    })
}

fn list_match(
    list: &[Pattern],
    real: &[u8],
    display: &[u8],
    pre: Option<&PreFixup<'_>>,
    buffer_kind: Buffer,
) -> bool {
    list_find(list, real, display, pre, buffer_kind).is_some()
}

/// After a protected host matched `n` bytes at the end of the displayed host with
/// no `.` before them (`secure paypal.com` cleaned to `securepaypal.com`), ClamAV
/// puts a `.` there (`secure.paypal.com`), dropping the leading one: the domain
/// comparison then sees the protected domain.
fn split_matched_host(host: &mut Vec<u8>, n: usize) {
    let h = host.strip_prefix(b".").unwrap_or(host);
    if h.len() > n && h[h.len() - n - 1] != b'.' {
        let cut = h.len() - n;
        let mut fixed = h[..cut].to_vec();
        fixed.push(b'.');
        fixed.extend_from_slice(&h[cut..]);
        *host = fixed;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Buffer {
    /// `real:displayed/`.
    Pair,
    /// `real/`.
    One,
}

/// What the URL hash lookup decided.
#[derive(Debug, PartialEq, Eq)]
enum HashVerdict {
    /// Not a URL the lookup canonicalises (no `:`): the link is fine.
    Clean,
    Found(&'static str),
    Undecided,
}

/// Removes `/./` and `/segment/../` from a path, as ClamAV's canonicalisation does.
fn dot_segments(s: &mut Vec<u8>) {
    loop {
        if let Some(i) = s.windows(3).position(|w| w == b"/./") {
            s.drain(i..i + 2);
            continue;
        }
        if let Some(i) = s
            .windows(4)
            .position(|w| w == b"/../")
            .or_else(|| s.ends_with(b"/..").then(|| s.len() - 3))
        {
            let last = s[..i].iter().rposition(|&b| b == b'/');
            match last {
                Some(l) => {
                    let end = (i + 4).min(s.len());
                    s.drain(l + 1..end);
                }
                None => {
                    s.drain(i..(i + 3).min(s.len()));
                }
            }
            continue;
        }
        return;
    }
}

/// Looks the real URL up in the `.gdb` hashes, canonicalised as ClamAV does: the
/// host (after any user name, `%xx` decoded, lower-cased) with a `/`, and the path
/// without its leading `/`; the SHA-256 of each of the host's last two to five
/// labels (and the whole host) followed by the whole path, the path without its
/// query, nothing, and each prefix of the path up to a `/`, is looked up.
fn url_hash(db: &PhishDb, url: &[u8]) -> HashVerdict {
    use sha2::Digest;
    if db.url_hashes.is_empty() {
        return HashVerdict::Undecided;
    }
    let url = &url[..url.len().min(1024)];
    let Some(colon) = url.iter().position(|&b| b == b':') else {
        return HashVerdict::Clean;
    };
    let mut h = colon + 1;
    while at(url, h) == b'/' {
        h += 1;
    }
    let host_len = url[h.min(url.len())..]
        .iter()
        .position(|b| b":/?".contains(b))
        .unwrap_or(url.len().saturating_sub(h));
    if let Some(a) = url[h.min(url.len())..h + host_len]
        .iter()
        .position(|&b| b == b'@')
    {
        h += a + 1;
    }
    let mut u = url[h.min(url.len())..].to_vec();
    unescape(&mut u);
    let mut start = 0;
    while at(&u, start) == b'/' {
        start += 1;
    }
    while at(&u, start) == b'.' {
        start += 1;
    }
    let mut u = u.split_off(start.min(u.len()));
    dot_segments(&mut u);
    let mut esc = Vec::with_capacity(u.len());
    for &c in &u {
        if c <= 32 || c >= 127 || c == b'%' || c == b'#' {
            esc.extend_from_slice(format!("%{c:02X}").as_bytes());
        } else {
            esc.push(c);
        }
    }
    let host_len = esc
        .iter()
        .position(|b| b":/?".contains(b))
        .unwrap_or(esc.len());
    let mut host = esc[..host_len].to_ascii_lowercase();
    host.push(b'/');
    let mut path: &[u8] = if host_len + 1 < esc.len() {
        &esc[host_len + 1..]
    } else {
        b""
    };
    if let Some(anchor) = path.iter().position(|&b| b == b'#') {
        path = &path[..anchor];
    }
    // Host suffixes: the last two to five labels, then the whole host.
    let name = &host[..host.len() - 1];
    let mut hosts: Vec<&[u8]> = Vec::new();
    let dots: Vec<usize> = name
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'.')
        .map(|(i, _)| i)
        .collect();
    for d in dots.iter().rev().skip(1).take(4) {
        hosts.push(&host[d + 1..]);
    }
    hosts.push(&host);
    // Path prefixes: whole, without the query, nothing, up to each `/`.
    let mut paths: Vec<&[u8]> = Vec::new();
    if path.is_empty() {
        paths.push(b"");
    } else {
        paths.push(path);
        let q = path.iter().position(|&b| b == b'?').unwrap_or(path.len());
        if q != path.len() {
            paths.push(&path[..q]);
        }
        paths.push(b"");
        let mut from = 1;
        while paths.len() < 6 {
            match path
                .get(from..)
                .and_then(|p| p.iter().position(|&b| b == b'/'))
            {
                Some(i) => {
                    paths.push(&path[..from + i + 1]);
                    from += i + 1 + 1;
                }
                None => break,
            }
        }
    }
    for p in paths.iter().rev() {
        for host in &hosts {
            let mut sha = sha2::Sha256::new();
            sha.update(host);
            sha.update(p);
            let d: [u8; 32] = sha.finalize().into();
            match db.url_hashes.get(&d) {
                Some(b'W') | None => {}
                Some(b'1') => return HashVerdict::Found(HASH_BLOCKED),
                Some(b'2') => return HashVerdict::Found(HASH_PHISHING),
                Some(_) => return HashVerdict::Found(HASH_MALWARE),
            }
        }
    }
    HashVerdict::Undecided
}

/// Checks one link (`real` is where it goes, `display` what it shows); returns the
/// name ClamAV reports for it, or `None` when it is fine.
pub(crate) fn check(
    db: &PhishDb,
    real: &[u8],
    display: &[u8],
    kind: LinkKind,
) -> Option<&'static str> {
    // ClamAV swaps the two for every tag but `<a href>`: the values it extracts
    // are already real and displayed here.
    let check_ssl = kind == LinkKind::Href;
    let mut real_raw = real.to_vec();
    if !is_url(&mut real_raw, false) {
        return None;
    }
    match url_hash(db, real) {
        HashVerdict::Clean => return None,
        HashVerdict::Found(name) => return Some(name),
        HashVerdict::Undecided => {}
    }
    if real == display || display.is_empty() {
        return None;
    }
    let (real, _) = cleanup(real, true)?;
    let (mut display, pre) = cleanup(display, false)?;
    if real == display {
        return None;
    }
    if !is_url(&mut display, true) {
        return None;
    }
    if list_match(&db.allowed, &real, &display, None, Buffer::Pair) {
        return None;
    }
    let mut listed = list_match(&db.protected, &real, &display, None, Buffer::Pair);
    let mut real_mailto = false;
    let (mut display_host, host_start, host_end) = host(&display, false, &mut real_mailto)?;
    let (real_host, _, _) = host(&real, true, &mut real_mailto)?;
    if real == display {
        return None;
    }
    if list_match(&db.allowed, &real_host, &display_host, None, Buffer::Pair) {
        return None;
    }
    let pre = PreFixup {
        pre: &pre[..host_end.min(pre.len())],
        host_start,
    };
    if let Some(m) = list_find(&db.protected, &display_host, b"", Some(&pre), Buffer::One) {
        listed = true;
        if let Some(n) = m {
            split_matched_host(&mut display_host, n);
        }
    }
    if !listed {
        // Only the always-on checks are left, and clamscan turns none on by default.
        return None;
    }
    if real.contains(&1) {
        return Some(CLOAKED_NULL);
    }
    if check_ssl && display.starts_with(b"https:") && !real.starts_with(b"https:") {
        return Some(SSL_SPOOF);
    }
    if domain(&real_host) == domain(&display_host) {
        return None;
    }
    Some(SPOOFED_DOMAIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(pdb: &str, wdb: &str) -> PhishDb {
        let mut db = PhishDb::default();
        for l in pdb.lines() {
            match parse_line(l, ListKind::Protected).unwrap() {
                PhishLine::Protected(p) => db.protected.push(p),
                other => panic!("{other:?}"),
            }
        }
        for l in wdb.lines() {
            match parse_line(l, ListKind::Allowed).unwrap() {
                PhishLine::Allowed(p) => db.allowed.push(p),
                other => panic!("{other:?}"),
            }
        }
        db
    }

    #[test]
    fn parses_the_line_types() {
        assert!(matches!(
            parse_line("H:paypal.com", ListKind::Protected),
            Ok(PhishLine::Protected(Pattern::Static(s))) if s == "paypal.com/"
        ));
        assert!(matches!(
            parse_line("H:paypal.com:20-", ListKind::Protected),
            Ok(PhishLine::Protected(Pattern::Static(s))) if s == "paypal.com/"
        ));
        assert!(matches!(
            parse_line("H:paypal.com:999-", ListKind::Protected),
            Ok(PhishLine::OtherLevel)
        ));
        assert!(matches!(
            parse_line("H:paypal.com:0-20", ListKind::Protected),
            Ok(PhishLine::OtherLevel)
        ));
        assert!(matches!(
            parse_line(
                r"R:.+\.evil\.net([/?].*)?:.+\.bank\.com",
                ListKind::Protected
            ),
            Ok(PhishLine::Protected(Pattern::Regex(..)))
        ));
        assert!(matches!(
            parse_line("M:www.google.ro:www.google.com", ListKind::Allowed),
            Ok(PhishLine::Allowed(Pattern::Static(_)))
        ));
        assert!(matches!(
            parse_line(&format!("S2:F:{}", "ab".repeat(32)), ListKind::Protected),
            Ok(PhishLine::Hash(d, b'2')) if d == [0xab; 32]
        ));
        assert!(matches!(
            parse_line(&format!("S:W:{}", "ab".repeat(32)), ListKind::Allowed),
            Ok(PhishLine::Hash(_, b'W'))
        ));
        assert!(matches!(
            parse_line("S:P:abcd1234", ListKind::Protected),
            Ok(PhishLine::Prefix)
        ));
        assert!(parse_line("S:F:abcd", ListKind::Protected).is_err());
        assert!(parse_line("S:F:abcd1234", ListKind::Allowed).is_err());
        assert!(parse_line("H:paypal.com", ListKind::Allowed).is_err());
        assert!(parse_line("X:a:b", ListKind::Protected).is_err());
        assert!(parse_line("Hpaypal.com", ListKind::Protected).is_err());
        assert!(parse_line("R:(unclosed:x", ListKind::Protected).is_err());
    }

    #[test]
    fn protected_domains_and_allowed_pairs() {
        let db = db(
            "H:paypal.com\nR:.+\\.evil\\.org([/?].*)?:.+\\.bank\\.com",
            "M:www.paypal.co.uk:www.paypal.com\nX:.+\\.paypal-mail\\.net([/?].*)?:.+\\.paypal\\.com",
        );
        let c = |r: &str, d: &str| check(&db, r.as_bytes(), d.as_bytes(), LinkKind::Href);
        assert_eq!(
            c("http://evil.example.net/x", "www.paypal.com"),
            Some(SPOOFED_DOMAIN)
        );
        assert_eq!(
            c("http://evil.example.net/x", "secure.paypal.com"),
            Some(SPOOFED_DOMAIN)
        );
        assert_eq!(
            c("http://evil.example.net/x", "secure paypal.com"),
            Some(SPOOFED_DOMAIN)
        );
        assert_eq!(c("http://evil.example.net/x", "www.notpaypal.com"), None);
        assert_eq!(c("http://evil.example.net/x", "www.ebay.com"), None);
        assert_eq!(c("http://evil.example.net/x", "click here"), None);
        assert_eq!(c("http://cgi.paypal.com/x", "www.paypal.com"), None);
        // The protected host matched after a space: ClamAV splits it there.
        assert_eq!(c("http://www.paypal.com/", "secure paypal.com"), None);
        assert_eq!(
            c("http://www.paypal.com/", "https://www.paypal.com"),
            Some(SSL_SPOOF)
        );
        assert_eq!(c("http://www.paypal.co.uk/", "www.paypal.com"), None);
        assert_eq!(c("http://x.paypal-mail.net/", "www.paypal.com"), None);
        assert_eq!(
            c("http://a.evil.org/", "www.bank.com"),
            Some(SPOOFED_DOMAIN)
        );
        assert_eq!(c("http://a.good.org/", "www.bank.com"), None);
        assert_eq!(c("javascript:go()", "www.paypal.com"), None);
        assert_eq!(
            c("evil.example.net", "www.paypal.com"),
            Some(SPOOFED_DOMAIN)
        );
        assert_eq!(
            check(
                &db,
                b"http://evil.example.net/",
                b"https://www.paypal.com",
                LinkKind::Image
            ),
            Some(SPOOFED_DOMAIN)
        );
        let empty = PhishDb::default();
        assert!(!empty.active());
        assert_eq!(
            check(
                &empty,
                b"http://evil.example.net/",
                b"www.paypal.com",
                LinkKind::Href
            ),
            None
        );
    }

    #[test]
    fn literal_tails() {
        assert_eq!(literal_tail(r"^h(t)tp://evil\.biz/"), "^http://evil.biz/");
        assert_eq!(
            literal_tail(r"^.+\.biz:www\.store\.com/"),
            ".biz:www.store.com/"
        );
        assert_eq!(literal_tail(r"x\.(a|b)\.com/"), ".com/");
        assert_eq!(literal_tail(r"x\.com$/"), "x.com");
    }

    #[test]
    fn domains_and_urls() {
        assert_eq!(domain(b".www.paypal.com"), b"paypal.com");
        assert_eq!(domain(b".www.paypal.co.uk"), b"paypal.co.uk");
        assert_eq!(domain(b".www.example.de"), b"example.de");
        assert_eq!(domain(b".paypal.com"), b"paypal.com");
        let mut u = b"www.paypal.com.evil".to_vec();
        assert!(is_url(&mut u, true));
        assert_eq!(u, b"www.paypal.com");
        assert!(!is_url(&mut b"click here".to_vec(), true));
        assert!(!is_url(&mut b"me@example.com".to_vec(), true));
        assert!(is_url(&mut b"http://x".to_vec(), false));
        let (c, pre) = cleanup(b"  HTTP://WWW.PayPal.COM/Path?q  ", false).unwrap();
        assert_eq!(c, b"HTTP://www.paypal.com");
        assert_eq!(pre, b"HTTP://www.paypal.com");
        let (c, _) = cleanup(b"http://evil%2Enet/x", true).unwrap();
        assert_eq!(c, b"http://evil.net");
    }
}
