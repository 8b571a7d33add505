#!/usr/bin/env bash
# A short, repeatable fuzz run of every target: a fixed seed and a fixed
# number of runs, so the same code gives the same inputs on every machine.
# CI runs this after the tests; for real fuzzing use `cargo fuzz run` with
# a time budget (see README.md).
#
# Usage: crates/imap/fuzz/smoke.sh [RUNS_PER_TARGET]
set -euo pipefail
cd "$(dirname "$0")"
runs=${1:-20000}
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
# cargo-fuzz passes nightly-only flags for the sanitizer; stable accepts
# them with RUSTC_BOOTSTRAP.
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$HOME/.cache/sluice/fuzz-target}"
targets=$(cargo fuzz list)
for target in $targets; do
  echo "fuzz $target: $runs runs, seed 1"
  cargo fuzz run -O "$target" -- -runs="$runs" -seed=1 -max_len=65536 2>&1 | tail -n 2
done
# A failing target stops the script above (set -e, pipefail).
echo "fuzz: $(echo "$targets" | wc -w) passed, 0 failed"
