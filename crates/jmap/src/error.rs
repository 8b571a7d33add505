//! JMAP's errors: request-level ones as RFC 7807 problem details (RFC
//! 8620 §3.6.1), method-level ones as `error` responses (§3.6.2), and the
//! crate's own error type for what fails beneath a method (the store).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

/// What goes wrong beneath a method: the store, or a message that cannot
/// be read. A method answers it as `serverFail` (§3.6.2), never a 500.
#[derive(Debug, thiserror::Error)]
pub enum JmapError {
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] store::StoreError),
}

/// A request refused as a whole (§3.6.1), sent as
/// `application/problem+json`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The body is not I-JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// The body is JSON, but not a Request object.
    #[error("not a request: {0}")]
    NotRequest(String),
    /// `using` names a capability the server does not have.
    #[error("unknown capability {0}")]
    UnknownCapability(String),
    /// A limit of the session object was passed; the limit's name.
    #[error("limit {0} exceeded")]
    Limit(&'static str),
}

impl RequestError {
    /// The part of the type URI after `urn:ietf:params:jmap:error:`.
    pub fn type_suffix(&self) -> &'static str {
        match self {
            RequestError::NotJson(_) => "notJSON",
            RequestError::NotRequest(_) => "notRequest",
            RequestError::UnknownCapability(_) => "unknownCapability",
            RequestError::Limit(_) => "limit",
        }
    }

    /// The problem details object.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "type": format!("urn:ietf:params:jmap:error:{}", self.type_suffix()),
            "status": 400,
            "detail": self.to_string(),
        });
        if let RequestError::Limit(limit) = self {
            v["limit"] = (*limit).into();
        }
        v
    }
}

impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        problem(StatusCode::BAD_REQUEST, self.to_json())
    }
}

/// A problem details response (RFC 7807) with `status` set to `code`.
pub fn problem(code: StatusCode, mut body: Value) -> Response {
    body["status"] = code.as_u16().into();
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/problem+json")],
        body.to_string(),
    )
        .into_response()
}

/// A method call answered with an error (§3.6.2).
#[derive(Debug, Clone, PartialEq)]
pub struct MethodError {
    /// The error type: `unknownMethod`, `invalidArguments`, ...
    pub kind: &'static str,
    /// A description for the developer, when there is one.
    pub description: Option<String>,
    /// More properties the type carries (`properties` of some).
    pub extra: Map<String, Value>,
}

impl MethodError {
    fn of(kind: &'static str, description: Option<String>) -> MethodError {
        MethodError {
            kind,
            description,
            extra: Map::new(),
        }
    }

    /// `forbidden`: the call is not allowed (§3.6.2).
    pub fn forbidden(why: impl Into<String>) -> MethodError {
        MethodError::of("forbidden", Some(why.into()))
    }

    /// `unknownMethod`: no such method, or its capability is not in
    /// `using` (§3.6.2).
    pub fn unknown_method(name: &str) -> MethodError {
        MethodError::of("unknownMethod", Some(format!("no method {name}")))
    }

    /// `invalidArguments`.
    pub fn invalid_arguments(why: impl Into<String>) -> MethodError {
        MethodError::of("invalidArguments", Some(why.into()))
    }

    /// `invalidResultReference`.
    pub fn invalid_result_reference(why: impl Into<String>) -> MethodError {
        MethodError::of("invalidResultReference", Some(why.into()))
    }

    /// `accountNotFound`.
    pub fn account_not_found() -> MethodError {
        MethodError::of("accountNotFound", None)
    }

    /// `requestTooLarge`: more ids or objects than the limits allow
    /// (§5.1, §5.3).
    pub fn request_too_large(why: impl Into<String>) -> MethodError {
        MethodError::of("requestTooLarge", Some(why.into()))
    }

    /// `stateMismatch`: `ifInState` does not match (§5.3).
    pub fn state_mismatch() -> MethodError {
        MethodError::of("stateMismatch", None)
    }

    /// `cannotCalculateChanges` (§5.2).
    pub fn cannot_calculate_changes() -> MethodError {
        MethodError::of("cannotCalculateChanges", None)
    }

    /// `anchorNotFound` (§5.5).
    pub fn anchor_not_found() -> MethodError {
        MethodError::of("anchorNotFound", None)
    }

    /// `unsupportedFilter` (§5.5).
    pub fn unsupported_filter(why: impl Into<String>) -> MethodError {
        MethodError::of("unsupportedFilter", Some(why.into()))
    }

    /// `unsupportedSort` (§5.5).
    pub fn unsupported_sort(why: impl Into<String>) -> MethodError {
        MethodError::of("unsupportedSort", Some(why.into()))
    }

    /// `tooManyChanges` (§5.6).
    pub fn too_many_changes() -> MethodError {
        MethodError::of("tooManyChanges", None)
    }

    /// `fromAccountNotFound` (§5.4).
    pub fn from_account_not_found() -> MethodError {
        MethodError::of("fromAccountNotFound", None)
    }

    /// `serverFail`: something failed that the client cannot mend.
    pub fn server_fail(why: impl Into<String>) -> MethodError {
        MethodError::of("serverFail", Some(why.into()))
    }

    /// The `error` response's arguments.
    pub fn to_json(&self) -> Value {
        let mut v = self.extra.clone();
        v.insert("type".into(), self.kind.into());
        if let Some(d) = &self.description {
            v.insert("description".into(), d.clone().into());
        }
        Value::Object(v)
    }
}

impl From<JmapError> for MethodError {
    fn from(e: JmapError) -> MethodError {
        tracing::error!(error = %e, "JMAP method failed");
        MethodError::server_fail(e.to_string())
    }
}

impl From<store::StoreError> for MethodError {
    fn from(e: store::StoreError) -> MethodError {
        JmapError::Store(e).into()
    }
}

/// A SetError (§5.3): why one object of a /set or /copy was not created,
/// updated or destroyed.
#[derive(Debug, Clone, PartialEq)]
pub struct SetError {
    /// `invalidProperties`, `notFound`, `forbidden`, ...
    pub kind: &'static str,
    /// A description for the developer.
    pub description: Option<String>,
    /// `invalidProperties`: the properties at fault.
    pub properties: Vec<String>,
    /// More properties some types carry (`existingId` of `alreadyExists`).
    pub extra: Map<String, Value>,
}

impl SetError {
    /// A SetError of `kind` with a description.
    pub fn new(kind: &'static str, description: impl Into<String>) -> SetError {
        SetError {
            kind,
            description: Some(description.into()),
            properties: Vec::new(),
            extra: Map::new(),
        }
    }

    /// `invalidProperties` naming `properties`.
    pub fn invalid_properties(properties: &[&str], description: impl Into<String>) -> SetError {
        SetError {
            properties: properties.iter().map(|p| p.to_string()).collect(),
            ..SetError::new("invalidProperties", description)
        }
    }

    /// `notFound`.
    pub fn not_found() -> SetError {
        SetError::new("notFound", "no such object")
    }

    /// The SetError object.
    pub fn to_json(&self) -> Value {
        let mut v = self.extra.clone();
        v.insert("type".into(), self.kind.into());
        if let Some(d) = &self.description {
            v.insert("description".into(), d.clone().into());
        }
        if !self.properties.is_empty() {
            v.insert("properties".into(), json!(self.properties));
        }
        Value::Object(v)
    }
}

impl From<store::StoreError> for SetError {
    fn from(e: store::StoreError) -> SetError {
        match e {
            store::StoreError::NotFound(what) => SetError::new("notFound", what),
            store::StoreError::Invalid(why) => SetError::new("invalidProperties", why),
            store::StoreError::Exists(what) => SetError::new("alreadyExists", what),
            e => {
                tracing::error!(error = %e, "JMAP change failed");
                SetError::new("serverFail", e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_details_name_their_type_and_limit() {
        let v = RequestError::Limit("maxCallsInRequest").to_json();
        assert_eq!(v["type"], "urn:ietf:params:jmap:error:limit");
        assert_eq!(v["limit"], "maxCallsInRequest");
        assert_eq!(v["status"], 400);
        let v = RequestError::NotJson("x".into()).to_json();
        assert_eq!(v["type"], "urn:ietf:params:jmap:error:notJSON");
    }

    #[test]
    fn method_errors_are_typed_objects() {
        let v = MethodError::unknown_method("Foo/bar").to_json();
        assert_eq!(v["type"], "unknownMethod");
        assert!(v["description"].as_str().unwrap().contains("Foo/bar"));
        let v = SetError::invalid_properties(&["name"], "bad").to_json();
        assert_eq!(v["properties"][0], "name");
    }
}
