//! System flags as the store's bits, keywords as atoms (RFC 3501 §2.3.2).

use std::collections::BTreeSet;

use imap_codec::imap_types::core::Atom;
use imap_codec::imap_types::flag::{Flag, FlagFetch, FlagPerm};
use store::{MessageEntry, FLAG_ANSWERED, FLAG_DELETED, FLAG_DRAFT, FLAG_FLAGGED, FLAG_SEEN};

const SYSTEM: [(u32, Flag<'static>); 5] = [
    (FLAG_ANSWERED, Flag::Answered),
    (FLAG_FLAGGED, Flag::Flagged),
    (FLAG_DELETED, Flag::Deleted),
    (FLAG_SEEN, Flag::Seen),
    (FLAG_DRAFT, Flag::Draft),
];

/// Flags from a command as bits and keywords. `\Recent` and unknown
/// system-like flags (`\Foo`) cannot be stored: `Err` names the first.
pub(crate) fn from_command(flags: &[Flag<'_>]) -> Result<(u32, Vec<String>), String> {
    let mut bits = 0;
    let mut keywords: Vec<String> = Vec::new();
    for f in flags {
        match f {
            Flag::Answered => bits |= FLAG_ANSWERED,
            Flag::Flagged => bits |= FLAG_FLAGGED,
            Flag::Deleted => bits |= FLAG_DELETED,
            Flag::Seen => bits |= FLAG_SEEN,
            Flag::Draft => bits |= FLAG_DRAFT,
            Flag::Keyword(k) => {
                if !keywords.iter().any(|x| x.eq_ignore_ascii_case(k.inner())) {
                    keywords.push(k.inner().to_string());
                }
            }
            Flag::Extension(_) => return Err(f.to_string()),
        }
    }
    Ok((bits, keywords))
}

fn keyword(k: &str) -> Option<Flag<'static>> {
    Atom::try_from(k.to_string()).ok().map(Flag::Keyword)
}

/// A message's flags for FETCH FLAGS.
pub(crate) fn flag_list(entry: &MessageEntry) -> Vec<FlagFetch<'static>> {
    SYSTEM
        .iter()
        .filter(|(bit, _)| entry.flags & bit != 0)
        .map(|(_, f)| FlagFetch::Flag(f.clone()))
        .chain(
            entry
                .keywords
                .iter()
                .filter_map(|k| keyword(k))
                .map(FlagFetch::Flag),
        )
        .collect()
}

/// The FLAGS response of a mailbox: system flags and known keywords.
pub(crate) fn mailbox_flags(keywords: &BTreeSet<String>) -> Vec<Flag<'static>> {
    SYSTEM
        .iter()
        .map(|(_, f)| f.clone())
        .chain(keywords.iter().filter_map(|k| keyword(k)))
        .collect()
}

/// PERMANENTFLAGS: every flag, and `\*` (new keywords may be created).
pub(crate) fn permanent_flags(keywords: &BTreeSet<String>) -> Vec<FlagPerm<'static>> {
    mailbox_flags(keywords)
        .into_iter()
        .map(FlagPerm::Flag)
        .chain(std::iter::once(FlagPerm::Asterisk))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_flags() {
        let flags = vec![
            Flag::Seen,
            Flag::Keyword(Atom::try_from("$Junk").unwrap()),
            Flag::Keyword(Atom::try_from("$junk").unwrap()),
            Flag::Deleted,
        ];
        assert_eq!(
            from_command(&flags),
            Ok((FLAG_SEEN | FLAG_DELETED, vec!["$Junk".to_string()]))
        );
        let recent = Flag::system(Atom::try_from("Recent").unwrap());
        assert_eq!(from_command(&[recent]), Err("\\Recent".into()));
    }
}
