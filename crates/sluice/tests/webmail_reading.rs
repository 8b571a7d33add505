//! Reading mail in the webmail with a real browser: Debian's Chromium,
//! driven by tests/browser/reading.mjs (playwright-core), against a real
//! `sluice serve` with mail delivered over SMTP. Every test also fails if
//! the server logged a panic.

use sluice_testkit as kit;

use kit::{python, Server, PASSWORD};

/// Runs the Chromium driver (tests/browser/reading.mjs) in `mode`, with
/// `out` as the directory it writes downloads and screenshots to.
fn browser(mode: &str, server: &Server, user: &str, out: &std::path::Path) -> String {
    kit::browser(
        "reading.mjs",
        mode,
        server,
        user,
        &[("OUT", out.as_os_str())],
    )
}

/// Chromium (which always asks for gzip) downloads a PDF, a CSV with an
/// RFC 2231 encoded name (`Preisliste März.csv`) and a 20 MB file: the
/// bytes and the names are what was sent, and the server does not panic.
/// View source shows the raw message byte for byte. A `cid:` picture is
/// painted in the sandboxed frame (which sends no cookie) by a signed
/// link; that link with another expiry, part or signature is refused.
#[test]
fn attachments_source_and_inline_pictures_in_chromium() {
    let server = Server::start();
    let user = server.add_user("reader");
    let out = tempfile::tempdir().unwrap();
    let report = browser("files", &server, &user, out.path());
    assert!(report.contains("\"pictureWidth\":2"), "{report}");
    assert!(report.contains("\"refused\":[403,403,403,403]"), "{report}");
}

/// A newsletter keeps its colours, fonts and table attributes in the
/// frame (computed styles), while `expression()`, `url(javascript:)`,
/// `@import`, `behavior`, `-moz-binding` and a `position: fixed` overlay
/// do nothing; in light and in dark mode the frame's text has contrast
/// against its background, and a dark UI keeps a light frame.
#[test]
fn newsletter_styles_and_dark_mode_in_chromium() {
    let server = Server::start();
    let user = server.add_user("reader");
    let out = tempfile::tempdir().unwrap();
    let report = browser("styles", &server, &user, out.path());
    assert!(report.contains("\"dark\""), "{report}");
}

/// At 360, 390 and 430 pixels wide (a phone: isMobile, hasTouch) the
/// login, list, message, compose, settings, filters and search pages do
/// not scroll sideways, the main controls are at least 44 px high, none
/// overlaps another, and a folder's name stands apart from its count.
/// Screenshots are saved in the test's temp dir.
#[test]
fn phone_widths_fit_in_chromium() {
    let server = Server::start();
    let user = server.add_user("reader");
    let out = tempfile::tempdir().unwrap();
    let report = browser("phone", &server, &user, out.path());
    assert!(report.contains("\"screenshots\":24"), "{report}");
}

/// axe-core finds no violation of impact serious or critical on the
/// login, inbox, message, compose, settings and filters pages, in light
/// and in dark mode.
#[test]
fn pages_pass_axe_in_chromium() {
    let server = Server::start();
    let user = server.add_user("reader");
    let out = tempfile::tempdir().unwrap();
    let report = browser("axe", &server, &user, out.path());
    assert!(report.contains("inbox-dark"), "{report}");
}

/// What the inbox page weighs on the wire with gzip: its HTML, the
/// stylesheet and the script, as a browser fetches them (under 60 KB).
#[test]
fn inbox_page_weight_with_gzip() {
    let server = Server::start();
    let user = server.add_user("reader");
    let out = python(
        &format!(
            "import sys\nsys.path.insert(0, {:?})\nfrom client import Web\n{}",
            concat!(env!("CARGO_MANIFEST_DIR"), "/tests/webmail"),
            r#"
import re, smtplib
web_addr, smtp_addr, user, password = sys.argv[1:5]
host, port = smtp_addr.rsplit(":", 1)
with smtplib.SMTP(host, int(port)) as s:
    for i in range(50):
        s.sendmail("x@remote.test", [user], "From: Sender %d <s%d@remote.test>\r\nTo: %s\r\nSubject: message number %d\r\n\r\nhello\r\n" % (i, i, user, i))
w = Web(web_addr)
assert w.login(user, password)[0] == 303
inbox = w.inbox()
sizes = {}
status, h, html = w.request("GET", inbox, headers={"Accept-Encoding": "gzip"})
assert status == 200 and h.get("content-encoding") == "gzip", h
sizes["html"] = len(html)
import gzip
text = gzip.decompress(html).decode()
for kind, pattern in (("css", r'href="(/static/[^"]+\.css)"'), ("js", r'src="(/static/[^"]+\.js)"')):
    url = re.search(pattern, text).group(1)
    status, h, body = w.request("GET", url, headers={"Accept-Encoding": "gzip"})
    assert status == 200 and h.get("content-encoding") == "gzip", (url, h)
    sizes[kind] = len(body)
total = sum(sizes.values())
print("inbox page with gzip: %d bytes (html %d, css %d, js %d)" % (total, sizes["html"], sizes["css"], sizes["js"]))
assert total < 60 * 1024, sizes
print("ok")
"#
        ),
        &[
            &server.addr("http").to_string(),
            &server.smtp.to_string(),
            &user,
            PASSWORD,
        ],
    );
    eprintln!("{out}");
    assert!(out.trim().ends_with("ok"), "{out}");
    server.assert_no_panic();
}
