//! Message HTML from the network through the sanitiser: it must never
//! panic, and what comes out must carry no script, handler or unsafe URL,
//! whatever went in.
//!
//! The checks read the tags of the output: text is escaped by the
//! sanitiser (`<` becomes `&lt;`), so a `<` starts a real tag, and text
//! such as "onerror=" or "javascript:" inside a paragraph is harmless.
//! Attribute values are always double-quoted with `"` escaped.
#![no_main]

use libfuzzer_sys::fuzz_target;

/// The tags of serialised HTML: (name, [(attribute, value)]), lower case.
fn tags(html: &str) -> Vec<(String, Vec<(String, String)>)> {
    let mut out = Vec::new();
    for piece in html.split('<').skip(1) {
        let mut chars = piece.chars().peekable();
        let mut name = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() || c == '>' || c == '/' {
                break;
            }
            name.push(c.to_ascii_lowercase());
            chars.next();
        }
        let mut attrs = Vec::new();
        loop {
            while chars.peek().is_some_and(|c| c.is_whitespace() || *c == '/') {
                chars.next();
            }
            match chars.peek() {
                None | Some('>') => break,
                _ => {}
            }
            let mut attr = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || c == '=' || c == '>' {
                    break;
                }
                attr.push(c.to_ascii_lowercase());
                chars.next();
            }
            let mut value = String::new();
            if chars.peek() == Some(&'=') {
                chars.next();
                if chars.peek() == Some(&'"') {
                    chars.next();
                    for c in chars.by_ref() {
                        if c == '"' {
                            break;
                        }
                        value.push(c.to_ascii_lowercase());
                    }
                }
            }
            if attr.is_empty() {
                chars.next();
                continue;
            }
            attrs.push((attr, value));
        }
        out.push((name, attrs));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let html = String::from_utf8_lossy(data);
    for allow_remote in [false, true] {
        let out = web::sanitize_html(&html, allow_remote, "/mail/1/1/cid/");
        for (name, attrs) in tags(&out.html) {
            assert!(name != "script" && name != "iframe", "{html:?} -> {}", out.html);
            for (attr, value) in attrs {
                assert!(!attr.starts_with("on"), "{html:?} -> {}", out.html);
                assert!(!value.trim_start().starts_with("javascript:"), "{html:?} -> {}", out.html);
                if !allow_remote && (attr == "src" || attr == "background") {
                    assert!(!value.trim_start().starts_with("http"), "{html:?} -> {}", out.html);
                }
            }
        }
    }
});
