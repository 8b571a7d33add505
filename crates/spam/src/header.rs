//! Building the header values this crate hands out.

/// Lines of a folded header are kept to about this many characters.
const FOLD_AT: usize = 76;

/// `head` followed by `items` separated by `sep`, folded (RFC 5322 §2.2.3:
/// CRLF and a tab) before an item that would make a line longer than
/// about 76 characters. `field` is the field name the value follows, for
/// the length of the first line.
pub(crate) fn fold(field: &str, head: &str, items: &[String], sep: &str) -> String {
    let mut out = head.to_string();
    // "Name: " then the value.
    let mut line = field.len() + 2 + out.len();
    for (i, item) in items.iter().enumerate() {
        let sep = if i + 1 < items.len() { sep } else { "" };
        let width = item.len() + sep.len();
        if i > 0 && line + width > FOLD_AT {
            // Folding whitespace must not be the last thing on a line:
            // a separator's trailing space moves to the fold.
            while out.ends_with(' ') {
                out.pop();
            }
            out.push_str("\r\n\t");
            line = 8;
        }
        out.push_str(item);
        out.push_str(sep);
        line += width;
    }
    while out.ends_with(' ') {
        out.pop();
    }
    out
}

/// `s` as a quoted string (RFC 5322 §3.2.4) in printable ASCII: `"` and
/// `\` escaped with a backslash, other characters outside printable ASCII
/// written `\u{hex}` so a header stays 7-bit whatever the token.
pub(crate) fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' | '\\' => {
                out.push('\\');
                out.push(ch);
            }
            ' '..='~' => out.push(ch),
            _ => out.push_str(&format!("\\u{{{:x}}}", ch as u32)),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn quoting() {
        assert_eq!(quoted("click here"), "\"click here\"");
        assert_eq!(quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quoted("今日"), "\"\\u{4eca}\\u{65e5}\"");
        assert_eq!(quoted("a\r\nb"), "\"a\\u{d}\\u{a}b\"");
    }

    proptest! {
        #[test]
        fn folded_lines_are_short_and_seven_bit(
            items in proptest::collection::vec(".{0,40}", 0..30),
        ) {
            let items: Vec<String> = items.iter().map(|s| quoted(s)).collect();
            let value = fold("X-Spam-Bayes", "0.5;", &items, ", ");
            let header = format!("X-Spam-Bayes: {value}");
            for line in header.split("\r\n") {
                // An item longer than a line cannot be broken, only put on
                // a line of its own.
                prop_assert!(line.len() <= 76 || !line[1..].contains("\", \""), "{line}");
                prop_assert!(!line.ends_with(' '));
                prop_assert!(!line.contains('\r') && !line.contains('\n'));
            }
            prop_assert!(header.is_ascii());
        }
    }
}
