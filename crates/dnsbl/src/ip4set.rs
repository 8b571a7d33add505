//! rbldnsd's `ip4set` list format: parser and lookup structure. No I/O.
//!
//! What is read (see rbldnsd(8), "ip4set Dataset" and "Special Entries"):
//!
//! - entries: a full address (`192.0.2.1`), a prefix (`192.0.2` = /24,
//!   `10` is an error, `10/8` is not), a CIDR range (`192.0.2.0/25`; host
//!   bits must be zero, as rbldnsd insists without `-e`) or a dash range
//!   (`192.0.2.10-192.0.2.20`, `192.0.2.10-20`, `127.16-31`);
//! - `!` before an entry excludes its addresses;
//! - after an entry, `:A:TXT`, `:A` (default TXT), `:A:` (no TXT) or a bare
//!   TXT template (default A); `A` may be a single number `n` for `127.0.0.n`;
//! - a line `:A:TXT` sets the default answer for the rest of its file;
//! - in TXT, `$` is replaced by the queried address, `$$` by `$`, `$0`..`$9`
//!   by the substitution variables; `$=` sets a base template (see
//!   [`Ip4Set::txt`]); TXT templates are cut at 255 bytes;
//! - `$TTL`, `$SOA`, `$NS` (first `$SOA` / `$NS` wins, the last `$TTL`
//!   wins), with times as seconds or with a unit suffix `s m h d w`;
//! - empty lines and lines starting with `#` or `;` are comments.
//!
//! Lines that cannot be read are skipped with a [`Warning`], as rbldnsd does.
//!
//! Precedence follows rbldnsd: every range is split into octet-aligned
//! blocks (/32, /24, /16, /8); an address takes the answer of the most
//! specific block that holds it; at the same level an exclusion wins, and
//! several entries give several answers.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use crate::bitmap::{Bitmap, Block25};

/// The A value rbldnsd returns when a list gives none.
pub const DEFAULT_A: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// One answer for a listed address: an A value and an optional TXT template.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Answer {
    /// The A record returned for a listed address.
    pub a: Ipv4Addr,
    /// The TXT template (before `$` substitution), if any.
    pub txt: Option<String>,
}

/// A `$SOA` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoaSpec {
    /// TTL of the SOA record itself (`None`: the list's TTL).
    pub ttl: Option<u32>,
    /// Primary name server.
    pub mname: String,
    /// Responsible person's mailbox, as a name.
    pub rname: String,
    /// Serial (0: the list file's modification time).
    pub serial: u32,
    /// Refresh interval.
    pub refresh: u32,
    /// Retry interval.
    pub retry: u32,
    /// Expiry.
    pub expire: u32,
    /// Negative-caching TTL (RFC 2308).
    pub minimum: u32,
}

/// A `$NS` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NsSpec {
    /// TTL of the NS records (`None`: the list's TTL).
    pub ttl: Option<u32>,
    /// Name server names.
    pub names: Vec<String>,
}

/// A line that was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Which file (as given to [`Ip4SetBuilder::add_text`]).
    pub origin: String,
    /// Line number, from 1.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

const EXCLUDED: u32 = u32::MAX;

/// One octet-aligned level: sorted block addresses and what each maps to.
#[derive(Debug, Default, Clone)]
struct Level {
    keys: Vec<u32>,
    vals: Vec<u32>,
    /// `index[h]` is the first position whose key's top 16 bits are `>= h`
    /// (65,537 entries, or none for a level too small to need it): a lookup
    /// searches one /16's keys instead of the whole list, which saves most
    /// of the cache misses of a plain binary search over a big list.
    index: Vec<u32>,
}

/// Levels with fewer keys than this are searched whole.
const INDEX_FROM: usize = 4096;

impl Level {
    fn build_index(&mut self) {
        if self.keys.len() < INDEX_FROM {
            return;
        }
        let mut index = Vec::with_capacity(65_537);
        let mut pos = 0;
        for h in 0..=65_536u32 {
            while pos < self.keys.len() && self.keys[pos] >> 16 < h {
                pos += 1;
            }
            index.push(pos as u32);
        }
        self.index = index;
    }

    /// The slice of positions that may hold keys with the top bits of `key`.
    fn bucket(&self, key: u32) -> (usize, usize) {
        if self.index.is_empty() {
            return (0, self.keys.len());
        }
        let h = (key >> 16) as usize;
        (self.index[h] as usize, self.index[h + 1] as usize)
    }

    fn get(&self, key: u32) -> Option<u32> {
        let (lo, hi) = self.bucket(key);
        self.keys[lo..hi]
            .binary_search(&key)
            .ok()
            .map(|i| self.vals[lo + i])
    }

    /// The first position whose key is `>= key`.
    fn lower_bound(&self, key: u32) -> usize {
        let (lo, hi) = self.bucket(key);
        lo + self.keys[lo..hi].partition_point(|&k| k < key)
    }
}

/// Masks of the four levels, most specific first.
const MASKS: [u32; 4] = [0xffff_ffff, 0xffff_ff00, 0xffff_0000, 0xff00_0000];

/// A parsed `ip4set` list, ready for lookups.
#[derive(Debug, Clone, Default)]
pub struct Ip4Set {
    levels: [Level; 4],
    sets: Vec<Box<[Answer]>>,
    ttl: Option<u32>,
    soa: Option<SoaSpec>,
    ns: Option<NsSpec>,
    vars: [Option<String>; 10],
    base_template: Option<String>,
    warnings: Vec<Warning>,
}

impl Ip4Set {
    /// Parses one list text (a convenience for [`Ip4SetBuilder`]).
    pub fn parse(text: &str) -> Ip4Set {
        let mut b = Ip4SetBuilder::new();
        b.add_text(text, "-");
        b.finish()
    }

    /// The answers for `ip`, or `None` if it is not listed (or excluded).
    pub fn lookup(&self, ip: Ipv4Addr) -> Option<&[Answer]> {
        let n = u32::from(ip);
        for (level, mask) in self.levels.iter().zip(MASKS) {
            if let Some(v) = level.get(n & mask) {
                return (v != EXCLUDED).then(|| &*self.sets[v as usize]);
            }
        }
        None
    }

    /// Which addresses of `block` are listed.
    pub fn bitmap(&self, block: Block25) -> Bitmap {
        let base = block.base_u32();
        let mut bitmap = Bitmap::EMPTY;
        for (level, mask) in self.levels.iter().zip(MASKS).skip(1) {
            if let Some(v) = level.get(base & mask) {
                if v != EXCLUDED {
                    bitmap = Bitmap::FULL;
                }
                break;
            }
        }
        let singles = &self.levels[0];
        let start = singles.lower_bound(base);
        for (k, v) in singles.keys[start..].iter().zip(&singles.vals[start..]) {
            if *k > base + 127 {
                break;
            }
            let offset = (*k - base) as u8;
            if *v == EXCLUDED {
                bitmap.clear(offset);
            } else {
                bitmap.set(offset);
            }
        }
        bitmap
    }

    /// The TXT text of `answer` for the queried address `ip`, after substitution.
    ///
    /// With a base template (`$=`), the entry's text is put where the base
    /// says `$=`, unless the entry's text starts with `=`, which opts out.
    pub fn txt(&self, answer: &Answer, ip: Ipv4Addr) -> Option<String> {
        let template = answer.txt.as_deref()?;
        let ip = ip.to_string();
        let text = match (&self.base_template, template.strip_prefix('=')) {
            (_, Some(own)) => expand(own, &ip, &self.vars, None),
            (Some(base), None) => expand(base, &ip, &self.vars, Some(template)),
            (None, None) => expand(template, &ip, &self.vars, None),
        };
        Some(text)
    }

    /// `$TTL` of the list, if given.
    pub fn ttl(&self) -> Option<u32> {
        self.ttl
    }

    /// `$SOA` of the list, if given.
    pub fn soa(&self) -> Option<&SoaSpec> {
        self.soa.as_ref()
    }

    /// `$NS` of the list, if given.
    pub fn ns(&self) -> Option<&NsSpec> {
        self.ns.as_ref()
    }

    /// Lines that were skipped while parsing.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Number of octet-aligned blocks held (listings and exclusions).
    pub fn len(&self) -> usize {
        self.levels.iter().map(|l| l.keys.len()).sum()
    }

    /// True when the list holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn expand(template: &str, ip: &str, vars: &[Option<String>; 10], entry: Option<&str>) -> String {
    let mut out = String::with_capacity(template.len() + ip.len());
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('$') => {
                chars.next();
                out.push('$');
            }
            Some(d @ '0'..='9') => {
                chars.next();
                if let Some(v) = &vars[d as usize - '0' as usize] {
                    out.push_str(v);
                }
            }
            Some('=') if entry.is_some() => {
                chars.next();
                match entry {
                    Some(e) if !e.is_empty() => out.push_str(&expand(e, ip, vars, None)),
                    _ => out.push_str(ip),
                }
            }
            _ => out.push_str(ip),
        }
    }
    out
}

/// Builds an [`Ip4Set`] from one or more list files, which act as one list.
#[derive(Debug, Default)]
pub struct Ip4SetBuilder {
    raw: [Vec<(u32, u32)>; 4],
    answer_ids: HashMap<Answer, u32>,
    answers: Vec<Answer>,
    ttl: Option<u32>,
    soa: Option<SoaSpec>,
    ns: Option<NsSpec>,
    vars: [Option<String>; 10],
    base_template: Option<String>,
    warnings: Vec<Warning>,
}

/// An entry line, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) first: u32,
    pub(crate) last: u32,
    pub(crate) excluded: bool,
    pub(crate) value: Value,
}

/// The value part of an entry line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// Nothing given: the default answer.
    Default,
    /// `:A` without a second colon: this A, the default TXT.
    AOnly(Ipv4Addr),
    /// An explicit answer.
    Answer(Answer),
    /// A bare TXT template: the default A.
    TxtOnly(String),
}

impl Ip4SetBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one file's text. `origin` names it in warnings. The default
    /// answer (`:A:TXT` line) applies to the rest of this text only.
    pub fn add_text(&mut self, text: &str, origin: &str) {
        let mut default = Answer {
            a: DEFAULT_A,
            txt: None,
        };
        for (i, raw_line) in text.lines().enumerate() {
            let lineno = i + 1;
            let line = raw_line.trim_matches([' ', '\t', '\r']);
            if line.is_empty() {
                continue;
            }
            let special = if let Some(s) = line.strip_prefix('$') {
                Some(s)
            } else if line.starts_with("#$") || line.starts_with(":$") {
                Some(&line[2..])
            } else {
                None
            };
            let result = if let Some(s) = special {
                self.special(s)
            } else if line.starts_with('#') || line.starts_with(';') {
                Ok(())
            } else if line.starts_with(':') {
                parse_value(line, &default).map(|v| {
                    default = resolve(v, &default);
                })
            } else {
                parse_entry(line).map(|e| self.add_entry(e, &default))
            };
            if let Err(message) = result {
                self.warnings.push(Warning {
                    origin: origin.to_string(),
                    line: lineno,
                    message,
                });
            }
        }
    }

    fn special(&mut self, s: &str) -> Result<(), String> {
        let mut words = s.split([' ', '\t']).filter(|w| !w.is_empty());
        let keyword = words.next().unwrap_or("");
        let rest: Vec<&str> = words.collect();
        match keyword.to_ascii_uppercase().as_str() {
            "TTL" => {
                let [t] = rest[..] else {
                    return Err("$TTL takes one value".into());
                };
                self.ttl = Some(parse_time(t)?);
            }
            "SOA" => {
                let [ttl, mname, rname, serial, refresh, retry, expire, minimum] = rest[..] else {
                    return Err(
                        "$SOA takes ttl origin person serial refresh retry expire minttl".into(),
                    );
                };
                if self.soa.is_none() {
                    let ttl = parse_time(ttl)?;
                    self.soa = Some(SoaSpec {
                        ttl: (ttl != 0).then_some(ttl),
                        mname: mname.to_string(),
                        rname: rname.to_string(),
                        serial: serial
                            .parse()
                            .map_err(|_| format!("bad serial {serial:?}"))?,
                        refresh: parse_time(refresh)?,
                        retry: parse_time(retry)?,
                        expire: parse_time(expire)?,
                        minimum: parse_time(minimum)?,
                    });
                }
            }
            "NS" => {
                let Some((ttl, names)) = rest.split_first() else {
                    return Err("$NS takes ttl and names".into());
                };
                if names.is_empty() {
                    return Err("$NS takes ttl and names".into());
                }
                if self.ns.is_none() {
                    let ttl = parse_time(ttl)?;
                    self.ns = Some(NsSpec {
                        ttl: (ttl != 0).then_some(ttl),
                        names: names
                            .iter()
                            .filter(|n| !n.starts_with('-'))
                            .take(32)
                            .map(|n| n.to_string())
                            .collect(),
                    });
                }
            }
            "=" => {
                let text = s[1..].trim_start_matches([' ', '\t']);
                if self.base_template.is_none() {
                    self.base_template = Some(truncate(text).to_string());
                }
            }
            "TIMESTAMP" | "MAXRANGE4" => {
                return Err(format!("${keyword} is not supported, ignored"));
            }
            k if k.len() == 1 && k.as_bytes()[0].is_ascii_digit() => {
                let n = usize::from(k.as_bytes()[0] - b'0');
                let text = s[1..].trim_start_matches([' ', '\t']);
                if text.is_empty() {
                    return Err(format!("${n} needs a value"));
                }
                if self.vars[n].is_none() {
                    self.vars[n] = Some(text.to_string());
                }
            }
            _ => return Err(format!("unknown special entry ${keyword}")),
        }
        Ok(())
    }

    fn answer_id(&mut self, answer: Answer) -> u32 {
        if let Some(id) = self.answer_ids.get(&answer) {
            return *id;
        }
        let id = self.answers.len() as u32;
        self.answers.push(answer.clone());
        self.answer_ids.insert(answer, id);
        id
    }

    fn add_entry(&mut self, entry: Entry, default: &Answer) {
        let id = if entry.excluded {
            EXCLUDED
        } else {
            let answer = resolve(entry.value, default);
            self.answer_id(answer)
        };
        for_each_block(entry.first, entry.last, |level, key| {
            self.raw[level].push((key, id));
        });
    }

    /// Sorts and merges the entries into a lookup structure.
    pub fn finish(self) -> Ip4Set {
        let mut set_ids: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut sets: Vec<Box<[Answer]>> = Vec::new();
        let mut levels: [Level; 4] = Default::default();
        for (level, mut raw) in levels.iter_mut().zip(self.raw) {
            raw.sort_unstable();
            raw.dedup();
            let mut i = 0;
            while i < raw.len() {
                let key = raw[i].0;
                let mut j = i;
                while j < raw.len() && raw[j].0 == key {
                    j += 1;
                }
                let ids: Vec<u32> = raw[i..j].iter().map(|(_, id)| *id).collect();
                // sorted, so an exclusion (u32::MAX) comes last
                let val = if ids.last() == Some(&EXCLUDED) {
                    EXCLUDED
                } else {
                    let next = sets.len() as u32;
                    *set_ids.entry(ids.clone()).or_insert_with(|| {
                        sets.push(
                            ids.iter()
                                .map(|id| self.answers[*id as usize].clone())
                                .collect(),
                        );
                        next
                    })
                };
                level.keys.push(key);
                level.vals.push(val);
                i = j;
            }
            level.build_index();
        }
        Ip4Set {
            levels,
            sets,
            ttl: self.ttl,
            soa: self.soa,
            ns: self.ns,
            vars: self.vars,
            base_template: self.base_template,
            warnings: self.warnings,
        }
    }
}

fn resolve(value: Value, default: &Answer) -> Answer {
    match value {
        Value::Default => default.clone(),
        Value::AOnly(a) => Answer {
            a,
            txt: default.txt.clone(),
        },
        Value::Answer(a) => a,
        Value::TxtOnly(t) => Answer {
            a: default.a,
            txt: Some(t),
        },
    }
}

/// Calls `f(level, key)` for the octet-aligned blocks that exactly cover
/// `first..=last`, largest first where alignment allows (level 0 = /32,
/// 1 = /24, 2 = /16, 3 = /8).
pub(crate) fn for_each_block(first: u32, last: u32, mut f: impl FnMut(usize, u32)) {
    let mut a = u64::from(first);
    let end = u64::from(last);
    while a <= end {
        let mut level = 0;
        for l in (1..=3).rev() {
            let size = 1u64 << (8 * l);
            if a % size == 0 && a + size - 1 <= end {
                level = l;
                break;
            }
        }
        f(level, a as u32);
        a += 1u64 << (8 * level);
    }
}

fn truncate(s: &str) -> &str {
    if s.len() <= 255 {
        return s;
    }
    let mut end = 255;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Parses a time: seconds, or a number with one of the suffixes `s m h d w`.
pub(crate) fn parse_time(s: &str) -> Result<u32, String> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let n: u64 = digits.parse().map_err(|_| format!("bad time {s:?}"))?;
    let mult = match unit.to_ascii_lowercase().as_str() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        "w" => 604800,
        _ => return Err(format!("bad time unit in {s:?}")),
    };
    u32::try_from(n * mult).map_err(|_| format!("time {s:?} too large"))
}

fn mask(bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    }
}

/// Reads 1 to 4 dotted octets at the start of `s`: (address, bits, rest).
fn prefix(s: &str) -> Result<(u32, u32, &str), String> {
    let mut addr = 0u32;
    let mut rest = s;
    for i in 0..4 {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(format!("invalid address {s:?}"));
        }
        let n: u32 = rest[..digits]
            .parse()
            .ok()
            .filter(|n| *n <= 255)
            .ok_or_else(|| format!("invalid octet in {s:?}"))?;
        addr |= n << (24 - 8 * i);
        rest = &rest[digits..];
        let bits = 8 * (i as u32 + 1);
        match rest.strip_prefix('.') {
            Some(r) if i < 3 => rest = r,
            _ => return Ok((addr, bits, rest)),
        }
    }
    unreachable!("the loop returns by its fourth octet")
}

/// Reads an address range at the start of `s`: (first, last, rest).
fn range(s: &str) -> Result<(u32, u32, &str), String> {
    let (a, bits, rest) = prefix(s)?;
    if let Some(r) = rest.strip_prefix('-') {
        let (b, bbits, rest) = prefix(r)?;
        let (mut b, bbits) = if bbits == 8 {
            // "127.0.0.1-2": the second part replaces the last given octet
            ((b >> (bits - 8)) | (a & mask(bits - 8)), bits)
        } else if bbits != bits {
            return Err(format!("range ends differ in length in {s:?}"));
        } else {
            (b, bbits)
        };
        b |= !mask(bbits);
        if a > b {
            return Err(format!("range runs backwards in {s:?}"));
        }
        Ok((a, b, rest))
    } else if let Some(r) = rest.strip_prefix('/') {
        let digits = r.bytes().take_while(u8::is_ascii_digit).count();
        let bits: u32 = r[..digits]
            .parse()
            .ok()
            .filter(|b| *b <= 32)
            .ok_or_else(|| format!("invalid prefix length in {s:?}"))?;
        if a & !mask(bits) != 0 {
            return Err(format!("host bits set in {s:?}"));
        }
        Ok((a, a | !mask(bits), &r[digits..]))
    } else if bits == 8 {
        Err(format!("bare number {s:?}: write it as a CIDR range (n/8)"))
    } else {
        Ok((a, a | !mask(bits), rest))
    }
}

fn is_comment(c: char) -> bool {
    c == '#' || c == ';'
}

/// Reads an entry line (not a default, special or comment line).
pub(crate) fn parse_entry(line: &str) -> Result<Entry, String> {
    let (excluded, s) = match line.strip_prefix('!') {
        Some(s) => (true, s.trim_start_matches([' ', '\t'])),
        None => (false, line),
    };
    let (first, last, rest) = range(s)?;
    match rest.chars().next() {
        None | Some(' ' | '\t' | ':') => {}
        Some(c) if is_comment(c) => {}
        Some(_) => return Err(format!("invalid address {s:?}")),
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let value = if excluded || rest.is_empty() || rest.starts_with(is_comment) {
        Value::Default
    } else {
        parse_value(
            rest,
            &Answer {
                a: DEFAULT_A,
                txt: None,
            },
        )?
    };
    Ok(Entry {
        first,
        last,
        excluded,
        value,
    })
}

/// Reads the value part: `:A:TXT`, `:A:`, `:A` or a bare TXT template.
fn parse_value(s: &str, _default: &Answer) -> Result<Value, String> {
    let Some(after) = s.strip_prefix(':') else {
        return Ok(Value::TxtOnly(truncate(s).to_string()));
    };
    let (n, bits, rest) = prefix(after).map_err(|_| format!("invalid A value in {s:?}"))?;
    // inet_aton forms: "2" is 127.0.0.2, "127.2" is 127.0.0.2
    let a = match bits {
        8 => 0x7f00_0000 | (n >> 24),
        16 => (n & 0xff00_0000) | ((n >> 16) & 0xff),
        24 => (n & 0xffff_0000) | ((n >> 8) & 0xff),
        _ => n,
    };
    if a == 0 {
        return Err(format!("invalid A value in {s:?}"));
    }
    let a = Ipv4Addr::from(a);
    let rest = rest.trim_start_matches([' ', '\t']);
    if let Some(txt) = rest.strip_prefix(':') {
        let txt = txt.trim_start_matches([' ', '\t']);
        let txt = (!txt.is_empty() && !txt.starts_with('#')).then(|| truncate(txt).to_string());
        Ok(Value::Answer(Answer { a, txt }))
    } else if rest.is_empty() || rest.starts_with('#') {
        Ok(Value::AOnly(a))
    } else {
        Err(format!("invalid value {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn span(line: &str) -> (Ipv4Addr, Ipv4Addr) {
        let e = parse_entry(line).unwrap();
        (Ipv4Addr::from(e.first), Ipv4Addr::from(e.last))
    }

    #[test]
    fn the_manuals_range_forms() {
        let slash24 = (ip("127.0.0.0"), ip("127.0.0.255"));
        for form in [
            "127.0.0.0/24",
            "127.0.0",
            "127/24",
            "127-127.0.0",
            "127.0.0.0-127.0.0.255",
        ] {
            if form == "127-127.0.0" {
                // the manual shows it, but rbldnsd's parser (and so ours)
                // rejects range ends of different lengths
                assert!(parse_entry(form).is_err(), "{form}");
                continue;
            }
            assert_eq!(span(form), slash24, "{form}");
        }
        assert_eq!(span("127.0.0.1-255"), (ip("127.0.0.1"), ip("127.0.0.255")));
        let big = (ip("127.16.0.0"), ip("127.31.255.255"));
        for form in [
            "127.16.0.0-127.31.255.255",
            "127.16.0-127.31.255",
            "127.16-127.31",
            "127.16-31",
            "127.16.0.0/12",
        ] {
            assert_eq!(span(form), big, "{form}");
        }
        assert_eq!(span("127.16.0-31"), (ip("127.16.0.0"), ip("127.16.31.255")));
        assert_eq!(span("10/8"), (ip("10.0.0.0"), ip("10.255.255.255")));
        assert_eq!(span("0.0.0.0/0"), (ip("0.0.0.0"), ip("255.255.255.255")));
        assert_eq!(span("192.0.2.7"), (ip("192.0.2.7"), ip("192.0.2.7")));
        for bad in [
            "10",
            "192.0.2.1/24",
            "256.0.0.1",
            "1.2.3.4/33",
            "1.2.3.9-1.2.3.1",
            "x",
            "1.2.3.4x",
        ] {
            assert!(parse_entry(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_and_defaults() {
        let list = Ip4Set::parse(
            "# comment\n\
             ; also a comment\n\
             192.0.2.1\n\
             :127.0.0.3:Listed $ see $1\n\
             $1 http://bl.example/\n\
             192.0.2.4\n\
             192.0.2.5 :5\n\
             192.0.2.6 :6:\n\
             192.0.2.7 open relay at $, costs $$5\n\
             192.0.2.8 :127.0.0.8:eight ; not a comment\n\
             192.0.2.9   # a comment\n\
             !192.0.2.10\n",
        );
        assert!(list.warnings().is_empty(), "{:?}", list.warnings());
        let one = |s: &str| {
            let a = list.lookup(ip(s)).expect(s);
            assert_eq!(a.len(), 1, "{s}");
            (a[0].a, list.txt(&a[0], ip(s)))
        };
        assert_eq!(one("192.0.2.1"), (ip("127.0.0.2"), None));
        assert_eq!(
            one("192.0.2.4"),
            (
                ip("127.0.0.3"),
                Some("Listed 192.0.2.4 see http://bl.example/".into())
            )
        );
        assert_eq!(
            one("192.0.2.5"),
            (
                ip("127.0.0.5"),
                Some("Listed 192.0.2.5 see http://bl.example/".into())
            )
        );
        assert_eq!(one("192.0.2.6"), (ip("127.0.0.6"), None));
        assert_eq!(
            one("192.0.2.7"),
            (
                ip("127.0.0.3"),
                Some("open relay at 192.0.2.7, costs $5".into())
            )
        );
        assert_eq!(
            one("192.0.2.8"),
            (ip("127.0.0.8"), Some("eight ; not a comment".into()))
        );
        assert_eq!(
            one("192.0.2.9"),
            (
                ip("127.0.0.3"),
                Some("Listed 192.0.2.9 see http://bl.example/".into())
            )
        );
        assert!(list.lookup(ip("192.0.2.10")).is_none());
        assert!(list.lookup(ip("192.0.2.11")).is_none());
    }

    #[test]
    fn default_answer_is_per_file() {
        let mut b = Ip4SetBuilder::new();
        b.add_text(":9:nine\n192.0.2.1\n", "a");
        b.add_text("192.0.2.2\n", "b");
        let list = b.finish();
        assert_eq!(list.lookup(ip("192.0.2.1")).unwrap()[0].a, ip("127.0.0.9"));
        assert_eq!(list.lookup(ip("192.0.2.2")).unwrap()[0].a, DEFAULT_A);
    }

    #[test]
    fn most_specific_level_wins_and_exclusion_wins_a_tie() {
        let list = Ip4Set::parse(
            "10.0.0.0/8 :2:wide\n\
             !10.1.0.0/16\n\
             10.1.2.0/24 :3:narrow\n\
             !10.1.2.3\n\
             10.9.9.9 :4:a\n\
             10.9.9.9 :5:b\n\
             10.9.9.9 :5:b\n\
             192.0.2.0/25\n\
             !192.0.2.0/25\n",
        );
        assert_eq!(list.lookup(ip("10.200.0.1")).unwrap()[0].a, ip("127.0.0.2"));
        assert!(list.lookup(ip("10.1.0.1")).is_none());
        assert_eq!(list.lookup(ip("10.1.2.4")).unwrap()[0].a, ip("127.0.0.3"));
        assert!(list.lookup(ip("10.1.2.3")).is_none());
        let mut many: Vec<_> = list
            .lookup(ip("10.9.9.9"))
            .unwrap()
            .iter()
            .map(|a| a.a)
            .collect();
        many.sort();
        assert_eq!(many, vec![ip("127.0.0.4"), ip("127.0.0.5")]);
        assert!(list.lookup(ip("192.0.2.5")).is_none());
        assert!(list.lookup(ip("11.0.0.0")).is_none());
    }

    #[test]
    fn specials() {
        let list = Ip4Set::parse(
            "$TTL 1h\n\
             $SOA 0 ns1.bl.example hostmaster.bl.example 7 2h 30m 1w 5m\n\
             $SOA 0 ignored.example x.example 1 1 1 1 1\n\
             $NS 3600 ns1.bl.example -ns9.bl.example ns2.bl.example\n\
             $= See http://bl.example/?$= ($)\n\
             192.0.2.1 r123\n\
             192.0.2.2 =plain $\n\
             $BOGUS x\n",
        );
        assert_eq!(list.ttl(), Some(3600));
        let soa = list.soa().unwrap();
        assert_eq!(
            (soa.mname.as_str(), soa.serial, soa.refresh, soa.minimum),
            ("ns1.bl.example", 7, 7200, 300)
        );
        assert_eq!(soa.ttl, None);
        assert_eq!(
            list.ns().unwrap().names,
            vec!["ns1.bl.example", "ns2.bl.example"]
        );
        let a = &list.lookup(ip("192.0.2.1")).unwrap()[0];
        assert_eq!(
            list.txt(a, ip("192.0.2.1")).unwrap(),
            "See http://bl.example/?r123 (192.0.2.1)"
        );
        let a = &list.lookup(ip("192.0.2.2")).unwrap()[0];
        assert_eq!(list.txt(a, ip("192.0.2.2")).unwrap(), "plain 192.0.2.2");
        assert_eq!(list.warnings().len(), 1);
        assert_eq!(list.warnings()[0].line, 8);
    }

    #[test]
    fn bitmap_of_a_block() {
        let list = Ip4Set::parse(
            "198.51.100.0\n198.51.100.127\n198.51.100.128\n198.51.100.255\n\
             203.0.113.0/24\n!203.0.113.5\n!203.0.113.200\n",
        );
        let lo = list.bitmap(Block25::of(ip("198.51.100.1")));
        assert_eq!(lo.count(), 2);
        assert!(lo.is_listed(0) && lo.is_listed(127));
        let hi = list.bitmap(Block25::of(ip("198.51.100.130")));
        assert!(hi.is_listed(0) && hi.is_listed(127) && hi.count() == 2);
        let wide = list.bitmap(Block25::of(ip("203.0.113.5")));
        assert_eq!(wide.count(), 127);
        assert!(!wide.is_listed(5));
        let wide_hi = list.bitmap(Block25::of(ip("203.0.113.200")));
        assert!(!wide_hi.is_listed(200 - 128));
        assert!(list.bitmap(Block25::of(ip("8.8.8.8"))).is_empty());
    }

    #[test]
    fn big_lists_use_the_index() {
        let mut x: u32 = 0x2545_f491;
        let mut picks = std::collections::HashSet::new();
        while picks.len() < INDEX_FROM * 3 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            picks.insert(x);
        }
        // and both ends of the address space
        picks.insert(0);
        picks.insert(u32::MAX);
        let text: String = picks
            .iter()
            .map(|n| format!("{}\n", Ipv4Addr::from(*n)))
            .collect();
        let big = Ip4Set::parse(&text);
        assert!(!big.levels[0].index.is_empty());
        for n in picks.iter().take(2000) {
            let block = Block25::of(Ipv4Addr::from(*n));
            let bits = big.bitmap(block);
            for off in 0..128u8 {
                let a = block.addr_at(off);
                let want = picks.contains(&u32::from(a));
                assert_eq!(big.lookup(a).is_some(), want, "{a}");
                assert_eq!(bits.is_listed(off), want, "{a}");
            }
        }
    }

    #[test]
    fn time_units() {
        assert_eq!(parse_time("35m"), Ok(2100));
        assert_eq!(parse_time("86400"), Ok(86400));
        assert_eq!(parse_time("1W"), Ok(604800));
        assert!(parse_time("1y").is_err());
        assert!(parse_time("").is_err());
    }

    /// rbldnsd's rule, read directly: an entry holds `n` at the level of
    /// the largest octet-aligned block around `n` that fits inside the
    /// entry's range; the most specific level holding `n` decides; there
    /// an exclusion wins, otherwise every entry's code counts.
    fn model(spans: &[(u32, u32, bool, usize)], n: u32) -> Option<Vec<usize>> {
        let level_of = |first: u32, last: u32| {
            (0..4).rev().find(|&l| {
                let lo = n & MASKS[l];
                lo >= first && (lo | !MASKS[l]) <= last
            })
        };
        for level in 0..4 {
            let here: Vec<_> = spans
                .iter()
                .filter(|(f, l, _, _)| n >= *f && n <= *l && level_of(*f, *l) == Some(level))
                .collect();
            if here.is_empty() {
                continue;
            }
            if here.iter().any(|s| s.2) {
                return None;
            }
            let mut codes: Vec<usize> = here.iter().map(|s| s.3).collect();
            codes.sort();
            codes.dedup();
            return Some(codes);
        }
        None
    }

    fn arb_entry() -> impl Strategy<Value = (u32, u8, bool)> {
        // a base address, a prefix length and whether it is an exclusion
        (
            any::<u32>(),
            prop_oneof![Just(32u8), 20u8..=32, 8u8..=32],
            any::<bool>(),
        )
    }

    proptest! {
        /// Blocks cover exactly the range, without overlap.
        #[test]
        fn blocks_cover_the_range(first in any::<u32>(), len in 0u32..2_000_000) {
            let last = first.saturating_add(len);
            let mut next = u64::from(first);
            for_each_block(first, last, |level, key| {
                assert_eq!(u64::from(key), next);
                assert_eq!(key & !MASKS[level], 0);
                next += 1u64 << (8 * level);
            });
            prop_assert_eq!(next, u64::from(last) + 1);
        }

        /// The lookup structure agrees with a direct reading of the rules,
        /// and the bitmap agrees with per-address lookups.
        #[test]
        fn lookup_matches_the_rules(
            entries in proptest::collection::vec(arb_entry(), 1..12),
            probe in any::<u8>(),
        ) {
            let anchor = entries[0].0 & 0xffff_ff00;
            let mut text = String::new();
            let mut spans = Vec::new();
            for (i, (base, bits, excl)) in entries.iter().enumerate() {
                // keep every other entry in the anchor's /24 so they interact
                let base = if i % 2 == 0 { anchor | (base & 0xff) } else { *base };
                let base = base & mask(u32::from(*bits));
                let last = base | !mask(u32::from(*bits));
                let bang = if *excl { "!" } else { "" };
                text.push_str(&format!("{bang}{}/{bits} :{}\n", Ipv4Addr::from(base), i + 2));
                spans.push((base, last, *excl, i + 2));
            }
            let list = Ip4Set::parse(&text);
            prop_assert!(list.warnings().is_empty());
            let block = Block25::of(Ipv4Addr::from(anchor | u32::from(probe)));
            let bitmap = list.bitmap(block);
            for off in 0..128u8 {
                let addr = block.addr_at(off);
                let want = model(&spans, u32::from(addr));
                let got = list.lookup(addr).map(|answers| {
                    let mut codes: Vec<usize> =
                        answers.iter().map(|a| usize::from(a.a.octets()[3])).collect();
                    codes.sort();
                    codes
                });
                prop_assert_eq!(&got, &want, "{}", addr);
                prop_assert_eq!(bitmap.is_listed(off), got.is_some());
            }
        }

        /// The parser never panics, whatever the line.
        #[test]
        fn parser_survives_anything(text in "\\PC{0,200}") {
            let _ = Ip4Set::parse(&text);
        }

        /// Dotted-quad entries always parse to themselves.
        #[test]
        fn single_addresses_parse(n in any::<u32>()) {
            let s = Ipv4Addr::from(n).to_string();
            let e = parse_entry(&s).unwrap();
            prop_assert_eq!((e.first, e.last), (n, n));
        }
    }
}
