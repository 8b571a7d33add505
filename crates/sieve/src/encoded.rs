//! RFC 5228 §2.4.2.4 encoded-character: `${hex:..}` and `${unicode:..}`
//! in string literals, replaced at compile time.

/// Replaces every well-formed encoded-character sequence in `s`. A
/// malformed one stays as written (§2.4.2.4); a code point outside the
/// Unicode scalar ranges, or hex bytes that are not UTF-8, is an error.
pub(crate) fn decode(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match one(after)? {
            Some((text, used)) => {
                out.push_str(&text);
                rest = &after[used..];
            }
            None => {
                out.push('$');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Reads `hex:...}` or `unicode:...}` at the start of `s`: the decoded text
/// and how many bytes were used, or None when it is not such a sequence.
fn one(s: &str) -> Result<Option<(String, usize)>, String> {
    let (unicode, body_start) = if starts_with_ci(s, "hex:") {
        (false, 4)
    } else if starts_with_ci(s, "unicode:") {
        (true, 8)
    } else {
        return Ok(None);
    };
    let Some(close) = s[body_start..].find('}') else {
        return Ok(None);
    };
    let body = &s[body_start..body_start + close];
    let used = body_start + close + 1;
    // blank = WSP / CRLF
    if !body
        .bytes()
        .all(|b| b.is_ascii_hexdigit() || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Ok(None);
    }
    let groups: Vec<&str> = body.split_ascii_whitespace().collect();
    if groups.is_empty() {
        return Ok(None);
    }
    if unicode {
        let mut text = String::new();
        for g in groups {
            let digits = g.trim_start_matches('0');
            if digits.len() > 6 {
                return Err(format!(
                    "invalid unicode character U+{g} in encoded-character"
                ));
            }
            let v = u32::from_str_radix(if digits.is_empty() { "0" } else { digits }, 16)
                .map_err(|_| format!("invalid unicode character {g}"))?;
            let c = char::from_u32(v)
                .ok_or_else(|| format!("invalid unicode character U+{g} in encoded-character"))?;
            text.push(c);
        }
        Ok(Some((text, used)))
    } else {
        if groups.iter().any(|g| g.len() != 2) {
            return Ok(None);
        }
        let bytes: Vec<u8> = groups
            .iter()
            .map(|g| u8::from_str_radix(g, 16).unwrap_or(0))
            .collect();
        let text = String::from_utf8(bytes)
            .map_err(|_| "encoded-character hex sequence is not UTF-8".to_string())?;
        Ok(Some((text, used)))
    }
}

fn starts_with_ci(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::decode;

    #[test]
    fn rfc_examples() {
        assert_eq!(decode("$${hex:24 24}").unwrap(), "$$$");
        assert_eq!(decode("${HEX: 40}").unwrap(), "@");
        assert_eq!(decode("${unicode:40}").unwrap(), "@");
        assert_eq!(decode("${Unicode:263a 0041}").unwrap(), "\u{263a}A");
        assert_eq!(decode("${hex:40").unwrap(), "${hex:40");
        assert_eq!(decode("${hex:400}").unwrap(), "${hex:400}");
        assert_eq!(decode("${hex:4${hex:30}}").unwrap(), "${hex:40}");
        assert_eq!(decode("${foo}").unwrap(), "${foo}");
        assert!(decode("${unicode:D800}").is_err());
        assert!(decode("${unicode:110000}").is_err());
        assert!(decode("${hex:ff}").is_err());
    }
}
