//! Search across every folder (`GET /search`): words (the full-text
//! index, sender and subject, as the box above a list), and filters on
//! From, To, Subject, an attachment, a date range and unread. Each hit
//! shows its folder. The filters are the store's search keys (the ones
//! IMAP SEARCH uses, RFC 3501 §6.4.4), run folder by folder; only "has an
//! attachment" is read from the MIME structure of the hits.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::Html;
use maud::html;
use serde::Deserialize;
use store::{MailboxId, MessageData, SearchKey, FLAG_SEEN};

use crate::error::WebError;
use crate::pages::{human_size, page, Chrome};
use crate::routes::{display_date, folder_list, mailboxes, sender_name, App};
use crate::session::User;

/// At most this many hits are shown, newest first.
const MAX_HITS: usize = 200;

/// The search form; every field may be empty.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SearchForm {
    #[serde(default)]
    q: String,
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    #[serde(default)]
    subject: String,
    /// `1`: only messages with an attachment.
    #[serde(default)]
    attachment: String,
    /// `YYYY-MM-DD`, the first day.
    #[serde(default)]
    since: String,
    /// `YYYY-MM-DD`, the last day.
    #[serde(default)]
    until: String,
    /// `1`: only unread messages.
    #[serde(default)]
    unread: String,
}

/// Days since the Unix epoch of a `YYYY-MM-DD` date.
fn day(text: &str) -> Result<Option<i64>, WebError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    let bad = || WebError::BadRequest(format!("{text:?} is not a date (YYYY-MM-DD)"));
    let mut parts = text.splitn(3, '-');
    let mut next = || parts.next().ok_or_else(bad);
    let (y, m, d) = (next()?, next()?, next()?);
    let year: i32 = y.parse().map_err(|_| bad())?;
    let month: u8 = m.parse().map_err(|_| bad())?;
    let month = time::Month::try_from(month).map_err(|_| bad())?;
    let date = time::Date::from_calendar_date(year, month, d.parse().map_err(|_| bad())?)
        .map_err(|_| bad())?;
    Ok(Some(
        date.midnight()
            .assume_utc()
            .unix_timestamp()
            .div_euclid(86_400),
    ))
}

impl SearchForm {
    /// The store's search key for the form, or `None` when it asks for
    /// nothing.
    fn key(&self) -> Result<Option<SearchKey>, WebError> {
        let mut all = Vec::new();
        let q = self.q.trim();
        if !q.is_empty() {
            all.push(SearchKey::Or(
                Box::new(SearchKey::Text(q.to_string())),
                Box::new(SearchKey::Or(
                    Box::new(SearchKey::From(q.to_string())),
                    Box::new(SearchKey::Subject(q.to_string())),
                )),
            ));
        }
        for (value, key) in [
            (&self.from, SearchKey::From as fn(String) -> SearchKey),
            (&self.to, SearchKey::To),
            (&self.subject, SearchKey::Subject),
        ] {
            if !value.trim().is_empty() {
                all.push(key(value.trim().to_string()));
            }
        }
        if let Some(d) = day(&self.since)? {
            all.push(SearchKey::Since(d));
        }
        if let Some(d) = day(&self.until)? {
            all.push(SearchKey::Before(d + 1));
        }
        if self.unread == "1" {
            all.push(SearchKey::FlagsUnset(FLAG_SEEN));
        }
        if all.is_empty() && self.attachment != "1" {
            return Ok(None);
        }
        Ok(Some(SearchKey::And(all)))
    }
}

/// One hit.
struct Hit {
    mailbox: MailboxId,
    folder: String,
    drafts: bool,
    data: MessageData,
}

fn has_attachment(d: &MessageData) -> bool {
    crate::read::leaves(&d.structure.root)
        .iter()
        .any(|l| l.attachment)
}

/// `GET /search`.
pub(crate) async fn results(
    State(app): State<Arc<App>>,
    user: User,
    Query(f): Query<SearchForm>,
) -> Result<Html<String>, WebError> {
    let boxes = mailboxes(&app, &user).await?;
    let key = f.key()?;
    let mut hits: Vec<Hit> = Vec::new();
    let mut more = false;
    if let Some(key) = &key {
        for b in &boxes {
            let mut uids = app.ctx.store.search(b.id, key).await?;
            // Newest by UID first; the page keeps the newest by date.
            uids.reverse();
            if uids.len() > MAX_HITS {
                uids.truncate(MAX_HITS);
                more = true;
            }
            let drafts = b
                .special_use
                .as_deref()
                .is_some_and(|s| s.eq_ignore_ascii_case("\\Drafts"));
            for data in app.ctx.store.message_data(b.id, &uids).await? {
                if f.attachment == "1" && !has_attachment(&data) {
                    continue;
                }
                hits.push(Hit {
                    mailbox: b.id,
                    folder: b.name.clone(),
                    drafts,
                    data,
                });
            }
        }
    }
    hits.sort_by_key(|h| std::cmp::Reverse((h.data.entry.internal_date, h.data.entry.uid)));
    if hits.len() > MAX_HITS {
        hits.truncate(MAX_HITS);
        more = true;
    }
    let folders = folder_list(&boxes);
    let chrome = Chrome {
        address: &user.address,
        admin: user.admin,
        csrf: &user.csrf,
        folders: &folders,
        current: None,
        view: "search",
        query: "",
        since: None,
    };
    Ok(page(
        &chrome,
        "Search – Sluice",
        html! {
            h1 { "Search all folders" }
            form.compose.search-all method="get" action="/search" role="search" {
                label { "Words" input type="search" name="q" value=(f.q); }
                label { "From" input name="from" value=(f.from); }
                label { "To" input name="to" value=(f.to); }
                label { "Subject" input name="subject" value=(f.subject); }
                label { "From the day" input type="date" name="since" value=(f.since); }
                label { "To the day" input type="date" name="until" value=(f.until); }
                label { input type="checkbox" name="attachment" value="1" checked[f.attachment == "1"]; " with an attachment" }
                label { input type="checkbox" name="unread" value="1" checked[f.unread == "1"]; " unread only" }
                div.actions { button { "Search" } }
            }
            @if key.is_some() {
                @if hits.is_empty() {
                    p.muted { "Nothing found." }
                } @else {
                    p.muted { (hits.len()) " found" @if more { " (the newest shown)" } }
                    table.list.search-hits {
                        tbody {
                            @for h in &hits {
                                tr class=[(h.data.entry.flags & FLAG_SEEN == 0).then_some("unread")] data-uid=(h.data.entry.uid) {
                                    td.from { (sender_name(&h.data.headers.from)) }
                                    td.subject {
                                        a href=(if h.drafts { format!("/compose?mode=draft&mailbox={}&uid={}", h.mailbox, h.data.entry.uid) } else { format!("/mail/{}/{}", h.mailbox, h.data.entry.uid) }) {
                                            @if h.data.headers.subject.is_empty() { "(no subject)" } @else { (h.data.headers.subject) }
                                        }
                                    }
                                    td.folder { (h.folder) }
                                    td { @if has_attachment(&h.data) { span title="Attachment" { "📎" } } }
                                    td.date.date-col { (display_date(h.data.entry.internal_date)) }
                                    td.size { (human_size(h.data.entry.size)) }
                                }
                            }
                        }
                    }
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_becomes_one_key() {
        assert!(SearchForm::default().key().unwrap().is_none());
        let f = SearchForm {
            from: " bob ".into(),
            since: "2026-01-02".into(),
            until: "2026-01-02".into(),
            unread: "1".into(),
            ..Default::default()
        };
        let day = 20455;
        assert_eq!(
            f.key().unwrap(),
            Some(SearchKey::And(vec![
                SearchKey::From("bob".into()),
                SearchKey::Since(day),
                SearchKey::Before(day + 1),
                SearchKey::FlagsUnset(FLAG_SEEN),
            ]))
        );
        let only_files = SearchForm {
            attachment: "1".into(),
            ..Default::default()
        };
        assert_eq!(only_files.key().unwrap(), Some(SearchKey::And(vec![])));
        let bad = SearchForm {
            since: "yesterday".into(),
            ..Default::default()
        };
        assert!(bad.key().is_err());
    }
}
