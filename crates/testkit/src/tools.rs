//! Independent clients run against the servers under test: Python's
//! mail libraries and swaks.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Runs a Python 3 snippet with `args` (as sys.argv[1:]); returns stdout.
/// A failing snippet fails the test with its stderr.
pub fn python(code: &str, args: &[&str]) -> String {
    python_at("python3", code, args)
}

/// As [`python`], with Debian's own Python, which has the modules of
/// Debian packages (python3-dkim) that another `python3` on the path may
/// lack.
pub fn debian_python(code: &str, args: &[&str]) -> String {
    python_at("/usr/bin/python3", code, args)
}

fn python_at(python: &str, code: &str, args: &[&str]) -> String {
    let out = Command::new(python)
        .arg("-c")
        .arg(code)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{python} must be installed: {e}"));
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Where the virtualenv with the tests' PyPI packages (jmapc and what it
/// needs, `crates/sluice/tests/jmap/requirements.txt`) is: what
/// `SLUICE_TEST_VENV` names, else `$HOME/.cache/sluice/venv`, as
/// `./test.sh` makes it.
pub fn venv_dir() -> std::path::PathBuf {
    match std::env::var_os("SLUICE_TEST_VENV") {
        Some(dir) => dir.into(),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            Path::new(&home).join(".cache/sluice/venv")
        }
    }
}

/// As [`python`], with the virtualenv's Python ([`venv_dir`]) and `env`
/// set. A missing virtualenv fails the test, saying how to make it.
pub fn venv_python(code: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let python = venv_dir().join("bin/python3");
    assert!(
        python.exists(),
        "{} is missing: ./test.sh makes it (python3 -m venv, then pip install -r \
         crates/sluice/tests/jmap/requirements.txt)",
        python.display()
    );
    let out = Command::new(&python)
        .arg("-c")
        .arg(code)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{} must run: {e}", python.display()));
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Starts a Python 3 snippet with piped stdin and stdout, for clients
/// that must stay connected while the test looks at the server.
pub fn python_spawn(code: &str, args: &[&str]) -> Child {
    Command::new("python3")
        .arg("-c")
        .arg(code)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 must be installed")
}

/// One IMAP LOGIN by Python's imaplib: "OK", or the server's refusal as
/// imaplib words it.
pub fn imap_login(imap: SocketAddr, user: &str, password: &str) -> String {
    python(
        r#"
import imaplib, sys
h, p = sys.argv[1].rsplit(":", 1)
m = imaplib.IMAP4(h, int(p))
try:
    m.login(sys.argv[2], sys.argv[3]); print("OK")
except imaplib.IMAP4.error as e:
    print(e)
"#,
        &[&imap.to_string(), user, password],
    )
    .trim()
    .to_string()
}

/// Runs swaks (must be installed: .ci/run does it); returns its transcript.
pub fn swaks(args: &[&str]) -> Output {
    Command::new("swaks")
        .args(args)
        .output()
        .expect("swaks must be installed")
}

/// A socket address as a command-line argument.
pub fn addr_arg(a: SocketAddr) -> String {
    a.to_string()
}

/// A path as a command-line argument.
pub fn path_arg(p: &Path) -> String {
    p.display().to_string()
}
