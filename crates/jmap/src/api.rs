//! The API endpoint (RFC 8620 §3): one POST carries a request of method
//! calls, processed in order; each call's arguments may refer to earlier
//! results (§3.7) and to objects created earlier in the request (§3.3
//! `createdIds`, §5.3).

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::auth::User;
use crate::error::{MethodError, RequestError};
use crate::request::{self, Request};
use crate::{ids, Jmap, CAPABILITIES};

/// What a method sees of the request it is part of.
pub(crate) struct Call<'a> {
    /// The server.
    pub jmap: &'a Jmap,
    /// Who is asking.
    pub user: &'a User,
    /// Creation ids known so far in this request (§3.3), creation id to
    /// server id; methods that create add theirs.
    pub created: &'a mut HashMap<String, String>,
}

impl Call<'_> {
    /// Checks the `accountId` argument names the user's account (the only
    /// one the session offers).
    pub fn account(&self, args: &Map<String, Value>) -> Result<(), MethodError> {
        match args.get("accountId") {
            Some(Value::String(id)) if ids::parse_account(id) == Some(self.user.account) => Ok(()),
            Some(Value::String(_)) => Err(MethodError::account_not_found()),
            _ => Err(MethodError::invalid_arguments("accountId is required")),
        }
    }

    /// An id as given, or the server id of an object created earlier in
    /// the request when it is `#creationId` (§5.3); `None` for a creation
    /// id nothing was created under.
    pub fn resolve_id(&self, id: &str) -> Option<String> {
        match id.strip_prefix('#') {
            Some(creation) => self.created.get(creation).cloned(),
            None => Some(id.to_string()),
        }
    }
}

/// The method names this server answers, with the capability each
/// belongs to. A name not here, or whose capability is not in `using`,
/// gets `unknownMethod` (§3.6.2).
fn capability_of(name: &str) -> Option<&'static str> {
    CAPABILITIES
        .iter()
        .map(|(uri, ..)| *uri)
        .find(|uri| crate::methods::names(uri).contains(&name))
}

impl Jmap {
    /// Answers an API request's body: the response object, or the
    /// request-level error.
    pub(crate) async fn api(&self, user: &User, body: &[u8]) -> Result<Value, RequestError> {
        // The WebSocket capability has no methods, but a client may name it.
        let mut known: Vec<&str> = CAPABILITIES.iter().map(|(uri, ..)| *uri).collect();
        known.push(crate::ws::WEBSOCKET);
        let Request {
            using,
            method_calls,
            created_ids,
        } = request::parse(body, &known, self.ctx.config.max_calls_in_request)?;
        let echo_created = created_ids.is_some();
        let mut created = created_ids.unwrap_or_default();
        let mut responses: Vec<(String, Value, String)> = Vec::new();
        for call in method_calls {
            let mut args = call.arguments;
            let answer = match capability_of(&call.name) {
                Some(cap) if using.iter().any(|u| u == cap) => {
                    match crate::reference::resolve(&mut args, &responses) {
                        Err(e) => Err(e),
                        Ok(()) => {
                            let mut ctx = Call {
                                jmap: self,
                                user,
                                created: &mut created,
                            };
                            crate::methods::dispatch(&call.name, &mut ctx, args).await
                        }
                    }
                }
                _ => Err(MethodError::unknown_method(&call.name)),
            };
            match answer {
                Ok(answers) => {
                    for (name, value) in answers {
                        responses.push((name, value, call.call_id.clone()));
                    }
                }
                Err(e) => responses.push(("error".into(), e.to_json(), call.call_id.clone())),
            }
        }
        let state = self.session_state_of(user);
        Ok(request::response(
            responses,
            echo_created.then_some(&created),
            &state,
        ))
    }
}
