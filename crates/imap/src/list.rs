//! LIST and LSUB: name patterns (RFC 3501 §6.3.8), mailbox attributes
//! (RFC 3348 CHILDREN, RFC 6154 SPECIAL-USE) and the extended LIST
//! (RFC 5258 LIST-EXTENDED, RFC 5819 LIST-STATUS).

use imap_codec::encode::Encoder;
use imap_codec::imap_types::flag::FlagNameAttribute;
use imap_codec::imap_types::mailbox::Mailbox;
use imap_codec::imap_types::response::{Data, Response};
use imap_codec::ResponseCodec;
use store::MailboxInfo;

use crate::commands::quoted_delimiter;
use crate::out::Out;
use crate::preparse::ExtendedList;
use crate::reply::Reply;
use crate::session::Session;

/// The hierarchy separator.
pub(crate) const DELIMITER: char = '/';

/// Whether `name` matches a LIST pattern: `*` matches anything, `%`
/// anything but the hierarchy separator. INBOX matches case-insensitively.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match p.split_first() {
            None => n.is_empty(),
            Some(('*', rest)) => (0..=n.len()).any(|i| go(rest, &n[i..])),
            Some(('%', rest)) => (0..=n.len())
                .take_while(|&i| i == 0 || n[i - 1] != DELIMITER)
                .any(|i| go(rest, &n[i..])),
            Some((c, rest)) => n.first() == Some(c) && go(rest, &n[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    if go(&p, &n) {
        return true;
    }
    // INBOX is case-insensitive (RFC 3501 §5.1), also in patterns.
    if name == "INBOX" || name.starts_with("INBOX/") {
        let upper: String = pattern
            .char_indices()
            .map(|(i, c)| if i < 5 { c.to_ascii_uppercase() } else { c })
            .collect();
        let p: Vec<char> = upper.chars().collect();
        return go(&p, &n);
    }
    false
}

/// The pattern a LIST reference and mailbox argument make together.
pub(crate) fn combine(reference: &str, pattern: &str) -> String {
    if reference.is_empty() || pattern.starts_with(DELIMITER) {
        pattern.to_string()
    } else if reference.ends_with(DELIMITER) {
        format!("{reference}{pattern}")
    } else {
        format!("{reference}{DELIMITER}{pattern}")
    }
}

fn attr(name: &str) -> Option<FlagNameAttribute<'static>> {
    // The attribute is an atom after the backslash.
    imap_codec::imap_types::core::Atom::try_from(name.to_string())
        .ok()
        .map(FlagNameAttribute::from)
}

/// Attributes of a mailbox among the account's mailboxes.
pub(crate) fn attributes(
    mailbox: &MailboxInfo,
    all: &[MailboxInfo],
) -> Vec<FlagNameAttribute<'static>> {
    let prefix = format!("{}{DELIMITER}", mailbox.name);
    let children = all.iter().any(|m| m.name.starts_with(&prefix));
    let mut out: Vec<FlagNameAttribute<'static>> = Vec::new();
    out.extend(attr(if children {
        "HasChildren"
    } else {
        "HasNoChildren"
    }));
    if let Some(special) = &mailbox.special_use {
        out.extend(attr(special.trim_start_matches('\\')));
    }
    out
}

/// Writes one LIST response, with CHILDINFO extended data (RFC 5258
/// §3.5) when `childinfo` is set: imap-codec's LIST has no extended data.
fn write_list(
    out: &mut Out,
    items: Vec<FlagNameAttribute<'static>>,
    mailbox: imap_codec::imap_types::mailbox::Mailbox<'static>,
    childinfo: bool,
) {
    let data = Data::List {
        items,
        delimiter: Some(quoted_delimiter()),
        mailbox,
    };
    if !childinfo {
        out.data(data);
        return;
    }
    let mut line = ResponseCodec::default()
        .encode(&Response::Data(data))
        .dump();
    line.truncate(line.len() - 2);
    line.extend_from_slice(b" (\"CHILDINFO\" (\"SUBSCRIBED\"))\r\n");
    out.raw(&line);
}

impl Session<'_> {
    /// LIST with RFC 5258 selection and return options, several patterns
    /// and RFC 5819 STATUS. `\HasChildren`/`\HasNoChildren` and special
    /// uses are always given, as for a plain LIST (RFC 5258 §4 and RFC
    /// 6154 allow it); `\Subscribed` when asked for. RECURSIVEMATCH
    /// applies to SUBSCRIBED (the one selection option whose matches
    /// CHILDINFO can name). Every mailbox is selectable and has its
    /// parents; `\NonExistent` marks a subscription whose mailbox is gone.
    pub(crate) async fn list_extended(&mut self, list: ExtendedList) -> store::Result<Reply> {
        if let Some(items) = &list.returns.status {
            if let Some(reply) = self.refuse_status_items(items) {
                return Ok(reply);
            }
        }
        let reference = String::from_utf8_lossy(&list.reference).into_owned();
        let patterns: Vec<String> = list
            .patterns
            .iter()
            .map(|p| combine(&reference, &String::from_utf8_lossy(p)))
            .collect();
        if patterns.iter().all(String::is_empty) {
            // RFC 3501 §6.3.8: the hierarchy delimiter and root.
            self.out.data(Data::List {
                items: vec![FlagNameAttribute::Noselect],
                delimiter: Some(quoted_delimiter()),
                mailbox: Mailbox::try_from("").unwrap_or(Mailbox::Inbox),
            });
            return Ok(Reply::ok("LIST completed"));
        }
        let sel = &list.selection;
        let meets = |m: &MailboxInfo| {
            (!sel.subscribed || m.subscribed) && (!sel.special_use || m.special_use.is_some())
        };
        let all = self.ctx.store.list_mailboxes(self.account_id()).await?;
        let lost = if sel.subscribed {
            self.ctx.store.lost_subscriptions(self.account_id()).await?
        } else {
            Vec::new()
        };
        let listed = |name: &str, me: &Self| {
            let shown = me.shown_name(name);
            patterns.iter().any(|p| matches(p, &shown))
        };
        for m in &all {
            if !listed(&m.name, self) {
                continue;
            }
            let prefix = format!("{}{DELIMITER}", m.name);
            let childinfo = sel.recursive_match && sel.subscribed && {
                // RFC 5258 §4: a mailbox that does not meet the selection
                // is returned for its children only when one of them is
                // not returned itself; one that meets it may say so too.
                let mut subscribed_children = all
                    .iter()
                    .filter(|c| c.name.starts_with(&prefix) && meets(c))
                    .map(|c| c.name.as_str())
                    .chain(
                        lost.iter()
                            .map(String::as_str)
                            .filter(|n| n.starts_with(&prefix)),
                    );
                if meets(m) {
                    subscribed_children.next().is_some()
                } else {
                    subscribed_children.any(|c| !listed(c, self))
                }
            };
            if !meets(m) && !childinfo {
                continue;
            }
            let mut items = attributes(m, &all);
            if m.subscribed && (sel.subscribed || list.returns.subscribed) {
                items.extend(attr("Subscribed"));
            }
            let mailbox = self.wire_mailbox(&m.name);
            write_list(&mut self.out, items, mailbox, childinfo);
            // RFC 5819 §2: STATUS right after the LIST of each selectable
            // mailbox listed (the ones only there for CHILDINFO too).
            if let Some(items) = &list.returns.status {
                self.status_data(m, items, list.returns.mailbox_id).await?;
            }
        }
        // Subscriptions whose mailbox is gone (RFC 5258 §3.1).
        for name in &lost {
            if listed(name, self) {
                let items = [attr("Subscribed"), attr("NonExistent")]
                    .into_iter()
                    .flatten()
                    .collect();
                let mailbox = self.wire_mailbox(name);
                write_list(&mut self.out, items, mailbox, false);
            }
        }
        Ok(Reply::ok("LIST completed"))
    }
}

/// Parents a name implies (`a/b/c` → `a`, `a/b`).
pub(crate) fn parents(name: &str) -> Vec<String> {
    name.match_indices(DELIMITER)
        .map(|(i, _)| name[..i].to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(matches("*", "a/b/c"));
        assert!(matches("%", "INBOX"));
        assert!(!matches("%", "a/b"));
        assert!(matches("a/%", "a/b"));
        assert!(!matches("a/%", "a/b/c"));
        assert!(matches("a/*", "a/b/c"));
        assert!(matches("inbox", "INBOX"));
        assert!(matches("Inbox/%", "INBOX/x"));
        assert!(!matches("sent", "Sent"));
        assert!(matches("S%t", "Sent"));
        assert!(matches("", "") && !matches("", "INBOX"));
    }

    #[test]
    fn references() {
        assert_eq!(combine("", "*"), "*");
        assert_eq!(combine("a", "*"), "a/*");
        assert_eq!(combine("a/", "%"), "a/%");
    }

    #[test]
    fn implied_parents() {
        assert_eq!(parents("a/b/c"), vec!["a", "a/b"]);
        assert!(parents("a").is_empty());
    }
}
