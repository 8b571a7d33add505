//! The admin pages' HTML (maud: every value escaped). Plain forms, one
//! per change, each with the session's CSRF token: they work without
//! JavaScript.

use axum::response::Html;
use maud::{html, Markup, DOCTYPE};
use store::{AliasEntry, DkimKey, QueuedRecipient, Quota};

use crate::pages::{head, human_size};
use crate::routes::display_date;
use crate::session::User;

/// One admin page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Overview,
    Domains,
    Users,
    Aliases,
    Queue,
    Dkim,
    Logs,
}

impl Section {
    const ALL: [Section; 7] = [
        Section::Overview,
        Section::Domains,
        Section::Users,
        Section::Aliases,
        Section::Queue,
        Section::Dkim,
        Section::Logs,
    ];

    /// Where the page is, and where its forms post.
    pub(crate) fn path(self) -> &'static str {
        match self {
            Section::Overview => "/admin",
            Section::Domains => "/admin/domains",
            Section::Users => "/admin/users",
            Section::Aliases => "/admin/aliases",
            Section::Queue => "/admin/queue",
            Section::Dkim => "/admin/dkim",
            Section::Logs => "/admin/logs",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Section::Overview => "Overview",
            Section::Domains => "Domains",
            Section::Users => "Users",
            Section::Aliases => "Aliases",
            Section::Queue => "Queue",
            Section::Dkim => "DKIM",
            Section::Logs => "Log",
        }
    }
}

/// An account on the users page.
pub(crate) struct UserRow {
    pub address: String,
    /// `None` when the directory has not loaded the account yet.
    pub quota: Option<Quota>,
}

/// The frame of every admin page: its sections, the logout form, and the
/// reason a change was refused, if one was.
pub(crate) fn layout(
    user: &User,
    section: Section,
    notice: Option<&str>,
    content: Markup,
) -> Html<String> {
    Html(
        html! {
            (DOCTYPE)
            html lang="en" {
                (head(&format!("{} – Sluice admin", section.title())))
                body data-view="admin" {
                    header {
                        strong { "Sluice admin" }
                        a href="/" { "Mail" }
                        span.muted { (user.address) }
                        form method="post" action="/logout" {
                            input type="hidden" name="csrf" value=(user.csrf);
                            button { "Log out" }
                        }
                    }
                    div.layout {
                        nav.folders aria-label="Admin" {
                            @for s in Section::ALL {
                                a href=(s.path()) class=[(s == section).then_some("current")] { (s.title()) }
                            }
                        }
                        main {
                            h1 { (section.title()) }
                            @if let Some(n) = notice { p.notice role="alert" { (n) } }
                            (content)
                        }
                    }
                }
            }
        }
        .into_string(),
    )
}

fn csrf_field(csrf: &str) -> Markup {
    html! { input type="hidden" name="csrf" value=(csrf); }
}

/// Key series from the metrics registry.
pub(crate) fn overview(series: &[(String, String)]) -> Markup {
    html! {
        h2 { "Metrics at a glance" }
        @if series.is_empty() {
            p.muted { "Nothing counted yet." }
        } @else {
            table.admin {
                tr { th { "Series" } th { "Value" } }
                @for (name, value) in series {
                    tr { td { code { (name) } } td { (value) } }
                }
            }
        }
        p.muted { "All series: the " code { "/metrics" } " endpoint of the metrics listener." }
    }
}

pub(crate) fn domains(csrf: &str, domains: &[String]) -> Markup {
    html! {
        ul.admin-list {
            @for d in domains { li { (d) } }
        }
        form.admin method="post" action=(Section::Domains.path()) {
            (csrf_field(csrf))
            input type="hidden" name="action" value="add";
            label { "Domain " input name="name" required placeholder="example.org"; }
            button { "Add domain" }
        }
    }
}

pub(crate) fn users(csrf: &str, rows: &[UserRow]) -> Markup {
    let path = Section::Users.path();
    html! {
        table.admin {
            tr { th { "Address" } th { "Used" } th { "Limit" } }
            @for r in rows {
                tr {
                    td { (r.address) }
                    @match &r.quota {
                        Some(q) => {
                            td { (human_size(q.used_bytes)) " in " (q.messages) " messages" }
                            td.quota { (q.limit_bytes.map_or("none".to_string(), human_size)) }
                        }
                        None => { td {} td {} }
                    }
                }
            }
        }
        h2 { "Add a user" }
        form.admin method="post" action=(path) {
            (csrf_field(csrf))
            input type="hidden" name="action" value="add";
            label { "Address " input name="address" type="email" required; }
            label { "Password " input name="password" type="password" autocomplete="new-password" required; }
            button { "Add user" }
        }
        h2 { "Reset a password" }
        form.admin method="post" action=(path) {
            (csrf_field(csrf))
            input type="hidden" name="action" value="password";
            label { "Address " (account_choice(rows)) }
            label { "New password " input name="password" type="password" autocomplete="new-password" required; }
            button { "Set password" }
        }
        h2 { "Set a storage limit" }
        form.admin method="post" action=(path) {
            (csrf_field(csrf))
            input type="hidden" name="action" value="quota";
            label { "Address " (account_choice(rows)) }
            label { "Limit " input name="limit" required placeholder="500M, 2G or none"; }
            button { "Set limit" }
        }
    }
}

fn account_choice(rows: &[UserRow]) -> Markup {
    html! {
        select name="address" required {
            @for r in rows { option value=(r.address) { (r.address) } }
        }
    }
}

pub(crate) fn aliases(csrf: &str, aliases: &[AliasEntry]) -> Markup {
    let path = Section::Aliases.path();
    html! {
        table.admin {
            tr { th { "Alias" } th { "Delivered to" } th {} }
            @for a in aliases {
                tr {
                    td { (a.address) }
                    td { (a.targets.join(", ")) }
                    td {
                        form method="post" action=(path) {
                            (csrf_field(csrf))
                            input type="hidden" name="action" value="remove";
                            input type="hidden" name="address" value=(a.address);
                            button { "Remove" }
                        }
                    }
                }
            }
        }
        h2 { "Add an alias" }
        form.admin method="post" action=(path) {
            (csrf_field(csrf))
            input type="hidden" name="action" value="add";
            label { "Address " input name="address" type="email" required; }
            label { "Targets " input name="targets" required placeholder="local or remote addresses, separated by commas"; }
            button { "Add alias" }
        }
    }
}

pub(crate) fn queue(csrf: &str, rows: &[QueuedRecipient]) -> Markup {
    let path = Section::Queue.path();
    html! {
        @if rows.is_empty() {
            p { "The queue is empty." }
        } @else {
            table.admin {
                tr { th { "Id" } th { "Sender" } th { "Recipient" } th { "Size" } th { "Queued" }
                     th { "Attempts" } th { "Next attempt" } th { "Last error" } th {} }
                @for r in rows {
                    tr {
                        td { (r.id) }
                        td { @if r.sender.is_empty() { "<>" } @else { (r.sender) } }
                        td { (r.recipient) }
                        td { (human_size(r.size)) }
                        td { (display_date(r.created)) }
                        td { (r.attempts) }
                        td { (display_date(r.next_attempt)) }
                        td { (r.last_error.as_deref().unwrap_or("")) }
                        td {
                            form method="post" action=(path) {
                                (csrf_field(csrf))
                                input type="hidden" name="id" value=(r.id);
                                button name="action" value="retry" { "Retry now" }
                                button name="action" value="remove" { "Remove" }
                            }
                        }
                    }
                }
            }
            p.muted { "Remove sends no bounce; the sender is not told." }
        }
    }
}

/// The records `sluice dkim record` prints, with each key's state.
pub(crate) fn dkim(records: &[(DkimKey, String)]) -> Markup {
    html! {
        @if records.is_empty() {
            p { "No DKIM keys. Make one with " code { "sluice dkim keygen DOMAIN" } "." }
        } @else {
            @for (k, txt) in records {
                h2 { (k.domain) " · " (k.selector) " · " (k.algorithm) " · "
                     @if k.signing { "signing" } @else { "published only" } }
                pre.dkim { (txt) }
            }
        }
    }
}

/// Recent log lines, those containing `filter` (a client address, a
/// queue id, an account...). `None`: the server keeps none.
pub(crate) fn logs(filter: &str, lines: Option<&[String]>) -> Markup {
    html! {
        form.admin method="get" action=(Section::Logs.path()) role="search" {
            label { "Lines containing " input name="filter" value=(filter) placeholder="queue id, client address, account"; }
            button { "Show" }
        }
        @match lines {
            None => p { "No log lines are kept (" code { "[web] admin_log_lines = 0" } ")." },
            Some([]) => p { "No recent line matches." },
            Some(lines) => pre.log { @for l in lines { (l) "\n" } },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped() {
        let user = User {
            account: 1,
            address: "<b>@x".into(),
            csrf: "t\"k".into(),
            id_hash: String::new(),
            admin: true,
        };
        let page = layout(
            &user,
            Section::Domains,
            Some("<script>"),
            domains("t\"k", &["<i>.org".into()]),
        )
        .0;
        assert!(!page.contains("<script>") && page.contains("&lt;script&gt;"));
        assert!(!page.contains("<i>.org") && !page.contains("<b>@x"));
        assert!(page.contains("value=\"t&quot;k\""), "{page}");
    }
}
