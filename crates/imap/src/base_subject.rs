//! The base subject of RFC 5256 §2.1, which SORT SUBJECT and both THREAD
//! algorithms compare: the subject without its reply and forward marks
//! and mailing-list blobs, compared with i;ascii-casemap.
//!
//! The subject arrives decoded (RFC 2047 encoded words turned into UTF-8
//! by the store at delivery: step 1's conversion).

/// `subject` reduced to its base subject (RFC 5256 §2.1 steps 1 to 7),
/// and whether it was a reply or a forward: step 2 removed a `(fwd)`,
/// step 3 a `Re:`/`Fw:`/`Fwd:`, or step 6 a `[fwd: ...]` (RFC 5256 §2.1,
/// last paragraph).
pub(crate) fn base_subject(subject: &str) -> (String, bool) {
    // Step 1: tabs and line breaks become spaces, runs of them one space.
    let mut s = String::with_capacity(subject.len());
    for c in subject.chars() {
        let c = if matches!(c, '\t' | '\r' | '\n') {
            ' '
        } else {
            c
        };
        if c == ' ' && s.ends_with(' ') {
            continue;
        }
        s.push(c);
    }
    let mut reply = false;
    let mut s = s.as_str();
    loop {
        // Step 2: trailing subj-trailer ("(fwd)" / WSP), repeatedly.
        loop {
            if let Some(rest) = s.strip_suffix(' ') {
                s = rest;
            } else if s.len() >= 5 && s.is_char_boundary(s.len() - 5) && {
                let tail = &s[s.len() - 5..];
                tail.eq_ignore_ascii_case("(fwd)")
            } {
                s = &s[..s.len() - 5];
                reply = true;
            } else {
                break;
            }
        }
        // Steps 3 to 5.
        loop {
            let before = s.len();
            // Step 3: every subj-leader.
            while let Some((rest, refwd)) = leader(s) {
                s = rest;
                reply |= refwd;
            }
            // Step 4: a leading subj-blob, when a subj-base stays.
            if let Some(rest) = blob(s) {
                if !rest.trim_start_matches(' ').is_empty() {
                    s = rest;
                }
            }
            if s.len() == before {
                break;
            }
        }
        // Step 6: "[fwd:" ... "]".
        if s.len() >= 6
            && s.is_char_boundary(5)
            && s[..5].eq_ignore_ascii_case("[fwd:")
            && s.ends_with(']')
        {
            s = &s[5..s.len() - 1];
            reply = true;
            continue;
        }
        break;
    }
    (s.to_string(), reply)
}

/// The i;ascii-casemap (RFC 4790 §9.2) form of a base subject, for
/// comparing: ASCII letters upper case, every other character as it is.
pub(crate) fn collation_key(s: &str) -> String {
    s.to_ascii_uppercase()
}

/// `subj-blob = "[" *BLOBCHAR "]" *WSP` at the start of `s`: what
/// follows it.
fn blob(s: &str) -> Option<&str> {
    let rest = s.strip_prefix('[')?;
    let close = rest.find(['[', ']'])?;
    if rest.as_bytes()[close] != b']' {
        return None;
    }
    Some(rest[close + 1..].trim_start_matches(' '))
}

/// `subj-leader = (*subj-blob subj-refwd) / WSP` at the start of `s`:
/// what follows it, and whether it was a subj-refwd.
fn leader(s: &str) -> Option<(&str, bool)> {
    if let Some(rest) = s.strip_prefix(' ') {
        return Some((rest, false));
    }
    let mut t = s;
    loop {
        if let Some(rest) = refwd(t) {
            return Some((rest, true));
        }
        t = blob(t)?;
    }
}

/// `subj-refwd = ("re" / ("fw" ["d"])) *WSP [subj-blob] ":"` at the start
/// of `s`: what follows it.
fn refwd(s: &str) -> Option<&str> {
    let lower = |n: usize| s.get(..n).map(str::to_ascii_lowercase);
    let rest = if lower(3).as_deref() == Some("fwd") {
        &s[3..]
    } else if matches!(lower(2).as_deref(), Some("re" | "fw")) {
        &s[2..]
    } else {
        return None;
    };
    let rest = rest.trim_start_matches(' ');
    if let Some(r) = rest.strip_prefix(':') {
        return Some(r);
    }
    blob(rest)?.strip_prefix(':')
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn base(s: &str) -> String {
        base_subject(s).0
    }

    #[test]
    fn the_rfc_steps() {
        assert_eq!(base_subject("Hello"), ("Hello".into(), false));
        assert_eq!(base_subject("Re: Hello"), ("Hello".into(), true));
        assert_eq!(base_subject("RE: re: Fwd: Hello"), ("Hello".into(), true));
        assert_eq!(base_subject("Fw: Hello"), ("Hello".into(), true));
        assert_eq!(base_subject("Hello (fwd)"), ("Hello".into(), true));
        assert_eq!(base_subject("Hello (FWD) (fwd)  "), ("Hello".into(), true));
        assert_eq!(base_subject("[list] Re: Hello"), ("Hello".into(), true));
        assert_eq!(base_subject("Re [list]: Hello"), ("Hello".into(), true));
        assert_eq!(base_subject("Re[2]: Hello"), ("Hello".into(), true));
        assert_eq!(base_subject("[list] Hello"), ("Hello".into(), false));
        assert_eq!(base_subject("[a] [b] Hello"), ("Hello".into(), false));
        // Step 4 keeps a blob that is all there is.
        assert_eq!(base_subject("[list]"), ("[list]".into(), false));
        assert_eq!(base_subject("[a] [b]"), ("[b]".into(), false));
        assert_eq!(base_subject("[fwd: Hello]"), ("Hello".into(), true));
        assert_eq!(
            base_subject("Re: [fwd: Re: Hello (fwd)]"),
            ("Hello".into(), true)
        );
        // Runs of white space are one space; leading and trailing go.
        assert_eq!(base("  Re:\t  Hello \t world  "), "Hello world");
        assert_eq!(base(""), "");
        assert_eq!(base("Re:"), "");
        // Not a reply mark: "Re" must be followed by ':' (after a blob).
        assert_eq!(base("Regarding: x"), "Regarding: x");
        assert_eq!(base("Re x"), "Re x");
        assert_eq!(base("Ré: x"), "Ré: x");
        assert_eq!(base("Re: Grüße"), "Grüße");
        assert_eq!(collation_key("Grüße aBc"), "GRüßE ABC");
    }

    proptest! {
        /// The base subject of a base subject is itself.
        #[test]
        fn idempotent(s in "([Rr][Ee]|[Ff][Ww][Dd]?|\\[[a-z ]{0,3}\\]|\\(fwd\\)|\\[fwd:|\\]|:| |\t|[a-zé]{1,3}){0,12}") {
            let once = base(&s);
            prop_assert_eq!(base(&once), once.clone());
            prop_assert!(!once.starts_with(' ') && !once.ends_with(' '));
        }

        /// Any text, including broken UTF-8 boundaries around the marks.
        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,40}") {
            let once = base(&s);
            prop_assert_eq!(base(&once), once.clone());
        }

        /// A reply mark in front changes nothing but the reply flag.
        #[test]
        fn reply_marks_are_stripped(s in "[a-z]{1,8}( [a-z]{1,8}){0,3}", mark in "(Re|RE|Fw|FWD|fwd|re\\[3\\]|\\[list\\] Re): ?") {
            let marked = format!("{mark}{s}");
            prop_assert_eq!(base_subject(&marked), (s.clone(), true));
            prop_assert_eq!(base_subject(&format!("{s} (fwd)")), (s.clone(), true));
            prop_assert_eq!(base_subject(&format!("[fwd: {s}]")), (s, true));
        }
    }
}
