# Shared by the probes that run a `sluice serve` of their own (sourced):
# a temp directory $T, removed on exit with the server stopped, and a
# config in $T/sluice.toml with every listener on a loopback port the
# kernel picks, except the ones named, and outbound mail and the DNS-based
# checks off. Then alice@example.org (password "pw") with the mbox
# $T/fill.mbox imported, when asked.
#
#   . "$(dirname "$0")/probe_lib.sh"
#   probe_setup NAME [LISTENER=ADDR ...]
#   probe_fill N           # N messages of random words, imported
#   probe_serve            # sluice serve in the background ($PID)

probe_setup() { # NAME [LISTENER=ADDR ...]
    T=$(mktemp -d "/tmp/sluice-$1.XXXXXX")
    PID=
    trap probe_cleanup EXIT
    shift
    local listen="" name addr
    for name in smtp pop3 pop3s imap imaps managesieve http https submission submissions metrics; do
        addr="127.0.0.1:0"
        for pair in "$@"; do
            [ "${pair%%=*}" = "$name" ] && addr=${pair#*=}
        done
        listen+="$name = \"$addr\""$'\n'
    done
    cat >"$T/sluice.toml" <<EOF
hostname = "mx.example.org"
data_dir = "$T/data"
[listen]
$listen[log]
level = "warn"
[outbound]
enabled = false
[auth_checks]
spf = "off"
dkim = "off"
dmarc = "off"
EOF
}

probe_cleanup() {
    set +e
    [ -n "$PID" ] && kill "$PID" && wait "$PID" 2>/dev/null
    rm -rf "$T"
}

probe_fill() { # N
    python3 "$(dirname "${BASH_SOURCE[0]}")/words_mbox.py" "$T/fill.mbox" "$1"
    "$SLUICE" domain add example.org --config "$T/sluice.toml" >/dev/null
    echo pw | "$SLUICE" user add alice@example.org --password-stdin --config "$T/sluice.toml" >/dev/null
    "$SLUICE" import alice@example.org mbox "$T/fill.mbox" --config "$T/sluice.toml" 2>&1 | tail -1
}

probe_serve() {
    "$SLUICE" serve --config "$T/sluice.toml" 2>"$T/log" &
    PID=$!
}
