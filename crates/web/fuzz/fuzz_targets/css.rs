//! The CSS of message HTML (a `<style>` element's content and a `style`
//! attribute's value) through the CSS filter, with and without remote
//! content: it must never panic, what comes out must carry no `<`, no
//! `expression(` and, when blocked, no `url(` outside
//! quoted strings (a string is text, never fetched or run; `javascript:`
//! can only matter inside a `url(`), and filtering
//! what came out must give it back unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let css = String::from_utf8_lossy(data);
    for remote in [false, true] {
        let filters: [fn(&str, bool) -> web::FilteredCss; 2] =
            [web::filter_css_stylesheet, web::filter_css_declarations];
        for filter in filters {
            let out = filter(&css, remote).css;
            assert!(!out.contains('<'), "{css:?} -> {out:?}");
            let low = without_strings(&out).to_ascii_lowercase();
            assert!(!low.contains("expression("), "{css:?} -> {out:?}");
            assert!(remote || !calls_url(&low), "{css:?} -> {out:?}");
            // What was kept, filtered again, is kept whole.
            assert_eq!(filter(&out, remote).css, out, "{css:?}");
        }
    }
});

/// Whether `low` has a `url(` that is the function itself, not the tail of
/// a longer name such as `eurl(` (CSS Syntax §4.3.4: a name runs on over
/// letters, digits, `-`, `_` and every non-ASCII character).
fn calls_url(low: &str) -> bool {
    low.match_indices("url(").any(|(at, _)| {
        !low[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || !c.is_ascii())
    })
}

/// `css` with the contents of its quoted strings (CSS Syntax §4.3.5,
/// backslash escapes included) left out.
fn without_strings(css: &str) -> String {
    let mut out = String::new();
    let mut quote = None;
    let mut chars = css.chars();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) if c == '\\' => {
                chars.next();
            }
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None => out.push(c),
        }
    }
    out
}
