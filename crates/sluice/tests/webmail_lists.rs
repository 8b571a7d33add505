//! Moving about message lists in the webmail with a real browser: Debian's
//! Chromium, driven by tests/browser/lists.mjs (playwright-core), against
//! a real `sluice serve` with mail delivered over SMTP. Every test also
//! fails if the server logged a panic.

use sluice_testkit as kit;

use kit::{python, Server, PASSWORD};

/// Runs the Chromium driver (tests/browser/lists.mjs) in `mode`.
fn browser(mode: &str, server: &Server, user: &str) -> String {
    kit::browser("lists.mjs", mode, server, user, &[])
}

/// With 250 messages, a message opened from page 3 of the folder (and of a
/// search in it) leads back to page 3 with the same rows, by its back link
/// and by the browser's Back button; archiving it from there returns to
/// page 3 too. Search across folders counts all 250 hits and pages to the
/// 250th, and a hit opened from its last page leads back to that page.
#[test]
fn paging_position_survives_in_chromium() {
    let server = Server::start();
    let user = server.add_user("pager");
    let report = browser("paging", &server, &user);
    assert!(report.contains("\"hits\":250"), "{report}");
}

/// The subjects in a mailbox over IMAP, sorted, one a line.
fn imap_subjects(server: &Server, user: &str, mailbox: &str) -> String {
    python(
        r#"
import imaplib, email, sys
imap_addr, user, password, box = sys.argv[1:5]
h, p = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(user, password)
typ, _ = m.select('"%s"' % box)
assert typ == "OK", box
typ, data = m.uid("SEARCH", None, "ALL")
subjects = []
for uid in data[0].split():
    typ, d = m.uid("FETCH", uid, "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    subjects.append(email.message_from_bytes(d[0][1])["Subject"])
print("\n".join(sorted(subjects)))
m.logout()
"#,
        &[&server.imap.to_string(), user, PASSWORD, mailbox],
    )
}

/// Two ticked rows dragged (Playwright's dragTo) onto Archive move
/// together; one unticked row dragged step by step onto Trash highlights
/// the folder under the pointer, announces the move in a status region,
/// and moves alone. IMAP sees the messages in their new folders.
#[test]
fn dragging_rows_onto_a_folder_moves_them_in_chromium() {
    let server = Server::start();
    let user = server.add_user("dragger");
    let report = browser("drag", &server, &user);
    assert!(report.contains("\"dragged\":3"), "{report}");
    assert_eq!(
        imap_subjects(&server, &user, "Archive").trim(),
        "drag 2\ndrag 4"
    );
    assert_eq!(imap_subjects(&server, &user, "Trash").trim(), "drag 1");
    assert_eq!(
        imap_subjects(&server, &user, "INBOX").trim(),
        "drag 3\ndrag 5"
    );
}

/// "Group by conversation" (a form, so it works without JavaScript)
/// lists one row per thread, by the threads the store keeps: the count,
/// the senders newest first, unread while any message is, the newest
/// subject and date. The choice is kept for the user (a second browser
/// sees it), a row opens the conversation page, and the switch goes back
/// to one row per message.
#[test]
fn conversation_view_switch_in_chromium() {
    let server = Server::start();
    let user = server.add_user("threader");
    let report = browser("threads", &server, &user);
    assert!(report.contains("\"threads\":3"), "{report}");
}
