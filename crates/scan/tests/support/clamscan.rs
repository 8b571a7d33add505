//! Running ClamAV's `clamscan` over sample files with a test database, for the
//! cross-checks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The path of clamscan, or `None` (outside CI) when it is not installed.
pub fn clamscan_program() -> Option<PathBuf> {
    if sluice_testkit::under_ci() {
        return Some(sluice_testkit::require_program("clamscan", "clamav"));
    }
    let found = ["/usr/bin/clamscan", "/usr/local/bin/clamscan"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        eprintln!("clamscan is not installed (apt-get install clamav): cross-check skipped");
    }
    found
}

/// Runs clamscan with `--allmatch` over `files` with the database directory `db`:
/// file → every signature name it reported (`.UNOFFICIAL` stripped).
pub fn clamscan_all(
    prog: &Path,
    db: &Path,
    files: &[PathBuf],
) -> BTreeMap<PathBuf, BTreeSet<String>> {
    let mut found: BTreeMap<PathBuf, BTreeSet<String>> =
        files.iter().map(|f| (f.clone(), BTreeSet::new())).collect();
    // Several runs of a few hundred files: command lines stay short.
    for batch in files.chunks(400) {
        let out = Command::new(prog)
            .args(["--no-summary", "--stdout", "--allmatch", "-d"])
            .arg(db)
            .args(batch)
            .output()
            .expect("clamscan runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.code() == Some(0) || out.status.code() == Some(1),
            "clamscan failed ({:?}): {}{}",
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        );
        for line in text.lines() {
            if let Some((path, what)) = line.rsplit_once(": ") {
                if let Some(name) = what.strip_suffix(" FOUND") {
                    let name = name.trim_end_matches(".UNOFFICIAL").to_string();
                    found.entry(PathBuf::from(path)).or_default().insert(name);
                }
            }
        }
    }
    found
}
