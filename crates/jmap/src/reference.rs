//! Result references (RFC 8620 §3.7): an argument named `#name` whose
//! value is `{resultOf, name, path}` takes its value from an earlier
//! response of the same request, found by a JSON pointer (RFC 6901) that
//! may hold `*` to map over an array. No I/O.

use serde_json::{Map, Value};

use crate::error::MethodError;

/// Replaces every `#name` argument with the value it refers to, among
/// `responses` (name, arguments, call id) made so far. Besides the
/// top-level arguments §3.7 defines, references nested in argument
/// objects (a filter's `#inMailbox`, as jmapc sends) are resolved too,
/// where the value has exactly a ResultReference's three string members;
/// any other `#` key there is left alone (a keyword, a creation id).
pub fn resolve(
    arguments: &mut Map<String, Value>,
    responses: &[(String, Value, String)],
) -> Result<(), MethodError> {
    resolve_top(arguments, responses)?;
    for value in arguments.values_mut() {
        resolve_nested(value, responses, 0)?;
    }
    Ok(())
}

/// Whether a value has the shape of a ResultReference.
fn is_reference(v: &Value) -> bool {
    matches!(v, Value::Object(o) if o.len() == 3
        && ["resultOf", "name", "path"].iter().all(|k| o.get(*k).is_some_and(Value::is_string)))
}

fn resolve_nested(
    value: &mut Value,
    responses: &[(String, Value, String)],
    depth: usize,
) -> Result<(), MethodError> {
    // Deep enough for any filter a client writes; deeper is left as is.
    if depth > 32 {
        return Ok(());
    }
    match value {
        Value::Object(o) => {
            let refs: Vec<String> = o
                .iter()
                .filter(|(k, v)| k.starts_with('#') && is_reference(v))
                .map(|(k, _)| k.clone())
                .collect();
            if !refs.is_empty() {
                let mut only = Map::new();
                for k in &refs {
                    if let Some(v) = o.remove(k) {
                        only.insert(k.clone(), v);
                    }
                }
                resolve_top(&mut only, responses)?;
                for (k, v) in only {
                    if o.contains_key(&k) {
                        return Err(MethodError::invalid_arguments(format!(
                            "{k} is given both as a value and as a result reference"
                        )));
                    }
                    o.insert(k, v);
                }
            }
            for v in o.values_mut() {
                resolve_nested(v, responses, depth + 1)?;
            }
        }
        Value::Array(items) => {
            for v in items {
                resolve_nested(v, responses, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn resolve_top(
    arguments: &mut Map<String, Value>,
    responses: &[(String, Value, String)],
) -> Result<(), MethodError> {
    let refs: Vec<String> = arguments
        .keys()
        .filter(|k| k.starts_with('#'))
        .cloned()
        .collect();
    for key in refs {
        let plain = &key[1..];
        // §3.7: an argument given both plainly and as a reference is an
        // error.
        if arguments.contains_key(plain) {
            return Err(MethodError::invalid_arguments(format!(
                "{plain} is given both as a value and as a result reference"
            )));
        }
        let Some(Value::Object(r)) = arguments.remove(&key) else {
            return Err(MethodError::invalid_result_reference(format!(
                "{key} is not a ResultReference object"
            )));
        };
        let field = |name: &str| match r.get(name) {
            Some(Value::String(s)) => Ok(s.as_str()),
            _ => Err(MethodError::invalid_result_reference(format!(
                "{key} has no string {name}"
            ))),
        };
        let (result_of, name, path) = (field("resultOf")?, field("name")?, field("path")?);
        // The first response with that call id, which must be of the
        // method named.
        let Some((found_name, found, _)) = responses.iter().find(|(_, _, id)| id == result_of)
        else {
            return Err(MethodError::invalid_result_reference(format!(
                "no response to call {result_of}"
            )));
        };
        if found_name != name {
            return Err(MethodError::invalid_result_reference(format!(
                "the response to {result_of} is {found_name}, not {name}"
            )));
        }
        let value = evaluate(found, path).ok_or_else(|| {
            MethodError::invalid_result_reference(format!(
                "path {path} does not resolve in the response to {result_of}"
            ))
        })?;
        arguments.insert(plain.to_string(), value);
    }
    Ok(())
}

/// Evaluates a JSON pointer with §3.7's `*`: applied to an array, the
/// rest of the pointer is evaluated on each item, and items that are
/// arrays themselves are flattened into the result. `None` when the
/// pointer does not resolve.
pub fn evaluate(value: &Value, path: &str) -> Option<Value> {
    if path.is_empty() {
        return Some(value.clone());
    }
    let rest = path.strip_prefix('/')?;
    let tokens: Vec<String> = rest.split('/').map(unescape).collect::<Option<_>>()?;
    walk(value, &tokens)
}

/// A JSON pointer token with its escapes undone; `None` when malformed.
pub(crate) fn unescape(token: &str) -> Option<String> {
    // RFC 6901 §4: `~1` is `/`, `~0` is `~`; any other `~` is malformed.
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn walk(value: &Value, tokens: &[String]) -> Option<Value> {
    let Some((first, rest)) = tokens.split_first() else {
        return Some(value.clone());
    };
    match value {
        Value::Array(items) if first == "*" => {
            let mut out = Vec::new();
            for item in items {
                match walk(item, rest)? {
                    Value::Array(inner) => out.extend(inner),
                    v => out.push(v),
                }
            }
            Some(Value::Array(out))
        }
        Value::Array(items) => {
            // RFC 6901 §4: an index is `0` or digits without a leading 0.
            if first.is_empty() || (first.len() > 1 && first.starts_with('0')) {
                return None;
            }
            let n: usize = first.parse().ok()?;
            walk(items.get(n)?, rest)
        }
        Value::Object(map) => walk(map.get(first.as_str())?, rest),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn responses() -> Vec<(String, Value, String)> {
        vec![
            (
                "Email/query".into(),
                json!({"ids": ["E1", "E2"], "a/b": {"~x": 5}}),
                "t0".into(),
            ),
            (
                "Email/get".into(),
                json!({"list": [
                    {"id": "E1", "threadId": "T1", "mailboxIds": ["M1"]},
                    {"id": "E2", "threadId": "T2", "mailboxIds": ["M2", "M3"]}
                ]}),
                "t1".into(),
            ),
        ]
    }

    #[test]
    fn pointers_with_stars_map_and_flatten() {
        let r = responses();
        assert_eq!(evaluate(&r[0].1, "/ids"), Some(json!(["E1", "E2"])));
        assert_eq!(evaluate(&r[0].1, "/ids/1"), Some(json!("E2")));
        assert_eq!(evaluate(&r[0].1, "/a~1b/~0x"), Some(json!(5)));
        assert_eq!(
            evaluate(&r[1].1, "/list/*/threadId"),
            Some(json!(["T1", "T2"]))
        );
        assert_eq!(
            evaluate(&r[1].1, "/list/*/mailboxIds"),
            Some(json!(["M1", "M2", "M3"]))
        );
        assert_eq!(evaluate(&r[0].1, ""), Some(r[0].1.clone()));
        for bad in [
            "ids",
            "/nope",
            "/ids/2",
            "/ids/01",
            "/ids/-1",
            "/a~2b",
            "/list/*/x",
        ] {
            let v = if bad.starts_with("/list") {
                &r[1].1
            } else {
                &r[0].1
            };
            assert_eq!(evaluate(v, bad), None, "{bad}");
        }
    }

    #[test]
    fn references_nested_in_objects_are_replaced_and_keywords_left() {
        let r = responses();
        let mut args = json!({
            "filter": {"conditions": [{"#inMailbox": {"resultOf": "t0", "name": "Email/query", "path": "/ids/0"}}]},
            "update": {"E1": {"keywords/#tag": true}},
            "keywords": {"#tag": true}
        })
        .as_object()
        .unwrap()
        .clone();
        resolve(&mut args, &r).unwrap();
        assert_eq!(args["filter"]["conditions"][0], json!({"inMailbox": "E1"}));
        assert_eq!(args["keywords"], json!({"#tag": true}));
    }

    #[test]
    fn references_are_replaced_or_refused() {
        let r = responses();
        let mut args =
            json!({"#ids": {"resultOf": "t1", "name": "Email/get", "path": "/list/*/threadId"}})
                .as_object()
                .unwrap()
                .clone();
        resolve(&mut args, &r).unwrap();
        assert_eq!(args["ids"], json!(["T1", "T2"]));

        let bad = [
            json!({"#ids": {"resultOf": "t9", "name": "Email/get", "path": "/list"}}),
            json!({"#ids": {"resultOf": "t1", "name": "Email/query", "path": "/ids"}}),
            json!({"#ids": {"resultOf": "t0", "name": "Email/query", "path": "/nothing"}}),
            json!({"#ids": {"resultOf": "t0", "name": "Email/query"}}),
            json!({"#ids": "t0"}),
        ];
        for b in bad {
            let mut args = b.as_object().unwrap().clone();
            let e = resolve(&mut args, &r).unwrap_err();
            assert_eq!(e.kind, "invalidResultReference", "{b}");
        }
        let mut both =
            json!({"ids": [], "#ids": {"resultOf": "t0", "name": "Email/query", "path": "/ids"}})
                .as_object()
                .unwrap()
                .clone();
        assert_eq!(resolve(&mut both, &r).unwrap_err().kind, "invalidArguments");
    }
}
