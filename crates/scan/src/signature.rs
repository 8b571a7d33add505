//! ClamAV signature formats: parsing `.ndb` body signatures into patterns the matcher
//! can anchor, and `.hdb`/`.hsb` whole-file hash signatures.
//!
//! `.ndb` lines are `Name:Target:Offset:HexSignature[:MinFLevel[:MaxFLevel]]`.
//! Supported in the hex signature: bytes, `??`, nibble wildcards `a?`/`?a`, bounded
//! gaps `{n}`, `{-n}`, `{n-m}`, unbounded gaps `*` and `{n-}` (and, as ClamAV reads
//! them, `{0}` and `{0-0}`), alternatives `(aa|bbcc)`. The subsignatures of logical
//! signatures add the `::i` (ASCII case folded), `::w` (UTF-16LE: every byte
//! followed by `00`, gaps unchanged), `::a` (with `::w`: the plain form too) and
//! `::f` (not touching an alphanumeric byte on either side) modifiers. Offsets: `*`, `n`, `n,m`, `EOF-n`, `EOF-n,m`. Target types: 0 (any
//! file), 1 (PE), 4 (mail: matched on the raw message of a mail session), 5 (images),
//! 6 (ELF), 9 (Mach-O), 10 (PDF), 11 (Flash), 12 (Java); the others need normalisation
//! or parsing this engine does not do. Anything else is refused with a reason that the
//! load report counts.

/// Longest span a group between unbounded gaps may cover: bounds the matcher's window.
pub const MAX_GROUP_SPAN: usize = 8 * 1024;

/// Longest literal anchor put in the automaton.
const MAX_ANCHOR: usize = 32;

/// Shortest literal anchor accepted (ClamAV requires two static bytes too).
const MIN_ANCHOR: usize = 2;

/// One element of a signature group: one per byte of most signatures, so kept
/// to 16 bytes (gaps in 32 bits, the rare alternatives behind a box); at 32
/// bytes, 100,000 `.ndb` and 50,000 `.ldb` signatures took half a gigabyte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Elem {
    /// An exact byte.
    Byte(u8),
    /// A byte where only the bits in `mask` must equal `value` (`??` has mask 0).
    Masked { mask: u8, value: u8 },
    /// A bounded gap of `min..=max` arbitrary bytes.
    Gap { min: u32, max: u32 },
    /// One of several literal byte strings.
    Alt(Box<Alts>),
    /// An ASCII letter matched in either case (stored in lower case; `::i`).
    Fold(u8),
}

impl Elem {
    fn max_len(&self) -> usize {
        match self {
            Elem::Byte(_) | Elem::Masked { .. } | Elem::Fold(_) => 1,
            Elem::Gap { max, .. } => *max as usize,
            Elem::Alt(a) => a.alts.iter().map(Vec::len).max().unwrap_or(0),
        }
    }
}

/// A run of elements with a bounded span, found through its literal anchor.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// The elements before the anchor.
    pub before: Vec<Elem>,
    /// The literal anchor searched for by the automaton (ASCII letters in lower case
    /// when `anchor_fold` is set; the index then holds every case variant).
    pub anchor: Vec<u8>,
    /// The anchor is compared without regard to ASCII case (`::i`).
    pub anchor_fold: bool,
    /// The elements after the anchor.
    pub after: Vec<Elem>,
    /// Least number of bytes between the end of the previous group and this one.
    pub min_gap: usize,
    /// Most bytes `before` can cover.
    pub before_max: usize,
    /// Most bytes `after` can cover.
    pub after_max: usize,
}

/// The byte strings of an alternative, compared without regard to ASCII case
/// when `fold` is set (the `::i` modifier of logical subsignatures).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Alts {
    pub alts: Vec<Vec<u8>>,
    pub fold: bool,
}

/// Where a body signature must start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offset {
    /// Anywhere.
    Any,
    /// At `start..=start+extra` from the beginning of the file.
    Abs { start: u64, extra: u64 },
    /// At `size-back..=size-back+extra`.
    Eof { back: u64, extra: u64 },
}

impl Offset {
    pub fn allows(self, start: u64, size: Option<u64>) -> bool {
        match self {
            Offset::Any => true,
            Offset::Abs { start: s, extra } => start >= s && start - s <= extra,
            Offset::Eof { back, extra } => match size {
                Some(size) if size >= back => {
                    let s = size - back;
                    start >= s && start - s <= extra
                }
                _ => false,
            },
        }
    }
}

/// A parsed `.ndb` body signature.
#[derive(Debug, Clone)]
pub(crate) struct BodySig {
    pub name: String,
    pub target: u8,
    pub offset: Offset,
    pub groups: Vec<Group>,
    /// For a subsignature of a logical signature: (logical signature, subsignature
    /// index). Its matches are counted for the logical expression, not reported.
    pub owner: Option<(u32, u8)>,
    /// `::f`: the match must not touch an alphanumeric character on either side
    /// (a wide one, `alnum 00`, when `wide`), as ClamAV's `(W)` boundary.
    pub fullword: Option<bool>,
}

/// Why a signature line was not loaded; the load report counts each reason.
pub(crate) type Refusal = &'static str;

/// A bounded gap element; gaps past 32 bits are refused.
fn gap(min: usize, max: usize) -> Result<Elem, Refusal> {
    let bound = |n: usize| u32::try_from(n).map_err(|_| "ndb: bad gap");
    Ok(Elem::Gap {
        min: bound(min)?,
        max: bound(max)?,
    })
}

/// Parses one `.ndb` line.
pub(crate) fn parse_ndb(line: &str) -> Result<BodySig, Refusal> {
    let fields: Vec<&str> = line.split(':').collect();
    if fields.len() < 4 {
        return Err("ndb: too few fields");
    }
    let name = fields[0].to_string();
    let target: u8 = fields[1].parse().map_err(|_| "ndb: bad target type")?;
    if !matches!(target, 0..=6 | 9..=12) {
        return Err("ndb: target type not supported (7 text, 8 graphics, 13+)");
    }
    let offset = parse_offset(fields[2])?;
    let groups = parse_hex(fields[3])?;
    if matches!(offset, Offset::Eof { .. }) && groups.len() > 1 {
        return Err("ndb: EOF offset with unbounded gaps not supported");
    }
    Ok(BodySig {
        name,
        target,
        offset,
        groups,
        owner: None,
        fullword: None,
    })
}

pub(crate) fn parse_offset(s: &str) -> Result<Offset, Refusal> {
    if s == "*" {
        return Ok(Offset::Any);
    }
    let (base, extra) = match s.split_once(',') {
        Some((b, e)) => (b, e.parse::<u64>().map_err(|_| "ndb: bad offset")?),
        None => (s, 0),
    };
    if let Some(back) = base.strip_prefix("EOF-") {
        let back = back.parse().map_err(|_| "ndb: bad offset")?;
        return Ok(Offset::Eof { back, extra });
    }
    if let Ok(start) = base.parse::<u64>() {
        return Ok(Offset::Abs { start, extra });
    }
    Err("ndb: offset type not supported (EP, Sx, SL, SE need executable parsing)")
}

/// Parses a hex signature into groups split at unbounded gaps.
pub(crate) fn parse_hex(hex: &str) -> Result<Vec<Group>, Refusal> {
    let b = hex.as_bytes();
    let mut runs: Vec<(usize, Vec<Elem>)> = Vec::new();
    let mut cur: Vec<Elem> = Vec::new();
    let mut min_gap = 0;
    let mut i = 0;
    let nib = |c: u8| (c as char).to_digit(16).map(|v| v as u8);
    while i < b.len() {
        match b[i] {
            b'*' => {
                runs.push((min_gap, std::mem::take(&mut cur)));
                min_gap = 0;
                i += 1;
            }
            b'{' => {
                let end = hex[i..].find('}').ok_or("ndb: unclosed {")? + i;
                let inner = &hex[i + 1..end];
                let (lo, hi) = match inner.split_once('-') {
                    Some((lo, hi)) => (lo, Some(hi)),
                    None => (inner, None),
                };
                let lo: usize = if lo.is_empty() {
                    0
                } else {
                    lo.parse().map_err(|_| "ndb: bad gap")?
                };
                match hi {
                    // ClamAV reads a gap whose upper bound is 0 (`{0}`, `{0-0}`,
                    // `{-0}`) as unbounded: checked against clamscan 1.4.
                    Some("0") | None if lo == 0 => {
                        runs.push((min_gap, std::mem::take(&mut cur)));
                        min_gap = 0;
                    }
                    Some("") => {
                        // {n-}: at least n bytes, no upper bound.
                        runs.push((min_gap, std::mem::take(&mut cur)));
                        min_gap = lo;
                    }
                    Some(hi) => {
                        let hi: usize = hi.parse().map_err(|_| "ndb: bad gap")?;
                        if hi < lo {
                            return Err("ndb: bad gap");
                        }
                        cur.push(gap(lo, hi)?);
                    }
                    None => cur.push(gap(lo, lo)?),
                }
                i = end + 1;
            }
            b'(' => {
                let end = hex[i..].find(')').ok_or("ndb: unclosed (")? + i;
                let inner = &hex[i + 1..end];
                if inner == "B" || inner == "L" || inner.is_empty() {
                    return Err("ndb: anchors (B)/(L) not supported");
                }
                let mut alts = Vec::new();
                for alt in inner.split('|') {
                    let ab = alt.as_bytes();
                    if !ab.len().is_multiple_of(2) || ab.is_empty() {
                        return Err("ndb: bad alternative");
                    }
                    let mut v = Vec::new();
                    for pair in ab.chunks(2) {
                        match (nib(pair[0]), nib(pair[1])) {
                            (Some(h), Some(l)) => v.push(h << 4 | l),
                            _ => return Err("ndb: wildcards inside alternatives not supported"),
                        }
                    }
                    alts.push(v);
                }
                cur.push(Elem::Alt(Box::new(Alts { alts, fold: false })));
                i = end + 1;
            }
            b'!' => return Err("ndb: negated alternatives not supported"),
            b'[' => return Err("ndb: [n-m] byte ranges not supported"),
            _ => {
                if i + 1 >= b.len() {
                    return Err("ndb: odd hex length");
                }
                let (h, l) = (b[i], b[i + 1]);
                let elem = match (h, l) {
                    (b'?', b'?') => Elem::Masked { mask: 0, value: 0 },
                    (b'?', l) => Elem::Masked {
                        mask: 0x0f,
                        value: nib(l).ok_or("ndb: bad hex")?,
                    },
                    (h, b'?') => Elem::Masked {
                        mask: 0xf0,
                        value: nib(h).ok_or("ndb: bad hex")? << 4,
                    },
                    (h, l) => match (nib(h), nib(l)) {
                        (Some(h), Some(l)) => Elem::Byte(h << 4 | l),
                        _ => return Err("ndb: bad hex"),
                    },
                };
                cur.push(elem);
                i += 2;
            }
        }
    }
    runs.push((min_gap, cur));
    let mut groups = Vec::new();
    for (min_gap, elems) in runs {
        if elems.is_empty() {
            if groups.is_empty() && min_gap == 0 {
                continue; // a leading `*`
            }
            return Err("ndb: empty part between gaps");
        }
        groups.push(make_group(min_gap, elems)?);
    }
    if groups.is_empty() {
        return Err("ndb: empty signature");
    }
    // Most signatures have one group: without this each would keep room for four
    // (400 bytes), 80 MB over 200,000 logical subsignatures.
    groups.shrink_to_fit();
    Ok(groups)
}

fn make_group(min_gap: usize, elems: Vec<Elem>) -> Result<Group, Refusal> {
    let span: usize = elems.iter().map(Elem::max_len).sum();
    if span > MAX_GROUP_SPAN {
        return Err("ndb: bounded part longer than the matcher's window");
    }
    let exact = |e: &Elem| matches!(e, Elem::Byte(_) | Elem::Fold(_));
    // The longest run of exact bytes (or case-folded letters) is the anchor.
    let (mut best_start, mut best_len) = (0, 0);
    let mut i = 0;
    while i < elems.len() {
        if exact(&elems[i]) {
            let s = i;
            while i < elems.len() && exact(&elems[i]) {
                i += 1;
            }
            if i - s > best_len {
                best_start = s;
                best_len = i - s;
            }
        } else {
            i += 1;
        }
    }
    if best_len < MIN_ANCHOR {
        return Err("ndb: no run of two exact bytes to anchor on");
    }
    // Long runs: anchor on a prefix, verify the rest. A case-folded letter doubles
    // the anchor's variants in the index: at most MAX_FOLDS of them.
    let mut anchor_len = 0;
    let mut folds = 0;
    for e in &elems[best_start..best_start + best_len.min(MAX_ANCHOR)] {
        if matches!(e, Elem::Fold(_)) {
            if folds == MAX_FOLDS && anchor_len >= MIN_ANCHOR {
                break;
            }
            folds += 1;
        }
        anchor_len += 1;
    }
    let before = elems[..best_start].to_vec();
    let anchor: Vec<u8> = elems[best_start..best_start + anchor_len]
        .iter()
        .map(|e| match e {
            Elem::Byte(b) | Elem::Fold(b) => *b,
            _ => unreachable!("anchor is made of exact bytes"),
        })
        .collect();
    let after = elems[best_start + anchor_len..].to_vec();
    Ok(Group {
        before_max: before.iter().map(Elem::max_len).sum(),
        after_max: after.iter().map(Elem::max_len).sum(),
        before,
        anchor,
        anchor_fold: folds > 0,
        after,
        min_gap,
    })
}

/// Most case-folded letters in one anchor (2^4 = 16 variants in the index).
const MAX_FOLDS: usize = 4;

/// Every ASCII-case variant of a folded anchor (letters are stored in lower case).
pub(crate) fn fold_variants(anchor: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![Vec::with_capacity(anchor.len())];
    for &b in anchor {
        if b.is_ascii_lowercase() {
            let mut upper = out.clone();
            for v in &mut out {
                v.push(b);
            }
            for v in &mut upper {
                v.push(b.to_ascii_uppercase());
            }
            out.extend(upper);
        } else {
            for v in &mut out {
                v.push(b);
            }
        }
    }
    out
}

/// Applies the `::i` modifier: letters match in either case, alternatives too.
pub(crate) fn fold_case(groups: &mut [Group]) {
    let fold = |elems: &mut Vec<Elem>| {
        for e in elems.iter_mut() {
            match e {
                Elem::Byte(b) if b.is_ascii_alphabetic() => *e = Elem::Fold(b.to_ascii_lowercase()),
                Elem::Alt(a) => a.fold = true,
                _ => {}
            }
        }
    };
    for g in groups {
        fold(&mut g.before);
        fold(&mut g.after);
        if g.anchor.iter().any(u8::is_ascii_alphabetic) {
            // Rebuild the group so the anchor respects MAX_FOLDS.
            let mut elems = std::mem::take(&mut g.before);
            elems.extend(g.anchor.iter().map(|&b| {
                if b.is_ascii_alphabetic() {
                    Elem::Fold(b.to_ascii_lowercase())
                } else {
                    Elem::Byte(b)
                }
            }));
            elems.append(&mut g.after);
            *g = make_group(g.min_gap, elems).expect("a group that parsed still anchors");
        }
    }
}

/// Applies the `::w` modifier to the text of a hex signature the way ClamAV does
/// (`cli_sigopts_handler`): every byte, nibble wildcard and alternative byte is
/// followed by `00`; gaps keep their byte counts; `[n-m]` becomes `{n-m}`.
pub(crate) fn widen_hex(hex: &str) -> Result<String, Refusal> {
    let b = hex.as_bytes();
    let mut out = String::with_capacity(hex.len() * 2);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'*' | b'|' | b')' | b'(' | b'!' => out.push(b[i] as char),
            b'[' => {
                let end = hex[i..].find(']').ok_or("ldb: unclosed [")? + i;
                out.push('{');
                out.push_str(&hex[i + 1..end]);
                out.push('}');
                i = end;
            }
            b'{' => {
                let end = hex[i..].find('}').ok_or("ndb: unclosed {")? + i;
                out.push_str(&hex[i..=end]);
                i = end;
            }
            _ => {
                let pair = hex.get(i..i + 2).ok_or("ndb: odd hex length")?;
                out.push_str(pair);
                out.push_str("00");
                i += 1;
            }
        }
        i += 1;
    }
    Ok(out)
}

/// Work allowed for one verification (gaps and alternatives backtrack).
const VERIFY_BUDGET: usize = 20_000;

/// Byte strings equal, or equal but for ASCII case when `fold`.
pub(crate) fn same(a: &[u8], b: &[u8], fold: bool) -> bool {
    if fold {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

/// Matches `elems` forwards from `pos` in `data`; returns the end of the earliest match.
pub(crate) fn match_forward(elems: &[Elem], data: &[u8], pos: usize) -> Option<usize> {
    let mut budget = VERIFY_BUDGET;
    fwd(elems, data, pos, &mut budget)
}

fn fwd(elems: &[Elem], data: &[u8], mut pos: usize, budget: &mut usize) -> Option<usize> {
    for (k, e) in elems.iter().enumerate() {
        if *budget == 0 {
            return None;
        }
        *budget -= 1;
        match e {
            Elem::Byte(b) => {
                if data.get(pos) != Some(b) {
                    return None;
                }
                pos += 1;
            }
            Elem::Masked { mask, value } => {
                if data.get(pos).is_none_or(|&d| d & mask != *value) {
                    return None;
                }
                pos += 1;
            }
            Elem::Gap { min, max } => {
                for g in *min as usize..=*max as usize {
                    if pos + g > data.len() {
                        return None;
                    }
                    if let Some(end) = fwd(&elems[k + 1..], data, pos + g, budget) {
                        return Some(end);
                    }
                }
                return None;
            }
            Elem::Fold(b) => {
                if data.get(pos).is_none_or(|d| d.to_ascii_lowercase() != *b) {
                    return None;
                }
                pos += 1;
            }
            Elem::Alt(set) => {
                for a in &set.alts {
                    if data
                        .get(pos..pos + a.len())
                        .is_some_and(|d| same(d, a, set.fold))
                    {
                        if let Some(end) = fwd(&elems[k + 1..], data, pos + a.len(), budget) {
                            return Some(end);
                        }
                    }
                }
                return None;
            }
        }
    }
    Some(pos)
}

/// Matches `elems` backwards so that they end at `end`; returns every start the
/// predicate accepts, trying the nearest first, and stops at the first accepted.
pub(crate) fn match_backward(
    elems: &[Elem],
    data: &[u8],
    end: usize,
    accept: &mut dyn FnMut(usize) -> bool,
) -> Option<usize> {
    let mut budget = VERIFY_BUDGET;
    bwd(elems, data, end, accept, &mut budget)
}

fn bwd(
    elems: &[Elem],
    data: &[u8],
    mut pos: usize,
    accept: &mut dyn FnMut(usize) -> bool,
    budget: &mut usize,
) -> Option<usize> {
    for (k, e) in elems.iter().enumerate().rev() {
        if *budget == 0 {
            return None;
        }
        *budget -= 1;
        match e {
            Elem::Byte(b) => {
                if pos == 0 || data[pos - 1] != *b {
                    return None;
                }
                pos -= 1;
            }
            Elem::Masked { mask, value } => {
                if pos == 0 || data[pos - 1] & mask != *value {
                    return None;
                }
                pos -= 1;
            }
            Elem::Gap { min, max } => {
                for g in *min as usize..=*max as usize {
                    if g > pos {
                        return None;
                    }
                    if let Some(s) = bwd(&elems[..k], data, pos - g, accept, budget) {
                        return Some(s);
                    }
                }
                return None;
            }
            Elem::Fold(b) => {
                if pos == 0 || data[pos - 1].to_ascii_lowercase() != *b {
                    return None;
                }
                pos -= 1;
            }
            Elem::Alt(set) => {
                for a in &set.alts {
                    if pos >= a.len() && same(&data[pos - a.len()..pos], a, set.fold) {
                        if let Some(s) = bwd(&elems[..k], data, pos - a.len(), accept, budget) {
                            return Some(s);
                        }
                    }
                }
                return None;
            }
        }
    }
    accept(pos).then_some(pos)
}

/// Which digest a hash signature uses, by its hex length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum HashKind {
    Md5,
    Sha1,
    Sha256,
}

/// A parsed `.hdb`/`.hsb` line: `Hash:Size:Name[:MinFLevel]` (size `*` = any).
#[derive(Debug, Clone)]
pub(crate) struct HashSig {
    pub kind: HashKind,
    pub digest: Vec<u8>,
    pub size: Option<u64>,
    pub name: String,
}

/// Parses one `.hdb`/`.hsb` line.
pub(crate) fn parse_hash(line: &str) -> Result<HashSig, Refusal> {
    let fields: Vec<&str> = line.split(':').collect();
    if fields.len() < 3 {
        return Err("hdb: too few fields");
    }
    let hex = fields[0].trim();
    let kind = match hex.len() {
        32 => HashKind::Md5,
        40 => HashKind::Sha1,
        64 => HashKind::Sha256,
        _ => return Err("hdb: hash length is not MD5, SHA-1 or SHA-256"),
    };
    let digest = decode_hex(hex).ok_or("hdb: bad hex")?;
    let size = match fields[1] {
        "*" => None,
        s => Some(s.parse().map_err(|_| "hdb: bad size")?),
    };
    Ok(HashSig {
        kind,
        digest,
        size,
        name: fields[2].to_string(),
    })
}

/// The three to five fields of a hash line whose fourth and fifth are the
/// lowest and highest functionality level (`.mdb`/`.msb`, `.imp`), checked
/// against this engine's; the lowest level back. `errors` word the refusals
/// for the format: a wrong field count, a bad level, a line for newer engines,
/// one for older engines only.
fn levelled_fields(line: &str, errors: [Refusal; 4]) -> Result<(Vec<&str>, Option<u32>), Refusal> {
    let [count, bad_level, newer, older] = errors;
    let fields: Vec<&str> = line.split(':').collect();
    if !(3..=5).contains(&fields.len()) {
        return Err(count);
    }
    let level = |i: usize| -> Result<Option<u32>, Refusal> {
        fields
            .get(i)
            .map(|l| l.parse::<u32>().map_err(|_| bad_level))
            .transpose()
    };
    let (min, max) = (level(3)?, level(4)?);
    if min.is_some_and(|l| l > crate::logical::FLEVEL) {
        return Err(newer);
    }
    if max.is_some_and(|l| l < crate::logical::FLEVEL) {
        return Err(older);
    }
    Ok((fields, min))
}

/// Parses one `.mdb`/`.msb` line: `SectionSize:Hash:Name[:MinFLevel[:MaxFLevel]]`,
/// the hash of one PE section's raw bytes (MD5 in `.mdb`, SHA-1 or SHA-256 in
/// `.msb`). A `*` size is allowed, as ClamAV allows it, only on lines that ask for
/// functionality level 73 or later.
pub(crate) fn parse_section_hash(line: &str) -> Result<HashSig, Refusal> {
    let (fields, min) = levelled_fields(
        line,
        [
            "mdb: wrong number of fields",
            "mdb: bad functionality level",
            "mdb: needs a newer engine",
            "mdb: for older engines only",
        ],
    )?;
    if fields[0] == "*" && min.is_none_or(|l| l < 73) {
        return Err("mdb: a wildcard size needs functionality level 73 or later");
    }
    parse_hash(&format!("{}:{}:{}", fields[1], fields[0], fields[2])).map_err(|r| match r {
        "hdb: bad size" => "mdb: bad section size",
        "hdb: bad hex" => "mdb: bad hex",
        _ => "mdb: hash length is not MD5, SHA-1 or SHA-256",
    })
}

/// Parses one `.imp` line: `Hash:Size:Name[:MinFLevel[:MaxFLevel]]`, the hash of
/// a PE file's import table (see [`crate::imports`]; MD5, SHA-1 or SHA-256) and
/// the length of the string hashed. A `*` size is allowed at any level, as ClamAV
/// allows it for `.imp` (the format is younger than wildcard sizes); a zero size
/// is refused, as ClamAV refuses it.
pub(crate) fn parse_import_hash(line: &str) -> Result<HashSig, Refusal> {
    let (fields, _) = levelled_fields(
        line,
        [
            "imp: wrong number of fields",
            "imp: bad functionality level",
            "imp: needs a newer engine",
            "imp: for older engines only",
        ],
    )?;
    let sig =
        parse_hash(&format!("{}:{}:{}", fields[0], fields[1], fields[2])).map_err(|r| match r {
            "hdb: bad size" => "imp: bad size",
            "hdb: bad hex" => "imp: bad hex",
            _ => "imp: hash length is not MD5, SHA-1 or SHA-256",
        })?;
    if sig.size.is_some_and(|s| s == 0 || s >= 0xffff_ffff) {
        return Err("imp: bad size");
    }
    Ok(sig)
}

/// Decodes a hex string.
pub(crate) fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|p| {
            let h = (p[0] as char).to_digit(16)?;
            let l = (p[1] as char).to_digit(16)?;
            Some((h * 16 + l) as u8)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_stay_small() {
        // One per signature byte: the database's memory follows this.
        assert_eq!(std::mem::size_of::<Elem>(), 16);
    }

    #[test]
    fn import_hash_lines() {
        let md5 = "0123456789abcdef0123456789abcdef";
        let h = parse_import_hash(&format!("{md5}:58:Imp")).unwrap();
        assert_eq!(
            (h.size, h.name.as_str(), h.kind),
            (Some(58), "Imp", HashKind::Md5)
        );
        assert_eq!(
            parse_import_hash(&format!("{md5}:*:Any")).unwrap().size,
            None,
            "no level needed for a wildcard"
        );
        assert_eq!(
            parse_import_hash(&format!("{md5}:0:N")).unwrap_err(),
            "imp: bad size"
        );
        assert_eq!(
            parse_import_hash(&format!("{md5}:4294967295:N")).unwrap_err(),
            "imp: bad size"
        );
        assert_eq!(
            parse_import_hash(&format!("{md5}:12:N:9999")).unwrap_err(),
            "imp: needs a newer engine"
        );
        assert_eq!(
            parse_import_hash(&format!("{md5}:12:N:10:20")).unwrap_err(),
            "imp: for older engines only"
        );
        assert_eq!(
            parse_import_hash("ab:12:N").unwrap_err(),
            "imp: hash length is not MD5, SHA-1 or SHA-256"
        );
        assert_eq!(
            parse_import_hash("1:2").unwrap_err(),
            "imp: wrong number of fields"
        );
        let sha256 = "ab".repeat(32);
        assert_eq!(
            parse_import_hash(&format!("{sha256}:7:S")).unwrap().kind,
            HashKind::Sha256
        );
    }

    #[test]
    fn section_hash_lines() {
        let md5 = "44d88612fea8a8f36de82e1278abb02f";
        let h = parse_section_hash(&format!("4096:{md5}:Sect")).unwrap();
        assert_eq!(
            (h.kind, h.size, h.name.as_str()),
            (HashKind::Md5, Some(4096), "Sect")
        );
        assert_eq!(
            parse_section_hash(&format!("*:{md5}:Any:73")).unwrap().size,
            None
        );
        assert_eq!(
            parse_section_hash(&format!("*:{md5}:Any")).unwrap_err(),
            "mdb: a wildcard size needs functionality level 73 or later"
        );
        assert_eq!(
            parse_section_hash(&format!("x:{md5}:N")).unwrap_err(),
            "mdb: bad section size"
        );
        assert_eq!(
            parse_section_hash("1:abc:N").unwrap_err(),
            "mdb: hash length is not MD5, SHA-1 or SHA-256"
        );
        assert_eq!(
            parse_section_hash(&format!("1:{md5}:N:9999")).unwrap_err(),
            "mdb: needs a newer engine"
        );
        assert_eq!(
            parse_section_hash("1:2").unwrap_err(),
            "mdb: wrong number of fields"
        );
    }

    proptest::proptest! {
        #[test]
        fn section_hash_lines_never_panic(line in "[0-9a-f:*xA-Z]{0,90}") {
            let _ = parse_section_hash(&line);
        }
    }

    fn matches(hex: &str, data: &[u8]) -> bool {
        let groups = parse_hex(hex).unwrap();
        assert_eq!(groups.len(), 1);
        let g = &groups[0];
        (0..data.len()).any(|i| {
            data[i..].starts_with(&g.anchor)
                && match_forward(&g.after, data, i + g.anchor.len()).is_some()
                && match_backward(&g.before, data, i, &mut |_| true).is_some()
        })
    }

    #[test]
    fn hex_elements() {
        assert!(matches("414243", b"xxABCxx"));
        assert!(matches("41??4344", b"AzCD"));
        assert!(matches("4142{2}4344", b"ABxyCD"));
        assert!(!matches("4142{2}4344", b"ABxCD"));
        assert!(matches("4142{1-3}4344", b"ABxxxCD"));
        assert!(matches("4142{-2}4344", b"ABCD"));
        assert!(matches("4142(43|4445)4647", b"ABDEFG"));
        assert!(matches("4?4142", b"OAB"));
        assert!(!matches("4?4142", b"aAB"));
        assert!(matches("(58|59)??4142", b"Y-AB"));
    }

    #[test]
    fn groups_and_refusals() {
        let g = parse_hex("4142*4344{10-}4546").unwrap();
        assert_eq!(g.len(), 3);
        assert_eq!(parse_hex("41424142{0}43444344").unwrap().len(), 2);
        assert_eq!(parse_hex("41424142{0-0}43444344").unwrap().len(), 2);
        assert_eq!(g[2].min_gap, 10);
        assert!(parse_hex("41??42").is_err());
        assert!(parse_ndb("X:0:EP+0:41424344").is_err());
        assert!(parse_ndb("X:3:*:41424344").is_ok());
        assert!(parse_ndb("X:7:*:41424344").is_err());
        assert!(parse_ndb("X:4:*:41424344").is_ok());
        assert!(parse_ndb("X:0:EOF-10:41424344").is_ok());
        assert!(parse_ndb("X:1:0,20:41424344:73").is_ok());
        assert!(parse_hash("44d88612fea8a8f36de82e1278abb02f:68:Eicar").is_ok());
        assert!(parse_hash("44d8:68:Eicar").is_err());
    }
}
