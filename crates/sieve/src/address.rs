//! Addresses in header fields (RFC 5322 §3.4) and their parts
//! (RFC 5228 §2.7.4, RFC 5233).

use crate::script::AddrPart;

/// The addr-specs (`local@domain`) in an address list, with display names,
/// comments, routes and group syntax removed. Unparsable pieces are kept
/// as written, trimmed.
pub(crate) fn parse_list(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    for item in split_top(s) {
        if let Some(a) = one(&item) {
            out.push(a);
        }
    }
    out
}

/// One address as `redirect` and vacation's `:from` take it: an addr-spec,
/// or a name-addr; None when it is not a `local@domain` address.
pub(crate) fn parse_single(s: &str) -> Option<String> {
    let list = parse_list(s);
    match list.as_slice() {
        [a] if valid(a) => Some(a.clone()),
        _ => None,
    }
}

/// Whether `a` looks like `local@domain` with a plausible domain.
pub(crate) fn valid(a: &str) -> bool {
    let Some((l, d)) = a.rsplit_once('@') else {
        return false;
    };
    !l.is_empty()
        && !d.is_empty()
        && !l.contains(char::is_whitespace)
        && d.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        || (d.starts_with('[') && d.ends_with(']'))
}

/// The part of `addr` a test looks at, or None when the address has no
/// such part (RFC 5228 §2.7.4: a `:domain` of an address without one does
/// not match; RFC 5233 §4: no `:detail` without a separator).
pub(crate) fn part(addr: &str, part: AddrPart) -> Option<String> {
    let (local, domain) = match addr.rsplit_once('@') {
        Some((l, d)) => (l, Some(d)),
        None => (addr, None),
    };
    match part {
        AddrPart::All => Some(addr.to_string()),
        AddrPart::Local => Some(local.to_string()),
        AddrPart::Domain => domain.map(str::to_string),
        // RFC 5233 §4: separator "+".
        AddrPart::User => Some(local.split_once('+').map_or(local, |(u, _)| u).to_string()),
        AddrPart::Detail => local.split_once('+').map(|(_, d)| d.to_string()),
    }
}

/// Splits an address list at top-level commas, dropping group names and
/// the `;` that ends a group.
fn split_top(s: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize; // comment nesting
    let mut quoted = false;
    let mut angle = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if quoted {
            cur.push(c);
            match c {
                '\\' => {
                    if let Some(n) = chars.next() {
                        cur.push(n);
                    }
                }
                '"' => quoted = false,
                _ => {}
            }
            continue;
        }
        if depth > 0 {
            match c {
                '\\' => {
                    chars.next();
                }
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            continue;
        }
        match c {
            '(' => depth = 1,
            '"' => {
                quoted = true;
                cur.push(c);
            }
            '<' => {
                angle = true;
                cur.push(c);
            }
            '>' => {
                angle = false;
                cur.push(c);
            }
            ':' if !angle => cur.clear(), // group display name
            ';' if !angle => {
                items.push(std::mem::take(&mut cur));
            }
            ',' if !angle => items.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    items.push(cur);
    items
}

/// The addr-spec of one list item.
fn one(item: &str) -> Option<String> {
    let item = item.trim();
    if item.is_empty() {
        return None;
    }
    let spec = match (item.rfind('<'), item.rfind('>')) {
        (Some(a), Some(b)) if a < b => {
            let inner = item[a + 1..b].trim();
            // Drop an obsolete route: <@a,@b:local@domain>.
            match inner.rfind(':') {
                Some(i) if inner.starts_with('@') => &inner[i + 1..],
                _ => inner,
            }
        }
        _ => item,
    };
    let spec: String = spec.split_whitespace().collect();
    if spec.is_empty() {
        None
    } else {
        Some(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(
            parse_list(
                "\"Doe, John\" <john@example.com>, jane@example.org (Jane), <@r.example:x@y.z>"
            ),
            ["john@example.com", "jane@example.org", "x@y.z"]
        );
        assert_eq!(
            parse_list("friends: a@b.c, \"q\" <d@e.f>;, g@h.i"),
            ["a@b.c", "d@e.f", "g@h.i"]
        );
        assert!(parse_list("undisclosed-recipients:;").is_empty());
        assert!(parse_list("").is_empty());
    }

    #[test]
    fn parts() {
        let a = "Ken+Sieve@Example.com";
        assert_eq!(part(a, AddrPart::Local).unwrap(), "Ken+Sieve");
        assert_eq!(part(a, AddrPart::Domain).unwrap(), "Example.com");
        assert_eq!(part(a, AddrPart::User).unwrap(), "Ken");
        assert_eq!(part(a, AddrPart::Detail).unwrap(), "Sieve");
        assert_eq!(part("ken@x", AddrPart::Detail), None);
        assert_eq!(part("ken+@x", AddrPart::Detail).unwrap(), "");
        assert_eq!(part("nodomain", AddrPart::Domain), None);
    }

    #[test]
    fn single() {
        assert_eq!(parse_single("Me <me@x.org>").unwrap(), "me@x.org");
        assert!(parse_single("not an address").is_none());
        assert!(parse_single("a@b.c, d@e.f").is_none());
    }
}
