//! Messages as they arrive over SMTP or IMPORT: tokenising never panics,
//! keeps its bound, gives each token once, and is deterministic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let tokens = spam::tokenize(data);
    assert!(tokens.len() <= spam::MAX_TOKENS);
    let list: Vec<&str> = tokens.iter().collect();
    assert!(list.windows(2).all(|w| w[0] < w[1]));
    assert!(list.iter().all(|t| !t.is_empty()));
    assert_eq!(spam::tokenize(data), tokens);
});
