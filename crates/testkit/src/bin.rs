//! Where the `sluice` binary under test is.

use std::path::PathBuf;

/// The `sluice` binary: `$SLUICE_BIN`, else the one cargo built next to
/// the running test. A library cannot use `env!("CARGO_BIN_EXE_sluice")`,
/// so this follows cargo's own test helpers: tests run from
/// `<target>/<profile>/deps/<test>`, and the binary is
/// `<target>/<profile>/sluice`. Integration tests of the `sluice` crate
/// get it built by cargo; other crates' tests need it built first
/// (`cargo test --workspace` does).
pub fn sluice_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("test binary path");
    let bin = exe
        .parent()
        .filter(|deps| deps.ends_with("deps"))
        .and_then(|deps| deps.parent())
        .unwrap_or_else(|| {
            panic!(
                "test binary {} is not in <target>/<profile>/deps",
                exe.display()
            )
        })
        .join(format!("sluice{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "no sluice binary at {}: build it first (`cargo build -p sluice`, or run `cargo test --workspace`), or set SLUICE_BIN",
        bin.display()
    );
    bin
}
