//! MTA-STS wire formats (RFC 8461): the `_mta-sts` TXT record and the
//! policy file. Pure parsing, no I/O.

use std::fmt::Write as _;

/// The policy's mode (RFC 8461 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StsMode {
    /// MX hosts must match a pattern and offer STARTTLS with a certificate
    /// valid for their name; otherwise the delivery is deferred.
    Enforce,
    /// Failures are recorded (and reported by TLS-RPT) but mail goes out.
    Testing,
    /// The domain has withdrawn its policy.
    None,
}

impl StsMode {
    /// The mode's name as written in a policy.
    pub fn as_str(self) -> &'static str {
        match self {
            StsMode::Enforce => "enforce",
            StsMode::Testing => "testing",
            StsMode::None => "none",
        }
    }
}

/// A parsed MTA-STS policy (RFC 8461 §3.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsPolicy {
    /// `mode`.
    pub mode: StsMode,
    /// `mx` patterns, lower case: `mail.example.net` or `*.example.net`.
    pub mx: Vec<String>,
    /// `max_age` in seconds (at most 31557600, RFC 8461 §3.2).
    pub max_age: u64,
}

/// Why a policy or TXT record was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StsParseError {
    /// A required field is missing.
    #[error("MTA-STS: missing field `{0}`")]
    Missing(&'static str),
    /// A field has a value that is not allowed.
    #[error("MTA-STS: bad value for `{field}`: {value:?}")]
    BadValue {
        /// The field's name.
        field: &'static str,
        /// The value as found (cut to 64 characters).
        value: String,
    },
    /// A line is not `key: value`.
    #[error("MTA-STS: malformed line {0:?}")]
    Malformed(String),
}

/// The largest `max_age` a policy may give (RFC 8461 §3.2: about one year).
pub const MAX_AGE_LIMIT: u64 = 31_557_600;

fn bad(field: &'static str, value: &str) -> StsParseError {
    StsParseError::BadValue {
        field,
        value: value.chars().take(64).collect(),
    }
}

/// Parses an `_mta-sts.DOMAIN` TXT record (RFC 8461 §3.1):
/// `v=STSv1; id=20160831085700Z;`. Returns the `id`. Fields are
/// separated by `;` with optional spaces; `v=STSv1` must come first;
/// unknown fields are ignored.
pub fn parse_txt(record: &str) -> Result<String, StsParseError> {
    let mut fields = record.split(';').map(|f| f.trim_matches([' ', '\t']));
    match fields.next() {
        Some("v=STSv1") => {}
        Some(other) => return Err(bad("v", other)),
        None => return Err(StsParseError::Missing("v")),
    }
    let mut id = None;
    for field in fields {
        if field.is_empty() {
            continue;
        }
        let Some((key, value)) = field.split_once('=') else {
            return Err(StsParseError::Malformed(field.chars().take(64).collect()));
        };
        if key == "id" {
            // sts-id = 1*32(ALPHA / DIGIT)
            if value.is_empty()
                || value.len() > 32
                || !value.bytes().all(|b| b.is_ascii_alphanumeric())
            {
                return Err(bad("id", value));
            }
            id = Some(value.to_string());
        }
    }
    id.ok_or(StsParseError::Missing("id"))
}

/// Picks the MTA-STS record among a name's TXT records: exactly one must
/// start with `v=STSv1` (RFC 8461 §3.1: several mean no policy).
pub fn pick_txt<'a>(records: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut found = None;
    for r in records {
        if r.starts_with("v=STSv1") {
            if found.is_some() {
                return None;
            }
            found = Some(r);
        }
    }
    found
}

/// Parses a policy file (RFC 8461 §3.2): `key: value` lines ending in
/// CRLF or LF; `version: STSv1`, `mode`, `max_age` and (unless mode is
/// `none`) at least one `mx` are required; unknown keys are ignored.
pub fn parse_policy(text: &str) -> Result<StsPolicy, StsParseError> {
    let mut version = false;
    let mut mode = None;
    let mut max_age = None;
    let mut mx = Vec::new();
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(StsParseError::Malformed(line.chars().take(64).collect()));
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "version" => {
                if value != "STSv1" {
                    return Err(bad("version", value));
                }
                version = true;
            }
            "mode" => {
                mode = Some(match value {
                    "enforce" => StsMode::Enforce,
                    "testing" => StsMode::Testing,
                    "none" => StsMode::None,
                    _ => return Err(bad("mode", value)),
                })
            }
            "max_age" => {
                // max-age-value = 1*10(DIGIT)
                if value.is_empty()
                    || value.len() > 10
                    || !value.bytes().all(|b| b.is_ascii_digit())
                {
                    return Err(bad("max_age", value));
                }
                let n: u64 = value.parse().map_err(|_| bad("max_age", value))?;
                max_age = Some(n.min(MAX_AGE_LIMIT));
            }
            "mx" => {
                let pattern = value.to_ascii_lowercase();
                if !valid_pattern(&pattern) {
                    return Err(bad("mx", value));
                }
                mx.push(pattern);
            }
            _ => {}
        }
    }
    if !version {
        return Err(StsParseError::Missing("version"));
    }
    let mode = mode.ok_or(StsParseError::Missing("mode"))?;
    let max_age = max_age.ok_or(StsParseError::Missing("max_age"))?;
    if mx.is_empty() && mode != StsMode::None {
        return Err(StsParseError::Missing("mx"));
    }
    Ok(StsPolicy { mode, mx, max_age })
}

/// A host name, optionally with a leading `*.` (RFC 8461 §3.2 `mx-pattern`).
fn valid_pattern(p: &str) -> bool {
    let name = p.strip_prefix("*.").unwrap_or(p);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

impl StsPolicy {
    /// Whether `host` matches one of the `mx` patterns (RFC 8461 §4.1): a
    /// `*.` wildcard stands for exactly one leftmost label.
    pub fn mx_matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.mx
            .iter()
            .any(|pattern| match pattern.strip_prefix("*.") {
                Some(suffix) => host
                    .split_once('.')
                    .is_some_and(|(first, rest)| !first.is_empty() && rest == suffix),
                None => *pattern == host,
            })
    }

    /// The policy written back as a policy file (CRLF lines).
    pub fn to_text(&self) -> String {
        let mut s = format!("version: STSv1\r\nmode: {}\r\n", self.mode.as_str());
        for mx in &self.mx {
            let _ = write!(s, "mx: {mx}\r\n");
        }
        let _ = write!(s, "max_age: {}\r\n", self.max_age);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn txt_record() {
        assert_eq!(
            parse_txt("v=STSv1; id=20160831085700Z;").unwrap(),
            "20160831085700Z"
        );
        assert_eq!(parse_txt("v=STSv1;id=abc").unwrap(), "abc");
        assert_eq!(parse_txt("v=STSv1; id=abc; ext=1").unwrap(), "abc");
        assert_eq!(parse_txt("v=STSv1;"), Err(StsParseError::Missing("id")));
        assert!(parse_txt("v=STSv2; id=abc").is_err());
        assert!(parse_txt("id=abc; v=STSv1").is_err());
        assert!(parse_txt("v=STSv1; id=a-b").is_err());
        assert!(parse_txt(&format!("v=STSv1; id={}", "a".repeat(33))).is_err());
    }

    #[test]
    fn several_sts_records_mean_none() {
        assert_eq!(
            pick_txt(["v=spf1 -all", "v=STSv1; id=1"]),
            Some("v=STSv1; id=1")
        );
        assert_eq!(pick_txt(["v=STSv1; id=1", "v=STSv1; id=2"]), None);
        assert_eq!(pick_txt(["v=spf1 -all"]), None);
    }

    #[test]
    fn policy_from_the_rfc() {
        let p = parse_policy(
            "version: STSv1\r\nmode: enforce\r\nmx: mail.example.com\r\nmx: *.example.net\r\nmx: backupmx.example.com\r\nmax_age: 604800\r\n",
        )
        .unwrap();
        assert_eq!(p.mode, StsMode::Enforce);
        assert_eq!(p.max_age, 604800);
        assert!(p.mx_matches("mail.example.com"));
        assert!(p.mx_matches("MAIL.example.com."));
        assert!(p.mx_matches("mx1.example.net"));
        assert!(!p.mx_matches("example.net"), "the wildcard needs one label");
        assert!(
            !p.mx_matches("a.b.example.net"),
            "the wildcard is one label only"
        );
        assert!(!p.mx_matches("mail.example.org"));
    }

    #[test]
    fn policy_errors() {
        assert_eq!(
            parse_policy("mode: enforce\nmx: a\nmax_age: 1\n"),
            Err(StsParseError::Missing("version"))
        );
        assert_eq!(
            parse_policy("version: STSv1\nmode: enforce\nmax_age: 1\n"),
            Err(StsParseError::Missing("mx"))
        );
        assert!(parse_policy("version: STSv1\nmode: none\nmax_age: 1\n").is_ok());
        assert!(parse_policy("version: STSv1\nmode: strict\nmx: a\nmax_age: 1\n").is_err());
        assert!(parse_policy("version: STSv1\nmode: enforce\nmx: a\nmax_age: -1\n").is_err());
        assert!(parse_policy("version: STSv1\nmode: enforce\nmx: a b\nmax_age: 1\n").is_err());
        assert!(parse_policy("<html>\n").is_err());
        let long =
            parse_policy("version: STSv1\nmode: testing\nmx: a\nmax_age: 9999999999\n").unwrap();
        assert_eq!(long.max_age, MAX_AGE_LIMIT);
    }

    fn pattern() -> impl Strategy<Value = String> {
        ("(\\*\\.)?", "[a-z0-9]{1,10}(\\.[a-z0-9-]{1,10}){0,3}").prop_map(|(w, n)| w + &n)
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC*") {
            let _ = parse_policy(&s);
            let _ = parse_txt(&s);
        }

        #[test]
        fn parsers_never_panic_on_near_valid_input(
            lines in proptest::collection::vec("(version|mode|mx|max_age|x)?:? ?[a-zA-Z0-9*.:;= ]{0,20}", 0..8)
        ) {
            let _ = parse_policy(&lines.join("\r\n"));
            let _ = parse_txt(&lines.join(";"));
        }

        #[test]
        fn valid_policies_round_trip(
            mode in prop_oneof![Just(StsMode::Enforce), Just(StsMode::Testing), Just(StsMode::None)],
            mx in proptest::collection::vec(pattern(), 1..5),
            max_age in 0..=MAX_AGE_LIMIT,
        ) {
            let p = StsPolicy { mode, mx, max_age };
            prop_assert_eq!(parse_policy(&p.to_text()), Ok(p));
        }

        #[test]
        fn valid_txt_round_trips(id in "[a-zA-Z0-9]{1,32}") {
            prop_assert_eq!(parse_txt(&format!("v=STSv1; id={id};")), Ok(id));
        }
    }
}
