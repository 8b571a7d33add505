//! The pieces of pages that act on mail: the list's selection and folder
//! buttons, the confirmation asked before deleting for good, the spam
//! verdict on a message, the compose form's address fields with their
//! errors and a reopened draft's attachments, and the folders page. Kept
//! apart from [`crate::pages`] so reading and acting change apart.

use axum::response::Html;
use maud::{html, Markup};

use crate::actions::SpamVerdict;
use crate::compose::StoredDraft;
use crate::pages::{page, Chrome, ComposeView, ListView};

/// Above a list: "select all" (shown by the script, which alone can tick
/// boxes), "mark all read", and in Trash "Empty Trash".
pub(crate) fn list_extras(v: &ListView) -> Markup {
    html! {
        div.actions.list-extras {
            label.select-all-label hidden { input.select-all type="checkbox" aria-label="Select all"; " Select all" }
            button name="action" value="allread" { "Mark all read" }
            @if v.role == "trash" {
                button name="action" value="empty" data-confirm="Empty the Trash? Its messages are deleted for good." { "Empty Trash" }
            }
        }
    }
}

/// Where a row of the list leads: a draft opens in Compose; a message
/// carries the list page it was opened from (`here`), unless that is the
/// folder's first page, where its back link leads anyway.
pub(crate) fn row_link(v: &ListView, uid: store::Uid, here: &str) -> String {
    if v.role == "drafts" {
        format!("/compose?mode=draft&mailbox={}&uid={uid}", v.mailbox)
    } else if v.page == 1 && v.query.is_empty() {
        format!("/mail/{}/{uid}", v.mailbox)
    } else {
        format!("/mail/{}/{uid}?{}", v.mailbox, crate::position::carry(here))
    }
}

/// The spam filter's verdict on a message and the tests behind it.
pub(crate) fn spam_verdict(s: &SpamVerdict) -> Markup {
    html! {
        details.spam-verdict {
            summary {
                @if s.spam { "Spam filter: spam" } @else { "Spam filter: not spam" }
                " (score " (s.score) @if let Some(r) = &s.required { ", spam from " (r) } ")"
            }
            @if s.tests.is_empty() {
                p.muted { "No test counted." }
            } @else {
                table.spam-tests {
                    tbody {
                        @for (name, points) in &s.tests {
                            tr { td { (name) } td.points { (points) } }
                        }
                    }
                }
            }
        }
    }
}

/// One address field of the compose form; an error about it is shown
/// right below it and tied to it for screen readers.
pub(crate) fn address_field(
    name: &'static str,
    label: &str,
    value: &str,
    v: &ComposeView,
) -> Markup {
    let error = match (&v.error, v.error_field) {
        (Some(e), Some(f)) if f == name => Some(e.as_str()),
        _ => None,
    };
    let error_id = format!("{name}-error");
    html! {
        label for=(name) { (label) }
        @if let Some(e) = error {
            input #(name) name=(name) value=(value) list="correspondents" autocomplete="off" aria-invalid="true" aria-describedby=(error_id);
            p.field-error id=(error_id) role="alert" { (e) }
        } @else {
            input #(name) name=(name) value=(value) list="correspondents" autocomplete="off";
        }
    }
}

/// The stored draft a compose form edits: its number, and its
/// attachments, each kept unless unticked.
pub(crate) fn stored_draft(s: &StoredDraft) -> Markup {
    html! {
        input type="hidden" name="draft" value=(s.uid);
        @if !s.attachments.is_empty() {
            fieldset.kept {
                legend { "Attached" }
                @for (n, name, size) in &s.attachments {
                    label { input type="checkbox" name="keep" value=(n) checked; " " (name) " " span.muted { (crate::pages::human_size(*size)) } }
                }
            }
        }
    }
}

/// What a confirmation asks and what it sends on.
pub(crate) struct Confirm<'a> {
    pub title: &'a str,
    pub question: String,
    pub action: String,
    /// Fields posted again, with `confirm=1` added.
    pub fields: Vec<(String, String)>,
    pub button: &'a str,
    pub cancel: String,
}

/// A page that asks before something is done for good (the script asks
/// with a dialog instead).
pub(crate) fn confirm(chrome: &Chrome<'_>, c: &Confirm<'_>) -> Html<String> {
    page(
        chrome,
        &format!("{} – Sluice", c.title),
        html! {
            h1 { (c.title) }
            form.confirm method="post" action=(c.action) {
                p { (c.question) }
                @for (k, v) in &c.fields { input type="hidden" name=(k) value=(v); }
                input type="hidden" name="confirm" value="1";
                div.actions {
                    button.danger { (c.button) }
                    a href=(c.cancel) { "Cancel" }
                }
            }
        },
    )
}

/// One folder on the folders page.
pub(crate) struct FolderRow {
    pub name: String,
    pub messages: u32,
    pub unseen: u32,
    pub subscribed: bool,
    /// A special-use folder (or INBOX): kept, not renamed or deleted here.
    pub special: bool,
}

/// The folders page: create, rename, delete, subscribe.
pub(crate) fn folders(
    chrome: &Chrome<'_>,
    rows: &[FolderRow],
    notice: Option<&str>,
    error: Option<&str>,
) -> Html<String> {
    let hidden = |op: &'static str, name: &str| {
        html! {
            input type="hidden" name="csrf" value=(chrome.csrf);
            input type="hidden" name="op" value=(op);
            input type="hidden" name="name" value=(name);
        }
    };
    page(
        chrome,
        "Folders – Sluice",
        html! {
            h1 { "Folders" }
            @if let Some(e) = error { p.notice role="alert" { (e) } }
            @if let Some(n) = notice { p.notice role="status" { (n) } }
            table.list.folder-admin {
                tbody {
                    @for r in rows {
                        tr data-folder=(r.name) {
                            td { (r.name) }
                            td.muted { (r.messages) " messages, " (r.unseen) " unread" }
                            td {
                                form.inline method="post" action="/folders" {
                                    @if r.subscribed {
                                        (hidden("unsubscribe", &r.name))
                                        button { "Unsubscribe" }
                                    } @else {
                                        (hidden("subscribe", &r.name))
                                        button { "Subscribe" }
                                    }
                                }
                                @if !r.special {
                                    " "
                                    form.inline method="post" action="/folders" {
                                        (hidden("rename", &r.name))
                                        input name="to" value=(r.name) aria-label={"New name for " (r.name)} required;
                                        button { "Rename" }
                                    }
                                    " "
                                    form.inline method="post" action="/folders" {
                                        (hidden("delete", &r.name))
                                        button data-confirm={"Delete the folder " (r.name) " and its messages?"} { "Delete" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            h2 { "New folder" }
            form.compose method="post" action="/folders" {
                input type="hidden" name="csrf" value=(chrome.csrf);
                input type="hidden" name="op" value="create";
                label { "Name (a / makes a subfolder)" input name="name" required maxlength="200"; }
                div.actions { button { "Create" } }
            }
        },
    )
}
