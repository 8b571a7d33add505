//! The window of a /query's results (RFC 8620 §5.5): `position`, or
//! `anchor` with `anchorOffset`, and `limit`.

use super::args::Args;
use crate::error::MethodError;

/// Most ids one /query answers, whatever `limit` asks (§5.5 lets the
/// server cap it, and says so in the response's `limit`).
pub(crate) const MAX_LIMIT: usize = 1000;

/// Which results a /query returns.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Window {
    /// The `position` the response reports.
    pub position: usize,
    /// The results sent: `ids[start..end]`.
    pub start: usize,
    pub end: usize,
    /// The limit used, when the server lowered the one asked for.
    pub limit: Option<usize>,
}

/// The window over `ids`, the whole sorted result.
pub(crate) fn window(args: &Args, ids: &[String]) -> Result<Window, MethodError> {
    let total = ids.len();
    let asked = args.uint("limit")?.map(|n| n as usize);
    let limit = asked.unwrap_or(MAX_LIMIT).min(MAX_LIMIT);
    let start = match args.str("anchor")? {
        Some(anchor) => {
            let at = ids
                .iter()
                .position(|id| id == anchor)
                .ok_or_else(MethodError::anchor_not_found)?;
            let offset = args.int("anchorOffset")?.unwrap_or(0);
            (at as i64 + offset).clamp(0, total as i64) as usize
        }
        None => {
            let position = args.int("position")?.unwrap_or(0);
            if position < 0 {
                (total as i64 + position).max(0) as usize
            } else {
                (position as usize).min(total)
            }
        }
    };
    let end = (start + limit).min(total);
    Ok(Window {
        position: start,
        start,
        end,
        limit: (asked.is_none_or(|a| a > MAX_LIMIT) && total - start > MAX_LIMIT)
            .then_some(MAX_LIMIT),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn w(args: serde_json::Value, n: usize) -> Result<Window, MethodError> {
        let ids: Vec<String> = (0..n).map(|i| format!("E{i}")).collect();
        window(&Args(args.as_object().unwrap().clone()), &ids)
    }

    #[test]
    fn positions_anchors_and_limits() {
        let r = w(json!({"position": 2, "limit": 2}), 5).unwrap();
        assert_eq!((r.start, r.end, r.position), (2, 4, 2));
        let r = w(json!({"position": -2}), 5).unwrap();
        assert_eq!((r.start, r.end), (3, 5));
        let r = w(json!({"position": -9}), 5).unwrap();
        assert_eq!(r.start, 0);
        let r = w(json!({"position": 9}), 5).unwrap();
        assert_eq!((r.start, r.end), (5, 5));
        let r = w(json!({"anchor": "E3", "anchorOffset": -1, "limit": 10}), 5).unwrap();
        assert_eq!((r.start, r.end), (2, 5));
        let r = w(json!({"anchor": "E0", "anchorOffset": -3}), 5).unwrap();
        assert_eq!(r.start, 0);
        assert_eq!(
            w(json!({"anchor": "E9"}), 5).unwrap_err().kind,
            "anchorNotFound"
        );
        assert_eq!(
            w(json!({"limit": -1}), 5).unwrap_err().kind,
            "invalidArguments"
        );
        let r = w(json!({}), 1500).unwrap();
        assert_eq!((r.end, r.limit), (1000, Some(1000)));
    }
}
