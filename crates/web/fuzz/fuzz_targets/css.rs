//! The CSS of message HTML (a `<style>` element's content and a `style`
//! attribute's value) through the CSS filter, with and without remote
//! content: it must never panic, what comes out must carry no `<`, no
//! `expression(`, no `javascript:` and, when blocked, no `url(`, and
//! filtering what came out must give it back unchanged (a fixed point).
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
            let low = out.to_ascii_lowercase();
            assert!(!low.contains("expression("), "{css:?} -> {out:?}");
            assert!(!low.contains("javascript:"), "{css:?} -> {out:?}");
            assert!(remote || !low.contains("url("), "{css:?} -> {out:?}");
            assert_eq!(filter(&out, remote).css, out, "{css:?}");
        }
    }
});
