#!/usr/bin/env bash
# Sluice's test command: installs what the tests need when it is missing
# (Debian packages; npm packages for the browser tests), then runs the
# whole suite and short fixed-seed fuzz runs. The tests talk to real peers
# (Python's mail libraries, swaks, mbsync, fetchmail, ClamAV, rbldnsd,
# Dovecot, nsd, Postfix...), and fail, never skip, when one is missing.
#
# Usage: ./test.sh [extra arguments for cargo test]
set -euo pipefail
cd "$(dirname "$0")"

# Debian packages the tests use, and why:
packages=(
  python3                                   # smtplib, poplib, imaplib clients
  python3-venv                              # the virtualenv for the PyPI clients (jmapc, websockets)
  swaks libnet-ssleay-perl libio-socket-ssl-perl  # SMTP client (with STARTTLS)
  procps                                    # ps/kill in the kill -9 tests
  isync fetchmail                           # IMAP sync clients
  neomutt                                   # a mail client, set up as the README says
  clamav clamav-daemon clamav-testfiles     # scanner cross-check, test corpus
  7zip gcab                                 # make the 7z (7zz) and cab archives the scanner cross-check unpacks
  rbldnsd                                   # DNSBL server cross-check
  dovecot-core dovecot-imapd                # IMAP bench workload peer
  dovecot-pop3d                             # upstream POP3 server behind the scanning proxy
  dovecot-sieve                             # sieve-test, the Sieve cross-check peer
  nsd dnsutils                              # the tests' DNS server, and dig
  ldnsutils                                 # signs the test zones (DANE)
  postfix                                   # a real MX peer for outbound mail
  python3-dkim                              # an independent DKIM signer and verifier (dkimpy)
  openssl                                   # makes the test senders' DKIM keys
  python3-prometheus-client                 # parses /metrics as Prometheus does
  chromium                                  # the webmail tests drive Chromium
  sieve-connect                             # an independent ManageSieve client
  pebble                                    # Let's Encrypt's test ACME CA, for certificate issuance and renewal
  iproute2 nftables                         # a network namespace with a redirect rule, for the proxy's transparent interception
  postgresql-15                             # the PostgreSQL back end's tests (a server of their own per test, no system service)
)
# Node and npm run the browser driver; any install of them will do (the
# one from Debian, or NodeSource's, which bundles npm and conflicts with
# Debian's npm package).
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
if command -v dpkg-query >/dev/null; then
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
else
  echo "test.sh: this is not a Debian-based system; install the equivalents of: ${packages[*]}" >&2
  echo "test.sh: then run: cargo test --workspace --locked" >&2
  exit 1
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing ${missing[*]}"
  as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then
      as_root=(sudo)
    else
      echo "test.sh: not root and no sudo; as root run: apt-get install ${missing[*]}" >&2
      exit 1
    fi
  fi
  # Postfix asks how it is used when installed; a local-only answer keeps
  # it off the network and out of the way.
  printf "%s\n" "postfix postfix/main_mailer_type select Local only" "postfix postfix/mailname string localhost" | "${as_root[@]}" debconf-set-selections 2>/dev/null || true
  # PostgreSQL's package makes and starts a cluster of its own unless told
  # not to; the tests start their own servers.
  if [[ " ${missing[*]} " == *" postgresql-15 "* ]]; then
    "${as_root[@]}" mkdir -p /etc/postgresql-common
    echo "create_main_cluster = false" | "${as_root[@]}" tee /etc/postgresql-common/createcluster.conf >/dev/null
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# playwright-core for the browser tests, exactly as locked (it drives
# Debian's chromium; no browser is downloaded). Installed again only when
# the lock file changed.
browser=crates/sluice/tests/browser
if ! cmp -s "$browser/package-lock.json" "$browser/node_modules/.package-lock.json.installed" 2>/dev/null; then
  (cd "$browser" && npm ci --no-audit --no-fund --silent)
  cp "$browser/package-lock.json" "$browser/node_modules/.package-lock.json.installed"
fi

# The JMAP tests' clients from PyPI (jmapc, websockets), pinned, in a virtualenv of
# its own (Debian's python3 is externally managed); the tests find it
# there (testkit's venv_python). Made again only when the list changed.
venv="${SLUICE_TEST_VENV:-$HOME/.cache/sluice/venv}"
requirements=crates/sluice/tests/jmap/requirements.txt
if ! cmp -s "$requirements" "$venv/.requirements.installed" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$venv/.requirements.installed"
fi

# Every step runs even when one before it failed, and each test binary
# even when another failed (--no-fail-fast), so one failure never hides
# the others; the run ends with one line per failing test.
log=$(mktemp "${TMPDIR:-/tmp}/sluice-test.XXXXXX")
trap 'rm -f "$log"' EXIT
failed_steps=()
step() {
  local name=$1
  shift
  echo "test.sh: $name" | tee -a "$log"
  if ! "$@" 2>&1 | tee -a "$log"; then
    failed_steps+=("$name")
  fi
}

step "the workspace's tests" cargo test --workspace --locked --no-fail-fast "$@"

# The protocol suites again with every server's store in PostgreSQL (a
# server of its own per test): both back ends answer the same clients.
step "the protocol suites on PostgreSQL" env SLUICE_TEST_STORE=postgres cargo test --locked --no-fail-fast -p sluice \
  --test smtp --test pop3 --test imap --test imap_concurrency --test submission \
  --test sieve --test managesieve --test spam --test admin --test auth_throttle --test jmap --test imap_sort --test imap_objectid --test webmail_lists --test webmail_unsubscribe "$@"

# Short fuzz runs of every parser that reads network bytes, with a fixed
# seed so they are the same runs everywhere (.ci/fuzz-smoke).
for smoke in crates/*/fuzz/smoke.sh; do
  step "fuzz smoke run of ${smoke%/fuzz/smoke.sh}" "$smoke" 50000
done

if [ ${#failed_steps[@]} -gt 0 ]; then
  echo
  echo "test.sh: FAILED"
  # "Running tests/imap.rs (...)" names the binary of the "... FAILED"
  # lines that follow it.
  awk '/^test\.sh: /{step=substr($0, 10)}
       /^     Running /{binary=substr($0, 14)}
       / \.\.\. FAILED$/{sub(/^test /, ""); sub(/ \.\.\. FAILED$/, ""); print "test.sh: failed: " step ": " binary ": " $0}' "$log"
  for s in "${failed_steps[@]}"; do
    echo "test.sh: failed step: $s"
  done
  exit 1
fi
echo "test.sh: every test passed"
