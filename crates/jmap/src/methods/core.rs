//! `urn:ietf:params:jmap:core` methods (RFC 8620).

use serde_json::{Map, Value};

use super::Answer;
use crate::api::Call;

/// Core/echo (§4): the arguments, returned as they came.
pub(super) fn echo(_call: &mut Call<'_>, args: Map<String, Value>) -> Answer {
    Ok(vec![("Core/echo".into(), Value::Object(args))])
}
