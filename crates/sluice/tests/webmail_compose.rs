//! Writing mail in the webmail with a real browser: Debian's Chromium,
//! driven by tests/browser/compose.mjs (playwright-core), against a real
//! `sluice serve`. What was really sent is read back over IMAP (imaplib).
//! Every test also fails if the server logged a panic.

use sluice_testkit as kit;

use kit::{python, Server, PASSWORD};

/// Runs the Chromium driver (tests/browser/compose.mjs) in `mode`.
fn browser(mode: &str, server: &Server, user: &str, friend: &str, other: &str) -> String {
    kit::browser(
        "compose.mjs",
        mode,
        server,
        user,
        &[("FRIEND", friend.as_ref()), ("OTHER", other.as_ref())],
    )
}

/// Over IMAP, one JSON line per message of `mailbox`: its flags, its
/// In-Reply-To and each attachment's SHA-256 by file name.
fn imap_messages(server: &Server, user: &str, mailbox: &str) -> String {
    python(
        r#"
import imaplib, email, email.policy, hashlib, sys, json
imap_addr, user, password, box = sys.argv[1:5]
h, p = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(user, password)
typ, _ = m.select('"%s"' % box)
assert typ == "OK", box
typ, data = m.uid("SEARCH", None, "ALL")
for uid in data[0].split():
    typ, d = m.uid("FETCH", uid, "(FLAGS BODY.PEEK[])")
    flags = imaplib.ParseFlags(d[0][0])
    msg = email.message_from_bytes(d[0][1], policy=email.policy.default)
    files = {a.get_filename(): hashlib.sha256(a.get_content() if isinstance(a.get_content(), bytes) else a.get_payload(decode=True)).hexdigest()
             for a in msg.iter_attachments()}
    print(json.dumps({"subject": msg["Subject"], "flags": sorted(f.decode() for f in flags),
        "in_reply_to": msg["In-Reply-To"], "references": msg["References"],
        "files": json.dumps(files, sort_keys=True, separators=(",", ":"))}))
m.logout()
"#,
        &[&server.imap.to_string(), user, PASSWORD, mailbox],
    )
}

/// A reply saved as a draft and reopened from Drafts keeps In-Reply-To
/// and References, and knows again which message it answers: sending it
/// marks the original `\Answered` (seen over IMAP), and the friend's copy
/// carries the In-Reply-To.
#[test]
fn a_reopened_reply_draft_keeps_what_it_answers_in_chromium() {
    let server = Server::start();
    let user = server.add_user("asker");
    let friend = server.add_user("answerer");
    browser("answered", &server, &user, &friend, "");
    let inbox = imap_messages(&server, &user, "INBOX");
    assert!(inbox.contains("\\\\Answered"), "{inbox}");
    let got = imap_messages(&server, &friend, "INBOX");
    assert_eq!(got.lines().count(), 1, "{got}");
    assert!(
        got.contains("\"in_reply_to\": \"<question-1@remote.test>\""),
        "{got}"
    );
    assert!(
        got.contains("\"references\": \"<question-1@remote.test>\""),
        "{got}"
    );
}

/// Files dropped on the form are uploaded into the draft at once, each
/// with a `<progress>` that reaches 100%; one is removed again before
/// sending. The friend's copy holds the other two, byte for byte
/// (SHA-256). Without JavaScript the file input is there and no zone.
#[test]
fn dropped_files_upload_with_progress_and_arrive_whole_in_chromium() {
    let server = Server::start();
    let user = server.add_user("dropper");
    let friend = server.add_user("catcher");
    let report = browser("drop", &server, &user, &friend, "");
    let files = report
        .split("\"files\":")
        .nth(1)
        .and_then(|s| s.strip_suffix("}\n"))
        .expect("the driver reports the files")
        .to_string();
    let got = imap_messages(&server, &friend, "INBOX");
    assert_eq!(got.lines().count(), 1, "{got}");
    let quoted = serde_json::to_string(&files).unwrap();
    assert!(got.contains(&quoted), "{got}\nwanted {quoted}");
    assert_eq!(imap_messages(&server, &user, "Drafts"), "");
}

/// The address fields suggest past correspondents as an ARIA combobox:
/// typing a prefix offers them most frequent first, ArrowDown and Enter
/// fill the field, a second address goes after the comma. A third
/// account's correspondent never shows, in the list or the JSON.
#[test]
fn address_suggestions_rank_fill_and_stay_in_the_account_in_chromium() {
    let server = Server::start();
    let user = server.add_user("writer");
    let other = server.add_user("stranger");
    let report = browser("suggest", &server, &user, "", &other);
    assert!(report.contains("\"alfred\":[]"), "{report}");
    let sent = imap_messages(&server, &user, "Sent");
    assert!(sent.contains("\"subject\": \"to both\""), "{sent}");
}

/// A signature per sending identity, set on the webmail's Signatures
/// page for the account's address and for an alias of it: JMAP's
/// Identity/get (raw JSON over HTTP, Basic auth) shows both as
/// `textSignature`; compose puts the own one below the text after `-- `,
/// changing From to the alias swaps it, and the friend's copy is from
/// the alias with its signature.
#[test]
fn a_signature_per_identity_shared_with_jmap_in_chromium() {
    let server = Server::start();
    let user = server.add_user("ann");
    let friend = server.add_user("client");
    let alias = format!("sales@{}", kit::DOMAIN);
    server.cli_ok(&["alias", "add", &alias, &user]);
    kit::browser(
        "compose.mjs",
        "signature",
        &server,
        &user,
        &[
            ("FRIEND", friend.as_ref()),
            ("OTHER", "".as_ref()),
            ("ALIAS", alias.as_ref()),
        ],
    );
    let identities = python(
        r#"
import sys, json, base64, urllib.request
http_addr, user, password = sys.argv[1:4]
auth = {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}
def call(path, body=None):
    h = dict(auth)
    if body is not None:
        h["Content-Type"] = "application/json"
    req = urllib.request.Request("http://" + http_addr + path, data=body, headers=h)
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())
account = call("/jmap/session")["primaryAccounts"]["urn:ietf:params:jmap:core"]
got = call("/jmap/api", json.dumps({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:submission"],
    "methodCalls": [["Identity/get", {"accountId": account}, "0"]]}).encode())
for i in sorted(got["methodResponses"][0][1]["list"], key=lambda i: i["email"]):
    print(json.dumps({"email": i["email"], "textSignature": i["textSignature"]}))
"#,
        &[&server.addr("http").to_string(), &user, PASSWORD],
    );
    assert!(
        identities.contains(&format!(
            "{{\"email\": \"{user}\", \"textSignature\": \"Ann Example\\nSluice Ltd\"}}"
        )),
        "{identities}"
    );
    assert!(
        identities.contains(&format!(
            "{{\"email\": \"{alias}\", \"textSignature\": \"The sales team\\nCall us any time\"}}"
        )),
        "{identities}"
    );
    let got = python(
        r#"
import imaplib, email, email.policy, sys, json
imap_addr, user, password = sys.argv[1:4]
h, p = imap_addr.rsplit(":", 1)
m = imaplib.IMAP4(h, int(p)); m.login(user, password)
m.select("INBOX")
typ, data = m.uid("SEARCH", None, "ALL")
for uid in data[0].split():
    typ, d = m.uid("FETCH", uid, "(BODY.PEEK[])")
    msg = email.message_from_bytes(d[0][1], policy=email.policy.default)
    print(json.dumps({"from": msg["From"], "text": msg.get_body(("plain",)).get_content().replace("\r\n", "\n")}))
m.logout()
"#,
        &[&server.imap.to_string(), &friend, PASSWORD],
    );
    assert!(got.contains(&alias), "{got}");
    assert!(
        got.contains(
            "\"text\": \"Our offer is attached.\\n\\n-- \\nThe sales team\\nCall us any time"
        ),
        "{got}"
    );
    assert!(!got.contains("Ann Example"), "{got}");
}

/// axe-core on the compose page with an upload listed and the
/// suggestions open: no serious or critical violation, light and dark.
#[test]
fn compose_page_passes_axe_in_chromium() {
    let server = Server::start();
    let user = server.add_user("checker");
    browser("axe", &server, &user, "", "");
}
