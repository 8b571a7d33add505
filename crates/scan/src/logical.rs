//! ClamAV logical signatures (`.ldb`, and `.ldu` for PUA): parsing a line into its
//! target description block, logical expression and subsignatures, and evaluating
//! the expression over subsignature match counts.
//!
//! A line is `Name;TargetDescriptionBlock;LogicalExpression;Subsig0;Subsig1;...`.
//!
//! - The target description block: `Engine:min-max` (first, and at least 51 when
//!   any attribute other than `Target` is used, as ClamAV requires), `Target:N`
//!   (required), `FileSize:min-max`, `Container:CL_TYPE_*`,
//!   `Intermediates:CL_TYPE_*>CL_TYPE_*...`. `EntryPoint`, `NumberOfSections` (PE,
//!   ELF, Mach-O headers), `IconGroup1/2` (PE icons) and `HandlerType` need parsing
//!   this engine does not do: such signatures are not loaded, and counted.
//! - The logical expression is parsed exactly as ClamAV's `cli_ac_chklsig` splits it,
//!   so that its quirks are ours too: at the top level the *first* `&`/`|` splits the
//!   expression (`0&1|2` is `0&(1|2)`), inside a parenthesised block the *last*
//!   operator at depth one does; `X=N`, `X>N`, `X<N` on a subsignature compare its
//!   match count, `(...)>N,M` on a block compares the sum of the counts of the parts
//!   that held and needs `M` distinct subsignatures among them.
//! - Subsignatures: `.ndb` body syntax with an optional `offset:` and the `::i`,
//!   `::w`, `::f`, `::a` modifiers (see [`crate::signature`]); PCRE subsignatures
//!   `[offset:]Trigger/regex/[flags]` (see [`crate::pcre`]). Byte-compare
//!   subsignatures, macros and fuzzy image hashes are refused and counted.

use crate::bytecmp::ByteCmp;
use crate::pcre::Pcre;
use crate::signature::{fold_case, parse_hex, parse_offset, widen_hex, BodySig, Offset, Refusal};

/// The functionality level this engine claims for `Engine:min-max` ranges: that of
/// ClamAV 1.4, whose documented format this parser follows.
pub const FLEVEL: u32 = 213;

/// Most subsignatures in one logical signature (ClamAV's `MAX_LDB_SUBSIGS`).
pub const MAX_SUBSIGS: usize = 64;

/// Deepest nesting of a logical expression accepted (guards the recursion).
const MAX_EXPR_DEPTH: usize = 64;

/// A count comparison in a logical expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmp {
    Eq,
    Gt,
    Lt,
}

impl Cmp {
    fn from(c: u8) -> Option<Cmp> {
        match c {
            b'=' => Some(Cmp::Eq),
            b'>' => Some(Cmp::Gt),
            b'<' => Some(Cmp::Lt),
            _ => None,
        }
    }

    fn holds(self, val: u32, n: u32) -> bool {
        match self {
            Cmp::Eq => val == n,
            Cmp::Gt => val > n,
            Cmp::Lt => val < n,
        }
    }
}

/// A parsed logical expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Node {
    /// A subsignature, optionally with a count comparison (`3>2`).
    Leaf { id: u8, cmp: Option<(Cmp, u32)> },
    /// `l & r` or `l | r`, optionally a block with a count comparison and a least
    /// number of distinct subsignatures (`(0|1)>2,1`; 0 = no such condition).
    Bin {
        and: bool,
        l: Box<Node>,
        r: Box<Node>,
        block: Option<(Cmp, u32, u32)>,
    },
}

/// Reads an unsigned number the way `sscanf("%u")` does: leading white space and a
/// `+` are skipped, trailing text is ignored.
fn scan_u32(s: &[u8]) -> Option<(u32, usize)> {
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    if i < s.len() && s[i] == b'+' {
        i += 1;
    }
    let start = i;
    let mut v: u32 = 0;
    while i < s.len() && s[i].is_ascii_digit() {
        v = v.wrapping_mul(10).wrapping_add(u32::from(s[i] - b'0'));
        i += 1;
    }
    (i > start).then_some((v, i))
}

/// Parses a logical expression (or a PCRE trigger).
pub(crate) fn parse_expr(e: &[u8]) -> Result<Node, Refusal> {
    parse_node(e, 0)
}

fn parse_node(e: &[u8], depth: usize) -> Result<Node, Refusal> {
    if depth > MAX_EXPR_DEPTH {
        return Err("ldb: logical expression nested too deeply");
    }
    if e.is_empty() {
        return Err("ldb: logical expression: missing operand");
    }
    let len = e.len();
    let (mut pth, mut op, mut opoff, mut op1, mut op1off) = (0usize, 0u8, 0usize, 0u8, 0usize);
    let (mut modc, mut modoff) = (0u8, 0usize);
    let (mut blkend, mut blkmod, mut modval1, mut modval2) = (0usize, 0u8, 0u32, 0u32);
    let mut i = 0;
    while i < len {
        match e[i] {
            b'(' => pth += 1,
            c @ (b')' | b'>' | b'<' | b'=') => {
                if c == b')' {
                    if pth == 0 {
                        return Err("ldb: logical expression: missing opening parenthesis");
                    }
                    pth -= 1;
                }
                modc = c;
                modoff = i;
            }
            c @ (b'&' | b'|') => {
                if pth == 0 {
                    op = c;
                    opoff = i;
                } else if pth == 1 {
                    op1 = c;
                    op1off = i;
                }
            }
            _ => {}
        }
        if op != 0 {
            break;
        }
        if op1 != 0 && pth == 0 {
            blkend = i;
            if i + 1 < len && Cmp::from(e[i + 1]).is_some() {
                blkmod = e[i + 1];
                let rest = &e[i + 2..];
                let (v1, used) = scan_u32(rest)
                    .ok_or("ldb: logical expression: missing number after a comparison")?;
                modval1 = v1;
                if rest.get(used) == Some(&b',') {
                    if let Some((v2, _)) = scan_u32(&rest[used + 1..]) {
                        modval2 = v2;
                    }
                }
                i += 2;
                while i + 1 < len && (e[i + 1].is_ascii_digit() || e[i + 1] == b',') {
                    i += 1;
                }
            }
            if i + 1 == len {
                break;
            }
            blkmod = 0;
        }
        i += 1;
    }
    if pth != 0 {
        return Err("ldb: logical expression: missing closing parenthesis");
    }
    if op == 0 && op1 == 0 {
        if e[0] == b'(' {
            if len < 2 {
                return Err("ldb: logical expression: missing operand");
            }
            return parse_node(&e[1..len - 1], depth + 1);
        }
        let (id, _) = scan_u32(e).ok_or("ldb: logical expression: not a subsignature number")?;
        if id as usize >= MAX_SUBSIGS {
            return Err("ldb: more than 64 subsignatures");
        }
        let cmp = if modc != 0 {
            let cmp = Cmp::from(modc).ok_or("ldb: logical expression: misplaced parenthesis")?;
            let (n, _) = scan_u32(&e[modoff + 1..])
                .ok_or("ldb: logical expression: missing number after a comparison")?;
            Some((cmp, n))
        } else {
            None
        };
        return Ok(Node::Leaf { id: id as u8, cmp });
    }
    let (mut lstart, mut rend) = (0, len);
    if op == 0 {
        op = op1;
        opoff = op1off;
        lstart = 1;
        rend = blkend;
    }
    if opoff == 0 {
        return Err("ldb: logical expression: missing left operand");
    }
    if opoff + 1 == len {
        return Err("ldb: logical expression: missing right operand");
    }
    let l = parse_node(e.get(lstart..opoff).unwrap_or_default(), depth + 1)?;
    let r = parse_node(e.get(opoff + 1..rend).unwrap_or_default(), depth + 1)?;
    let block = Cmp::from(blkmod).map(|c| (c, modval1, modval2));
    Ok(Node::Bin {
        and: op == b'&',
        l: Box::new(l),
        r: Box::new(r),
        block,
    })
}

impl Node {
    /// Highest subsignature number the expression names.
    pub fn max_id(&self) -> u8 {
        match self {
            Node::Leaf { id, .. } => *id,
            Node::Bin { l, r, .. } => l.max_id().max(r.max_id()),
        }
    }

    /// Evaluates the expression over match counts (indexed by subsignature):
    /// `Some((count, ids))` when it holds, as ClamAV's `cli_ac_chklsig` computes them.
    pub fn eval(&self, counts: &[u32]) -> Option<(u32, u64)> {
        match self {
            Node::Leaf { id, cmp } => {
                let val = counts.get(*id as usize).copied().unwrap_or(0);
                let holds = match cmp {
                    Some((c, n)) => c.holds(val, *n),
                    None => val > 0,
                };
                holds.then_some((val, 1u64 << id))
            }
            Node::Bin { and, l, r, block } => {
                let lv = l.eval(counts);
                let rv = r.eval(counts);
                let ret = if *and {
                    lv.is_some() && rv.is_some()
                } else {
                    lv.is_some() || rv.is_some()
                };
                let (lc, li) = lv.unwrap_or((0, 0));
                let (rc, ri) = rv.unwrap_or((0, 0));
                match block {
                    None => ret.then_some((lc.wrapping_add(rc), li | ri)),
                    Some((cmp, n, distinct)) => {
                        let (tcnt, tids) = if ret {
                            (lc.wrapping_add(rc), li | ri)
                        } else {
                            (0, 0)
                        };
                        if !cmp.holds(tcnt, *n) {
                            return None;
                        }
                        if *distinct != 0 && tids.count_ones() < *distinct {
                            return None;
                        }
                        // ClamAV passes up the count of a block but not its ids.
                        Some((tcnt, 0))
                    }
                }
            }
        }
    }
}

/// A ClamAV file type a `Container`/`Intermediates` attribute names, as far as this
/// engine can tell it apart; `Unknown` types are valid names this engine never sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClType {
    Any,
    Known(crate::filetype::FileType),
    Unknown,
}

/// The file types ClamAV 1.4 knows by name (`cli_ftcode`), so that a signature naming
/// anything else is refused as ClamAV refuses it.
const CL_TYPES: &[&str] = &[
    "7Z",
    "7ZSFX",
    "ALZ",
    "ANY",
    "APM",
    "ARJ",
    "ARJSFX",
    "AUTOIT",
    "BINARY_DATA",
    "BINHEX",
    "BZ",
    "CABSFX",
    "CPIO_CRC",
    "CPIO_NEWC",
    "CPIO_ODC",
    "CPIO_OLD",
    "CRYPTFF",
    "DMG",
    "EGG",
    "EGGSFX",
    "ELF",
    "GIF",
    "GPT",
    "GRAPHICS",
    "GZ",
    "HTML",
    "HTML_UTF16",
    "HWP3",
    "HWPOLE2",
    "IGNORED",
    "INTERNAL",
    "ISHIELD_MSI",
    "ISO9660",
    "JAVA",
    "JPEG",
    "LHA_LZH",
    "LNK",
    "MACHO",
    "MACHO_UNIBIN",
    "MAIL",
    "MBR",
    "MHTML",
    "MSCAB",
    "MSCHM",
    "MSEXE",
    "MSOLE2",
    "MSSZDD",
    "NULSFT",
    "OLD_TAR",
    "ONENOTE",
    "OOXML_HWP",
    "OOXML_PPT",
    "OOXML_WORD",
    "OOXML_XL",
    "PART_ANY",
    "PART_HFSPLUS",
    "PDF",
    "PNG",
    "POSIX_TAR",
    "PS",
    "PYTHON_COMPILED",
    "RAR",
    "RARSFX",
    "RIFF",
    "RTF",
    "SCRENC",
    "SCRIPT",
    "SFX",
    "SIS",
    "SWF",
    "TEXT_ASCII",
    "TEXT_UTF16BE",
    "TEXT_UTF16LE",
    "TEXT_UTF8",
    "TIFF",
    "TNEF",
    "UDF",
    "UUENCODED",
    "XAR",
    "XDP",
    "XML_HWP",
    "XML_WORD",
    "XML_XL",
    "XZ",
    "ZIP",
    "ZIPSFX",
];

fn cl_type(name: &str) -> Option<ClType> {
    use crate::filetype::FileType as F;
    let short = name.strip_prefix("CL_TYPE_")?;
    if !CL_TYPES.contains(&short) {
        return None;
    }
    Some(match short {
        "ANY" => ClType::Any,
        "ZIP" => ClType::Known(F::Zip),
        "GZ" => ClType::Known(F::Gzip),
        "BZ" => ClType::Known(F::Bzip2),
        "XZ" => ClType::Known(F::Xz),
        "POSIX_TAR" => ClType::Known(F::Tar),
        "MAIL" => ClType::Known(F::Mail),
        "7Z" => ClType::Known(F::SevenZip),
        "RAR" => ClType::Known(F::Rar),
        "MSCAB" => ClType::Known(F::Cab),
        "MSEXE" => ClType::Known(F::Pe),
        "ELF" => ClType::Known(F::Elf),
        "MACHO" => ClType::Known(F::MachO),
        "PDF" => ClType::Known(F::Pdf),
        "SWF" => ClType::Known(F::Swf),
        "JAVA" => ClType::Known(F::JavaClass),
        "MSOLE2" => ClType::Known(F::Ole2),
        _ => ClType::Unknown,
    })
}

impl ClType {
    /// Whether a file of type `t` (`None`: no such ancestor) is of this type.
    pub fn is(self, t: Option<crate::filetype::FileType>) -> bool {
        match self {
            ClType::Any => true,
            ClType::Known(k) => t == Some(k),
            ClType::Unknown => false,
        }
    }
}

/// A PCRE subsignature.
#[derive(Debug)]
pub(crate) struct PcreSub {
    /// Its subsignature number.
    pub id: u8,
    /// Runs only when this expression over the earlier subsignatures holds.
    pub trigger: Node,
    pub offset: Offset,
    pub re: Pcre,
}

/// A parsed logical signature (its body subsignatures are kept with the `.ndb`
/// signatures, owned by it, so one anchor index finds both).
#[derive(Debug)]
pub(crate) struct LogicalSig {
    pub name: String,
    pub target: u8,
    pub filesize: Option<(u64, u64)>,
    pub container: Option<ClType>,
    /// Types of the ancestors, outermost first, the last being the direct container.
    pub intermediates: Option<Vec<ClType>>,
    pub expr: Node,
    /// Number of subsignatures.
    pub subsigs: u8,
    pub pcre: Vec<PcreSub>,
    pub bytecmp: Vec<ByteCmp>,
    /// The expression holds with no subsignature matched (`0=0`, `0<2`): evaluated
    /// on every file, not only on files where a subsignature matched.
    pub always: bool,
}

/// What parsing one line gives: the logical signature and its body subsignatures
/// (each with its subsignature number).
#[derive(Debug)]
pub(crate) struct LdbLine {
    pub sig: LogicalSig,
    pub bodies: Vec<(u8, BodySig)>,
}

/// Why a line was not loaded: an error in the line, or a signature ClamAV itself
/// would skip without an error (an `Engine` range that excludes this level, an
/// attribute or file type it does not know).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LdbRefusal {
    Error(Refusal),
    Skip(Refusal),
}

impl From<Refusal> for LdbRefusal {
    fn from(r: Refusal) -> Self {
        LdbRefusal::Error(r)
    }
}

fn range(v: &str) -> Result<(u64, u64), Refusal> {
    let (a, b) = v.split_once('-').ok_or("ldb: TDB range is not min-max")?;
    let num = |s: &str| {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
            .ok_or("ldb: TDB range is not min-max")
    };
    Ok((num(a)?, num(b)?))
}

/// Parses one `.ldb` line.
pub(crate) fn parse_ldb(line: &str) -> Result<LdbLine, LdbRefusal> {
    let tokens: Vec<&str> = line.split(';').collect();
    if tokens.len() < 4 {
        return Err("ldb: fewer than four ;-separated fields".into());
    }
    let name = tokens[0];
    if name.is_empty() {
        return Err("ldb: empty signature name".into());
    }
    let expr = parse_expr(tokens[2].as_bytes())?;
    let subsigs = expr.max_id() as usize + 1;
    if subsigs != tokens.len() - 3 {
        return Err("ldb: subsignature count does not match the logical expression".into());
    }

    // Target description block (ClamAV's lsigattribs and init_tdb).
    let mut target = None;
    let mut engine = None;
    let mut filesize = None;
    let mut container = None;
    let mut intermediates = None;
    let mut new_attrs = false;
    let (mut exe_header, mut icon, mut handler) = (false, false, false);
    let attrs: Vec<&str> = tokens[1].split(',').collect();
    if attrs.len() > 10 {
        return Err("ldb: more than ten TDB attributes".into());
    }
    for (k, attr) in attrs.iter().enumerate() {
        let (key, val) = attr
            .split_once(':')
            .ok_or("ldb: TDB attribute without a colon")?;
        match key {
            "Engine" => {
                if k != 0 {
                    return Err("ldb: Engine must be the first TDB attribute".into());
                }
                engine = Some(range(val)?);
            }
            "Target" => {
                if val.is_empty() || !val.bytes().all(|c| c.is_ascii_digit()) {
                    return Err("ldb: bad Target".into());
                }
                target = Some(val.parse::<u32>().unwrap_or(u32::MAX));
            }
            "FileSize" => filesize = Some(range(val)?),
            "EntryPoint" | "NumberOfSections" => {
                range(val)?;
                exe_header = true;
            }
            "IconGroup1" | "IconGroup2" => icon = true,
            "Container" => {
                container = Some(cl_type(val).ok_or(LdbRefusal::Skip(
                    "ldb: Container names a file type ClamAV does not know",
                ))?)
            }
            "HandlerType" => {
                cl_type(val).ok_or(LdbRefusal::Skip(
                    "ldb: HandlerType names a file type ClamAV does not know",
                ))?;
                handler = true;
            }
            "Intermediates" => {
                let types: Vec<&str> = val.split('>').filter(|t| !t.is_empty()).collect();
                if types.is_empty() || types.len() > 16 {
                    return Err(LdbRefusal::Skip("ldb: bad Intermediates"));
                }
                let mut v = Vec::new();
                for t in types {
                    v.push(cl_type(t).ok_or(LdbRefusal::Skip(
                        "ldb: Intermediates names a file type ClamAV does not know",
                    ))?);
                }
                intermediates = Some(v);
            }
            _ => return Err(LdbRefusal::Skip("ldb: unknown TDB attribute")),
        }
        if key != "Engine" && key != "Target" {
            new_attrs = true;
        }
    }
    if new_attrs && engine.is_none_or(|(min, _)| min < 51) {
        return Err("ldb: TDB attributes other than Target need Engine:51- or later".into());
    }
    if let Some((min, max)) = engine {
        if min > u64::from(FLEVEL) || max < u64::from(FLEVEL) {
            return Err(LdbRefusal::Skip("ldb: Engine range excludes this engine"));
        }
    }
    let target = target.ok_or("ldb: no Target in the TDB")?;
    if target >= 15 {
        return Err(LdbRefusal::Skip("ldb: target type ClamAV does not know"));
    }
    let target = target as u8;
    if icon && target != 1 {
        return Err("ldb: IconGroup outside a PE (target 1) signature".into());
    }
    if exe_header && !matches!(target, 1 | 6 | 9) {
        return Err("ldb: EntryPoint/NumberOfSections outside PE, ELF or Mach-O".into());
    }
    if !matches!(target, 0..=6 | 9..=12) {
        return Err(LdbRefusal::Skip(
            "ldb: target type not supported (7 text, 8 graphics, 13+)",
        ));
    }

    // Subsignatures.
    let mut bodies = Vec::new();
    let mut pcre = Vec::new();
    let mut bytecmp = Vec::new();
    for (id, sub) in tokens[3..].iter().enumerate() {
        let id = id as u8;
        if sub.starts_with('$') {
            return Err(LdbRefusal::Skip("ldb: macro subsignatures not supported"));
        } else if sub.contains('/') {
            pcre.push(parse_pcre_sub(id, sub)?);
        } else if sub.contains('(') && sub.find('#') != sub.rfind('#') {
            bytecmp.push(crate::bytecmp::parse(id, sub).map_err(|r| {
                if r.contains("not supported") {
                    LdbRefusal::Skip(r)
                } else {
                    LdbRefusal::Error(r)
                }
            })?);
        } else if sub.starts_with("fuzzy_img#") {
            return Err(LdbRefusal::Skip("ldb: fuzzy image hashes not supported"));
        } else {
            for mut body in parse_body_sub(name, target, sub)? {
                body.owner = Some((0, id));
                bodies.push((id, body));
            }
        }
    }
    // Checked last, so a line that is wrong in any way counts as an error first.
    if exe_header {
        return Err(LdbRefusal::Skip(
            "ldb: EntryPoint/NumberOfSections need executable header parsing",
        ));
    }
    if icon {
        return Err(LdbRefusal::Skip("ldb: IconGroup needs PE icon parsing"));
    }
    if handler {
        return Err(LdbRefusal::Skip(
            "ldb: HandlerType (re-typing) not supported",
        ));
    }
    let always = expr.eval(&[0; MAX_SUBSIGS]).is_some();
    Ok(LdbLine {
        sig: LogicalSig {
            name: name.to_string(),
            target,
            filesize,
            container,
            intermediates,
            expr,
            subsigs: subsigs as u8,
            pcre,
            bytecmp,
            always,
        },
        bodies,
    })
}

/// A body subsignature: `[offset:]hex[::modifiers]`; `::w` with `::a` gives two.
fn parse_body_sub(name: &str, target: u8, sub: &str) -> Result<Vec<BodySig>, Refusal> {
    let parts: Vec<&str> = sub.split(':').collect();
    let (offset, hex, opts) = match parts.len() {
        1 => ("*", parts[0], ""),
        2 => (parts[0], parts[1], ""),
        3 => (("*"), parts[0], parts[2]),
        4 => (parts[0], parts[1], parts[3]),
        _ => return Err("ldb: too many : in a subsignature"),
    };
    let (mut nocase, mut wide, mut fullword, mut ascii) = (false, false, false, false);
    for c in opts.chars() {
        match c {
            'i' => nocase = true,
            'w' => wide = true,
            'f' => fullword = true,
            'a' => ascii = true,
            _ => return Err("ldb: unknown subsignature modifier"),
        }
    }
    let offset = parse_offset(offset)?;
    let mut forms = Vec::new();
    if wide {
        forms.push((widen_hex(hex)?, true));
    }
    if !wide || ascii {
        forms.push((hex.to_string(), false));
    }
    let mut out = Vec::new();
    for (hex, is_wide) in forms {
        let mut groups = parse_hex(&hex)?;
        if matches!(offset, Offset::Eof { .. }) && groups.len() > 1 {
            return Err("ndb: EOF offset with unbounded gaps not supported");
        }
        if nocase {
            fold_case(&mut groups);
        }
        if fullword {
            // Room for the boundary bytes on either side of the match.
            groups.first_mut().expect("at least one group").before_max += 2;
            groups.last_mut().expect("at least one group").after_max += 2;
        }
        out.push(BodySig {
            name: name.to_string(),
            target,
            offset,
            groups,
            owner: None,
            fullword: fullword.then_some(is_wide),
        });
    }
    Ok(out)
}

/// A PCRE subsignature: `[offset:]Trigger/regex/[flags]`.
fn parse_pcre_sub(id: u8, sub: &str) -> Result<PcreSub, Refusal> {
    let first = sub.find('/').expect("caller saw a /");
    let last = sub.rfind('/').expect("caller saw a /");
    if first == last {
        return Err("ldb: PCRE subsignature with one /");
    }
    let head = &sub[..first];
    let (offset, trigger) = match head.rsplit_once(':') {
        Some((o, t)) => (o, t),
        None => ("*", head),
    };
    if trigger.is_empty() {
        return Err("ldb: PCRE subsignature without a trigger");
    }
    let pattern = &sub[first + 1..last];
    if pattern.is_empty() {
        return Err("ldb: empty PCRE pattern");
    }
    let trigger = parse_expr(trigger.as_bytes())?;
    if trigger.max_id() >= id {
        return Err("ldb: PCRE trigger names this or a later subsignature");
    }
    let offset = parse_offset(offset)?;
    let re = Pcre::new(pattern, &sub[last + 1..])?;
    Ok(PcreSub {
        id,
        trigger,
        offset,
        re,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(id: u8) -> Node {
        Node::Leaf { id, cmp: None }
    }

    fn bin(and: bool, l: Node, r: Node) -> Node {
        Node::Bin {
            and,
            l: Box::new(l),
            r: Box::new(r),
            block: None,
        }
    }

    #[test]
    fn expressions_split_as_clamav_splits_them() {
        assert_eq!(parse_expr(b"0").unwrap(), leaf(0));
        // Top level: the first operator splits.
        assert_eq!(
            parse_expr(b"0&1|2").unwrap(),
            bin(true, leaf(0), bin(false, leaf(1), leaf(2)))
        );
        // In a block: the last operator at depth one splits.
        assert_eq!(
            parse_expr(b"(0&1|2)").unwrap(),
            bin(false, bin(true, leaf(0), leaf(1)), leaf(2))
        );
        assert_eq!(
            parse_expr(b"((0|1)&2)").unwrap(),
            bin(true, bin(false, leaf(0), leaf(1)), leaf(2))
        );
        assert_eq!(
            parse_expr(b"0>2").unwrap(),
            Node::Leaf {
                id: 0,
                cmp: Some((Cmp::Gt, 2))
            }
        );
        let Node::Bin { block, .. } = parse_expr(b"(0|1|2)>3,2").unwrap() else {
            panic!()
        };
        assert_eq!(block, Some((Cmp::Gt, 3, 2)));
        for bad in ["", "(0", "0)", "&0", "0&", "(0)>2", "a", "0>", "(|1)", "64"] {
            assert!(parse_expr(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn evaluation_follows_clamav() {
        let e = |s: &str, c: &[u32]| parse_expr(s.as_bytes()).unwrap().eval(c).is_some();
        assert!(e("0&1", &[1, 1]));
        assert!(!e("0&1", &[1, 0]));
        assert!(e("0|1", &[0, 3]));
        assert!(e("0=0", &[0]));
        assert!(e("0<2", &[1]));
        assert!(!e("0>1", &[1]));
        assert!(e("(0|1)>2", &[2, 1]));
        assert!(!e("(0|1)>2", &[2, 0]));
        assert!(e("(0|1)>1,2", &[1, 1]));
        assert!(!e("(0|1)>1,2", &[2, 0]));
        // A block that does not hold counts 0: `<` and `=0` hold on nothing.
        assert!(e("(0&1)<1", &[0, 0]));
        assert!(e("(0&1)=0", &[5, 0]));
    }

    #[test]
    fn lines() {
        let l = parse_ldb("Sig.A;Engine:51-255,Target:0;0&1;41424344;0:45464748::i").unwrap();
        assert_eq!(l.sig.expr.max_id(), 1);
        assert_eq!(l.bodies.len(), 2);
        let l = parse_ldb("Sig.W;Target:0;0;414243::wa").unwrap();
        assert_eq!(l.bodies.len(), 2);
        let l = parse_ldb("Sig.P;Engine:81-255,Target:0;0&1;41424344;0/ab+c/i").unwrap();
        assert_eq!(l.sig.pcre.len(), 1);
        let err = |s: &str| match parse_ldb(s) {
            Err(LdbRefusal::Error(r)) => r,
            other => panic!("{s}: {other:?}"),
        };
        let skip = |s: &str| matches!(parse_ldb(s), Err(LdbRefusal::Skip(_)));
        err("Sig;Target:0;0&1;41424344");
        err("Sig;Target:0,FileSize:1-2;0;41424344");
        err("Sig;Engine:51-255;0;41424344");
        err("Sig;Target:0,Engine:51-255;0;41424344");
        err("Sig;Target:0;0;414243::z");
        err("Sig;Engine:51-255,Target:0;0&1;41424344;1/ab/");
        err("Sig;Engine:51-255,Target:0,EntryPoint:0-10;0;41424344");
        assert!(skip("Sig;Engine:300-400,Target:0;0;41424344"));
        assert!(skip(
            "Sig;Engine:51-255,Target:1,EntryPoint:0-10;0;41424344"
        ));
        assert!(skip(
            "Sig;Engine:51-255,Target:0,Container:CL_TYPE_NOPE;0;41424344"
        ));
        assert!(skip("Sig;Engine:51-255,Target:0,Foo:1;0;41424344"));
        assert!(skip("Sig;Target:0;0&1;41424344;0(>>2#hl2#=12)"));
        assert_eq!(
            parse_ldb("Sig;Target:0;0&1;41424344;0(>>2#hb2#=12)")
                .unwrap()
                .sig
                .bytecmp
                .len(),
            1
        );
        let l = parse_ldb(
            "Sig;Engine:51-255,Target:0,Container:CL_TYPE_ZIP,Intermediates:CL_TYPE_ANY>CL_TYPE_ZIP;0;41424344",
        )
        .unwrap();
        assert_eq!(l.sig.intermediates.unwrap().len(), 2);
    }

    proptest::proptest! {
        /// Any line parses or is refused; nothing panics.
        #[test]
        fn never_panics(line in "[ -~]{0,120}") {
            let _ = parse_ldb(&line);
        }

        /// Lines made of the format's own pieces, which reach deeper.
        #[test]
        fn never_panics_on_shaped_lines(
            expr in "[0-9()&|<>=,]{1,30}",
            subs in proptest::collection::vec("[0-9a-f?*{}()|\\-:/!#<>a-zA-Z+\\[\\]]{0,24}", 1..6),
        ) {
            let line = format!("Sig;Engine:51-255,Target:0;{expr};{}", subs.join(";"));
            let _ = parse_ldb(&line);
        }
    }
}
