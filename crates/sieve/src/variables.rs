//! RFC 5229 variables: strings with `${name}` references, compiled once and
//! expanded at run time, and the `set` modifiers.

/// Longest value a variable holds; longer values are cut (RFC 5229 §6
/// lets an implementation limit it).
pub(crate) const MAX_VALUE_LEN: usize = 64 * 1024;

/// A reference to a variable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum VarRef {
    /// A plain name, lowercased (RFC 5229 §3: names are case-insensitive).
    /// It reads a global when the running script declared it `global`.
    Name(String),
    /// `global.name` (RFC 6609 §3.5).
    Global(String),
}

/// One piece of a string with references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    Text(String),
    Var(VarRef),
    /// `${0}`..`${9}` (RFC 5229 §3.2).
    Match(usize),
}

/// A string argument: a constant, or pieces expanded at run time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Const(String),
    Template(Vec<Part>),
}

impl Value {
    /// The constant text, when the value has no references.
    pub(crate) fn as_const(&self) -> Option<&str> {
        match self {
            Value::Const(s) => Some(s),
            Value::Template(_) => None,
        }
    }
}

/// What a value's references read from.
pub(crate) trait Scope {
    fn var(&self, r: &VarRef) -> Option<&str>;
    fn matched(&self, n: usize) -> Option<&str>;
}

/// Expands `v` in `scope`; unknown variables are empty (RFC 5229 §3).
pub(crate) fn expand(v: &Value, scope: &dyn Scope) -> String {
    match v {
        Value::Const(s) => s.clone(),
        Value::Template(parts) => {
            let mut out = String::new();
            for p in parts {
                match p {
                    Part::Text(t) => out.push_str(t),
                    Part::Var(r) => out.push_str(scope.var(r).unwrap_or("")),
                    Part::Match(n) => out.push_str(scope.matched(*n).unwrap_or("")),
                }
            }
            truncate(&mut out);
            out
        }
    }
}

/// Cuts `s` to `MAX_VALUE_LEN` bytes at a character boundary.
pub(crate) fn truncate(s: &mut String) {
    if s.len() > MAX_VALUE_LEN {
        let mut at = MAX_VALUE_LEN;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
}

/// Whether `s` is an identifier (RFC 5228 §8.1).
pub(crate) fn is_identifier(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Reads a variable name as `set`, `global` and the imap4flags commands
/// take it: an identifier, or `global.` and one when `globals` is allowed.
pub(crate) fn parse_name(s: &str, globals: bool) -> Result<VarRef, String> {
    if let Some((ns, rest)) = s.split_once('.') {
        if globals && ns.eq_ignore_ascii_case("global") && is_identifier(rest) {
            return Ok(VarRef::Global(rest.to_ascii_lowercase()));
        }
        return Err(format!("invalid variable name '{s}'"));
    }
    if is_identifier(s) {
        Ok(VarRef::Name(s.to_ascii_lowercase()))
    } else {
        Err(format!("invalid variable name '{s}'"))
    }
}

/// Splits a string literal into text and references (RFC 5229 §3). A
/// malformed reference stays as text; a reference into a namespace that is
/// not available is an error.
pub(crate) fn compile(s: &str, globals: bool) -> Result<Value, String> {
    let mut parts: Vec<Part> = Vec::new();
    let mut text = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        text.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let name_len = after
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.')
            .count();
        let name = &after[..name_len];
        if after[name_len..].starts_with('}') && !name.is_empty() {
            let part = if name.bytes().all(|b| b.is_ascii_digit()) {
                Some(Part::Match(name.parse().unwrap_or(usize::MAX)))
            } else if name.contains('.') {
                let valid = name.split('.').all(|p| !p.is_empty())
                    && is_identifier(name.split('.').next().unwrap_or(""));
                if valid {
                    Some(Part::Var(parse_name(name, globals).map_err(|_| {
                        format!("variable namespace in '${{{name}}}' is not available")
                    })?))
                } else {
                    None
                }
            } else if is_identifier(name) {
                Some(Part::Var(VarRef::Name(name.to_ascii_lowercase())))
            } else {
                None
            };
            if let Some(part) = part {
                if !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                parts.push(part);
                rest = &after[name_len + 1..];
                continue;
            }
        }
        text.push('$');
        rest = &rest[i + 1..];
    }
    text.push_str(rest);
    if parts.is_empty() {
        return Ok(Value::Const(text));
    }
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    Ok(Value::Template(parts))
}

/// A `set` modifier (RFC 5229 §4.1, and `:quoteregex` from the regex draft).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Modifier {
    Lower,
    Upper,
    LowerFirst,
    UpperFirst,
    QuoteWildcard,
    QuoteRegex,
    Length,
}

impl Modifier {
    /// RFC 5229 §4.1: higher precedence applies first; two of the same
    /// precedence are an error.
    pub(crate) fn precedence(self) -> u8 {
        match self {
            Modifier::Lower | Modifier::Upper => 40,
            Modifier::LowerFirst | Modifier::UpperFirst => 30,
            Modifier::QuoteWildcard | Modifier::QuoteRegex => 20,
            Modifier::Length => 10,
        }
    }

    pub(crate) fn from_tag(tag: &str) -> Option<Modifier> {
        Some(match tag {
            "lower" => Modifier::Lower,
            "upper" => Modifier::Upper,
            "lowerfirst" => Modifier::LowerFirst,
            "upperfirst" => Modifier::UpperFirst,
            "quotewildcard" => Modifier::QuoteWildcard,
            "quoteregex" => Modifier::QuoteRegex,
            "length" => Modifier::Length,
            _ => return None,
        })
    }

    /// Applies this modifier to `s`.
    pub(crate) fn apply(self, s: String) -> String {
        match self {
            Modifier::Lower => s.to_lowercase(),
            Modifier::Upper => s.to_uppercase(),
            Modifier::LowerFirst => first(s, |c| c.to_lowercase().collect()),
            Modifier::UpperFirst => first(s, |c| c.to_uppercase().collect()),
            Modifier::QuoteWildcard => {
                let mut out = String::with_capacity(s.len());
                for c in s.chars() {
                    if matches!(c, '*' | '?' | '\\') {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out
            }
            Modifier::QuoteRegex => regex::escape(&s),
            Modifier::Length => s.chars().count().to_string(),
        }
    }
}

fn first(s: String, f: impl Fn(char) -> String) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => f(c) + chars.as_str(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct S;
    impl Scope for S {
        fn var(&self, r: &VarRef) -> Option<&str> {
            match r {
                VarRef::Name(n) if n == "a" => Some("AAA"),
                VarRef::Global(n) if n == "g" => Some("GGG"),
                _ => None,
            }
        }
        fn matched(&self, n: usize) -> Option<&str> {
            (n == 1).then_some("one")
        }
    }

    fn x(s: &str) -> String {
        expand(&compile(s, true).unwrap(), &S)
    }

    #[test]
    fn references() {
        assert_eq!(x("plain"), "plain");
        assert_eq!(x("${a}-${A}-${b}-${1}-${2}"), "AAA-AAA--one-");
        assert_eq!(x("${global.g}${GLOBAL.G}"), "GGGGGG");
        assert_eq!(x("${a${a}}"), "${aAAA}");
        assert_eq!(x("$${a}"), "$AAA");
        assert_eq!(x("${}${ a}${1a}"), "${}${ a}${1a}");
        assert!(compile("${foo.bar}", false).is_err());
        assert!(compile("${global.g}", false).is_err());
    }

    #[test]
    fn modifiers() {
        assert_eq!(Modifier::UpperFirst.apply("hello".into()), "Hello");
        assert_eq!(Modifier::LowerFirst.apply("HELLO".into()), "hELLO");
        assert_eq!(
            Modifier::QuoteWildcard.apply("a*b?\\".into()),
            "a\\*b\\?\\\\"
        );
        assert_eq!(Modifier::Length.apply("héllo".into()), "5");
        assert_eq!(Modifier::QuoteRegex.apply("a.b".into()), "a\\.b");
    }
}
