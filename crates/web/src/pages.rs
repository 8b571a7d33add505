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
    /// The folder's special use (`trash`, `junk`, `drafts`, ...), which
    /// changes what its buttons do.
    pub role: &'static str,
    /// Unread messages in the folder, for the tab's title.
    pub unseen: u32,
    /// The user lists conversations (see [`crate::conversations`]).
    pub conversations: bool,
    /// The page's threads, when they are listed (not while searching):
    /// `rows` is empty then.
    pub threads: Option<Vec<crate::conversations::ThreadRow>>,
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
    /// The folder's special use, as in [`ListView::role`].
    pub role: &'static str,
    /// The spam filter's verdict at delivery, when it gave one.
    pub spam: Option<crate::actions::SpamVerdict>,
    /// How to leave the list the message came from, if it says.
    pub unsubscribe: Option<crate::unsubscribe::Offer>,
    /// Where "Back" leads: the list page it was opened from.
    pub back: String,
    /// That list page when it came in the message's link (see
    /// [`crate::position`]), to be carried on.
    pub carried: Option<String>,
}

/// The compose form, filled in.
pub(crate) struct ComposeView {
    pub draft: crate::compose::Draft,
    pub error: Option<String>,
    /// A field the error is about (`to`, `cc`, `bcc`): the message is
    /// shown beside it.
    pub error_field: Option<&'static str>,
    /// The stored draft this form edits, and its attachments, kept unless
    /// unticked.
    pub stored: Option<crate::compose::StoredDraft>,
    /// Past correspondents, offered as the address fields are typed.
    pub suggestions: Vec<String>,
    /// The addresses it may be sent from, each with its signature block.
    pub identities: Vec<(String, String)>,
}

/// What every logged-in page shows around its content.
pub(crate) struct Chrome<'a> {
    pub address: &'a str,
    /// The user may see the admin pages: the header links them.
    pub admin: bool,
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

pub(crate) fn head(title: &str) -> Markup {
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

pub(crate) fn page(chrome: &Chrome<'_>, title: &str, content: Markup) -> Html<String> {
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
                        a.search-all href="/search" { "Search all folders" }
                        a.compose href="/compose" { "Compose (c)" }
                        a href="/folders" { "Folders" }
                        a href="/settings" { "Settings" }
                        @if chrome.admin { a href="/admin" { "Admin" } }
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

fn action_buttons(chrome: &Chrome<'_>, current: MailboxId, role: &str) -> Markup {
    html! {
        div.actions {
            button name="action" value="read" { "Mark read" }
            button name="action" value="unread" { "Mark unread" }
            button name="action" value="flag" { "Flag" }
            button name="action" value="unflag" { "Unflag" }
            button name="action" value="archive" { "Archive" }
            // RFC 6154 §2: \Trash is where deleted mail waits; deleting
            // there is for good, so it asks first.
            @if role == "trash" {
                button name="action" value="trash" data-confirm="Delete the selected messages for good?" { "Delete for good" }
            } @else {
                button name="action" value="trash" { "Delete" }
            }
            @if role == "junk" {
                button name="action" value="notspam" { "Not spam" }
            } @else {
                button name="action" value="spam" { "Spam" }
            }
            // No folder is chosen for the user: moving needs a pick.
            select name="to" aria-label="Move to" {
                option value="" selected { "Move to…" }
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
                    main {
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
    let here = format!("{base}?page={}{q}", v.page);
    let title = if v.unseen > 0 {
        format!("({}) {} – Sluice", v.unseen, v.name)
    } else {
        format!("{} – Sluice", v.name)
    };
    page(
        chrome,
        &title,
        html! {
            h1 { (v.name) @if !v.query.is_empty() { " – search: " (v.query) } }
            form.inline.view-switch method="post" action={(base) "/view"} {
                input type="hidden" name="csrf" value=(chrome.csrf);
                @if v.conversations {
                    input type="hidden" name="view" value="messages";
                    button { "One row per message" }
                } @else {
                    input type="hidden" name="view" value="threads";
                    button { "Group by conversation" }
                }
            }
            form method="post" action={(base) "/act"} {
                input type="hidden" name="csrf" value=(chrome.csrf);
                input type="hidden" name="back" value=(here);
                (action_buttons(chrome, v.mailbox, v.role))
                (crate::action_pages::list_extras(v))
                @if v.rows.is_empty() {
                    p.muted { @if v.query.is_empty() { "No messages." } @else { "Nothing found." } }
                }
                table.list {
                    tbody {
                        @for t in v.threads.iter().flatten() {
                            tr class=[t.unread.then_some("unread")] data-thread=(t.uid) {
                                td.sel {}
                                td.mark { @if t.flagged { span.flag title="Flagged" { "★" } } }
                                td.from { (t.senders) }
                                td.subject {
                                    a href=(crate::action_pages::row_link(v, t.uid, &here)) { @if t.subject.is_empty() { "(no subject)" } @else { (t.subject) } }
                                    @if t.count > 1 { " " span.count title="Messages in the conversation" { (t.count) } }
                                }
                                td.att {}
                                td.date.date-col { (t.date) }
                                td.size {}
                            }
                        }
                        @for r in &v.rows {
                            tr class=[r.unread.then_some("unread")] data-uid=(r.uid) {
                                td.sel { input type="checkbox" name="uid" value=(r.uid) aria-label="Select"; }
                                td.mark { @if r.flagged { span.flag title="Flagged" { "★" } } }
                                td.from { (r.from) }
                                td.subject { a href=(crate::action_pages::row_link(v, r.uid, &here)) { @if r.subject.is_empty() { "(no subject)" } @else { (r.subject) } } }
                                td.att { @if r.attachment { span title="Attachment" { "📎" } } }
                                td.date.date-col { (r.date) }
                                td.size { (human_size(r.size)) }
                            }
                        }
                    }
                }
            }
            div.pager {
                @if v.page > 1 { a rel="prev" href={(base) "?page=" (v.page - 1) (q)} { "← Newer" } }
                span.muted { (v.total) @if v.threads.is_some() { " conversations" } @else { " messages" } ", page " (v.page) " of " (v.pages.max(1)) }
                @if v.page < v.pages { a rel="next" href={(base) "?page=" (v.page + 1) (q)} { "Older →" } }
            }
        },
    )
}

/// A message.
pub(crate) fn message(chrome: &Chrome<'_>, m: &MessageView) -> Html<String> {
    let base = format!("/mail/{}/{}", m.mailbox, m.uid);
    // The list page it was opened from, kept by every link back to it.
    let (here, remote) = match &m.carried {
        Some(list) => {
            let c = crate::position::carry(list);
            (format!("{base}?{c}"), format!("{base}?remote=1&{c}"))
        }
        None => (base.clone(), format!("{base}?remote=1")),
    };
    page(
        chrome,
        &format!("{} – Sluice", m.subject),
        html! {
            p { a.back href=(m.back) { "← Back (u)" } }
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
                @match &m.unsubscribe {
                    Some(crate::unsubscribe::Offer::Link(url)) => {
                        " "
                        a.unsubscribe href=(url) target="_blank" rel="noopener noreferrer" { "Unsubscribe (the list's page)" }
                    }
                    Some(_) => {
                        " "
                        form.inline method="post" action={(base) "/unsubscribe"} {
                            input type="hidden" name="csrf" value=(chrome.csrf);
                            button.unsubscribe data-confirm="Unsubscribe from this list?" { "Unsubscribe" }
                        }
                    }
                    None => {}
                }
            }
            form method="post" action={"/mail/" (m.mailbox) "/act"} {
                input type="hidden" name="csrf" value=(chrome.csrf);
                input type="hidden" name="uid" value=(m.uid);
                input type="hidden" name="back" value=(here);
                (action_buttons(chrome, m.mailbox, m.role))
            }
            @if let Some(s) = &m.spam { (crate::action_pages::spam_verdict(s)) }
            @if m.blocked_remote > 0 && !m.remote_allowed {
                div.notice {
                    (m.blocked_remote) " remote image(s) blocked to protect your privacy. "
                    a href=(remote) { "Show them" }
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
            h1 { @if v.stored.is_some() { "Draft" } @else { "New message" } }
            @if let (Some(e), None) = (&v.error, v.error_field) { p.notice role="alert" { (e) } }
            form.compose method="post" action="/compose" enctype="multipart/form-data" {
                input type="hidden" name="csrf" value=(chrome.csrf);
                (crate::identities::from_field(&d.from, &v.identities))
                (crate::action_pages::address_field("to", "To", &d.to, v))
                (crate::action_pages::address_field("cc", "Cc", &d.cc, v))
                (crate::action_pages::address_field("bcc", "Bcc", &d.bcc, v))
                label { "Subject" input name="subject" value=(d.subject); }
                textarea name="body" rows="16" aria-label="Message" { "\n" (d.body) }
                input type="hidden" name="in_reply_to" value=(d.in_reply_to);
                input type="hidden" name="references" value=(d.references);
                input type="hidden" name="attach" value=(d.attach);
                input type="hidden" name="replied" value=(d.replied);
                @if !d.attach.is_empty() { p.muted { "The original message is attached." } }
                @if let Some(s) = &v.stored { (crate::action_pages::stored_draft(s)) }
                div.actions {
                    button name="action" value="send" { "Send" }
                    button name="action" value="draft" { "Save draft" }
                }
                label { "Attachments" input type="file" name="files" multiple; }
            }
            datalist #correspondents {
                @for a in &v.suggestions { option value=(a) {} }
            }
            script src=(crate::assets::COMPOSE_JS.path) defer {}
        },
    )
}

/// The settings form.
pub(crate) fn settings(
    chrome: &Chrome<'_>,
    s: &store::WebSettings,
    tokens: &[store::ApiToken],
    created: Option<(&str, &str)>,
) -> Html<String> {
    page(
        chrome,
        "Settings – Sluice",
        html! {
            h1 { "Settings" }
            @if let Some((name, token)) = created {
                section.notice #new-token {
                    p { "The token " strong { (name) } " was created. Copy it now: it is not shown again." }
                    p { code #token-value { (token) } }
                }
            }
            form.compose method="post" action="/settings" {
                input type="hidden" name="csrf" value=(chrome.csrf);
                label { "Display name" input name="display_name" value=(s.display_name); }
                p { a href="/settings/signatures" { "Signatures for each address you send from" } }
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
            h2 { "Filters" }
            p { a href="/settings/filters" { "Rules and vacation answer" } " · " a href="/settings/filters/scripts" { "Sieve scripts" } }
            h2 #tokens { "App tokens" }
            p { "A token lets a JMAP client log in as you (" code { "Authorization: Bearer" } ") without your password. Revoke one you no longer use." }
            @if tokens.is_empty() {
                p { "No tokens." }
            } @else {
                table.tokens {
                    thead { tr { th { "Name" } th { "Created" } th { "Last used" } th {} } }
                    tbody {
                        @for t in tokens {
                            tr {
                                td.name { (t.name) }
                                td { (crate::routes::display_date(t.created)) }
                                td { @match t.last_used { Some(at) => (crate::routes::display_date(at)), None => "never" } }
                                td {
                                    form method="post" action="/settings/tokens" {
                                        input type="hidden" name="csrf" value=(chrome.csrf);
                                        input type="hidden" name="revoke" value=(t.id);
                                        button { "Revoke" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            form.compose method="post" action="/settings/tokens" {
                input type="hidden" name="csrf" value=(chrome.csrf);
                label { "New token's name" input name="name" maxlength=(store::MAX_TOKEN_NAME) required; }
                div.actions { button { "Create token" } }
            }
        },
    )
}

/// The rule form's values, as strings the way the form holds them.
#[derive(Debug, Clone)]
pub(crate) struct RuleForm {
    /// `from`, `to`, `subject` or `header`.
    pub field: String,
    /// The header's name when `field` is `header`.
    pub header: String,
    /// `contains`, `is`, `matches` or `not_contains`.
    pub test: String,
    pub value: String,
    /// `move`, `mark_read`, `flag`, `forward`, `discard` or `reject`.
    pub action: String,
    /// An existing mailbox, or (`new_folder`) one to name.
    pub folder: String,
    pub new_folder: String,
    pub create: bool,
    pub address: String,
    pub keep: bool,
    pub reject_text: String,
}

impl Default for RuleForm {
    fn default() -> Self {
        RuleForm {
            field: "subject".into(),
            header: String::new(),
            test: "contains".into(),
            value: String::new(),
            action: "move".into(),
            folder: String::new(),
            new_folder: String::new(),
            create: true,
            address: String::new(),
            keep: true,
            reject_text: String::new(),
        }
    }
}

/// The vacation form's values.
#[derive(Debug, Clone)]
pub(crate) struct VacationForm {
    pub enabled: bool,
    pub subject: String,
    pub text: String,
    pub days: String,
}

/// The rule editor.
pub(crate) struct FiltersView {
    /// The rules in words, in order.
    pub rules: Vec<String>,
    pub vacation: VacationForm,
    /// The add (or edit) form.
    pub form: RuleForm,
    /// The rule the form edits; `None`: it adds one.
    pub editing: Option<usize>,
    /// The user's mailboxes, for "move to".
    pub mailboxes: Vec<String>,
    /// The stored script's version, sent back with every form.
    pub revision: String,
    /// Another script is the active one: the rules are not in effect.
    pub other_active: Option<String>,
    /// The rules are stored but no script is active.
    pub none_active: bool,
    /// The stored script was changed elsewhere: what saving will do.
    pub edited: Option<&'static str>,
    /// The account's own spam threshold, `None` for the site's.
    pub spam_threshold: Option<f32>,
    pub error: Option<String>,
}

/// The list of the account's Sieve scripts.
pub(crate) struct ScriptsView {
    pub scripts: Vec<store::SieveScriptInfo>,
    /// Most scripts an account keeps.
    pub max: usize,
    pub error: Option<String>,
}

/// One script in the editor.
pub(crate) struct ScriptView {
    pub name: String,
    pub source: String,
    /// Not stored yet: the name can be chosen.
    pub is_new: bool,
    pub active: bool,
    /// Just saved.
    pub saved: bool,
    pub error: Option<String>,
}

fn filters_nav(current: &str) -> Markup {
    html! {
        nav.reply aria-label="Filters" {
            a href="/settings" { "Settings" }
            @if current == "rules" { strong { "Rules and vacation" } } @else { a href="/settings/filters" { "Rules and vacation" } }
            @if current == "scripts" { strong { "Sieve scripts" } } @else { a href="/settings/filters/scripts" { "Sieve scripts" } }
        }
    }
}

/// The rule editor: the rules with their buttons, the add/edit form and
/// the vacation answer. Every button is a form: it works without script.
pub(crate) fn filters(chrome: &Chrome<'_>, v: &FiltersView) -> Html<String> {
    let f = &v.form;
    let hidden = |op: &'static str| {
        html! {
            input type="hidden" name="csrf" value=(chrome.csrf);
            input type="hidden" name="rev" value=(v.revision);
            input type="hidden" name="op" value=(op);
        }
    };
    let activate_box = html! {
        @if let Some(other) = &v.other_active {
            label { input type="checkbox" name="activate" value="1"; " and make these rules the active filter (instead of “" (other) "”)" }
        }
    };
    let known_folder = v.mailboxes.contains(&f.folder);
    page(
        chrome,
        "Filters – Sluice",
        html! {
            h1 { "Filters" }
            (filters_nav("rules"))
            @if let Some(e) = &v.error { p.notice role="alert" { (e) } }
            @if let Some(other) = &v.other_active {
                div.notice {
                    "Your active filter is the Sieve script “" (other) "”, so these rules are not used. "
                    form.inline method="post" action="/settings/filters" {
                        (hidden("activate"))
                        button { "Use these rules instead" }
                    }
                }
            }
            @if v.none_active { p.notice { "No filter is active: these rules are not used until you save them again." } }
            @if let Some(e) = v.edited { p.notice { (e) } }
            h2 { "Spam" }
            form method="post" action="/settings/filters/spam" {
                input type="hidden" name="csrf" value=(chrome.csrf);
                label {
                    "Move mail to Junk from this spam score on (empty: the server's setting) "
                    input type="number" name="threshold" step="0.1" min="-100" max="1000"
                        value=[v.spam_threshold.map(|t| t.to_string())];
                }
                " "
                button { "Save" }
            }
            p.muted { "Moving a message into Junk teaches the filter it is spam; moving it out, that it is not." }
            h2 { "Rules" }
            p.muted { "Every matching rule applies, in this order; discarding or rejecting ends the filtering. Marking as read and flagging apply wherever the message goes." }
            @if v.rules.is_empty() { p.muted { "No rules yet." } }
            ol.rules {
                @for (i, r) in v.rules.iter().enumerate() {
                    li class=[(v.editing == Some(i)).then_some("current")] {
                        span.rule { (r) }
                        " "
                        a href={"/settings/filters?edit=" (i) "#rule-form"} { "Edit" }
                        form.inline method="post" action="/settings/filters" {
                            (hidden("up"))
                            input type="hidden" name="index" value=(i);
                            button disabled[i == 0] aria-label={"Move rule " (i + 1) " up"} { "↑" }
                        }
                        form.inline method="post" action="/settings/filters" {
                            (hidden("down"))
                            input type="hidden" name="index" value=(i);
                            button disabled[i + 1 == v.rules.len()] aria-label={"Move rule " (i + 1) " down"} { "↓" }
                        }
                        form.inline method="post" action="/settings/filters" {
                            (hidden("delete"))
                            input type="hidden" name="index" value=(i);
                            button aria-label={"Delete rule " (i + 1)} { "Delete" }
                        }
                    }
                }
            }
            h2 #rule-form { @if let Some(i) = v.editing { "Edit rule " (i + 1) } @else { "Add a rule" } }
            form.compose.rule method="post" action="/settings/filters" {
                @if let Some(i) = v.editing {
                    (hidden("update"))
                    input type="hidden" name="index" value=(i);
                } @else {
                    (hidden("add"))
                }
                fieldset {
                    legend { "If" }
                    select name="field" aria-label="Field" {
                        option value="from" selected[f.field == "from"] { "From" }
                        option value="to" selected[f.field == "to"] { "To" }
                        option value="subject" selected[f.field == "subject"] { "Subject" }
                        option value="header" selected[f.field == "header"] { "the header named…" }
                    }
                    label data-for="header" { "Header name (for “the header named…”)" input name="header" value=(f.header) placeholder="List-Id"; }
                    select name="test" aria-label="Comparison" {
                        option value="contains" selected[f.test == "contains"] { "contains" }
                        option value="is" selected[f.test == "is"] { "is" }
                        option value="matches" selected[f.test == "matches"] { "matches (* and ? as wildcards)" }
                        option value="not_contains" selected[f.test == "not_contains"] { "does not contain" }
                    }
                    label { "Value" input name="value" value=(f.value) required; }
                }
                fieldset {
                    legend { "Then" }
                    select name="action" aria-label="Action" {
                        option value="move" selected[f.action == "move"] { "move to a folder" }
                        option value="mark_read" selected[f.action == "mark_read"] { "mark as read" }
                        option value="flag" selected[f.action == "flag"] { "flag" }
                        option value="forward" selected[f.action == "forward"] { "forward" }
                        option value="discard" selected[f.action == "discard"] { "discard" }
                        option value="reject" selected[f.action == "reject"] { "reject" }
                    }
                    div data-for="move" {
                        label { "Folder"
                            select name="folder" {
                                @for m in &v.mailboxes { option value=(m) selected[*m == f.folder] { (m) } }
                            }
                        }
                        label { "or a folder by name" input name="new_folder" value=(if known_folder { "" } else { f.folder.as_str() }) placeholder="Lists"; }
                        label { input type="checkbox" name="create" value="1" checked[f.create]; " create the folder if it is missing" }
                    }
                    div data-for="forward" {
                        label { "Forward to" input name="address" type="email" value=(f.address) placeholder="name@example.org"; }
                        label { input type="checkbox" name="keep" value="1" checked[f.keep]; " keep a copy here" }
                    }
                    div data-for="reject" {
                        label { "Rejection text" textarea name="reject_text" rows="2" { (f.reject_text) } }
                    }
                }
                (activate_box)
                div.actions {
                    button { @if v.editing.is_some() { "Save rule" } @else { "Add rule" } }
                    @if v.editing.is_some() { a href="/settings/filters" { "Cancel" } }
                }
            }
            h2 { "Vacation answer" }
            form.compose method="post" action="/settings/filters" {
                (hidden("vacation"))
                label { input type="checkbox" name="vacation_enabled" value="1" checked[v.vacation.enabled]; " Answer mail automatically" }
                label { "Subject (empty: “Auto:” and the message's subject)" input name="vacation_subject" value=(v.vacation.subject); }
                label { "Text" textarea name="vacation_text" rows="5" { (v.vacation.text) } }
                label { "Answer each sender at most once every (days)" input name="vacation_days" type="number" min="1" max="365" value=(v.vacation.days); }
                (activate_box)
                div.actions { button { "Save vacation answer" } }
            }
        },
    )
}

/// The account's Sieve scripts, with their buttons.
pub(crate) fn scripts(chrome: &Chrome<'_>, v: &ScriptsView) -> Html<String> {
    let hidden = |op: &'static str, name: &str| {
        html! {
            input type="hidden" name="csrf" value=(chrome.csrf);
            input type="hidden" name="op" value=(op);
            input type="hidden" name="name" value=(name);
        }
    };
    page(
        chrome,
        "Sieve scripts – Sluice",
        html! {
            h1 { "Sieve scripts" }
            (filters_nav("scripts"))
            @if let Some(e) = &v.error { p.notice role="alert" { (e) } }
            p.muted { "Delivery runs the active script. The rules page writes the script “webmail”." }
            @if v.scripts.is_empty() { p.muted { "No scripts yet." } }
            table.list.scripts {
                tbody {
                    @for s in &v.scripts {
                        tr data-script=(s.name) {
                            td { a href={"/settings/filters/script?name=" (urlencode(&s.name))} { (s.name) } }
                            td { @if s.active { strong.active { "active" } } }
                            td.size { (human_size(s.size)) }
                            td {
                                form.inline method="post" action="/settings/filters/scripts" {
                                    @if s.active {
                                        (hidden("deactivate", &s.name))
                                        button { "Deactivate" }
                                    } @else {
                                        (hidden("activate", &s.name))
                                        button { "Activate" }
                                    }
                                }
                                " "
                                form.inline method="post" action="/settings/filters/scripts" {
                                    (hidden("delete", &s.name))
                                    button { "Delete" }
                                }
                            }
                        }
                    }
                }
            }
            @if v.scripts.len() < v.max {
                p { a href="/settings/filters/script" { "New script" } }
            } @else {
                p.muted { "An account keeps at most " (v.max) " scripts." }
            }
        },
    )
}

/// One script in a text area.
pub(crate) fn script(chrome: &Chrome<'_>, v: &ScriptView) -> Html<String> {
    page(
        chrome,
        "Sieve script – Sluice",
        html! {
            h1 { @if v.is_new { "New Sieve script" } @else { "Sieve script “" (v.name) "”" @if v.active { " (active)" } } }
            (filters_nav("script"))
            @if let Some(e) = &v.error { p.notice role="alert" { (e) } }
            @if v.saved { p.notice { "Saved." } }
            form.compose method="post" action="/settings/filters/script" {
                input type="hidden" name="csrf" value=(chrome.csrf);
                @if v.is_new {
                    input type="hidden" name="new" value="1";
                    label { "Name" input name="name" value=(v.name) required maxlength="100"; }
                } @else {
                    input type="hidden" name="name" value=(v.name);
                }
                // The HTML parser drops one newline after <textarea>: this
                // one, so a script's own first line break is kept.
                textarea.script name="source" rows="24" spellcheck="false" aria-label="Script" { "\n" (v.source) }
                div.actions {
                    button name="op" value="save" { "Save" }
                    @if !v.active { button name="op" value="save_activate" { "Save and activate" } }
                    a href="/settings/filters/scripts" { "Back to the scripts" }
                }
            }
            p.muted { "Scripts are checked when saved; one with an error is not saved. See RFC 5228 for the language." }
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
            admin: false,
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
            role: "",
            unseen: 2,
            conversations: false,
            threads: None,
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
            role: "",
            spam: None,
            unsubscribe: None,
            back: "/mail/1?page=3".into(),
            carried: Some("/mail/1?page=3".into()),
        };
        let out = message(&chrome(&folders), &m).0;
        assert!(out.contains("&lt;/pre&gt;&lt;script&gt;"), "{out}");
        assert!(out.contains("3 remote image(s) blocked"), "{out}");
        // The list page it came from stays in "Back", "Show them" and the
        // buttons' way back.
        assert!(out.contains("href=\"/mail/1?page=3\""), "{out}");
        assert!(
            out.contains("href=\"/mail/1/2?remote=1&amp;back=%2Fmail%2F1%3Fpage%3D3\""),
            "{out}"
        );
        assert!(
            out.contains("name=\"back\" value=\"/mail/1/2?back=%2Fmail%2F1%3Fpage%3D3\""),
            "{out}"
        );
    }

    #[test]
    fn filter_pages_escape_and_work_without_script() {
        let folders = [];
        let v = FiltersView {
            rules: vec!["If Subject is “<script>x()</script>”: discard".into()],
            vacation: VacationForm {
                enabled: true,
                subject: "\"><b>".into(),
                text: "</textarea><script>".into(),
                days: "7".into(),
            },
            form: RuleForm::default(),
            editing: None,
            mailboxes: vec!["INBOX".into(), "<i>Lists".into()],
            revision: "abc".into(),
            other_active: Some("<mine>".into()),
            none_active: false,
            spam_threshold: Some(7.5),
            edited: None,
            error: Some("<bad>".into()),
        };
        let out = filters(&chrome(&folders), &v).0;
        assert!(!out.contains("<script>"), "{out}");
        assert!(!out.contains("<i>Lists") && !out.contains("<mine>") && !out.contains("<bad>"));
        assert!(out.contains("&lt;/textarea&gt;&lt;script&gt;"), "{out}");
        // Reordering and deleting are buttons in forms of their own.
        for op in ["up", "down", "delete", "add", "vacation", "activate"] {
            assert!(out.contains(&format!("name=\"op\" value=\"{op}\"")), "{op}");
        }
        assert!(out.contains("name=\"activate\" value=\"1\""), "{out}");
        assert!(
            out.contains("name=\"threshold\"") && out.contains("value=\"7.5\""),
            "{out}"
        );

        let s = ScriptView {
            name: "a\"b".into(),
            source: "\nkeep; # </textarea>".into(),
            is_new: false,
            active: true,
            saved: false,
            error: Some("line 1, column 2: <x>".into()),
        };
        let out = script(&chrome(&folders), &s).0;
        // The parser drops the newline after <textarea>: the script's own
        // first line break survives.
        assert!(
            out.contains("aria-label=\"Script\">\n\nkeep; # &lt;/textarea&gt;</textarea>"),
            "{out}"
        );
        assert!(out.contains("line 1, column 2: &lt;x&gt;"), "{out}");
        assert!(!out.contains("save_activate"), "already active: {out}");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_size(12), "12 B");
        assert_eq!(human_size(1025), "2 KB");
        assert_eq!(human_size(3 * 1_048_576), "3.0 MB");
    }
}
