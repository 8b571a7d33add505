//! Sluice's metrics: one registry the whole process shares, fed by the
//! protocol crates where things happen (a connection accepted, a
//! transaction ended, a commit made) and read by the `/metrics` endpoint
//! in the Prometheus text format (OpenMetrics 1.0, which Prometheus
//! scrapes).
//!
//! Counting costs an atomic add: the families are created once, and a
//! label set is a fixed array of static strings, so no allocation happens
//! on the hot path after a label set's first use.
#![forbid(unsafe_code)]

use std::sync::OnceLock;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// One label.
pub type Label = [(&'static str, &'static str); 1];
/// Two labels.
pub type Labels2 = [(&'static str, &'static str); 2];

/// Every metric Sluice keeps.
pub struct Metrics {
    registry: Registry,
    /// Connections taken by each listener (`listener`), and turned away
    /// over a limit (`outcome` = accepted, refused).
    pub connections: Family<Labels2, Counter>,
    /// Connections open now, by listener.
    pub connections_open: Family<Label, Gauge>,
    /// SMTP transactions ended, by verdict (accepted, rejected-content,
    /// rejected-dmarc, too-big, timeout...).
    pub smtp_transactions: Family<Label, Counter>,
    /// SMTP replies sent, by class (`2xx`, `3xx`, `4xx`, `5xx`): how
    /// much a server refuses, and whether temporarily.
    pub smtp_replies: Family<Label, Counter>,
    /// Bytes of messages accepted over SMTP.
    pub smtp_accepted_bytes: Counter,
    /// Messages stored, by kind (local entries made, remote recipients
    /// queued).
    pub deliveries: Family<Label, Counter>,
    /// Content scan verdicts (clean, infected, unscanned, error).
    pub scan_verdicts: Family<Label, Counter>,
    /// Bytes of messages the content scan went through.
    pub scan_bytes: Counter,
    /// DNSBL look-ups by how the cache answered them (hit, miss: a query
    /// sent, merged: waiting on a query already in flight).
    pub dnsbl_lookups: Family<Label, Counter>,
    /// POP3 commands run, by command name.
    pub pop3_commands: Family<Label, Counter>,
    /// Outbound recipients by outcome (delivered, deferred, failed).
    pub outbound_recipients: Family<Label, Counter>,
    /// Logins refused, every protocol together, by reason (`password`,
    /// `throttled`, `parallel`: an attempt beside another from a client
    /// with failures, `unavailable`: the shared failure counts could not
    /// be read).
    pub auth_failures: Family<Label, Counter>,
    /// Accounts whose failed logins from any addresses passed the alert
    /// count within the penalty window (each such episode once): the
    /// accounts under a guessing attack.
    pub auth_accounts_attacked: Counter,
    /// IMAP commands run, by command name.
    pub imap_commands: Family<Label, Counter>,
    /// IMAP and POP3 sessions open now, by `protocol` and `state` (IMAP:
    /// not_authenticated, authenticated, selected; POP3: authorization,
    /// transaction): how many clients are logged in, not only connected.
    pub sessions: Family<Labels2, Gauge>,
    /// Store commits: seconds each took (group commits count once).
    pub store_commit_seconds: Histogram,
    /// Store commits: how many writes each carried.
    pub store_commit_batch: Histogram,
    /// Bytes the store's commits appended to its write-ahead log.
    pub store_wal_bytes: Counter,
    /// Bytes the full-text index's commits appended to its own
    /// write-ahead log (the index lives in a file of its own).
    pub store_index_wal_bytes: Counter,
    /// 1 while the store's disk is full (free space under
    /// `store.min_free_mb`, or a write failed for lack of space since the
    /// last one that succeeded), else 0: new mail is refused with
    /// temporary errors meanwhile.
    pub store_disk_full: Gauge,
}

impl Metrics {
    fn new() -> Metrics {
        let mut registry = Registry::with_prefix("sluice");
        let m = Metrics {
            connections: Family::default(),
            connections_open: Family::default(),
            smtp_transactions: Family::default(),
            smtp_replies: Family::default(),
            smtp_accepted_bytes: Counter::default(),
            deliveries: Family::default(),
            scan_verdicts: Family::default(),
            scan_bytes: Counter::default(),
            dnsbl_lookups: Family::default(),
            pop3_commands: Family::default(),
            outbound_recipients: Family::default(),
            auth_failures: Family::default(),
            auth_accounts_attacked: Counter::default(),
            imap_commands: Family::default(),
            sessions: Family::default(),
            // 50 µs to about 3 s.
            store_commit_seconds: Histogram::new(exponential_buckets(0.00005, 3.0, 11)),
            // 1 to 1024 writes.
            store_commit_batch: Histogram::new(exponential_buckets(1.0, 2.0, 11)),
            store_wal_bytes: Counter::default(),
            store_index_wal_bytes: Counter::default(),
            store_disk_full: Gauge::default(),
            registry: Registry::default(),
        };
        registry.register(
            "connections",
            "Connections by listener and outcome",
            m.connections.clone(),
        );
        registry.register(
            "connections_open",
            "Connections open now, by listener",
            m.connections_open.clone(),
        );
        registry.register(
            "smtp_transactions",
            "SMTP transactions by verdict",
            m.smtp_transactions.clone(),
        );
        registry.register(
            "smtp_replies",
            "SMTP replies sent, by class",
            m.smtp_replies.clone(),
        );
        registry.register(
            "smtp_accepted_bytes",
            "Bytes of messages accepted over SMTP",
            m.smtp_accepted_bytes.clone(),
        );
        registry.register(
            "deliveries",
            "Local mailbox entries made and remote recipients queued",
            m.deliveries.clone(),
        );
        registry.register(
            "scan_verdicts",
            "Content scan verdicts",
            m.scan_verdicts.clone(),
        );
        registry.register(
            "scan_bytes",
            "Bytes of messages scanned",
            m.scan_bytes.clone(),
        );
        registry.register(
            "dnsbl_lookups",
            "DNSBL look-ups by cache outcome",
            m.dnsbl_lookups.clone(),
        );
        registry.register(
            "pop3_commands",
            "POP3 commands by name",
            m.pop3_commands.clone(),
        );
        registry.register(
            "outbound_recipients",
            "Outbound recipients by outcome of an attempt",
            m.outbound_recipients.clone(),
        );
        registry.register(
            "auth_failures",
            "Logins refused by reason",
            m.auth_failures.clone(),
        );
        registry.register(
            "auth_accounts_attacked",
            "Accounts whose failed logins passed the alert count in the penalty window",
            m.auth_accounts_attacked.clone(),
        );
        registry.register(
            "imap_commands",
            "IMAP commands by name",
            m.imap_commands.clone(),
        );
        registry.register(
            "sessions",
            "IMAP and POP3 sessions open now, by protocol and state",
            m.sessions.clone(),
        );
        registry.register(
            "store_commit_seconds",
            "Seconds per store commit",
            m.store_commit_seconds.clone(),
        );
        registry.register(
            "store_commit_batch",
            "Writes per store commit",
            m.store_commit_batch.clone(),
        );
        registry.register(
            "store_wal_bytes",
            "Bytes appended to the store's write-ahead log by commits",
            m.store_wal_bytes.clone(),
        );
        registry.register(
            "store_disk_full",
            "1 while the store's disk is full and new mail is refused",
            m.store_disk_full.clone(),
        );
        registry.register(
            "store_index_wal_bytes",
            "Bytes appended to the full-text index's write-ahead log by commits",
            m.store_index_wal_bytes.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Every metric in the text format, then the `gauges` measured at
    /// scrape time (queue sizes...), each `(name, help, value)`.
    pub fn encode(&self, gauges: &[(&str, &str, f64)]) -> String {
        let mut out = String::new();
        let _ = encode(&mut out, &self.registry);
        // The registry's text ends with "# EOF": the scrape-time gauges go
        // before it.
        let eof = out.rfind("# EOF").unwrap_or(out.len());
        let mut extra = String::new();
        for (name, help, value) in gauges {
            extra.push_str(&format!(
                "# HELP sluice_{name} {help}.\n# TYPE sluice_{name} gauge\nsluice_{name} {value}\n"
            ));
        }
        out.insert_str(eof, &extra);
        out
    }
}

/// Metric families shown on the admin page, in this order: the ones an
/// administrator looks at first.
const AT_A_GLANCE: &[&str] = &[
    "sluice_connections_open",
    "sluice_sessions",
    "sluice_smtp_transactions_total",
    "sluice_deliveries_total",
    "sluice_outbound_recipients_total",
    "sluice_scan_verdicts_total",
    "sluice_auth_failures_total",
];

impl Metrics {
    /// A few key series and their values now, as `(series, value)`, e.g.
    /// `("sluice_sessions{protocol=\"imap\",state=\"selected\"}", "1")`:
    /// read from the same text `/metrics` serves, so the two never differ.
    pub fn at_a_glance(&self) -> Vec<(String, String)> {
        let text = self.encode(&[]);
        let mut out = Vec::new();
        for family in AT_A_GLANCE {
            for line in text.lines().filter(|l| !l.starts_with('#')) {
                let Some((series, value)) = line.rsplit_once(' ') else {
                    continue;
                };
                let name = series.split('{').next().unwrap_or(series);
                if name == *family {
                    out.push((series.to_string(), value.to_string()));
                }
            }
        }
        out
    }
}

/// The state of one IMAP or POP3 session in [`Metrics::sessions`]: counted
/// in its state while it lives, moved by [`SessionState::set`], and taken
/// off when dropped, however the session ends.
pub struct SessionState {
    protocol: &'static str,
    state: &'static str,
}

impl SessionState {
    /// A session of `protocol` starting in `state`.
    pub fn new(protocol: &'static str, state: &'static str) -> SessionState {
        get()
            .sessions
            .get_or_create(&[("protocol", protocol), ("state", state)])
            .inc();
        SessionState { protocol, state }
    }

    /// The session is now in `state`.
    pub fn set(&mut self, state: &'static str) {
        if state == self.state {
            return;
        }
        let m = get();
        m.sessions
            .get_or_create(&[("protocol", self.protocol), ("state", self.state)])
            .dec();
        m.sessions
            .get_or_create(&[("protocol", self.protocol), ("state", state)])
            .inc();
        self.state = state;
    }
}

impl Drop for SessionState {
    fn drop(&mut self) {
        get()
            .sessions
            .get_or_create(&[("protocol", self.protocol), ("state", self.state)])
            .dec();
    }
}

/// The process's metrics.
pub fn get() -> &'static Metrics {
    static METRICS: OnceLock<Metrics> = OnceLock::new();
    METRICS.get_or_init(Metrics::new)
}

/// Counts one more in a one-label family.
pub fn inc(family: &Family<Label, Counter>, name: &'static str, value: &'static str) {
    family.get_or_create(&[(name, value)]).inc();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_show_in_the_text_format() {
        let m = get();
        inc(&m.smtp_transactions, "verdict", "accepted");
        inc(&m.smtp_transactions, "verdict", "accepted");
        m.connections
            .get_or_create(&[("listener", "smtp"), ("outcome", "accepted")])
            .inc();
        m.store_commit_seconds.observe(0.001);
        let text = m.encode(&[("queue_recipients", "Recipients in the outbound queue", 3.0)]);
        assert!(
            text.contains("sluice_smtp_transactions_total{verdict=\"accepted\"} 2"),
            "{text}"
        );
        assert!(text.contains("sluice_connections_total{listener=\"smtp\",outcome=\"accepted\"} 1"));
        assert!(
            text.contains("sluice_store_commit_seconds_count 1"),
            "{text}"
        );
        assert!(text.contains("# TYPE sluice_queue_recipients gauge\nsluice_queue_recipients 3\n"));
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn session_states_move_and_end() {
        let series = |state| {
            get()
                .sessions
                .get_or_create(&[("protocol", "test"), ("state", state)])
                .get()
        };
        let mut s = SessionState::new("test", "authorization");
        assert_eq!(series("authorization"), 1);
        s.set("transaction");
        assert_eq!((series("authorization"), series("transaction")), (0, 1));
        drop(s);
        assert_eq!(series("transaction"), 0);
        let glance = get().at_a_glance();
        assert!(
            glance
                .iter()
                .any(|(k, v)| k.contains("protocol=\"test\"") && v == "0"),
            "{glance:?}"
        );
    }
}
