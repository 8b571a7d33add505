//! What a user's copies and moves teach the spam classifier. Both back
//! ends apply this rule to the rows a copy or move made, queueing each
//! new message for training in the class it returns.

/// The special use that marks the mailbox of spam (RFC 6154 §2).
const JUNK: &str = "\\Junk";
/// The special use of the wastebasket (RFC 6154 §2).
const TRASH: &str = "\\Trash";

/// The class to train messages copied or moved from a mailbox with
/// special use `from_use` to one with `to_use` as: `Some(true)` for spam,
/// `Some(false)` for ham, `None` for nothing to learn.
///
/// Into Junk is spam; out of Junk to anywhere but Trash is ham (to Trash
/// is throwing away, which says nothing); any other copy or move, Junk to
/// Junk included, says nothing either.
pub(crate) fn class_for_move(from_use: Option<&str>, to_use: Option<&str>) -> Option<bool> {
    match (from_use == Some(JUNK), to_use == Some(JUNK)) {
        (false, true) => Some(true),
        (true, false) if to_use != Some(TRASH) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn into_junk_is_spam_out_of_it_ham() {
        for from in [None, Some("\\Sent"), Some(TRASH), Some("\\Archive")] {
            assert_eq!(class_for_move(from, Some(JUNK)), Some(true), "{from:?}");
        }
        for to in [None, Some("\\Archive"), Some("\\Sent"), Some("\\Flagged")] {
            assert_eq!(class_for_move(Some(JUNK), to), Some(false), "{to:?}");
        }
    }

    #[test]
    fn the_rest_says_nothing() {
        assert_eq!(class_for_move(Some(JUNK), Some(TRASH)), None);
        assert_eq!(class_for_move(Some(JUNK), Some(JUNK)), None);
        assert_eq!(class_for_move(None, None), None);
        assert_eq!(class_for_move(None, Some(TRASH)), None);
        assert_eq!(class_for_move(Some(TRASH), None), None);
        // Special uses are stored in one spelling (mailbox_names.rs), so
        // the rule compares exactly.
        assert_eq!(class_for_move(None, Some("\\junk")), None);
    }
}
