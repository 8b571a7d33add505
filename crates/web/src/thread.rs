//! The conversation a message belongs to: messages linked to it through
//! `Message-ID`, `References` and `In-Reply-To` (RFC 5322 §3.6.4), found in
//! every folder but Trash and Junk, so the user's own replies in Sent
//! are part of it.

use store::{MailboxId, MailboxInfo, MessageData, SearchKey};

use crate::error::WebError;
use crate::pages::ThreadItem;
use crate::routes::{self, App};

/// Message ids of a thread looked for at most (the newest references).
const MAX_IDS: usize = 15;

/// The `<...>` ids in a header value.
pub(crate) fn message_ids(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find('<') {
        let Some(len) = rest[start..].find('>') else {
            break;
        };
        let id = &rest[start..start + len + 1];
        if id.len() > 2 && id.len() < 1000 && !id[1..id.len() - 1].contains(['<', ' ']) {
            out.push(id.to_string());
        }
        rest = &rest[start + len + 1..];
    }
    out
}

/// Any of the keys, as a balanced tree (the store bounds nesting).
fn any(mut keys: Vec<SearchKey>) -> SearchKey {
    match keys.len() {
        0 => SearchKey::Not(Box::new(SearchKey::All)),
        1 => keys.pop().unwrap_or(SearchKey::All),
        n => {
            let right = keys.split_off(n / 2);
            SearchKey::Or(Box::new(any(keys)), Box::new(any(right)))
        }
    }
}

/// The ids that tie a message to its thread.
fn thread_ids(data: &MessageData) -> Vec<String> {
    let mut ids = message_ids(&routes::header_field(&data.header, "references"));
    ids.extend(message_ids(&routes::header_field(
        &data.header,
        "in-reply-to",
    )));
    if !data.headers.message_id.is_empty() {
        ids.push(format!("<{}>", data.headers.message_id));
    }
    let mut seen = std::collections::HashSet::new();
    ids.retain(|i| seen.insert(i.clone()));
    let skip = ids.len().saturating_sub(MAX_IDS);
    ids.split_off(skip)
}

/// The search for a thread: messages that are, or refer to, one of its ids.
pub(crate) fn thread_key(ids: &[String]) -> SearchKey {
    any(ids
        .iter()
        .flat_map(|id| {
            ["message-id", "references", "in-reply-to"]
                .map(|f| SearchKey::Header(f.into(), id.clone()))
        })
        .collect())
}

/// The conversation of `data` (in `mailbox`), oldest first.
pub(crate) async fn conversation(
    app: &App,
    boxes: &[MailboxInfo],
    mailbox: MailboxId,
    data: &MessageData,
) -> Result<Vec<ThreadItem>, WebError> {
    let ids = thread_ids(data);
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let key = thread_key(&ids);
    let mut items = Vec::new();
    for b in boxes {
        let skip = b
            .special_use
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("\\Trash") || s.eq_ignore_ascii_case("\\Junk"));
        if skip {
            continue;
        }
        let uids = app.ctx.store.search(b.id, &key).await?;
        if uids.is_empty() {
            continue;
        }
        for d in app.ctx.store.message_data(b.id, &uids).await? {
            let date = d.headers.date.unwrap_or(d.entry.internal_date);
            items.push((
                date,
                ThreadItem {
                    url: format!("/mail/{}/{}", b.id, d.entry.uid),
                    folder: b.name.clone(),
                    from: routes::sender_name(&d.headers.from),
                    subject: d.headers.subject.clone(),
                    date: routes::display_date(date),
                    current: b.id == mailbox && d.entry.uid == data.entry.uid,
                },
            ));
        }
    }
    items.sort_by_key(|(date, _)| *date);
    Ok(items.into_iter().map(|(_, i)| i).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_read_from_header_values() {
        assert_eq!(
            message_ids("<a@x> <b@y>\r\n <c@z> junk <bad id@x> <>"),
            ["<a@x>", "<b@y>", "<c@z>"]
        );
    }

    #[test]
    fn the_key_stays_shallow() {
        fn depth(k: &SearchKey) -> usize {
            match k {
                SearchKey::Or(a, b) => 1 + depth(a).max(depth(b)),
                _ => 1,
            }
        }
        let ids: Vec<String> = (0..MAX_IDS).map(|i| format!("<{i}@x>")).collect();
        assert!(depth(&thread_key(&ids)) <= 8);
    }
}
