//! ManageSieve against a real `sluice serve`, with `sieve-connect` (an
//! independent client, over STARTTLS) and Python raw sockets for the
//! corners; and the `sluice sieve` command line.

use sluice_testkit as kit;

use std::process::{Command, Output, Stdio};

use kit::{python, Server, PASSWORD};

/// Runs sieve-connect as `user` against the server's ManageSieve
/// listener with `args` (the password goes in on standard input).
fn sieve_connect(server: &Server, user: &str, password: &str, args: &[&str]) -> Output {
    let addr = server.addr("managesieve");
    let mut child = Command::new("sieve-connect")
        .args(["--nosrv", "--notlsverify", "--passwordfd", "0"])
        .args(["-s", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(["-u", user])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sieve-connect must be installed (test.sh installs it)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const SCRIPT: &str = "require [\"fileinto\"];\r\nif header :contains \"List-Id\" \"rust\" {\r\n  fileinto \"Lists\";\r\n}\r\n";

#[test]
fn sieve_connect_uploads_lists_activates_downloads_and_deletes() {
    let server = Server::start();
    let user = server.add_user("filter");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("lists.sieve");
    std::fs::write(&local, SCRIPT).unwrap();
    let local = local.to_string_lossy().into_owned();

    ok(sieve_connect(
        &server,
        &user,
        PASSWORD,
        &["--upload", "--localsieve", &local, "--remotesieve", "lists"],
    ));
    ok(sieve_connect(
        &server,
        &user,
        PASSWORD,
        &["--activate", "--remotesieve", "lists"],
    ));
    let list = ok(sieve_connect(&server, &user, PASSWORD, &["--list"]));
    assert!(
        list.lines()
            .any(|l| l.contains("lists") && l.contains("ACTIVE")),
        "{list}"
    );
    let copy = dir.path().join("copy.sieve");
    ok(sieve_connect(
        &server,
        &user,
        PASSWORD,
        &[
            "--download",
            "--remotesieve",
            "lists",
            "--localsieve",
            &copy.to_string_lossy(),
        ],
    ));
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), SCRIPT);
    // The store has it, active, as delivery will read it.
    assert_eq!(
        server.count("SELECT count(*) FROM sieve_scripts WHERE name = 'lists' AND active"),
        1
    );

    // The active script cannot be deleted; once deactivated it can.
    let refused = sieve_connect(
        &server,
        &user,
        PASSWORD,
        &["--delete", "--remotesieve", "lists"],
    );
    assert!(!refused.status.success(), "{}", text(&refused));
    ok(sieve_connect(&server, &user, PASSWORD, &["--deactivate"]));
    ok(sieve_connect(
        &server,
        &user,
        PASSWORD,
        &["--delete", "--remotesieve", "lists"],
    ));
    let list = ok(sieve_connect(&server, &user, PASSWORD, &["--list"]));
    assert!(!list.contains("lists"), "{list}");
    assert_eq!(server.count("SELECT count(*) FROM sieve_scripts"), 0);
    let log = server.log();
    assert!(
        log.contains("command=\"PUTSCRIPT\"") || log.contains("command=PUTSCRIPT"),
        "changes are logged:\n{log}"
    );
}

#[test]
fn sieve_connect_sees_compile_errors_and_nothing_is_stored() {
    let server = Server::start();
    let user = server.add_user("broken");
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("broken.sieve");
    // Line 2 calls a command that does not exist.
    std::fs::write(&local, "keep;\r\n  frobnicate \"x\";\r\n").unwrap();
    let out = sieve_connect(
        &server,
        &user,
        PASSWORD,
        &[
            "--upload",
            "--localsieve",
            &local.to_string_lossy(),
            "--remotesieve",
            "broken",
        ],
    );
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("line 2, column 3"), "{all}");
    assert_eq!(server.count("SELECT count(*) FROM sieve_scripts"), 0);
    // CHECKSCRIPT says the same and stores nothing either.
    let out = sieve_connect(
        &server,
        &user,
        PASSWORD,
        &["--checkscript", "--localsieve", &local.to_string_lossy()],
    );
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("line 2, column 3"), "{all}");
    assert_eq!(server.count("SELECT count(*) FROM sieve_scripts"), 0);
}

#[test]
fn sieve_connect_with_a_wrong_password_is_refused() {
    let server = Server::start();
    let user = server.add_user("locked");
    let out = sieve_connect(&server, &user, "not the password", &["--list"]);
    let all = text(&out);
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("Authentication failed"), "{all}");
}

/// A raw session from Python: literal forms, HAVESPACE, quota refusals,
/// UNAUTHENTICATE, and no SASL over plain text from a non-loopback
/// address is covered by the crate's tests (here the client is local).
#[test]
fn raw_protocol_corners() {
    let server = Server::start_with("[managesieve]\nmax_script_size = 200\nmax_scripts = 2\n");
    let user = server.add_user("raw");
    let out = python(
        r##"
import base64, socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=30)
f = s.makefile("rb")
def response():
    lines = []
    while True:
        line = f.readline().decode()
        lines.append(line.rstrip("\r\n"))
        if line.rstrip().endswith("}") and "{" in line:
            n = int(line.rstrip()[line.rindex("{") + 1:-1])
            lines.append(f.read(n).decode())
            continue
        if line.split(" ")[0].strip() in ("OK", "NO", "BYE"):
            return lines
def cmd(data):
    s.sendall(data.encode() if isinstance(data, str) else data)
    return response()
greeting = response()
print("STARTTLS" if any('"STARTTLS"' in l for l in greeting) else "no STARTTLS")
print("SIEVE" if any(l.startswith('"SIEVE" "') and "fileinto" in l for l in greeting) else "no SIEVE")
auth = base64.b64encode(("\0%s\0%s" % (sys.argv[2], sys.argv[3])).encode()).decode()
print(cmd('AUTHENTICATE "PLAIN" {%d+}\r\n%s\r\n' % (len(auth), auth))[-1])
print(cmd('HAVESPACE "a" 201\r\n')[-1])
print(cmd('PUTSCRIPT "a" {5}\r\nkeep;\r\n')[-1])
print(cmd('PUTSCRIPT "b" "discard;"\r\n')[-1])
print(cmd('HAVESPACE "c" 10\r\n')[-1])
print(cmd('PUTSCRIPT "big" {300+}\r\n' + "#" * 300 + '\r\n')[-1])
print(cmd('CHECKSCRIPT "if true {"\r\n')[-1])
print(cmd('LISTSCRIPTS\r\n'))
print(cmd('UNAUTHENTICATE\r\n')[-1])
print(cmd('LISTSCRIPTS\r\n')[-1])
print(cmd('LOGOUT\r\n')[-1])
"##,
        &[&server.addr("managesieve").to_string(), &user, PASSWORD],
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "STARTTLS", "{out}");
    assert_eq!(lines[1], "SIEVE", "{out}");
    assert_eq!(lines[2], "OK \"Logged in\"", "{out}");
    assert!(lines[3].starts_with("NO (QUOTA/MAXSIZE)"), "{out}");
    assert!(lines[4].starts_with("OK"), "{out}");
    assert!(lines[5].starts_with("OK"), "{out}");
    assert!(lines[6].starts_with("NO (QUOTA/MAXSCRIPTS)"), "{out}");
    assert!(lines[7].starts_with("NO (QUOTA/MAXSIZE)"), "{out}");
    assert!(
        lines[8].starts_with("NO") && lines[8].contains("line 1, column"),
        "{out}"
    );
    assert_eq!(
        lines[9], "['\"a\"', '\"b\"', 'OK \"Listscripts completed\"']",
        "{out}"
    );
    assert!(lines[10].starts_with("OK"), "{out}");
    assert!(lines[11].starts_with("NO"), "{out}");
    assert!(lines[12].starts_with("OK"), "{out}");
}

#[test]
fn command_line_puts_lists_activates_and_gets() {
    let server = Server::start();
    let user = server.add_user("cli");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.sieve");
    std::fs::write(&file, SCRIPT).unwrap();
    let file = file.to_string_lossy().into_owned();

    server.cli_ok(&["sieve", "put", &user, "lists", &file]);
    let out = server.cli(&["sieve", "put", &user, "stdin", "-"], "discard;\n");
    assert!(out.status.success(), "{}", text(&out));
    server.cli_ok(&["sieve", "activate", &user, "lists"]);
    let list = server.cli_ok(&["sieve", "list", &user]);
    assert_eq!(
        list,
        format!("lists\t{}\tactive\nstdin\t9\n", SCRIPT.len()),
        "{list}"
    );
    assert_eq!(server.cli_ok(&["sieve", "get", &user, "lists"]), SCRIPT);
    server.cli_ok(&["sieve", "rename", &user, "stdin", "old"]);
    server.cli_ok(&["sieve", "delete", &user, "old"]);
    let refused = server.cli(&["sieve", "delete", &user, "lists"], "");
    assert!(!refused.status.success(), "{}", text(&refused));
    server.cli_ok(&["sieve", "deactivate", &user]);
    assert_eq!(
        server.cli_ok(&["sieve", "list", &user]),
        format!("lists\t{}\n", SCRIPT.len())
    );

    // Global scripts are apart from the account's.
    server.cli_ok(&["sieve", "put", "--global", "spam", &file]);
    assert_eq!(
        server.cli_ok(&["sieve", "list", "--global"]),
        format!("spam\t{}\n", SCRIPT.len())
    );
    assert_eq!(server.cli_ok(&["sieve", "get", "--global", "spam"]), SCRIPT);
    server.cli_ok(&["sieve", "delete", "--global", "spam"]);

    // A broken script: its line and column, a failing exit, nothing stored.
    let broken = dir.path().join("broken.sieve");
    std::fs::write(&broken, "keep;\n\nfileinto \"x\";\n").unwrap();
    let broken = broken.to_string_lossy().into_owned();
    let out = server.cli(&["sieve", "put", &user, "broken", &broken], "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(err.contains("line 3, column 1"), "{err}");
    assert_eq!(
        server.cli_ok(&["sieve", "list", &user]),
        format!("lists\t{}\n", SCRIPT.len())
    );
    let out = server.cli(&["sieve", "check", &broken], "");
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 3, column 1"),
        "{}",
        text(&out)
    );
    assert!(server.cli_ok(&["sieve", "check", &file]).contains("valid"));
    let out = server.cli(&["sieve", "list", "nobody@example.org"], "");
    assert!(!out.status.success(), "{}", text(&out));
}
