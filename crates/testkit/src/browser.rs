//! The Chromium drivers of the webmail and admin tests: node scripts in
//! crates/sluice/tests/browser (playwright-core, axe-core), run against a
//! server on loopback. One place checks that the browser and the node
//! modules are there, passes the server's addresses, and fails the test
//! with the driver's output or with any panic the server logged.

use std::ffi::OsStr;
use std::path::Path;

use crate::require_program;
use crate::server::{Server, PASSWORD};

/// Where the driver scripts and their `node_modules` are.
const DRIVERS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice/tests/browser");

/// Runs `script` (e.g. `actions.mjs`) with `mode` as its argument against
/// `server`, logged in as `user` with the kit's password. The driver gets
/// `BASE` (the web listener's URL), `USER`, `PASSWORD`, `SMTP` and `env`.
/// Returns its standard output; fails the test if the driver fails or the
/// server panicked.
pub fn browser(
    script: &str,
    mode: &str,
    server: &Server,
    user: &str,
    env: &[(&str, &OsStr)],
) -> String {
    require_program("chromium", "chromium");
    let node = require_program("node", "nodejs");
    for module in ["playwright-core", "axe-core"] {
        assert!(
            Path::new(DRIVERS)
                .join("node_modules")
                .join(module)
                .exists(),
            "{module} is not installed: run `npm ci` in {DRIVERS} (./test.sh does)"
        );
    }
    let mut command = std::process::Command::new(node);
    command
        .arg(script)
        .arg(mode)
        .current_dir(DRIVERS)
        .env("BASE", format!("http://{}", server.addr("http")))
        .env("USER", user)
        .env("PASSWORD", PASSWORD)
        .env("SMTP", server.smtp.to_string());
    for (name, value) in env {
        command.env(name, value);
    }
    let run = command.output().expect("node runs");
    assert!(
        run.status.success(),
        "browser check {script} {mode} failed:\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    server.assert_no_panic();
    String::from_utf8(run.stdout).expect("the driver prints UTF-8")
}
