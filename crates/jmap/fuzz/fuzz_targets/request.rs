//! API request bodies from the network through the request parser and
//! the result-reference resolver: never a panic, and a request that
//! parses keeps within the call limit.
#![no_main]

use libfuzzer_sys::fuzz_target;

const CORE: &str = "urn:ietf:params:jmap:core";

fuzz_target!(|data: &[u8]| {
    let Ok(request) = jmap::request::parse(data, &[CORE], 16) else {
        return;
    };
    assert!(request.method_calls.len() <= 16);
    // Each call's arguments resolved against the calls before it, as
    // the API endpoint does with their responses.
    let mut responses = Vec::new();
    for call in request.method_calls {
        let mut arguments = call.arguments.clone();
        let _ = jmap::reference::resolve(&mut arguments, &responses);
        responses.push((
            call.name,
            serde_json::Value::Object(call.arguments),
            call.call_id,
        ));
    }
});
