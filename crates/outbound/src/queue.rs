//! The queue manager: takes due recipients from the store, groups them by
//! destination domain and message, delivers each group over one SMTP
//! connection (several recipients per transaction, several messages per
//! connection), and records each outcome durably as soon as the remote
//! side has answered.
//!
//! - Temporary failures (4xx, no answer, DNS trouble, TLS the policy
//!   requires but could not get) wait for the next step of the retry
//!   schedule, with ±10% jitter so a destination that was down is not hit
//!   by every message at the same second; after `max_age` they fail.
//! - Permanent failures (5xx, a domain without mail exchangers) are never
//!   retried.
//! - Each destination gets a window of connections (concurrency.rs: a few
//!   at first, one more after each run that reached it, halved after one
//!   that could not), its messages spread over them, and all share a
//!   global connection limit, so a dead or slow destination holds only
//!   its own mail back and a healthy one with a backlog is sent to in
//!   parallel.
//! - A recipient that fails for good is reported to the sender with a
//!   delivery status notification (dsn.rs), sent before the failure is
//!   recorded: a crash in between repeats the report rather than lose it.
//!   One still waiting after `delay_warning` gets one "delayed" report.
//! - New mail wakes the manager at once (the store's queue signal); it
//!   also looks every second, for rows edited by `sluice queue` in
//!   another process.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use store::{DirectoryWatch, QueueOutcome, QueuedRecipient, Store};
use tokio::sync::Semaphore;

use crate::client::{Session, Timeouts, TransactionResult};
use crate::concurrency::{Concurrency, Feedback};
use crate::config::OutboundConfig;
use crate::dkim::Signer;
use crate::route::{RouteError, Router};
use crate::tls_policy::{DomainPolicy, TlsOutcome, TlsPolicies};

/// Rows claimed per look.
const CLAIM: usize = 500;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The queue manager.
pub struct QueueManager {
    store: Arc<dyn Store>,
    router: Router,
    policies: Arc<TlsPolicies>,
    config: OutboundConfig,
    helo: String,
    connections: Arc<Semaphore>,
    /// Connections per destination (concurrency.rs).
    concurrency: Concurrency,
    /// Turns a rewritten envelope sender (SRS) back into the real one, for
    /// the reports that go to it.
    original_sender: Option<SenderReverser>,
    /// DKIM signs mail of the local domains, which the directory names.
    signer: Option<(Arc<Signer>, Arc<DirectoryWatch>)>,
    /// How to reach the relay, when there is one: its TLS, and the login.
    relay: Option<(crate::config::RelayTls, Option<(String, String)>)>,
}

/// Maps an envelope sender to the address reports should go to, when it
/// is a rewritten one.
pub type SenderReverser = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A report returns at most this much of a message (RET=FULL); a
/// larger one comes back as its header.
const FULL_REPORT_LIMIT: u64 = 256 * 1024;

/// The message a report is about.
struct About {
    blob: store::BlobId,
    sender: String,
    arrival: i64,
    envid: Option<String>,
    ret_full: bool,
    size: u64,
}

impl About {
    fn row(row: &QueuedRecipient) -> About {
        About {
            blob: row.blob,
            sender: row.sender.clone(),
            arrival: row.created,
            envid: row.envid.clone(),
            ret_full: row.ret_full,
            size: row.size,
        }
    }
}

/// Why a server cannot take a message as it is, from its EHLO reply: over
/// its SIZE limit (RFC 1870), 8-bit content without 8BITMIME (RFC 6152
/// §3: not converted, returned), or addresses that need SMTPUTF8 when it
/// does not offer it (RFC 6531 §3.2: no downgrade of addresses).
fn unsendable(extensions: &crate::client::Extensions, host: &str, job: &Job) -> Option<String> {
    if let Some(limit) = extensions.size.filter(|&l| l > 0) {
        if job.size > limit {
            return Some(format!(
                "message too big for {host}: 5.3.4 it takes up to {limit} bytes, this one has {}",
                job.size
            ));
        }
    }
    if job.rows.iter().any(|r| r.eight_bit) && !extensions.eight_bit_mime {
        return Some(format!(
            "{host} cannot take this message: 5.6.3 it has 8-bit content and {host} does not offer 8BITMIME"
        ));
    }
    let international = !job.sender.is_ascii() || job.rows.iter().any(|r| !r.recipient.is_ascii());
    if international && !extensions.smtputf8 {
        return Some(format!(
            "{host} cannot take these addresses: 5.6.7 it does not offer SMTPUTF8"
        ));
    }
    None
}

/// The envelope of a job: DSN requests handed on when the server takes
/// them (`dsn`), else kept for our own reports.
fn envelope_of(job: &Job, dsn: bool) -> crate::client::Envelope {
    let first = job.rows.first();
    let mut mail_params = String::new();
    if dsn {
        if first.is_some_and(|r| r.ret_full) {
            mail_params.push_str(" RET=FULL");
        }
        if let Some(envid) = first.and_then(|r| r.envid.as_deref()) {
            mail_params.push_str(&format!(" ENVID={}", crate::dsn::xtext(envid)));
        }
    }
    let recipients = job
        .rows
        .iter()
        .map(|r| {
            let mut params = String::new();
            if dsn {
                if let Some(notify) = crate::dsn::notify_value(r.dsn.notify) {
                    params.push_str(&format!(" NOTIFY={notify}"));
                }
                if let Some(orcpt) = &r.dsn.orcpt {
                    params.push_str(&format!(" ORCPT=rfc822;{}", crate::dsn::xtext(orcpt)));
                }
            }
            (r.recipient.clone(), params)
        })
        .collect();
    crate::client::Envelope {
        sender: job.sender.clone(),
        mail_params,
        recipients,
    }
}

/// Recipients of one message to one domain.
struct Job {
    blob: store::BlobId,
    sender: String,
    size: u64,
    rows: Vec<QueuedRecipient>,
}

impl QueueManager {
    /// A manager sending as `helo` (the server's host name).
    pub fn new(
        store: Arc<dyn Store>,
        router: Router,
        policies: Arc<TlsPolicies>,
        config: OutboundConfig,
        helo: String,
    ) -> Arc<QueueManager> {
        Arc::new(QueueManager {
            store,
            router,
            policies,
            connections: Arc::new(Semaphore::new(config.max_connections)),
            concurrency: Concurrency::new(
                config.initial_destination_concurrency,
                config.destination_concurrency,
            ),
            config,
            helo,
            original_sender: None,
            signer: None,
            relay: None,
        })
    }

    /// A manager whose reports to rewritten senders go to the real ones.
    pub fn with_sender_reverser(self: Arc<Self>, reverse: SenderReverser) -> Arc<QueueManager> {
        let mut me = Arc::try_unwrap(self).unwrap_or_else(|_| panic!("configured before it runs"));
        me.original_sender = Some(reverse);
        Arc::new(me)
    }

    /// A manager that DKIM-signs what local domains send (dkim.rs).
    pub fn with_signer(
        self: Arc<Self>,
        signer: Arc<Signer>,
        directory: Arc<DirectoryWatch>,
    ) -> Arc<QueueManager> {
        let mut me = Arc::try_unwrap(self).unwrap_or_else(|_| panic!("configured before it runs"));
        me.signer = Some((signer, directory));
        Arc::new(me)
    }

    /// Logs in to the relay hops with `login` (username, password), over
    /// `tls`.
    pub fn with_relay(
        self: Arc<Self>,
        tls: crate::config::RelayTls,
        login: Option<(String, String)>,
    ) -> Arc<QueueManager> {
        let mut me = Arc::try_unwrap(self).unwrap_or_else(|_| panic!("configured before it runs"));
        me.relay = Some((tls, login));
        Arc::new(me)
    }

    /// Opens a session with `hop` at `addr`: the relay's TLS and login, or
    /// an MX's STARTTLS as `mx` says.
    async fn open(
        &self,
        hop: &crate::route::Hop,
        addr: std::net::SocketAddr,
        mx: &crate::tls_policy::MxTls,
        timeouts: Timeouts,
    ) -> Result<Session, String> {
        use crate::config::RelayTls;
        let relay = self.relay.as_ref().filter(|_| hop.relay);
        let opened = match relay {
            Some((RelayTls::Implicit, _)) => {
                Session::open_implicit(addr, &hop.host, &self.helo, mx, timeouts).await
            }
            _ => Session::open(addr, &hop.host, &self.helo, mx, timeouts).await,
        };
        let mut session = opened.map_err(|e| format!("{} ({addr}): {e}", hop.host))?;
        if let Some((_, Some((username, password)))) = relay {
            if let Err(e) = session.auth(username, password).await {
                // A refused login is the configuration's fault, not the
                // mail's: it waits (and the log says why) until fixed.
                tracing::error!(relay = %hop.host, %addr, username = %username, error = %e, "the relay refused our login");
                session.quit().await;
                return Err(format!("the relay {} refused our login: {e}", hop.host));
            }
        }
        Ok(session)
    }

    /// The DKIM-Signature fields for a message, empty when none applies.
    /// A signing error is logged and the message goes unsigned: refusing
    /// to send over a broken key would hold all of a domain's mail.
    async fn signature(&self, job: &Job) -> Vec<u8> {
        let Some((signer, directory)) = &self.signer else {
            return Vec::new();
        };
        let directory = directory.get();
        let local = |domain: &str| directory.is_local_domain(domain);
        match signer.sign(job.blob, &job.sender, &local).await {
            Ok(fields) => fields,
            Err(e) => {
                tracing::warn!(blob = job.blob, error = %e, "DKIM signing failed; sent unsigned");
                Vec::new()
            }
        }
    }

    /// Runs until the task is dropped.
    pub async fn run(self: Arc<Self>) {
        // Attempts of an earlier run that stopped (or crashed) in flight
        // are due again now, not when their leases would have run out.
        match self.store.release_queue_leases().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                recipients = n,
                "outbound attempts of the last run are due again"
            ),
            Err(e) => tracing::warn!(error = %e, "could not release the outbound leases"),
        }
        let signal = self.store.queue_signal();
        loop {
            let notified = signal.notified();
            let started = match self.claim().await {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the outbound queue failed");
                    0
                }
            };
            if started == 0 {
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }

    /// Claims due rows and starts a task per destination nobody is working
    /// on; returns how many rows went to new tasks.
    async fn claim(self: &Arc<Self>) -> store::Result<usize> {
        // How long a claimed row stays leased to this attempt
        // (`lease_secs`, validated at start to be at least 1).
        let lease = i64::try_from(self.config.lease_secs).unwrap_or(i64::MAX);
        let rows = self.store.claim_queue(now(), lease, CLAIM).await?;
        let mut started = 0;
        let mut by_domain: BTreeMap<String, Vec<QueuedRecipient>> = BTreeMap::new();
        for row in rows {
            by_domain
                .entry(domain_of(&row.recipient))
                .or_default()
                .push(row);
        }
        for (domain, rows) in by_domain {
            let jobs = group_jobs(rows);
            let granted = self.concurrency.acquire(&domain, jobs.len());
            if granted == 0 {
                // The destination has all the connections it may: hand
                // the rows back for a look after one of them is done.
                let back = jobs
                    .iter()
                    .flat_map(|j| j.rows.iter().map(|r| (r.id, QueueOutcome::Released)))
                    .collect();
                self.store.record_queue_outcomes(back).await?;
                continue;
            }
            // The messages spread over the connections granted.
            let mut shares: Vec<Vec<Job>> = (0..granted).map(|_| Vec::new()).collect();
            for (i, job) in jobs.into_iter().enumerate() {
                started += job.rows.len();
                shares[i % granted].push(job);
            }
            for share in shares {
                let me = Arc::clone(self);
                let domain = domain.clone();
                tokio::spawn(async move {
                    let feedback = me.deliver_domain(&domain, share).await;
                    me.concurrency.release(&domain, feedback);
                    // Rows of this destination may have come due meanwhile.
                    me.store.queue_signal().notify_one();
                });
            }
        }
        Ok(started)
    }

    /// Delivers `jobs` (messages to one destination) over one connection;
    /// returns what that taught about the destination.
    async fn deliver_domain(&self, domain: &str, jobs: Vec<Job>) -> Feedback {
        let hops = match self.router.hops(domain).await {
            Ok(h) => h,
            Err(RouteError::Permanent(reason)) => {
                self.finish_all(&jobs, |_| QueueOutcome::Failed {
                    reason: reason.clone(),
                })
                .await;
                return Feedback::None;
            }
            Err(RouteError::Temporary(reason)) => {
                self.defer_all(&jobs.iter().collect::<Vec<_>>(), &reason)
                    .await;
                return Feedback::None;
            }
        };
        let Ok(_permit) = Arc::clone(&self.connections).acquire_owned().await else {
            return Feedback::None;
        };
        let policy = if hops.iter().any(|h| h.routed) {
            DomainPolicy {
                domain: domain.to_string(),
                sts: None,
                sts_error: None,
            }
        } else {
            self.policies.for_domain(domain).await
        };
        let timeouts = Timeouts {
            connect: Duration::from_secs(self.config.connect_timeout),
            command: Duration::from_secs(self.config.command_timeout),
            data_block: Duration::from_secs(self.config.command_timeout),
            data_end: Duration::from_secs(self.config.command_timeout * 2),
        };
        let mut last_error = format!("no mail exchanger of {domain} could be reached");
        let mut pending: Vec<&Job> = jobs.iter().collect();
        'hops: for hop in &hops {
            let relay_tls = self.relay.as_ref().map(|(tls, _)| *tls);
            let mx = if hop.relay && relay_tls != Some(crate::config::RelayTls::None) {
                self.policies.relay()
            } else if hop.routed {
                self.policies.opportunistic()
            } else {
                self.policies.for_mx(&policy, &hop.host).await
            };
            if !mx.allowed {
                self.policies
                    .record(domain, &hop.host, TlsOutcome::refused(&mx));
                last_error = match &mx.policy_failure {
                    Some(why) => format!(
                        "{}: refused by the {} policy (dane={}: {why})",
                        hop.host, mx.kind, mx.dane
                    ),
                    None => format!("{}: refused by the {} policy", hop.host, mx.kind),
                };
                continue;
            }
            for &addr in &hop.addrs {
                let started = Instant::now();
                let mut session = match self.open(hop, addr, &mx, timeouts).await {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::info!(domain, mx = %hop.host, %addr, error = %e, "outbound connection failed");
                        last_error = e;
                        continue;
                    }
                };
                self.policies.record(domain, &hop.host, session.tls.clone());
                while let Some(job) = pending.first() {
                    if let Some(reason) = unsendable(&session.extensions, &hop.host, job) {
                        // What this server cannot take, another attempt
                        // will not change: a permanent failure, reported.
                        self.finish_all(&[*job], |_| QueueOutcome::Failed {
                            reason: reason.clone(),
                        })
                        .await;
                        pending.remove(0);
                        continue;
                    }
                    let envelope = envelope_of(job, session.extensions.dsn);
                    let store = Arc::clone(&self.store);
                    let blob = job.blob;
                    // The signature goes first, then the stored message.
                    let mut prefix = Some(self.signature(job).await);
                    let size = job.size + prefix.as_ref().map_or(0, |p| p.len() as u64);
                    let mut seq = 0u32;
                    let result = session
                        .send(&envelope, size, || {
                            let store = Arc::clone(&store);
                            let first = prefix.take().filter(|p| !p.is_empty());
                            let this = seq;
                            if first.is_none() {
                                seq += 1;
                            }
                            async move {
                                if first.is_some() {
                                    return Ok(first);
                                }
                                crate::message::piece(&*store, blob, this)
                                    .await
                                    .map_err(std::io::Error::other)
                            }
                        })
                        .await;
                    match result {
                        Ok(result) => {
                            let parallel = self.concurrency.running(domain);
                            log_transaction(
                                domain, &hop.host, &session, job, &result, started, parallel,
                            );
                            self.record_transaction(job, &result, session.extensions.dsn)
                                .await;
                            pending.remove(0);
                        }
                        Err(e) => {
                            tracing::info!(domain, mx = %hop.host, error = %e, "outbound transaction failed");
                            last_error = format!("{}: {e}", hop.host);
                            if e.is_permanent() {
                                self.finish_all(&pending, |_| QueueOutcome::Failed {
                                    reason: last_error.clone(),
                                })
                                .await;
                                return Feedback::Reached;
                            }
                            // The connection is spent; the rest waits.
                            break 'hops;
                        }
                    }
                }
                session.quit().await;
                return Feedback::Reached;
            }
        }
        self.defer_all(&pending, &last_error).await;
        Feedback::Unreachable
    }

    /// Records the outcome of one transaction for each recipient; `dsn`:
    /// the server took over the delivery status notifications.
    async fn record_transaction(&self, job: &Job, result: &TransactionResult, dsn: bool) {
        let outcomes: Vec<(i64, QueueOutcome)> = job
            .rows
            .iter()
            .zip(&result.recipients)
            .map(|(row, rcpt)| {
                let outcome = match (rcpt, &result.data) {
                    (Err(reply), _) if reply.is_permanent() => QueueOutcome::Failed {
                        reason: reply.to_string(),
                    },
                    (Err(reply), _) => self.deferral(row, &reply.to_string()),
                    (Ok(()), Some(end)) if end.is_positive() => QueueOutcome::Delivered,
                    (Ok(()), Some(end)) if end.is_permanent() => QueueOutcome::Failed {
                        reason: end.to_string(),
                    },
                    (Ok(()), Some(end)) => self.deferral(row, &end.to_string()),
                    (Ok(()), None) => self.deferral(row, "no reply to the data"),
                };
                (row.id, outcome)
            })
            .collect();
        if !dsn {
            self.report_relayed(&outcomes, &job.rows).await;
        }
        self.record(outcomes, &job.rows).await;
    }

    /// RFC 3461 §5.2.3: mail handed to a server that makes no reports is
    /// reported "relayed" to senders that asked for NOTIFY=SUCCESS.
    async fn report_relayed(&self, outcomes: &[(i64, QueueOutcome)], rows: &[QueuedRecipient]) {
        let relayed: Vec<&QueuedRecipient> = outcomes
            .iter()
            .filter(|(_, o)| *o == QueueOutcome::Delivered)
            .filter_map(|(id, _)| rows.iter().find(|r| r.id == *id))
            .filter(|r| !r.sender.is_empty() && r.dsn.wants(store::NOTIFY_SUCCESS))
            .collect();
        let Some(first) = relayed.first() else {
            return;
        };
        let recipients: Vec<crate::dsn::Recipient> = relayed
            .iter()
            .map(|r| crate::dsn::Recipient {
                recipient: r.recipient.clone(),
                orcpt: r.dsn.orcpt.clone(),
                reason: "relayed to a server that sends no delivery reports".into(),
            })
            .collect();
        let about = About::row(first);
        if let Err(e) = self
            .send_report(&about, crate::dsn::Action::Relayed, &recipients)
            .await
        {
            tracing::error!(sender = %first.sender, error = %e, "could not send a delivery status notification");
        }
    }

    fn deferral(&self, row: &QueuedRecipient, reason: &str) -> QueueOutcome {
        let t = now();
        if t - row.created >= self.config.max_age as i64 {
            return QueueOutcome::Failed {
                reason: format!(
                    "gave up after {} days; last: {reason}",
                    (t - row.created) / 86400
                ),
            };
        }
        let delay = self.config.retry_delay(row.attempts + 1) as f64;
        let jitter = 0.9 + 0.2 * fraction(row.id, row.attempts);
        QueueOutcome::Deferred {
            next_attempt: t + (delay * jitter).round().max(1.0) as i64,
            reason: reason.to_string(),
        }
    }

    async fn defer_all(&self, jobs: &[&Job], reason: &str) {
        let outcomes = jobs
            .iter()
            .flat_map(|j| j.rows.iter())
            .map(|r| (r.id, self.deferral(r, reason)))
            .collect();
        let rows: Vec<QueuedRecipient> = jobs.iter().flat_map(|j| j.rows.clone()).collect();
        self.record(outcomes, &rows).await;
    }

    async fn finish_all(
        &self,
        jobs: &[impl std::borrow::Borrow<Job>],
        outcome: impl Fn(&QueuedRecipient) -> QueueOutcome,
    ) {
        let rows: Vec<QueuedRecipient> =
            jobs.iter().flat_map(|j| j.borrow().rows.clone()).collect();
        let outcomes = rows.iter().map(|r| (r.id, outcome(r))).collect();
        self.record(outcomes, &rows).await;
    }

    /// Reports to their senders the recipients that failed for good, and
    /// those waiting longer than `delay_warning` that were not warned yet:
    /// one report per message, sender and kind; never for a null sender.
    async fn report(&self, outcomes: &[(i64, QueueOutcome)], rows: &[QueuedRecipient]) {
        use crate::dsn::Action;
        let t = now();
        let mut groups: Vec<(&QueuedRecipient, Action, Vec<crate::dsn::Recipient>)> = Vec::new();
        for (id, outcome) in outcomes {
            let Some(row) = rows.iter().find(|r| r.id == *id) else {
                continue;
            };
            if row.sender.is_empty() {
                continue;
            }
            let (action, reason) = match outcome {
                QueueOutcome::Failed { reason } if row.dsn.wants(store::NOTIFY_FAILURE) => {
                    (Action::Failed, reason)
                }
                QueueOutcome::Deferred { reason, .. }
                    if !row.warned
                        && row.dsn.wants(store::NOTIFY_DELAY)
                        && self.config.delay_warning > 0
                        && t - row.created >= self.config.delay_warning as i64 =>
                {
                    let until = row.created + self.config.max_age as i64;
                    (Action::Delayed { until }, reason)
                }
                _ => continue,
            };
            let failed = crate::dsn::Recipient {
                recipient: row.recipient.clone(),
                orcpt: row.dsn.orcpt.clone(),
                reason: reason.clone(),
            };
            match groups
                .iter_mut()
                .find(|(r, a, _)| r.blob == row.blob && r.sender == row.sender && *a == action)
            {
                Some((_, _, list)) => list.push(failed),
                None => groups.push((row, action, vec![failed])),
            }
        }
        for (row, action, failed) in groups {
            if let Err(e) = self.send_report(&About::row(row), action, &failed).await {
                tracing::error!(queue_id = row.id, sender = %row.sender, error = %e, "could not send a delivery status notification");
                continue;
            }
            if matches!(action, Action::Delayed { .. }) {
                let ids = rows
                    .iter()
                    .filter(|r| {
                        r.blob == row.blob
                            && r.sender == row.sender
                            && failed.iter().any(|f| f.recipient == r.recipient)
                    })
                    .map(|r| r.id)
                    .collect();
                if let Err(e) = self.store.mark_queue_warned(ids).await {
                    tracing::warn!(error = %e, "could not note the delay warning");
                }
            }
        }
    }

    /// Sends one report about `recipients` of the message `about`.
    async fn send_report(
        &self,
        about: &About,
        action: crate::dsn::Action,
        recipients: &[crate::dsn::Recipient],
    ) -> store::Result<()> {
        let first = self
            .store
            .read_chunk(about.blob, 0)
            .await?
            .unwrap_or_default();
        // RET=FULL (RFC 3461 §4.3) returns the message with a failure, up
        // to a size a report may reasonably carry; past it, its header.
        let full = about.ret_full
            && action == crate::dsn::Action::Failed
            && about.size <= FULL_REPORT_LIMIT;
        let original = if full {
            let mut whole = Vec::with_capacity(about.size as usize);
            let mut seq = 0;
            while let Some(piece) = self.store.read_chunk(about.blob, seq).await? {
                whole.extend_from_slice(&piece);
                seq += 1;
            }
            whole
        } else {
            crate::dsn::header_block(&first[..first.len().min(64 * 1024)]).to_vec()
        };
        let t = now();
        let to = self
            .original_sender
            .as_ref()
            .and_then(|reverse| reverse(&about.sender))
            .unwrap_or_else(|| about.sender.clone());
        let report = crate::dsn::build(&crate::dsn::Report {
            action,
            reporting_mta: &self.helo,
            sender: &to,
            arrival: about.arrival,
            now: t,
            recipients,
            envid: about.envid.as_deref(),
            original: &original,
            full,
            unique: ((about.blob as u64) << 20) ^ (t as u64) ^ (recipients.len() as u64),
        });
        let (mailboxes, remote) = match self.store.load_directory().await?.resolve(&to) {
            store::Resolution::Deliver { mailboxes, remote } => (mailboxes, remote),
            store::Resolution::NotLocal => (Vec::new(), vec![to.clone()]),
            store::Resolution::UnknownUser => {
                tracing::warn!(sender = %to, "no such local sender: delivery status notification dropped");
                return Ok(());
            }
        };
        let mut writer = self.store.message_writer();
        writer.write(&report).await?;
        writer
            .deliver(store::Delivery {
                sender: String::new(),
                mailboxes,
                remote,
                ..Default::default()
            })
            .await?;
        tracing::info!(sender = %about.sender, recipients = recipients.len(), kind = ?action, "delivery status notification sent");
        Ok(())
    }

    /// Reports a local delivery to a sender that asked for it with
    /// NOTIFY=SUCCESS (RFC 3461 §5.2.2); `recipients` pairs each address
    /// with its ORCPT.
    pub async fn report_delivered(&self, delivered: store::DeliveryNotice) {
        if delivered.sender.is_empty() || delivered.recipients.is_empty() {
            return;
        }
        let recipients: Vec<crate::dsn::Recipient> = delivered
            .recipients
            .iter()
            .map(|(recipient, orcpt)| crate::dsn::Recipient {
                recipient: recipient.clone(),
                orcpt: orcpt.clone(),
                reason: "delivered to the mailbox".into(),
            })
            .collect();
        let about = About {
            blob: delivered.blob,
            sender: delivered.sender,
            arrival: now(),
            envid: delivered.envid,
            ret_full: false,
            size: 0,
        };
        if let Err(e) = self
            .send_report(&about, crate::dsn::Action::Delivered, &recipients)
            .await
        {
            tracing::error!(sender = %about.sender, error = %e, "could not send a delivery status notification");
        }
    }

    /// Writes outcomes durably and logs the final ones.
    async fn record(&self, outcomes: Vec<(i64, QueueOutcome)>, rows: &[QueuedRecipient]) {
        self.report(&outcomes, rows).await;
        let m = metrics::get();
        for (_, outcome) in &outcomes {
            let label = match outcome {
                QueueOutcome::Delivered => "delivered",
                QueueOutcome::Deferred { .. } => "deferred",
                QueueOutcome::Failed { .. } => "failed",
                QueueOutcome::Released => continue,
            };
            metrics::inc(&m.outbound_recipients, "outcome", label);
        }
        for (id, outcome) in &outcomes {
            let row = rows.iter().find(|r| r.id == *id);
            let rcpt = row.map_or("", |r| r.recipient.as_str());
            match outcome {
                QueueOutcome::Failed { reason } => {
                    tracing::warn!(
                        queue_id = id,
                        recipient = rcpt,
                        reason,
                        "outbound delivery failed for good"
                    )
                }
                QueueOutcome::Deferred {
                    next_attempt,
                    reason,
                } => {
                    tracing::info!(
                        queue_id = id,
                        recipient = rcpt,
                        reason,
                        retry_in = next_attempt - now(),
                        "outbound delivery deferred"
                    )
                }
                QueueOutcome::Delivered | QueueOutcome::Released => {}
            }
        }
        if let Err(e) = self.store.record_queue_outcomes(outcomes).await {
            // The leases run out and the rows are tried again: nothing is
            // lost, at worst a message is sent twice.
            tracing::error!(error = %e, "recording outbound outcomes failed");
        }
    }
}

fn log_transaction(
    domain: &str,
    mx: &str,
    session: &Session,
    job: &Job,
    result: &TransactionResult,
    started: Instant,
    parallel: usize,
) {
    let ids: Vec<i64> = job.rows.iter().map(|r| r.id).collect();
    let recipients: Vec<&str> = job.rows.iter().map(|r| r.recipient.as_str()).collect();
    let reply = result
        .data
        .as_ref()
        .map_or_else(|| "no recipient accepted".to_string(), |r| r.to_string());
    tracing::info!(
        domain,
        mx,
        addr = %session.peer,
        queue_ids = ?ids,
        recipients = ?recipients,
        tls = session.tls.kind,
        tls_version = session.tls.version.as_deref().unwrap_or("none"),
        data = if session.extensions.chunking { "bdat" } else { "data" },
        reply,
        ms = started.elapsed().as_millis() as u64,
        parallel,
        "outbound transaction"
    );
}

/// A number in [0, 1) that differs between rows and attempts.
fn fraction(id: i64, attempts: u32) -> f64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (id, attempts).hash(&mut h);
    (h.finish() % 10_000) as f64 / 10_000.0
}

/// The domain of an address, lower case.
fn domain_of(address: &str) -> String {
    address
        .rsplit_once('@')
        .map_or("", |(_, d)| d)
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// Recipients of the same message and sender go in one transaction.
fn group_jobs(rows: Vec<QueuedRecipient>) -> Vec<Job> {
    let mut jobs: Vec<Job> = Vec::new();
    for row in rows {
        match jobs
            .iter_mut()
            .find(|j| j.blob == row.blob && j.sender == row.sender)
        {
            Some(j) => j.rows.push(row),
            None => jobs.push(Job {
                blob: row.blob,
                sender: row.sender.clone(),
                size: row.size,
                rows: vec![row],
            }),
        }
    }
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: i64, blob: i64, sender: &str, rcpt: &str) -> QueuedRecipient {
        QueuedRecipient {
            id,
            blob,
            sender: sender.into(),
            recipient: rcpt.into(),
            attempts: 0,
            next_attempt: 0,
            last_error: None,
            created: 0,
            size: 10,
            warned: false,
            dsn: store::RecipientDsn::default(),
            envid: None,
            ret_full: false,
            eight_bit: false,
        }
    }

    #[test]
    fn what_a_server_cannot_take_is_found_before_sending() {
        let job = |sender: &str, rcpt: &str, size: u64| Job {
            blob: 1,
            sender: sender.into(),
            size,
            rows: vec![row(1, 1, sender, rcpt)],
        };
        let plain = crate::client::Extensions::default();
        let limited = crate::client::Extensions {
            size: Some(1000),
            smtputf8: true,
            ..Default::default()
        };
        assert_eq!(
            unsendable(&plain, "mx", &job("a@b.test", "c@d.test", 5000)),
            None
        );
        let big = unsendable(&limited, "mx", &job("a@b.test", "c@d.test", 5000)).unwrap();
        assert!(big.contains("5.3.4"), "{big}");
        assert_eq!(status_of_reason(&big), "5.3.4");
        let utf8 = unsendable(&plain, "mx", &job("a@b.test", "jos\u{e9}@d.test", 10)).unwrap();
        assert_eq!(status_of_reason(&utf8), "5.6.7");
        assert_eq!(
            unsendable(&limited, "mx", &job("a@b.test", "jos\u{e9}@d.test", 10)),
            None
        );
        let mut eight = job("a@b.test", "c@d.test", 10);
        eight.rows[0].eight_bit = true;
        let refused = unsendable(&limited, "mx", &eight).unwrap();
        assert_eq!(status_of_reason(&refused), "5.6.3");
        let takes = crate::client::Extensions {
            eight_bit_mime: true,
            ..Default::default()
        };
        assert_eq!(unsendable(&takes, "mx", &eight), None);
    }

    fn status_of_reason(reason: &str) -> String {
        crate::dsn::status_of(reason)
    }

    #[test]
    fn recipients_of_one_message_share_a_transaction() {
        let jobs = group_jobs(vec![
            row(1, 7, "a@x", "b@y"),
            row(2, 8, "a@x", "c@y"),
            row(3, 7, "a@x", "d@y"),
        ]);
        assert_eq!(jobs.len(), 2);
        assert_eq!(
            jobs[0].rows.iter().map(|r| r.id).collect::<Vec<_>>(),
            [1, 3]
        );
        assert_eq!(domain_of("Bob@Example.NET."), "example.net");
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        for id in 0..1000 {
            let f = fraction(id, 3);
            assert!((0.0..1.0).contains(&f));
        }
    }
}
