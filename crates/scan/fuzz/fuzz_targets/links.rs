//! The HTML link extractor behind the phishing check: any input, and the same input
//! split at a fuzzer-chosen point, must give the same links; a mail with the input
//! as its HTML part, checked against phishing lists, must give the same verdict
//! whole and split, and never panic.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use scan::{DatabaseBuilder, Limits, Scanner};

fn scanner() -> &'static Scanner {
    static S: OnceLock<Scanner> = OnceLock::new();
    S.get_or_init(|| {
        let mut b = DatabaseBuilder::new();
        b.add_pdb("fuzz.pdb", "H:paypal.com\nR:.+\\.evil\\.org([/?].*)?:.+\\.bank\\.com\n");
        b.add_wdb("fuzz.wdb", "M:www.paypal.co.uk:www.paypal.com\n");
        b.add_file("fuzz.gdb", format!("S:F:{}\n", "ab".repeat(32)).as_bytes())
            .expect("the .gdb text loads");
        Scanner::new(Arc::new(b.build().expect("the lists build").0), Limits::default())
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, html)) = data.split_first() else { return };
    let cut = usize::from(cut) * html.len() / 256;
    let (a, b) = html.split_at(cut);
    assert_eq!(scan::extract_links(&[html]), scan::extract_links(&[a, b]));

    let head: &[u8] = b"Subject: fuzz\r\nContent-Type: text/html\r\n\r\n";
    let mail = [head, html].concat();
    let whole = scanner().scan_mail(&mail);
    let mut s = scanner().session();
    let (a, b) = mail.split_at(head.len() + cut);
    s.feed(a);
    s.feed(b);
    assert_eq!(whole, s.finish());
});
