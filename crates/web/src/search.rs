//! Search across every folder (`GET /search`): words (the full-text
//! index, sender and subject, as the box above a list), and filters on
//! From, To, Subject, an attachment, a date range and unread. Each hit
//! shows its folder. The filters are the store's search keys (the ones
//! IMAP SEARCH uses, RFC 3501 §6.4.4), run folder by folder; only "has an
//! attachment" is read from the MIME structure of the hits. Every hit is
//! counted and the page asked for (the user's page size) is shown, newest
//! first; a message opened from it leads back to that page.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::Html;
use maud::html;
use serde::Deserialize;
use store::{MailboxId, MailboxInfo, MessageData, SearchKey, Uid, FLAG_SEEN};

use crate::error::WebError;
use crate::pages::{human_size, page as page_of, urlencode, Chrome};
use crate::routes::{display_date, folder_list, mailboxes, sender_name, App};
use crate::session::User;

/// The structures of this many hits are read at a time when only those
/// with an attachment are asked for.
const STRUCTURE_BATCH: usize = 256;

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
    /// The page of hits, from 1.
    page: Option<usize>,
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
    /// The search's address without its page, to page on from.
    fn url(&self) -> String {
        let mut out = String::from("/search?");
        for (name, value) in [
            ("q", &self.q),
            ("from", &self.from),
            ("to", &self.to),
            ("subject", &self.subject),
            ("attachment", &self.attachment),
            ("since", &self.since),
            ("until", &self.until),
            ("unread", &self.unread),
        ] {
            if !value.is_empty() {
                out.push_str(&format!("{name}={}&", urlencode(value)));
            }
        }
        out
    }

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

/// A hit before it is read: what it is sorted by and where it lies.
#[derive(Clone, Copy)]
struct Found {
    date: i64,
    uid: Uid,
    /// Its folder, as an index into the user's folders.
    folder: usize,
}

fn has_attachment(d: &MessageData) -> bool {
    crate::read::leaves(&d.structure.root)
        .iter()
        .any(|l| l.attachment)
}

/// Every hit of `key` in `boxes`, newest first. "Has an attachment" is
/// read from the hits' MIME structures, a batch at a time.
async fn find(
    app: &App,
    boxes: &[MailboxInfo],
    key: &SearchKey,
    attachment: bool,
) -> Result<Vec<Found>, WebError> {
    let mut found = Vec::new();
    for (folder, b) in boxes.iter().enumerate() {
        let uids = app.ctx.store.search(b.id, key).await?;
        if uids.is_empty() {
            continue;
        }
        let mut entries = app.ctx.store.list_messages(b.id).await?;
        entries.retain(|e| uids.binary_search(&e.uid).is_ok());
        if attachment {
            let mut kept = Vec::new();
            for batch in entries.chunks(STRUCTURE_BATCH) {
                let uids: Vec<Uid> = batch.iter().map(|e| e.uid).collect();
                let data = app.ctx.store.message_data(b.id, &uids).await?;
                kept.extend(
                    data.iter()
                        .filter(|d| has_attachment(d))
                        .map(|d| d.entry.uid),
                );
            }
            kept.sort_unstable();
            entries.retain(|e| kept.binary_search(&e.uid).is_ok());
        }
        found.extend(entries.iter().map(|e| Found {
            date: e.internal_date,
            uid: e.uid,
            folder,
        }));
    }
    found.sort_by_key(|f| std::cmp::Reverse((f.date, f.uid)));
    Ok(found)
}

/// The hits of one page, read, in the page's order.
async fn read_page(app: &App, boxes: &[MailboxInfo], page: &[Found]) -> Result<Vec<Hit>, WebError> {
    let mut hits: Vec<(usize, Hit)> = Vec::new();
    for (folder, b) in boxes.iter().enumerate() {
        let uids: Vec<Uid> = page
            .iter()
            .filter(|f| f.folder == folder)
            .map(|f| f.uid)
            .collect();
        if uids.is_empty() {
            continue;
        }
        let drafts = b
            .special_use
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("\\Drafts"));
        for data in app.ctx.store.message_data(b.id, &uids).await? {
            let at = page
                .iter()
                .position(|f| f.folder == folder && f.uid == data.entry.uid)
                .unwrap_or(usize::MAX);
            hits.push((
                at,
                Hit {
                    mailbox: b.id,
                    folder: b.name.clone(),
                    drafts,
                    data,
                },
            ));
        }
    }
    hits.sort_by_key(|(at, _)| *at);
    Ok(hits.into_iter().map(|(_, h)| h).collect())
}

/// `GET /search`.
pub(crate) async fn results(
    State(app): State<Arc<App>>,
    user: User,
    Query(f): Query<SearchForm>,
) -> Result<Html<String>, WebError> {
    let (boxes, settings) = tokio::try_join!(mailboxes(&app, &user), async {
        Ok(app.ctx.store.web_settings(user.account).await?)
    })?;
    let key = f.key()?;
    let per_page = settings.page_size.max(1) as usize;
    let found = match &key {
        Some(key) => find(&app, &boxes, key, f.attachment == "1").await?,
        None => Vec::new(),
    };
    let total = found.len();
    let pages = total.div_ceil(per_page).max(1);
    let page = f.page.unwrap_or(1).clamp(1, pages);
    let shown = &found[(page - 1) * per_page..(page * per_page).min(total)];
    let hits = read_page(&app, &boxes, shown).await?;
    let search = f.url();
    let here = format!("{search}page={page}");
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
    Ok(page_of(
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
                    table.list.search-hits {
                        tbody {
                            @for h in &hits {
                                tr class=[(h.data.entry.flags & FLAG_SEEN == 0).then_some("unread")] data-uid=(h.data.entry.uid) {
                                    td.from { (sender_name(&h.data.headers.from)) }
                                    td.subject {
                                        a href=(if h.drafts { format!("/compose?mode=draft&mailbox={}&uid={}", h.mailbox, h.data.entry.uid) } else { format!("/mail/{}/{}?{}", h.mailbox, h.data.entry.uid, crate::position::carry(&here)) }) {
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
                    div.pager {
                        @if page > 1 { a rel="prev" href={(search) "page=" (page - 1)} { "← Newer" } }
                        span.muted.found { (total) " found, page " (page) " of " (pages) }
                        @if page < pages { a rel="next" href={(search) "page=" (page + 1)} { "Older →" } }
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
