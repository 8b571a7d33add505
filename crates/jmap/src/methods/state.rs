//! State strings (RFC 8620 §5.1) and the /changes answer (§5.2). A state
//! is the account's modification sequence, the number every change to
//! its mailboxes and messages takes, whatever protocol made it (IMAP
//! STORE, EXPUNGE, APPEND, SMTP delivery, JMAP): one state for Mailbox,
//! Email and Thread alike, so a change over IMAP shows in JMAP's /changes
//! and the reverse.

use serde_json::{json, Value};

use super::args::Args;
use crate::error::MethodError;

/// The state string of a modseq.
pub(crate) fn state(modseq: u64) -> String {
    modseq.to_string()
}

/// The modseq of a state string; `None` for one this server never gave.
pub(crate) fn parse_state(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    s.parse().ok()
}

/// A /changes call's `sinceState` and `maxChanges`; a state from the
/// future is one the server cannot calculate changes from.
pub(crate) fn changes_args(args: &Args, now: u64) -> Result<(u64, Option<usize>), MethodError> {
    let since = args
        .str("sinceState")?
        .ok_or_else(|| MethodError::invalid_arguments("sinceState is required"))?;
    let since = parse_state(since)
        .filter(|s| *s <= now)
        .ok_or_else(MethodError::cannot_calculate_changes)?;
    let max = match args.uint("maxChanges")? {
        Some(0) => {
            return Err(MethodError::invalid_arguments(
                "maxChanges must be positive",
            ))
        }
        Some(n) => Some(n as usize),
        None => None,
    };
    Ok((since, max))
}

/// The /changes response (§5.2), every change since the state in one
/// answer. With more than `maxChanges` of them the client is told to
/// start over (`cannotCalculateChanges`) rather than given an
/// intermediate state: changes are not kept per state in between.
pub(crate) fn changes_response(
    account: &str,
    since: u64,
    now: u64,
    created: Vec<String>,
    updated: Vec<String>,
    destroyed: Vec<String>,
    max: Option<usize>,
) -> Result<Value, MethodError> {
    let total = created.len() + updated.len() + destroyed.len();
    if max.is_some_and(|m| total > m) {
        return Err(MethodError::cannot_calculate_changes());
    }
    Ok(json!({
        "accountId": account,
        "oldState": state(since),
        "newState": state(now),
        "hasMoreChanges": false,
        "created": created,
        "updated": updated,
        "destroyed": destroyed,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_strangers_are_refused() {
        assert_eq!(parse_state(&state(42)), Some(42));
        for bad in ["", "x", "01", "-1", "99999999999999999999"] {
            assert_eq!(parse_state(bad), None, "{bad}");
        }
        let r = changes_response("A1", 1, 2, vec!["E1".into()], vec![], vec![], Some(1)).unwrap();
        assert_eq!(r["newState"], "2");
        assert!(changes_response(
            "A1",
            1,
            2,
            vec!["E1".into(), "E2".into()],
            vec![],
            vec![],
            Some(1)
        )
        .is_err());
    }
}
