//! The JMAP request object (RFC 8620 §3.3) read from the bytes of an API
//! call, and the response object (§3.4) written back. No I/O: the API
//! endpoint hands in the body it read, bounded by `maxSizeRequest`.
//!
//! Parsing is strict where the RFC is: a body that is not I-JSON is
//! `notJSON`, one that is JSON but not a request is `notRequest`, a
//! capability the server does not know is `unknownCapability`, and more
//! calls than `maxCallsInRequest` is `limit` (§3.6.1).

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::error::RequestError;

/// One method call: `[name, arguments, method call id]` (§3.2).
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// The method's name, `Type/method`.
    pub name: String,
    /// Its named arguments.
    pub arguments: Map<String, Value>,
    /// The client's id for the call, echoed in its responses.
    pub call_id: String,
}

/// A parsed request (§3.3).
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The capabilities the client means to use.
    pub using: Vec<String>,
    /// The calls, processed in order.
    pub method_calls: Vec<Invocation>,
    /// Creation ids the client already knows (§3.3 `createdIds`); when
    /// given, the response carries the map back, with what this request
    /// created added.
    pub created_ids: Option<HashMap<String, String>>,
}

/// Reads a request. `known` are the capabilities the server has;
/// `max_calls` is `maxCallsInRequest`.
pub fn parse(body: &[u8], known: &[&str], max_calls: usize) -> Result<Request, RequestError> {
    // RFC 8620 §3.3: the body is I-JSON (RFC 7493): UTF-8 text.
    let text = std::str::from_utf8(body)
        .map_err(|_| RequestError::NotJson("the request is not UTF-8 text".into()))?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| RequestError::NotJson(format!("the request is not JSON: {e}")))?;
    let Value::Object(mut top) = value else {
        return Err(not_request("the request is not a JSON object"));
    };
    let using = match top.remove("using") {
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(not_request("using holds something other than strings")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(not_request("using is not an array of strings")),
        None => return Err(not_request("the request has no using")),
    };
    let calls = match top.remove("methodCalls") {
        Some(Value::Array(items)) => items,
        Some(_) => return Err(not_request("methodCalls is not an array")),
        None => return Err(not_request("the request has no methodCalls")),
    };
    let created_ids = match top.remove("createdIds") {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) => Some(
            map.into_iter()
                .map(|(k, v)| match v {
                    Value::String(id) => Ok((k, id)),
                    _ => Err(not_request("createdIds maps to something other than ids")),
                })
                .collect::<Result<HashMap<_, _>, _>>()?,
        ),
        Some(_) => return Err(not_request("createdIds is not an object")),
    };
    // §3.6.1: unknownCapability names what the server does not support.
    if let Some(unknown) = using.iter().find(|u| !known.contains(&u.as_str())) {
        return Err(RequestError::UnknownCapability(unknown.clone()));
    }
    if calls.len() > max_calls {
        return Err(RequestError::Limit("maxCallsInRequest"));
    }
    let method_calls = calls
        .into_iter()
        .map(invocation)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Request {
        using,
        method_calls,
        created_ids,
    })
}

fn not_request(why: &str) -> RequestError {
    RequestError::NotRequest(why.to_string())
}

fn invocation(v: Value) -> Result<Invocation, RequestError> {
    let Value::Array(parts) = v else {
        return Err(not_request("a method call is not an array"));
    };
    let [name, arguments, call_id]: [Value; 3] = parts
        .try_into()
        .map_err(|_| not_request("a method call is not [name, arguments, id]"))?;
    match (name, arguments, call_id) {
        (Value::String(name), Value::Object(arguments), Value::String(call_id)) => Ok(Invocation {
            name,
            arguments,
            call_id,
        }),
        _ => Err(not_request("a method call is not [string, object, string]")),
    }
}

/// The response object (§3.4).
pub fn response(
    responses: Vec<(String, Value, String)>,
    created_ids: Option<&HashMap<String, String>>,
    session_state: &str,
) -> Value {
    let mut out = Map::new();
    out.insert(
        "methodResponses".into(),
        Value::Array(
            responses
                .into_iter()
                .map(|(name, args, id)| Value::Array(vec![name.into(), args, id.into()]))
                .collect(),
        ),
    );
    if let Some(ids) = created_ids {
        out.insert(
            "createdIds".into(),
            Value::Object(
                ids.iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            ),
        );
    }
    out.insert("sessionState".into(), session_state.into());
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CORE: &str = "urn:ietf:params:jmap:core";

    fn kind(r: Result<Request, RequestError>) -> &'static str {
        match r {
            Ok(_) => "ok",
            Err(e) => e.type_suffix(),
        }
    }

    #[test]
    fn a_request_is_read_with_its_calls_and_created_ids() {
        let r = parse(
            br#"{"using":["urn:ietf:params:jmap:core"],
                 "methodCalls":[["Core/echo",{"a":1},"c1"]],
                 "createdIds":{"k":"M1"}}"#,
            &[CORE],
            16,
        )
        .unwrap();
        assert_eq!(r.using, [CORE]);
        assert_eq!(r.method_calls[0].name, "Core/echo");
        assert_eq!(r.method_calls[0].call_id, "c1");
        assert_eq!(r.method_calls[0].arguments["a"], 1);
        assert_eq!(r.created_ids.unwrap()["k"], "M1");
    }

    #[test]
    fn bad_bodies_get_the_request_level_error_the_rfc_names() {
        let p = |b: &[u8]| kind(parse(b, &[CORE], 2));
        assert_eq!(p(b"\xff\xfe"), "notJSON");
        assert_eq!(p(b"{"), "notJSON");
        assert_eq!(p(b""), "notJSON");
        assert_eq!(p(b"[]"), "notRequest");
        assert_eq!(p(br#"{"using":[]}"#), "notRequest");
        assert_eq!(p(br#"{"methodCalls":[]}"#), "notRequest");
        assert_eq!(p(br#"{"using":"x","methodCalls":[]}"#), "notRequest");
        assert_eq!(p(br#"{"using":[1],"methodCalls":[]}"#), "notRequest");
        assert_eq!(p(br#"{"using":[],"methodCalls":[["a",{}]]}"#), "notRequest");
        assert_eq!(
            p(br#"{"using":[],"methodCalls":[["a",[],"c"]]}"#),
            "notRequest"
        );
        assert_eq!(
            p(br#"{"using":[],"methodCalls":[],"createdIds":{"a":1}}"#),
            "notRequest"
        );
        assert_eq!(
            p(br#"{"using":["urn:x"],"methodCalls":[]}"#),
            "unknownCapability"
        );
        assert_eq!(
            p(br#"{"using":[],"methodCalls":[["a",{},"1"],["a",{},"2"],["a",{},"3"]]}"#),
            "limit"
        );
        assert_eq!(p(br#"{"using":[],"methodCalls":[]}"#), "ok");
    }

    #[test]
    fn the_response_carries_created_ids_only_when_asked() {
        let r = response(
            vec![("Core/echo".into(), Value::Null, "c".into())],
            None,
            "s1",
        );
        assert!(r.get("createdIds").is_none());
        assert_eq!(r["methodResponses"][0][2], "c");
        assert_eq!(r["sessionState"], "s1");
        let ids = HashMap::from([("k".to_string(), "E1".to_string())]);
        let r = response(vec![], Some(&ids), "s1");
        assert_eq!(r["createdIds"]["k"], "E1");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(body in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let _ = parse(&body, &[CORE], 4);
        }

        #[test]
        fn json_shaped_text_never_panics(body in r#"[\[\]{}",:a-z0-9 #]{0,64}"#) {
            let _ = parse(body.as_bytes(), &[CORE], 4);
        }
    }
}
