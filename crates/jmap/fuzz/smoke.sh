#!/usr/bin/env bash
# The short fixed-seed fuzz run of this crate's targets (.ci/fuzz-smoke).
# Usage: crates/jmap/fuzz/smoke.sh [RUNS_PER_TARGET]
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../../../.ci/fuzz-smoke" "$here" "$@"
