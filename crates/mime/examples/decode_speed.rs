//! How long `MessageStructure::from_bytes` takes on a typical structure:
//! a list view decodes one per message, 20,000 per request.
//!
//! Run with `cargo run --release -p sluice-mime --example decode_speed`.

use std::hint::black_box;
use std::time::Instant;

use mime_tree::{MessageStructure, StructureBuilder};

const MESSAGE: &[u8] = b"Return-Path: <ann@example.com>\r\n\
Date: Tue, 2 Jan 2024 10:00:00 +0100\r\n\
From: Ann Example <ann@example.com>\r\n\
To: Bob <bob@example.org>, \"Carol, C.\" <carol@example.net>\r\n\
Cc: team@example.com\r\n\
Subject: =?utf-8?q?Quarterly_report_=E2=80=93_draft?=\r\n\
Message-ID: <20240102090000.12345@mail.example.com>\r\n\
In-Reply-To: <20231231120000.999@mail.example.org>\r\n\
MIME-Version: 1.0\r\n\
Content-Type: multipart/mixed; boundary=\"=_outer_1\"\r\n\
\r\n\
This is a multi-part message in MIME format.\r\n\
--=_outer_1\r\n\
Content-Type: multipart/alternative; boundary=\"=_alt_2\"\r\n\
\r\n\
--=_alt_2\r\n\
Content-Type: text/plain; charset=utf-8; format=flowed\r\n\
Content-Transfer-Encoding: quoted-printable\r\n\
\r\n\
Hi Bob,\r\n\
the draft is attached.\r\n\
--=_alt_2\r\n\
Content-Type: text/html; charset=utf-8\r\n\
Content-Transfer-Encoding: quoted-printable\r\n\
\r\n\
<p>Hi Bob,<br>the draft is attached.</p>\r\n\
--=_alt_2--\r\n\
\r\n\
--=_outer_1\r\n\
Content-Type: application/pdf; name=\"report-q4.pdf\"\r\n\
Content-Transfer-Encoding: base64\r\n\
Content-Disposition: attachment; filename=\"report-q4.pdf\"; size=123456\r\n\
\r\n\
JVBERi0xLjQKJcOkw7zDtsOfCjIgMCBvYmoKPDwvTGVuZ3RoIDMgMCBSL0ZpbHRlci9GbGF0ZURl\r\n\
--=_outer_1--\r\n";

const N: usize = 20_000;

fn main() {
    let mut b = StructureBuilder::new();
    b.feed(MESSAGE);
    let structure = b.finish();
    let bytes = structure.to_bytes();
    println!("{} bytes encoded", bytes.len());
    report("from_bytes", || {
        black_box(MessageStructure::from_bytes(black_box(&bytes)).expect("decodes"));
    });
    report("envelope_from_bytes", || {
        black_box(MessageStructure::envelope_from_bytes(black_box(&bytes)).expect("decodes"));
    });
}

/// Best of five rounds of N calls.
fn report(what: &str, mut f: impl FnMut()) {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..N {
            f();
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    println!(
        "{what}: {N} in {:.1} ms ({:.2} µs each)",
        best * 1e3,
        best * 1e6 / N as f64
    );
}
