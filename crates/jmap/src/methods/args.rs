//! Reading method arguments (RFC 8620 §5): each wrong type or value is
//! `invalidArguments`, never a panic.

use serde_json::{Map, Value};

use crate::error::MethodError;

/// The arguments of one call, taken apart.
pub(crate) struct Args(pub Map<String, Value>);

impl Args {
    /// An optional string.
    pub fn str(&self, name: &str) -> Result<Option<&str>, MethodError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(bad(name, "a string")),
        }
    }

    /// An optional boolean, `default` when absent.
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, MethodError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(bad(name, "a boolean")),
        }
    }

    /// An optional unsigned integer (§1.3 UnsignedInt).
    pub fn uint(&self, name: &str) -> Result<Option<u64>, MethodError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| *n < (1 << 53))
                .map(Some)
                .ok_or_else(|| bad(name, "an unsigned integer")),
        }
    }

    /// An optional integer (§1.3 Int).
    pub fn int(&self, name: &str) -> Result<Option<i64>, MethodError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_i64()
                .filter(|n| n.unsigned_abs() < (1 << 53))
                .map(Some)
                .ok_or_else(|| bad(name, "an integer")),
        }
    }

    /// An optional list of strings; `None` for absent or null.
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, MethodError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| bad(name, "a list of strings")),
            Some(_) => Err(bad(name, "a list of strings")),
        }
    }

    /// An optional object.
    pub fn object(&self, name: &str) -> Result<Option<&Map<String, Value>>, MethodError> {
        match self.0.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(_) => Err(bad(name, "an object")),
        }
    }

    /// Fails on arguments the method does not know (§3.6.2: an unknown
    /// argument is `invalidArguments`).
    pub fn only(&self, known: &[&str]) -> Result<(), MethodError> {
        match self.0.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(MethodError::invalid_arguments(format!(
                "unknown argument {k}"
            ))),
            None => Ok(()),
        }
    }
}

fn bad(name: &str, what: &str) -> MethodError {
    MethodError::invalid_arguments(format!("{name} must be {what}"))
}

/// A /get's `ids` and `properties` (§5.1), checked against the limits and
/// the type's properties: (ids or `None` for all, properties).
pub(crate) fn get_args(
    args: &Args,
    max_objects: usize,
    all_properties: &[&str],
    default_properties: &[&str],
) -> Result<(Option<Vec<String>>, Vec<String>), MethodError> {
    let ids = args.strings("ids")?;
    if ids.as_ref().is_some_and(|ids| ids.len() > max_objects) {
        return Err(MethodError::request_too_large(format!(
            "at most {max_objects} ids per /get (maxObjectsInGet)"
        )));
    }
    let properties = match args.strings("properties")? {
        None => default_properties.iter().map(|p| p.to_string()).collect(),
        Some(list) => {
            if let Some(p) = list.iter().find(|p| !all_properties.contains(&p.as_str())) {
                return Err(MethodError::invalid_arguments(format!(
                    "unknown property {p}"
                )));
            }
            list
        }
    };
    Ok((ids, properties))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_types_are_invalid_arguments() {
        let a = Args(
            json!({"s": 1, "b": "x", "n": -1, "l": [1], "o": [], "i": 1.5})
                .as_object()
                .unwrap()
                .clone(),
        );
        assert_eq!(a.str("s").unwrap_err().kind, "invalidArguments");
        assert_eq!(a.bool("b", false).unwrap_err().kind, "invalidArguments");
        assert_eq!(a.uint("n").unwrap_err().kind, "invalidArguments");
        assert_eq!(a.strings("l").unwrap_err().kind, "invalidArguments");
        assert_eq!(a.object("o").unwrap_err().kind, "invalidArguments");
        assert_eq!(a.int("i").unwrap_err().kind, "invalidArguments");
        assert_eq!(a.int("n").unwrap(), Some(-1));
        assert_eq!(a.str("missing").unwrap(), None);
        assert!(a.only(&["s"]).is_err());
        let (ids, props) = get_args(
            &Args(json!({"ids": ["a"]}).as_object().unwrap().clone()),
            1,
            &["id", "x"],
            &["id"],
        )
        .unwrap();
        assert_eq!(
            (ids, props),
            (Some(vec!["a".to_string()]), vec!["id".to_string()])
        );
        let too_many = Args(json!({"ids": ["a", "b"]}).as_object().unwrap().clone());
        assert_eq!(
            get_args(&too_many, 1, &["id"], &["id"]).unwrap_err().kind,
            "requestTooLarge"
        );
        let unknown = Args(json!({"properties": ["nope"]}).as_object().unwrap().clone());
        assert_eq!(
            get_args(&unknown, 1, &["id"], &["id"]).unwrap_err().kind,
            "invalidArguments"
        );
    }
}
