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

/// Where a /changes call starts. A state this server gives out is a
/// modseq; an intermediate one (a /changes answer cut short by
/// `maxChanges`, RFC 8620 §5.2) is `<seen>.<origin>`: the changes the
/// client was given so far are those since `origin` of records whose last
/// change is at or below `seen`. Its next call reads the changes since
/// `origin` again and leaves those out, so a record is told as created
/// (or, come and gone, not at all) exactly as one unbounded call from
/// `origin` would have told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Since {
    /// The state the walk began at: what `created` is relative to.
    pub origin: u64,
    /// The changes up to here were given already.
    pub seen: u64,
}

/// The [`Since`] of a `sinceState`; `None` for one this server never gave
/// (or gave for another time: from the future).
pub(crate) fn parse_since(s: &str, now: u64) -> Option<Since> {
    let since = match s.split_once('.') {
        None => {
            let n = parse_state(s)?;
            Since { origin: n, seen: n }
        }
        Some((seen, origin)) => Since {
            origin: parse_state(origin)?,
            seen: parse_state(seen)?,
        },
    };
    (since.origin <= since.seen && since.seen <= now).then_some(since)
}

/// A /changes call's `sinceState` and `maxChanges`; a state from the
/// future is one the server cannot calculate changes from.
pub(crate) fn changes_args(args: &Args, now: u64) -> Result<(Since, Option<usize>), MethodError> {
    let since = args
        .str("sinceState")?
        .ok_or_else(|| MethodError::invalid_arguments("sinceState is required"))?;
    let since = parse_since(since, now).ok_or_else(MethodError::cannot_calculate_changes)?;
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

/// What a change did to a record, for the /changes answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// Created since the state.
    Created,
    /// Changed since the state, and there before it.
    Updated,
    /// Gone since the state, and there before it.
    Destroyed,
}

/// The /changes response (§5.2): `changes` are the records changed since
/// `since.origin`, each with what happened to it and the modseq of its
/// last change; those at or below `since.seen` were given already. With
/// more than `maxChanges` left the answer stops at an intermediate state:
/// below the first modseq that would not fit. Every record whose last
/// change is at or below it is as it is now, so the answer is true of
/// that state; the others come in the next call, from it. A single modseq
/// that changed more records than `maxChanges` (one IMAP STORE over many
/// messages) cannot be split: then `cannotCalculateChanges`.
pub(crate) fn changes_response(
    account: &str,
    since: Since,
    now: u64,
    mut changes: Vec<(String, Change, u64)>,
    max: Option<usize>,
) -> Result<Value, MethodError> {
    changes.retain(|(_, _, at)| *at > since.seen);
    let mut new_state = state(now);
    let mut more = false;
    if let Some(max) = max.filter(|m| changes.len() > *m) {
        changes.sort_by_key(|(_, _, at)| *at);
        // The first record left out; everything at its modseq goes too.
        let cut = changes[max].2 - 1;
        if cut <= since.seen {
            return Err(MethodError::cannot_calculate_changes());
        }
        changes.retain(|(_, _, at)| *at <= cut);
        new_state = format!("{cut}.{}", since.origin);
        more = true;
    }
    let of = |kind: Change| -> Vec<&str> {
        changes
            .iter()
            .filter(|(_, k, _)| *k == kind)
            .map(|(id, _, _)| id.as_str())
            .collect()
    };
    let old_state = if since.seen == since.origin {
        state(since.seen)
    } else {
        format!("{}.{}", since.seen, since.origin)
    };
    Ok(json!({
        "accountId": account,
        "oldState": old_state,
        "newState": new_state,
        "hasMoreChanges": more,
        "created": of(Change::Created),
        "updated": of(Change::Updated),
        "destroyed": of(Change::Destroyed),
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
        assert_eq!(parse_since("5", 9), Some(Since { origin: 5, seen: 5 }));
        assert_eq!(parse_since("7.3", 9), Some(Since { origin: 3, seen: 7 }));
        for bad in ["10", "3.7", "10.3", "7.", ".3", "7.3.1", "7.x"] {
            assert_eq!(parse_since(bad, 9), None, "{bad}");
        }
    }

    fn ids(v: &Value) -> Vec<&str> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_str().unwrap())
            .collect()
    }

    #[test]
    fn max_changes_stops_at_an_intermediate_state() {
        let changes = vec![
            ("E3".to_string(), Change::Updated, 7),
            ("E1".to_string(), Change::Created, 3),
            ("E2".to_string(), Change::Destroyed, 5),
            ("E4".to_string(), Change::Created, 7),
        ];
        let from = Since { origin: 2, seen: 2 };
        let all = changes_response("A1", from, 9, changes.clone(), None).unwrap();
        assert_eq!(all["newState"], "9");
        assert_eq!(all["hasMoreChanges"], false);
        let r = changes_response("A1", from, 9, changes.clone(), Some(2)).unwrap();
        assert_eq!(r["newState"], "6.2");
        assert_eq!(r["hasMoreChanges"], true);
        assert_eq!(ids(&r["created"]), ["E1"]);
        assert_eq!(ids(&r["destroyed"]), ["E2"]);
        // Two records share modseq 7: with room for three, the cut is
        // below them both.
        let r = changes_response("A1", from, 9, changes.clone(), Some(3)).unwrap();
        assert_eq!(r["newState"], "6.2");
        // From there, what is left.
        let next = parse_since("6.2", 9).unwrap();
        let r = changes_response("A1", next, 9, changes.clone(), Some(3)).unwrap();
        assert_eq!(r["oldState"], "6.2");
        assert_eq!(r["newState"], "9");
        assert_eq!(ids(&r["created"]), ["E4"]);
        assert_eq!(ids(&r["updated"]), ["E3"]);
        assert!(ids(&r["destroyed"]).is_empty());
        let r = changes_response("A1", from, 9, changes.clone(), Some(4)).unwrap();
        assert_eq!(r["newState"], "9");
        assert_eq!(r["hasMoreChanges"], false);
        // One modseq with more records than maxChanges cannot be split.
        let same = vec![
            ("E1".to_string(), Change::Created, 3),
            ("E2".to_string(), Change::Created, 3),
        ];
        assert!(changes_response("A1", from, 9, same, Some(1)).is_err());
    }
}
