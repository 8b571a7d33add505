//! MTA-STS and TLS-RPT parsers on untrusted bytes: the `_mta-sts` and
//! `_smtp._tls` TXT records, the policy file and the HTTP answer it comes
//! in never panic, and a policy that parses round-trips through its text
//! form.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_outbound::tls_policy::{https, sts, tlsrpt};

fuzz_target!(|data: &[u8]| {
    let _ = https::parse_response(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = sts::parse_txt(text);
        let _ = tlsrpt::parse_txt(text);
        let _ = sts::pick_txt(text.split('\n'));
        if let Ok(policy) = sts::parse_policy(text) {
            assert_eq!(sts::parse_policy(&policy.to_text()), Ok(policy.clone()));
            let _ = policy.mx_matches(text);
        }
    }
});
