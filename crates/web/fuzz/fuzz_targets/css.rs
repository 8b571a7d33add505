//! The CSS of message HTML (a `<style>` element's content and a `style`
//! attribute's value) through the CSS filter, with and without remote
//! content: it must never panic, what comes out must carry no `<`, no
//! `expression(` function and, when blocked, no `url(` token or `url`
//! function (read as a browser reads it, with cssparser; `javascript:` can only
//! matter inside a `url(`), and filtering
//! what came out must give it back unchanged.
#![no_main]

use cssparser::{ParseError, Parser, Token};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let css = String::from_utf8_lossy(data);
    for remote in [false, true] {
        let filters: [fn(&str, bool) -> web::FilteredCss; 2] =
            [web::filter_css_stylesheet, web::filter_css_declarations];
        for filter in filters {
            let out = filter(&css, remote).css;
            assert!(!out.contains('<'), "{css:?} -> {out:?}");
            assert!(!calls(&out, "expression"), "{css:?} -> {out:?}");
            assert!(remote || !calls(&out, "url"), "{css:?} -> {out:?}");
            // What was kept, filtered again, is kept whole.
            assert_eq!(filter(&out, remote).css, out, "{css:?}");
        }
    }
});

/// Whether `css`, read as CSS, calls the function `name` at any depth;
/// for `url`, a `url(` token counts too: the two ways a value fetches.
fn calls(css: &str, name: &str) -> bool {
    fn walk(p: &mut Parser<'_>, name: &str) -> bool {
        while let Ok(t) = p.next_including_whitespace_and_comments() {
            let nested = match t {
                Token::UnquotedUrl(_) | Token::BadUrl(_) if name == "url" => return true,
                Token::Function(f) if f.eq_ignore_ascii_case(name) => return true,
                Token::Function(_)
                | Token::ParenthesisBlock
                | Token::SquareBracketBlock
                | Token::CurlyBracketBlock => true,
                _ => false,
            };
            if nested
                && p.parse_nested_block(|p| Ok::<_, ParseError<()>>(walk(p, name)))
                    .unwrap_or(false)
            {
                return true;
            }
        }
        false
    }
    walk(&mut Parser::new(css), name)
}
