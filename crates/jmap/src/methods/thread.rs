//! Thread/get and Thread/changes (RFC 8621 §3): a thread is the emails
//! the store filed together when each came to the account.

use serde_json::json;

use super::args::Args;
use super::state::{changes_args, changes_response, state, Change};
use super::Answer;
use crate::api::Call;
use crate::error::MethodError;
use crate::ids;

/// Thread/get (§3.1): each thread's emails, oldest first.
pub(super) async fn get(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "ids", "properties"])?;
    if let Some(p) = args.strings("properties")? {
        if let Some(bad) = p.iter().find(|p| *p != "id" && *p != "emailIds") {
            return Err(MethodError::invalid_arguments(format!(
                "unknown property {bad}"
            )));
        }
    }
    let store = &call.jmap.ctx.store;
    let account = call.user.account;
    let modseq = store.account_modseq(account).await?;
    let Some(wanted) = args.strings("ids")? else {
        // §3.1: there are too many threads to list them all.
        return Err(MethodError::request_too_large("Thread/get needs ids"));
    };
    if wanted.len() > call.jmap.ctx.config.max_objects_in_get {
        return Err(MethodError::request_too_large(
            "more ids than maxObjectsInGet",
        ));
    }
    let keys: Vec<i64> = wanted
        .iter()
        .filter_map(|id| ids::parse_thread(id))
        .collect();
    let found = store.thread_emails(account, &keys).await?;
    let mut list = Vec::new();
    let mut not_found = Vec::new();
    for id in wanted {
        match ids::parse_thread(&id).and_then(|k| found.iter().find(|(t, _)| *t == k)) {
            Some((t, blobs)) => list.push(json!({
                "id": ids::thread(*t),
                "emailIds": blobs.iter().map(|b| ids::email(*b)).collect::<Vec<_>>(),
            })),
            None => not_found.push(id),
        }
    }
    Ok(vec![(
        "Thread/get".into(),
        json!({
            "accountId": ids::account(account),
            "state": state(modseq),
            "list": list,
            "notFound": not_found,
        }),
    )])
}

/// Thread/changes (§3.2): threads an email joined or left.
pub(super) async fn changes(call: &mut Call<'_>, args: Args) -> Answer {
    call.account(&args.0)?;
    args.only(&["accountId", "sinceState", "maxChanges"])?;
    let store = &call.jmap.ctx.store;
    let now = store.account_modseq(call.user.account).await?;
    let (from, max) = changes_args(&args, now)?;
    let since = from.origin;
    let c = store.account_changes(call.user.account, since).await?;
    let at: std::collections::HashMap<i64, u64> = c.thread_modseqs.iter().copied().collect();
    let mut changes = Vec::new();
    for (t, was, is) in &c.threads {
        let kind = match (was, is) {
            (false, true) => Change::Created,
            (true, true) => Change::Updated,
            (true, false) => Change::Destroyed,
            (false, false) => continue,
        };
        changes.push((
            ids::thread(*t),
            kind,
            at.get(t).copied().unwrap_or(c.modseq),
        ));
    }
    let response = changes_response(
        &ids::account(call.user.account),
        from,
        c.modseq,
        changes,
        max,
    )?;
    Ok(vec![("Thread/changes".into(), response)])
}
