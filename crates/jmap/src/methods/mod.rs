//! The methods, one module per data type, and the table that routes a
//! call to its method.

use serde_json::{Map, Value};

use crate::api::Call;
use crate::error::MethodError;
use crate::{CORE, MAIL, QUOTA, SUBMISSION, VACATION};

pub(crate) mod args;
mod copy;
mod core;
mod email;
mod email_create;
mod email_query;
mod email_set;
mod identity;
mod mailbox;
mod push_subscription;
pub(crate) mod query;
mod quota;
pub(crate) mod records;
mod snippet;
pub(crate) mod state;
mod submission;
mod thread;
pub(crate) mod vacation;

/// What a method answers: one response or more (name and arguments).
pub(crate) type Answer = Result<Vec<(String, Value)>, MethodError>;

/// The methods of a capability. Only methods served in full are here.
pub(crate) fn names(capability: &str) -> &'static [&'static str] {
    match capability {
        CORE => &[
            "Core/echo",
            "Blob/copy",
            "PushSubscription/get",
            "PushSubscription/set",
        ],
        MAIL => &[
            "Mailbox/get",
            "Mailbox/changes",
            "Mailbox/query",
            "Mailbox/queryChanges",
            "Mailbox/set",
            "Thread/get",
            "Thread/changes",
            "Email/get",
            "Email/changes",
            "Email/query",
            "Email/queryChanges",
            "Email/set",
            "Email/import",
            "Email/parse",
            "Email/copy",
            "SearchSnippet/get",
        ],
        QUOTA => &["Quota/get", "Quota/changes", "Quota/query"],
        SUBMISSION => &[
            "Identity/get",
            "Identity/changes",
            "Identity/set",
            "EmailSubmission/get",
            "EmailSubmission/changes",
            "EmailSubmission/query",
            "EmailSubmission/queryChanges",
            "EmailSubmission/set",
        ],
        VACATION => &["VacationResponse/get", "VacationResponse/set"],
        _ => &[],
    }
}

/// Runs the method `name` (one of [`names`]).
pub(crate) async fn dispatch(name: &str, call: &mut Call<'_>, args: Map<String, Value>) -> Answer {
    let args = args::Args(args);
    match name {
        "Core/echo" => core::echo(call, args.0),
        "Blob/copy" => copy::blob_copy(call, args).await,
        "PushSubscription/get" => push_subscription::get(call, args).await,
        "PushSubscription/set" => push_subscription::set(call, args).await,
        "Email/copy" => copy::email_copy(call, args).await,
        "Mailbox/get" => mailbox::get(call, args).await,
        "Mailbox/changes" => mailbox::changes(call, args).await,
        "Mailbox/query" => mailbox::query(call, args).await,
        "Mailbox/queryChanges" => mailbox::query_changes(call, args).await,
        "Mailbox/set" => mailbox::set(call, args).await,
        "Thread/get" => thread::get(call, args).await,
        "Thread/changes" => thread::changes(call, args).await,
        "Email/get" => email::get(call, args).await,
        "Email/changes" => email::changes(call, args).await,
        "Email/query" => email_query::query(call, args).await,
        "Email/queryChanges" => email_query::query_changes(call, args).await,
        "Email/set" => email_set::set(call, args).await,
        "Email/import" => email_set::import(call, args).await,
        "SearchSnippet/get" => snippet::get(call, args).await,
        "Email/parse" => email::parse(call, args).await,
        "Quota/get" => quota::get(call, args).await,
        "Quota/changes" => quota::changes(call, args).await,
        "Quota/query" => quota::query(call, args).await,
        "Identity/get" => identity::get(call, args).await,
        "Identity/changes" => identity::changes(call, args).await,
        "Identity/set" => identity::set(call, args).await,
        "EmailSubmission/get" => submission::get(call, args).await,
        "EmailSubmission/changes" => submission::changes(call, args).await,
        "EmailSubmission/query" => submission::query(call, args).await,
        "EmailSubmission/queryChanges" => submission::query_changes(call, args).await,
        "EmailSubmission/set" => submission::set(call, args).await,
        "VacationResponse/get" => vacation::get(call, args).await,
        "VacationResponse/set" => vacation::set(call, args).await,
        _ => Err(MethodError::unknown_method(name)),
    }
}
