//! The HTML pages, as maud templates: compiled with the program, every
//! value escaped unless marked otherwise (nothing here is).

use axum::http::StatusCode;
use axum::response::Html;
use maud::{html, Markup, DOCTYPE};
use store::{MailboxId, Uid};

use crate::assets::{CSS, JS};

/// A folder in the side list.
pub(crate) struct Folder {
    pub id: MailboxId,
    pub name: String,
    pub unseen: u32,
    /// `inbox`, `sent`, `trash`, ... for the script's shortcuts.
    pub role: &'static str,
}

/// One line of a message list.
pub(crate) struct Row {
    pub uid: Uid,
    pub from: String,
    pub subject: String,
    pub date: String,
    pub size: u64,
    pub unread: bool,
    pub flagged: bool,
    pub attachment: bool,
}

/// A page of a mailbox.
pub(crate) struct ListView {
    pub mailbox: MailboxId,
    pub name: String,
    pub rows: Vec<Row>,
    pub page: usize,
    pub pages: usize,
    pub total: usize,
    pub query: String,
}

/// How a message's text is shown.
pub(crate) enum BodyView {
    Text { text: String, truncated: bool },
    Html { frame: String },
    Empty,
}

/// One attachment of a message.
pub(crate) struct Attachment {
    pub url: String,
    pub name: String,
    pub content_type: String,
    pub size: u64,
}

/// A message opened.
pub(crate) struct MessageView {
    pub mailbox: MailboxId,
    pub uid: Uid,
    pub subject: String,
    pub from: String,
    pub from_address: String,
    pub to: String,
    pub cc: String,
    pub date: String,
    pub flagged: bool,
    pub body: BodyView,
    pub attachments: Vec<Attachment>,
    pub blocked_remote: usize,
    pub remote_allowed: bool,
    /// The conversation, oldest first (empty when the message is alone).
    pub thread: Vec<ThreadItem>,
}

/// The compose form, filled in.
pub(crate) struct ComposeView {
    pub draft: crate::compose::Draft,
    pub error: Option<String>,
    /// Past correspondents, offered as the address fields are typed.
    pub suggestions: Vec<String>,
}

/// What every logged-in page shows around its content.
pub(crate) struct Chrome<'a> {
    pub address: &'a str,
    pub csrf: &'a str,
    pub folders: &'a [Folder],
    pub current: Option<MailboxId>,
    pub view: &'static str,
    pub query: &'a str,
    /// The mailbox's HIGHESTMODSEQ as shown, for live updates.
    pub since: Option<u64>,
}

/// "1.2 MB", "340 KB", "12 B".
pub(crate) fn human_size(n: u64) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{} KB", n.div_ceil(1024)),
        _ => format!("{:.1} MB", n as f64 / 1_048_576.0),
    }
}

fn head(title: &str) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="color-scheme" content="light dark";
            title { (title) }
            link rel="stylesheet" href=(CSS.path);
            script src=(JS.path) defer {}
        }
    }
}

fn page(chrome: &Chrome<'_>, title: &str, content: Markup) -> Html<String> {
    let mailbox = chrome.current.map(|m| m.to_string());
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                (head(title))
                body data-view=(chrome.view) data-mailbox=[mailbox] data-since=[chrome.since] {
                    header {
                        strong { "Sluice" }
                        @if let Some(m) = chrome.current {
                            form.search method="get" action={"/mail/" (m)} role="search" {
                                input type="search" name="q" value=(chrome.query) placeholder="Search (/)" aria-label="Search";
                                button { "Search" }
                            }
                        }
                        a.compose href="/compose" { "Compose (c)" }
                        a href="/settings" { "Settings" }
                        span.muted { (chrome.address) }
                        form method="post" action="/logout" {
                            input type="hidden" name="csrf" value=(chrome.csrf);
                            button { "Log out" }
                        }
                    }
                    div.layout {
                        (folders(chrome))
                        main { (content) }
                    }
                }
            }
        }
        .into_string(),
    )
}

fn folders(chrome: &Chrome<'_>) -> Markup {
    html! {
        nav.folders aria-label="Folders" {
            @for f in chrome.folders {
                a href={"/mail/" (f.id)} data-use=(f.role) class=[(chrome.current == Some(f.id)).then_some("current")] {
                    span { (f.name) }
                    @if f.unseen > 0 { span.unseen { (f.unseen) } }
                }
            }
        }
    }
}

fn action_buttons(chrome: &Chrome<'_>, current: MailboxId) -> Markup {
    html! {
        div.actions {
            button name="action" value="read" { "Mark read" }
            button name="action" value="unread" { "Mark unread" }
            button name="action" value="flag" { "Flag" }
            button name="action" value="unflag" { "Unflag" }
            button name="action" value="archive" { "Archive" }
            button name="action" value="trash" { "Delete" }
            select name="to" aria-label="Move to" {
                @for f in chrome.folders.iter().filter(|f| f.id != current) {
                    option value=(f.id) { (f.name) }
                }
            }
            button name="action" value="move" { "Move" }
        }
    }
}

/// The login form.
pub(crate) fn login(error: Option<&str>, address: &str) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                (head("Log in – Sluice"))
                body data-view="login" {
                    form.login method="post" action="/login" {
                        h1 { "Sluice webmail" }
                        @if let Some(e) = error { p.notice role="alert" { (e) } }
                        label { "Address" input name="address" type="email" autocomplete="username" required value=(address) autofocus; }
                        label { "Password" input name="password" type="password" autocomplete="current-password" required; }
                        button { "Log in" }
                    }
                }
            }
        }
        .into_string(),
    )
}

/// A page saying what went wrong.
pub(crate) fn error_page(status: StatusCode, text: &str) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                (head(status.canonical_reason().unwrap_or("Error")))
                body data-view="error" {
                    main { h1 { (status.as_u16()) } p { (text) } p { a href="/" { "Back to the inbox" } } }
                }
            }
        }
        .into_string(),
    )
}

/// A page of a mailbox.
pub(crate) fn list(chrome: &Chrome<'_>, v: &ListView) -> Html<String> {
    let base = format!("/mail/{}", v.mailbox);
    let q = if v.query.is_empty() {
        String::new()
    } else {
        format!("&q={}", urlencode(&v.query))
    };
    page(
        chrome,
        &format!("{} – Sluice", v.name),
        html! {
            h1 { (v.name) @if !v.query.is_empty() { " – search: " (v.query) } }
            form method="post" action={(base) "/act"} {
                input type="hidden" name="csrf" value=(chrome.csrf);
                input type="hidden" name="back" value={(base) "?page=" (v.page) (q)};
                (action_buttons(chrome, v.mailbox))
                @if v.rows.is_empty() {
                    p.muted { @if v.query.is_empty() { "No messages." } @else { "Nothing found." } }
                }
                table.list {
                    tbody {
                        @for r in &v.rows {
                            tr class=[r.unread.then_some("unread")] data-uid=(r.uid) {
                                td { input type="checkbox" name="uid" value=(r.uid) aria-label="Select"; }
                                td { @if r.flagged { span.flag title="Flagged" { "★" } } }
                                td.from { (r.from) }
                                td.subject { a href={(base) "/" (r.uid)} { @if r.subject.is_empty() { "(no subject)" } @else { (r.subject) } } }
                                td { @if r.attachment { span title="Attachment" { "📎" } } }
                                td.date.date-col { (r.date) }
                                td.size { (human_size(r.size)) }
                            }
                        }
                    }
                }
            }
            div.pager {
                @if v.page > 1 { a rel="prev" href={(base) "?page=" (v.page - 1) (q)} { "← Newer" } }
                span.muted { (v.total) " messages, page " (v.page) " of " (v.pages.max(1)) }
                @if v.page < v.pages { a rel="next" href={(base) "?page=" (v.page + 1) (q)} { "Older →" } }
            }
        },
    )
}

/// A message.
pub(crate) fn message(chrome: &Chrome<'_>, m: &MessageView) -> Html<String> {
    let base = format!("/mail/{}/{}", m.mailbox, m.uid);
    page(
        chrome,
        &format!("{} – Sluice", m.subject),
        html! {
            p { a.back href={"/mail/" (m.mailbox)} { "← Back (u)" } }
            article.msghead {
                h1 { @if m.flagged { span.flag title="Flagged" { "★ " } } @if m.subject.is_empty() { "(no subject)" } @else { (m.subject) } }
                dl {
                    dt { "From" } dd { (m.from) }
                    dt { "To" } dd { (m.to) }
                    @if !m.cc.is_empty() { dt { "Cc" } dd { (m.cc) } }
                    dt { "Date" } dd { (m.date) }
                }
            }
            nav.reply {
                a.reply href={"/compose?mode=reply&mailbox=" (m.mailbox) "&uid=" (m.uid)} { "Reply (r)" }
                " "
                a.reply-all href={"/compose?mode=all&mailbox=" (m.mailbox) "&uid=" (m.uid)} { "Reply all (a)" }
                " "
                a.forward href={"/compose?mode=forward&mailbox=" (m.mailbox) "&uid=" (m.uid)} { "Forward (f)" }
                " "
                a href={"/compose?mode=attach&mailbox=" (m.mailbox) "&uid=" (m.uid)} { "Forward as attachment" }
            }
            form method="post" action={"/mail/" (m.mailbox) "/act"} {
                input type="hidden" name="csrf" value=(chrome.csrf);
                input type="hidden" name="uid" value=(m.uid);
                input type="hidden" name="back" value=(base);
                (action_buttons(chrome, m.mailbox))
            }
            @if m.blocked_remote > 0 && !m.remote_allowed {
                div.notice {
                    (m.blocked_remote) " remote image(s) blocked to protect your privacy. "
                    a href={(base) "?remote=1"} { "Show them" }
                    " · "
                    form.inline method="post" action={(base) "/trust"} {
                        input type="hidden" name="csrf" value=(chrome.csrf);
                        button { "Always show from " (m.from_address) }
                    }
                }
            }
            @match &m.body {
                BodyView::Text { text, truncated } => {
                    pre.body { (text) }
                    @if *truncated { p.notice { "The message is long and was cut here; " a href={(base) "/source"} { "view the source" } " for all of it." } }
                }
                BodyView::Html { frame } => {
                    iframe.body src=(frame) sandbox="allow-popups allow-popups-to-escape-sandbox" referrerpolicy="no-referrer" title="Message" {}
                }
                BodyView::Empty => { p.muted { "This message has no text." } }
            }
            @if !m.attachments.is_empty() {
                h2 { "Attachments" }
                ul.attachments {
                    @for a in &m.attachments {
                        li { a href=(a.url) download=(a.name) { (a.name) } " " span.muted { (a.content_type) ", " (human_size(a.size)) } }
                    }
                }
            }
            p { a href={(base) "/source"} { "View source" } }
            @if m.thread.len() > 1 {
                h2 { "Conversation" }
                table.list.thread {
                    tbody {
                        @for t in &m.thread {
                            tr class=[t.current.then_some("cursor")] {
                                td.date { (t.date) }
                                td.from { (t.from) }
                                td.subject { a href=(t.url) { (t.subject) } }
                                td.muted { (t.folder) }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// The compose form. The CSRF token comes first and the file input last:
/// the server reads the upload as a stream, in this order.
pub(crate) fn compose(chrome: &Chrome<'_>, v: &ComposeView) -> Html<String> {
    let d = &v.draft;
    page(
        chrome,
        "Compose – Sluice",
        html! {
            h1 { "New message" }
            @if let Some(e) = &v.error { p.notice role="alert" { (e) } }
            form.compose method="post" action="/compose" enctype="multipart/form-data" {
                input type="hidden" name="csrf" value=(chrome.csrf);
                label { "To" input name="to" value=(d.to) list="correspondents" autocomplete="off"; }
                label { "Cc" input name="cc" value=(d.cc) list="correspondents" autocomplete="off"; }
                label { "Bcc" input name="bcc" value=(d.bcc) list="correspondents" autocomplete="off"; }
                label { "Subject" input name="subject" value=(d.subject); }
                textarea name="body" rows="16" aria-label="Message" { (d.body) }
                input type="hidden" name="in_reply_to" value=(d.in_reply_to);
                input type="hidden" name="references" value=(d.references);
                input type="hidden" name="attach" value=(d.attach);
                input type="hidden" name="replied" value=(d.replied);
                @if !d.attach.is_empty() { p.muted { "The original message is attached." } }
                div.actions {
                    button name="action" value="send" { "Send" }
                    button name="action" value="draft" { "Save draft" }
                }
                label { "Attachments" input type="file" name="files" multiple; }
            }
            datalist #correspondents {
                @for a in &v.suggestions { option value=(a) {} }
            }
        },
    )
}

/// The settings form.
pub(crate) fn settings(chrome: &Chrome<'_>, s: &store::WebSettings) -> Html<String> {
    page(
        chrome,
        "Settings – Sluice",
        html! {
            h1 { "Settings" }
            form.compose method="post" action="/settings" {
                input type="hidden" name="csrf" value=(chrome.csrf);
                label { "Display name" input name="display_name" value=(s.display_name); }
                label { "Signature" textarea name="signature" rows="4" { (s.signature) } }
                label { "Messages per page" input name="page_size" type="number" min="1" max="500" value=(s.page_size); }
                @if !s.remote_ok.is_empty() {
                    fieldset {
                        legend { "Remote images always shown from" }
                        @for a in &s.remote_ok {
                            label { input type="checkbox" name="forget" value=(a); " stop for " (a) }
                        }
                    }
                }
                div.actions { button { "Save" } }
            }
        },
    )
}

/// A message's conversation: the other messages of its thread.
pub(crate) struct ThreadItem {
    pub url: String,
    pub folder: String,
    pub from: String,
    pub subject: String,
    pub date: String,
    pub current: bool,
}

/// The document inside the sandboxed frame: sanitised HTML on a white page.
pub(crate) fn frame(sanitized_html: &str) -> Html<String> {
    Html(format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><meta name=\"referrer\" content=\"no-referrer\"><style>{}</style></head><body>{}</body></html>",
        crate::assets::FRAME_STYLE,
        sanitized_html
    ))
}

/// Percent-encodes a query value.
pub(crate) fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chrome<'a>(folders: &'a [Folder]) -> Chrome<'a> {
        Chrome {
            address: "a@example.org",
            csrf: "tok\"en",
            folders,
            current: Some(1),
            view: "list",
            query: "",
            since: None,
        }
    }

    #[test]
    fn values_are_escaped() {
        let folders = [Folder {
            id: 1,
            name: "<b>INBOX</b>".into(),
            unseen: 2,
            role: "inbox",
        }];
        let v = ListView {
            mailbox: 1,
            name: "INBOX".into(),
            rows: vec![Row {
                uid: 7,
                from: "\"><script>alert(1)</script>".into(),
                subject: "<img src=x onerror=alert(1)>".into(),
                date: "today".into(),
                size: 2048,
                unread: true,
                flagged: true,
                attachment: true,
            }],
            page: 1,
            pages: 1,
            total: 1,
            query: "\"q".into(),
        };
        let out = list(&chrome(&folders), &v).0;
        assert!(!out.contains("<script>alert"), "{out}");
        assert!(!out.contains("<img src=x"), "{out}");
        assert!(!out.contains("<b>INBOX"), "{out}");
        assert!(out.contains("&lt;img src=x onerror=alert(1)&gt;"), "{out}");
        assert!(out.contains("value=\"tok&quot;en\""), "{out}");
        assert!(out.contains("class=\"unread\""), "{out}");
        assert!(out.contains("2 KB"), "{out}");
        assert!(!out.contains("<script>"), "no inline script: {out}");
    }

    #[test]
    fn message_text_is_escaped_and_remote_notice_shown() {
        let folders = [];
        let m = MessageView {
            mailbox: 1,
            uid: 2,
            subject: "s".into(),
            from: "A <a@x>".into(),
            from_address: "a@x".into(),
            to: "b@y".into(),
            cc: String::new(),
            date: "d".into(),
            flagged: false,
            body: BodyView::Text {
                text: "</pre><script>x()</script>".into(),
                truncated: false,
            },
            attachments: vec![],
            blocked_remote: 3,
            remote_allowed: false,
            thread: vec![],
        };
        let out = message(&chrome(&folders), &m).0;
        assert!(out.contains("&lt;/pre&gt;&lt;script&gt;"), "{out}");
        assert!(out.contains("3 remote image(s) blocked"), "{out}");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_size(12), "12 B");
        assert_eq!(human_size(1025), "2 KB");
        assert_eq!(human_size(3 * 1_048_576), "3.0 MB");
    }
}
