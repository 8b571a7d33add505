//! The acting side of the webmail in Chromium (tests/browser/actions.mjs
//! drives Debian's Chromium through playwright-core against a real
//! `sluice serve`): live updates keep the selection, drafts reopen and are
//! replaced, Trash deletes for good after a confirmation (a page without
//! JavaScript, a dialog with it), a bad address keeps the form, selection
//! and unread counts, folders, Spam and Not spam, search across folders
//! and the key sheet.
//! Mail arrives over SMTP; results are checked over IMAP (imaplib) too.

use std::time::Duration;

use sluice_testkit as kit;

use kit::{python, Server, PASSWORD};

/// Runs the Chromium driver (tests/browser/actions.mjs) in `mode`.
fn browser(mode: &str, server: &Server, user: &str, friend: &str) -> String {
    kit::browser(
        "actions.mjs",
        mode,
        server,
        user,
        &[("FRIEND", friend.as_ref())],
    )
}

/// Over IMAP: the subjects in a mailbox, and for each message the names
/// of its attachments and the start of its text, as JSON lines.
fn imap_messages(server: &Server, user: &str, mailbox: &str) -> String {
    python(
        r#"
import imaplib, email, email.policy, sys, json
imap_addr, user, password, box = sys.argv[1:5]
h, p = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(user, password)
typ, _ = m.select('"%s"' % box)
assert typ == "OK", box
typ, data = m.uid("SEARCH", None, "ALL")
for uid in data[0].split():
    typ, d = m.uid("FETCH", uid, "(BODY.PEEK[])")
    msg = email.message_from_bytes(d[0][1], policy=email.policy.default)
    body = msg.get_body(("plain",))
    print(json.dumps({"subject": msg["Subject"], "to": msg["To"], "cc": msg["Cc"],
        "files": [a.get_filename() for a in msg.iter_attachments()],
        "text": body.get_content() if body else ""}))
m.logout()
"#,
        &[&server.imap.to_string(), user, PASSWORD, mailbox],
    )
}

/// Ticked boxes survive a live update: two rows are ticked, a new mail
/// arrives over SMTP and is swapped into the list without a reload, and
/// the same two are still ticked (the new one is not); the tab's title
/// follows the unread count.
#[test]
fn live_update_keeps_the_ticked_boxes_in_chromium() {
    let server = Server::start();
    let user = server.add_user("live");
    let report = browser("live", &server, &user, "");
    assert!(report.contains("\"ticked\":2"), "{report}");
}

/// A saved draft opens again in Compose with its To, Cc, Subject, text
/// and attachment; saving again replaces it (one draft, not two); sending
/// removes it: the friend gets the last text with the attachment, Drafts
/// is empty and Sent holds one copy.
#[test]
fn a_draft_reopens_is_replaced_and_goes_when_sent_in_chromium() {
    let server = Server::start();
    let user = server.add_user("writer");
    let friend = server.add_user("reader");
    browser("drafts", &server, &user, &friend);
    assert_eq!(imap_messages(&server, &user, "Drafts"), "");
    let sent = imap_messages(&server, &user, "Sent");
    assert_eq!(sent.lines().count(), 1, "{sent}");
    let got = imap_messages(&server, &friend, "INBOX");
    assert_eq!(got.lines().count(), 1, "{got}");
    assert!(got.contains("\"subject\": \"plan\""), "{got}");
    assert!(got.contains("\"files\": [\"plan.txt\"]"), "{got}");
    assert!(got.contains("\"text\": \"second version"), "{got}");
    assert!(got.contains("carol@remote.test"), "{got}");
}

/// RFC 6154 \Trash: Delete inside Trash deletes for good after a
/// confirmation, a page of its own without JavaScript and a dialog with
/// it (dismissing it keeps the mail); Empty Trash likewise. Afterwards
/// IMAP sees Trash and INBOX empty.
#[test]
fn delete_in_trash_and_empty_trash_ask_then_delete_for_good_in_chromium() {
    let server = Server::start();
    let user = server.add_user("tidy");
    browser("trash", &server, &user, "");
    assert_eq!(imap_messages(&server, &user, "Trash"), "");
    assert_eq!(imap_messages(&server, &user, "INBOX"), "");
}

/// A typo in To: the form comes back with the text, the subject and the
/// uploaded file, and the error beside To (aria-describedby); fixed, the
/// message is sent with its attachment and no draft is left behind.
#[test]
fn a_bad_address_keeps_the_whole_form_in_chromium() {
    let server = Server::start();
    let user = server.add_user("typist");
    let friend = server.add_user("pal");
    browser("badaddr", &server, &user, &friend);
    assert_eq!(imap_messages(&server, &user, "Drafts"), "");
    let got = imap_messages(&server, &friend, "INBOX");
    assert_eq!(got.lines().count(), 1, "{got}");
    assert!(got.contains("\"files\": [\"notes.txt\"]"), "{got}");
    assert!(got.contains("\"text\": \"A long and careful text"), "{got}");
}

/// Select all, shift-click ranges, mark read, mark all read; the unread
/// count in the folder list (name and count apart) and in the tab title.
#[test]
fn selection_ranges_and_unread_counts_in_chromium() {
    let server = Server::start();
    let user = server.add_user("picker");
    browser("select", &server, &user, "");
}

/// The folders page creates, subscribes, renames and deletes a folder;
/// the Move menu starts on a placeholder, and a move without a folder is
/// refused with a message saying so.
#[test]
fn folders_and_the_move_menu_in_chromium() {
    let server = Server::start();
    let user = server.add_user("sorter");
    browser("folders", &server, &user, "");
    let out = python(
        r#"
import imaplib, sys
imap_addr, user, password = sys.argv[1:4]
h, p = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(user, password)
typ, names = m.list()
print(b"\n".join(names).decode())
m.logout()
"#,
        &[&server.imap.to_string(), &user, PASSWORD],
    );
    assert!(out.contains("Keep"), "{out}");
    assert!(!out.contains("Projects") && !out.contains("Work"), "{out}");
}

/// Spam and Not spam move the message to Junk and back, and train the
/// account's classifier as such moves do over IMAP; the message shows the
/// spam filter's verdict and its tests.
#[test]
fn spam_and_not_spam_train_the_classifier_in_chromium() {
    let server = Server::start();
    let user = server.add_user("judge");
    browser("spam", &server, &user, "");
    // One message stayed in Junk (spam), one came back (ham): the
    // account's own model learnt both.
    let totals = |column: &str| {
        server.count(&format!(
            "SELECT coalesce(sum({column}), 0) FROM spam_totals \
             WHERE account_id = (SELECT id FROM accounts WHERE address = '{user}')"
        ))
    };
    let trained = kit::wait_until(Duration::from_secs(30), || {
        totals("spam") == 1 && totals("ham") == 1
    });
    assert!(trained, "spam {} ham {}", totals("spam"), totals("ham"));
}

/// Search across every folder shows each hit's folder, and filters by
/// From, To, Subject, an attachment, a date range and unread.
#[test]
fn search_all_folders_with_filters_in_chromium() {
    let server = Server::start();
    let user = server.add_user("seeker");
    browser("search", &server, &user, "");
}

/// `?` opens the sheet of keyboard shortcuts and Escape closes it; x
/// ticks the row under the cursor.
#[test]
fn the_key_sheet_and_x_in_chromium() {
    let server = Server::start();
    let user = server.add_user("keys");
    browser("keys", &server, &user, "");
}
