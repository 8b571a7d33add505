//! Byte-compare subsignatures of logical signatures:
//! `Ref(Offset#Options#Comparisons)`, e.g. `0(>>4#ib2#>512)`: take the bytes at
//! `Offset` from the last match of subsignature `Ref`, read them as a number, and
//! compare it. Parsed and evaluated as ClamAV's `matcher-byte-comp.c` does.
//!
//! - Offset: `>>n` or `<<n` (decimal, `0x` hex or `0` octal), or `0`.
//! - Options: `i` raw binary (1, 2, 4 or 8 bytes), `h` hex text, `d` decimal text, `a`
//!   hex text when it starts with `0x`, else decimal; `l` little- or `b` big-endian
//!   (decimal is big-endian; without either, only decimal ever matches, as in
//!   ClamAV); `e` the text must fill the length exactly; then the length.
//! - Comparisons: one or two of `<n`, `>n`, `=n`, comma-separated; all must hold.
//!
//! Not supported (refused and counted): little-endian hex or automatic text, which
//! ClamAV reads through a digit-pair reversal of its own.

use crate::signature::Refusal;

/// A parsed byte-compare subsignature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ByteCmp {
    /// Its own subsignature number.
    pub id: u8,
    /// The subsignature whose last match it reads from.
    pub reference: u8,
    offset: i64,
    kind: Kind,
    exact: bool,
    len: usize,
    comps: Vec<(u8, i64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    BinLe,
    BinBe,
    HexBe,
    DecBe,
    AutoBe,
    /// ClamAV accepts it but never matches (no endianness given).
    Never,
}

/// `strtol` with `base` 0 (prefix `0x` hex, `0` octal) or 10 over the whole of `s`.
fn whole_number(s: &str, base0: bool) -> Option<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = if base0 {
        if let Some(h) = digits
            .strip_prefix("0x")
            .or_else(|| digits.strip_prefix("0X"))
        {
            i64::from_str_radix(h, 16).ok()?
        } else if digits.len() > 1 && digits.starts_with('0') {
            i64::from_str_radix(&digits[1..], 8).ok()?
        } else {
            digits.parse().ok()?
        }
    } else {
        digits.parse().ok()?
    };
    if digits.is_empty() || digits.starts_with(['+', '-']) {
        return None;
    }
    Some(if neg { -v } else { v })
}

/// Parses `sub`, subsignature number `id`.
pub(crate) fn parse(id: u8, sub: &str) -> Result<ByteCmp, Refusal> {
    const BAD: Refusal = "ldb: bad byte-compare subsignature";
    let open = sub.find('(').ok_or(BAD)?;
    let reference: u8 = sub[..open].parse().map_err(|_| BAD)?;
    if reference as usize >= crate::logical::MAX_SUBSIGS {
        return Err(BAD);
    }
    let close = sub[open..].find(')').ok_or(BAD)? + open;
    let tokens: Vec<&str> = sub[open + 1..close].split('#').collect();
    if tokens.len() != 3 {
        return Err(BAD);
    }
    let o = tokens[0];
    let offset = if let Some(n) = o.strip_prefix(">>") {
        whole_number(n, true).ok_or(BAD)?
    } else if let Some(n) = o.strip_prefix("<<") {
        -whole_number(n, true).ok_or(BAD)?
    } else if o.is_empty() || o.starts_with('0') {
        0
    } else {
        return Err(BAD);
    };
    let opts = tokens[1];
    let digits_at = opts.find(|c: char| c.is_ascii_digit()).ok_or(BAD)?;
    let (mut hex, mut dec, mut bin, mut auto, mut le, mut be, mut exact) =
        (false, false, false, false, false, false, false);
    for c in opts[..digits_at].chars() {
        match c {
            'h' if !(dec || bin || auto) => hex = true,
            'd' if !(hex || bin || auto || le) => {
                dec = true;
                be = true;
            }
            'i' if !(hex || dec || auto) => bin = true,
            'a' if !(hex || dec || bin) => auto = true,
            'l' if !(be || dec) => le = true,
            'b' if !le => be = true,
            'e' => exact = true,
            _ => return Err(BAD),
        }
    }
    let len = whole_number(&opts[digits_at..], true).ok_or(BAD)?;
    if len <= 0 || (bin && (len > 8 || 8 % len != 0)) || (hex && len > 18) {
        return Err(BAD);
    }
    let comps_text = tokens[2];
    if comps_text.matches(',').count() > 1 {
        return Err(BAD);
    }
    let mut comps = Vec::new();
    for c in comps_text.split(',') {
        let sym = *c.as_bytes().first().ok_or(BAD)?;
        if !matches!(sym, b'<' | b'>' | b'=') {
            return Err(BAD);
        }
        comps.push((sym, whole_number(&c[1..], true).ok_or(BAD)?));
    }
    let kind = match (bin, hex, dec, auto, le, be) {
        (true, _, _, _, true, _) => Kind::BinLe,
        (true, _, _, _, _, true) => Kind::BinBe,
        (_, true, _, _, false, true) => Kind::HexBe,
        (_, _, true, _, _, _) => Kind::DecBe,
        (_, _, _, true, false, true) => Kind::AutoBe,
        (_, true, _, _, true, _) | (_, _, _, true, true, _) => {
            return Err("ldb: little-endian text byte-compare not supported")
        }
        _ => Kind::Never,
    };
    Ok(ByteCmp {
        id,
        reference,
        offset,
        kind,
        exact,
        len: len as usize,
        comps,
    })
}

/// `strtol` over at most the bytes given: white space, a sign, (`0x` for base 16),
/// digits. `None` on overflow; `(0, 0)` when there are no digits.
fn strntol(s: &[u8], base: u32) -> Option<(i64, usize)> {
    let mut i = 0;
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    if base == 16
        && i + 2 < s.len() + 1
        && s.get(i) == Some(&b'0')
        && matches!(s.get(i + 1), Some(b'x' | b'X'))
        && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        i += 2;
    }
    let start = i;
    let mut v: i64 = 0;
    while i < s.len() {
        let Some(d) = (s[i] as char).to_digit(base) else {
            break;
        };
        v = v.checked_mul(i64::from(base))?.checked_add(i64::from(d))?;
        i += 1;
    }
    if i == start {
        return Some((0, 0));
    }
    Some((if neg { -v } else { v }, i))
}

impl ByteCmp {
    /// Whether the comparison holds for the bytes of `buf` (the file's first bytes)
    /// at this subsignature's offset from `at`, the reference's last match.
    pub fn holds(&self, buf: &[u8], at: u64) -> bool {
        let start = at as i64 + self.offset;
        if start + self.len as i64 > buf.len() as i64 || start <= 0 {
            return false;
        }
        let bytes = &buf[start as usize..start as usize + self.len];
        let value = match self.kind {
            Kind::Never => return false,
            Kind::BinLe | Kind::BinBe => {
                let mut v: u64 = 0;
                for k in 0..bytes.len() {
                    let b = if self.kind == Kind::BinBe {
                        bytes[k]
                    } else {
                        bytes[bytes.len() - 1 - k]
                    };
                    v = v << 8 | u64::from(b);
                }
                v as i64
            }
            Kind::HexBe | Kind::DecBe | Kind::AutoBe => {
                let pad = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
                let text = &bytes[pad..];
                let base = match self.kind {
                    Kind::HexBe => 16,
                    Kind::DecBe => 10,
                    _ if text.len() >= 3
                        && (text.starts_with(b"0x") || text.starts_with(b"0X")) =>
                    {
                        16
                    }
                    _ => 10,
                };
                let Some((v, used)) = strntol(text, base) else {
                    return false;
                };
                if self.exact && (used != text.len() || pad != 0) {
                    return false;
                }
                v
            }
        };
        self.comps.iter().all(|&(sym, n)| match sym {
            b'>' => value > n,
            b'<' => value < n,
            _ => value == n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_compare() {
        let b = parse(1, "0(>>2#ib2#>512)").unwrap();
        assert_eq!(b.reference, 0);
        assert!(b.holds(b"..AB\x02\x01", 2)); // 0x0201 = 513
        assert!(!b.holds(b"..AB\x02\x00", 2));
        let b = parse(1, "0(>>2#il2#=258)").unwrap();
        assert!(b.holds(b"..AB\x02\x01", 2));
        let b = parse(1, "0(<<3#hb4#=0x1f2e,<0x2000)").unwrap();
        assert!(b.holds(b"..1f2eXYZ", 5));
        let b = parse(1, "0(>>1#de3#>99)").unwrap();
        assert!(b.holds(b"xA123", 1));
        assert!(!b.holds(b"xA12z", 1));
        let b = parse(1, "0(>>1#ab4#=16)").unwrap();
        assert!(b.holds(b"xA0x10", 1));
        assert!(!parse(1, "0(>>1#hb4#=1)").unwrap().holds(b"x", 0));
        // Without an endianness only decimal ever matches.
        assert!(!parse(1, "0(>>2#i2#>0)").unwrap().holds(b"..AB\x02\x01", 2));
        for bad in [
            "0(>>2#ib3#>1)",
            "0(>>2#ib2#>1,<2,=3)",
            "0(2#ib2#>1)",
            "0(>>2#dl2#>1)",
            "0(>>2#ib2#!1)",
            "x(>>2#ib2#>1)",
            "0(>>2#ib2)",
        ] {
            assert!(parse(1, bad).is_err(), "{bad}");
        }
        assert!(parse(1, "0(>>2#hl2#>1)").is_err());
    }
}
