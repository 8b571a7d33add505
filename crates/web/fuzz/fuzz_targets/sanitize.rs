//! Message HTML from the network through the sanitiser: it must never
//! panic, and what comes out must carry no script, handler or unsafe URL,
//! whatever went in.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let html = String::from_utf8_lossy(data);
    for allow_remote in [false, true] {
        let out = web::sanitize_html(&html, allow_remote, "/mail/1/1/cid/");
        let lower = out.html.to_ascii_lowercase();
        assert!(!lower.contains("<script"), "{html:?} -> {}", out.html);
        assert!(!lower.contains("javascript:"), "{html:?} -> {}", out.html);
        assert!(!lower.contains(" onerror="), "{html:?} -> {}", out.html);
        if !allow_remote {
            assert!(!lower.contains("src=\"http"), "{html:?} -> {}", out.html);
        }
    }
});
