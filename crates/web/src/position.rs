//! Where the user was in a list when a message was opened: the list page
//! (its `page` and `q`, or a page of search results) travels in the
//! message's link as `back=`, so the message's back link, its "Show them"
//! link and its buttons lead to that same page, not to the first.
//!
//! Only list pages of the user's own lists are accepted: a path, never a
//! host, so the parameter cannot send anyone elsewhere.

use axum::extract::Query;
use axum::http::Uri;
use serde::Deserialize;
use store::MailboxId;

use crate::pages::urlencode;

/// The list page `back` names, if it is one of `mailbox`'s pages or a
/// page of search results; else `None`.
pub(crate) fn list_page(mailbox: MailboxId, back: &str) -> Option<&str> {
    let list = format!("/mail/{mailbox}");
    let rest = back
        .strip_prefix(list.as_str())
        .or_else(|| back.strip_prefix("/search"))?;
    let plain = |c: char| c.is_ascii_graphic() && !matches!(c, '\\' | '"' | '<' | '>');
    let ok = (rest.is_empty() || rest.starts_with('?'))
        && !back.contains("//")
        && back.chars().all(plain);
    ok.then_some(back)
}

/// The list page to go back to from a message of `mailbox`: the one it
/// was opened from, else the folder's first page.
pub(crate) fn back_to(mailbox: MailboxId, back: Option<&str>) -> String {
    back.and_then(|b| list_page(mailbox, b))
        .map_or_else(|| format!("/mail/{mailbox}"), str::to_string)
}

/// The query that carries a list page in a message's link.
pub(crate) fn carry(list_page: &str) -> String {
    format!("back={}", urlencode(list_page))
}

#[derive(Deserialize)]
struct Carried {
    back: Option<String>,
}

/// The list page carried in a message page's address (`/mail/1/7?back=…`),
/// for where to go once the message has left the folder.
pub(crate) fn carried_by(mailbox: MailboxId, message_page: &str) -> Option<String> {
    let uri: Uri = message_page.parse().ok()?;
    let Query(c) = Query::<Carried>::try_from_uri(&uri).ok()?;
    list_page(mailbox, c.back.as_deref()?).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_users_list_pages_are_kept() {
        assert_eq!(
            list_page(3, "/mail/3?page=3&q=a%20b"),
            Some("/mail/3?page=3&q=a%20b")
        );
        assert_eq!(list_page(3, "/mail/3"), Some("/mail/3"));
        assert_eq!(
            list_page(3, "/search?from=bob&page=2"),
            Some("/search?from=bob&page=2")
        );
        for bad in [
            "/mail/4?page=2",
            "/mail/33",
            "/mail/3/7",
            "//evil.example/mail/3",
            "/mail/3?x=//evil",
            "https://evil.example/mail/3",
            "/mail/3?\"><script>",
            "/searching",
            "/mail/3?a\\b",
        ] {
            assert_eq!(list_page(3, bad), None, "{bad}");
        }
        assert_eq!(back_to(3, Some("/mail/4")), "/mail/3");
        assert_eq!(back_to(3, None), "/mail/3");
    }

    #[test]
    fn a_message_link_carries_its_list_page() {
        let list = "/mail/3?page=3&q=caf%C3%A9";
        let message = format!("/mail/3/7?{}", carry(list));
        assert_eq!(carried_by(3, &message).as_deref(), Some(list));
        assert_eq!(carried_by(4, &message), None);
        assert_eq!(carried_by(3, "/mail/3/7"), None);
    }
}
