//! `sluice bench smtp`: postal-like SMTP load with the spam-aware
//! workload of the seeds: a bounce ratio (connections whose recipients are
//! all unknown), an unfinished-session ratio (connect, EHLO, QUIT),
//! recipients per message as a distribution, and source addresses spread
//! across 127.0.0.0/8 with /24 locality. Closed model (N connections, each
//! starts a new session when the last ends) or open model (new sessions
//! arrive at a rate, Poisson). With `--auth` (and `--starttls` or
//! `--tls`) it is a submission client: each session logs in as one of the
//! accounts and sends as it, to the accounts or, with `--remote-domains`,
//! to addresses the server must relay.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::time::Instant;

use crate::distribution::{chosen_before, exact_share, exponential, RecipientDist, SizeDist};
use crate::error::{BenchError, Result};
use crate::latency::{Histogram, Percentiles, Timeline};
use crate::pop3;
use crate::progress::Progress;
use crate::report::{num, print_json, Table};
use crate::source::SourcePlan;
use crate::tls::Tls;
use crate::users::{Account, UserArgs};
use crate::wire::Conn;

/// Options of `sluice bench smtp`.
#[derive(Debug, Clone, clap::Args)]
pub struct SmtpArgs {
    /// SMTP server to load, host:port.
    #[arg(long, default_value = "127.0.0.1:2525")]
    pub server: String,
    /// The accounts mail is sent to.
    #[command(flatten)]
    pub users: UserArgs,
    /// Closed model: this many concurrent connections. Open model (with
    /// --rate): the most sessions in flight; arrivals beyond are dropped.
    #[arg(long, default_value_t = 10)]
    pub connections: usize,
    /// Open model: new sessions per second (Poisson arrivals).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Open model: --rate counts legitimate sessions only; bounce and
    /// unfinished sessions arrive on top (total rate = rate / legit share),
    /// so an ideal server's goodput stays flat as the bounce ratio rises,
    /// as in the spam-aware study's goodput experiment.
    #[arg(long, requires = "rate")]
    pub legit_rate: bool,
    /// How long each run lasts, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Stop after this many legitimate messages instead (or whichever
    /// comes first with --duration).
    #[arg(long)]
    pub messages: Option<u64>,
    /// Messages per legitimate session: `N` or `A-B` (postal's -c).
    #[arg(long, default_value = "1")]
    pub per_connection: RecipientDist,
    /// Message size: `4k`, `0-5k` or `realistic` (mean about 4.7 KB).
    #[arg(long, default_value = "4k")]
    pub size: SizeDist,
    /// Recipients per message: `N`, `A-B`, `legit` (mean 1.02) or `spam` (5-15).
    #[arg(long, default_value = "1")]
    pub recipients: RecipientDist,
    /// Share of sessions whose recipients are all unknown (0 to 1). A comma
    /// list runs one run per value, e.g. `0,0.3,0.6,0.9`.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub bounce_ratio: Vec<f64>,
    /// Share of sessions that connect, EHLO and QUIT without a transaction.
    #[arg(long, default_value_t = 0.0)]
    pub unfinished_ratio: f64,
    /// Connect from this many distinct addresses in 127.0.0.0/8 (0: let the
    /// system choose). Only for servers on loopback.
    #[arg(long, default_value_t = 0)]
    pub sources: usize,
    /// Source addresses per /24 prefix (locality), 1 to 254.
    #[arg(long, default_value_t = 16)]
    pub per_prefix: usize,
    /// Never pipeline, even when the server offers PIPELINING.
    #[arg(long)]
    pub no_pipelining: bool,
    /// Name given in EHLO.
    #[arg(long, default_value = "bench.example.net")]
    pub helo: String,
    /// Start TLS with STARTTLS after EHLO, then EHLO again (submission on
    /// port 587).
    #[arg(long, conflicts_with = "tls")]
    pub starttls: bool,
    /// TLS from the first byte (submissions, port 465).
    #[arg(long)]
    pub tls: bool,
    /// PEM certificates to trust for the server's certificate (default:
    /// the web PKI's roots).
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Name the server's certificate must carry (default: the host part
    /// of --server).
    #[arg(long, value_name = "NAME")]
    pub tls_name: Option<String>,
    /// Log in with AUTH PLAIN as one of the accounts (picked per session),
    /// which is then the envelope sender and the From.
    #[arg(long)]
    pub auth: bool,
    /// Send to `rcptN@DOMAIN` at these domains instead of the accounts:
    /// mail the server relays.
    #[arg(long, value_delimiter = ',', value_name = "DOMAINS")]
    pub remote_domains: Vec<String>,
    /// Envelope sender domain.
    #[arg(long, default_value = "sender.example.net")]
    pub sender_domain: String,
    /// Per-reply timeout, in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Seed for every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// After the run, count what arrived with POP3 STAT at this host:port
    /// (the accounts' passwords are used), waiting up to --verify-wait.
    #[arg(long, value_name = "ADDR")]
    pub verify_pop3: Option<String>,
    /// After the run, count what arrived with IMAP STATUS at this host:port.
    #[arg(long, value_name = "ADDR")]
    pub verify_imap: Option<String>,
    /// Longest wait for queued mail to arrive when verifying, in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub verify_wait: f64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Draw a PNG: goodput against bounce ratio for a sweep, else
    /// throughput and latency over time.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
}

/// The report of `sluice bench smtp`: one run per bounce ratio.
#[derive(Debug, Clone, Serialize)]
pub struct SmtpReport {
    /// Server address.
    pub server: String,
    /// Closed or open model.
    pub model: String,
    /// The runs, in the order of the bounce ratios.
    pub runs: Vec<SmtpRun>,
}

/// The figures of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SmtpRun {
    /// Share of bounce sessions asked for.
    pub bounce_ratio: f64,
    /// Share of unfinished sessions asked for.
    pub unfinished_ratio: f64,
    /// Wall time of the run, in seconds.
    pub elapsed_s: f64,
    /// Sessions opened, by kind.
    pub sessions: SessionCounts,
    /// Open model: arrivals dropped because --connections were in flight.
    pub dropped_arrivals: u64,
    /// Transactions started (MAIL FROM sent), legitimate and bounce.
    pub sent: u64,
    /// Messages the server accepted after DATA.
    pub accepted: u64,
    /// Legitimate messages accepted (the goodput count).
    pub good: u64,
    /// Recipients of accepted messages (mailbox deliveries).
    pub deliveries: u64,
    /// Bytes of accepted messages.
    pub bytes: u64,
    /// Unknown recipients the server accepted (it should refuse them).
    pub unknown_accepted: u64,
    /// Transactions started per second.
    pub sent_per_s: f64,
    /// Messages accepted per second.
    pub accepted_per_s: f64,
    /// Legitimate messages accepted per second.
    pub goodput_per_s: f64,
    /// Deliveries per second.
    pub deliveries_per_s: f64,
    /// Megabytes (10^6) accepted per second.
    pub mb_per_s: f64,
    /// MAIL FROM to the reply after the data, per accepted message.
    pub message_latency: Percentiles,
    /// Connect to greeting, per session.
    pub connect_latency: Percentiles,
    /// Failures by stage and reply code (`RCPT 550`) or kind (`io`).
    pub errors: BTreeMap<String, u64>,
    /// Whether the server offered PIPELINING (and it was used).
    pub pipelining: bool,
    /// What arrived, when verification was asked for.
    pub verified: Option<Verified>,
    /// Accepted messages per second of the run, and their mean latency.
    pub timeline: Timeline,
}

/// Sessions opened, by kind.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SessionCounts {
    /// Legitimate sessions (known recipients, messages sent).
    pub legit: u64,
    /// Bounce sessions (unknown recipients only).
    pub bounce: u64,
    /// Unfinished sessions (EHLO then QUIT).
    pub unfinished: u64,
    /// Legitimate sessions the run's end overtook before their first
    /// message: opened in time, but ready to send only after the
    /// deadline (a loaded client machine). Not a server failure, and not
    /// counted in `good`.
    pub legit_cut_at_end: u64,
}

/// What a verification after the run found.
#[derive(Debug, Clone, Serialize)]
pub struct Verified {
    /// The protocol used to count (`pop3` or `imap`).
    pub via: String,
    /// Deliveries the run counted.
    pub expected: u64,
    /// New messages found in the mailboxes.
    pub arrived: u64,
    /// Seconds from the end of the run until everything had arrived (a
    /// queueing server accepts first and delivers later), to 0.2 s.
    pub drain_s: f64,
    /// Deliveries per second counting the drain: deliveries / (run + drain).
    pub delivered_per_s: f64,
}

/// The kind of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Legit,
    Bounce,
    Unfinished,
}

/// The kind of session number `i`: the shares are exact at every prefix
/// (see [`exact_share`]); bounce sessions are spread over the sessions
/// that are not unfinished, so both shares hold of all sessions.
fn kind_of(i: u64, bounce: f64, unfinished: f64) -> Kind {
    if exact_share(i, unfinished) {
        return Kind::Unfinished;
    }
    let j = i - chosen_before(i, unfinished);
    let rest = 1.0 - unfinished;
    let share = if rest <= 0.0 {
        0.0
    } else {
        (bounce / rest).min(1.0)
    };
    if exact_share(j, share) {
        Kind::Bounce
    } else {
        Kind::Legit
    }
}

/// State shared by the sessions of one run.
struct Shared {
    args: SmtpArgs,
    server: SocketAddr,
    tls: Option<Tls>,
    accounts: Vec<Account>,
    domain: String,
    sources: SourcePlan,
    filler: Arc<Vec<u8>>,
    bounce: f64,
    start: Instant,
    deadline: Instant,
    timeout: Duration,
    next_session: AtomicU64,
    good_claimed: AtomicU64,
    accepted: Arc<AtomicU64>,
    in_flight: AtomicUsize,
    totals: Mutex<Totals>,
}

/// What sessions add up.
#[derive(Default)]
struct Totals {
    run: SmtpRun,
    message: Histogram,
    connect: Histogram,
}

/// One session's own figures, merged into [`Totals`] when it ends.
#[derive(Default)]
struct SessionStats {
    sent: u64,
    accepted: u64,
    good: u64,
    deliveries: u64,
    bytes: u64,
    unknown_accepted: u64,
    errors: BTreeMap<String, u64>,
    message: Histogram,
    connect: Histogram,
    timeline: Timeline,
    pipelining: bool,
    /// A legitimate session that sent nothing because the run had ended.
    cut_at_end: bool,
}

impl SessionStats {
    fn error(&mut self, what: String) {
        *self.errors.entry(what).or_default() += 1;
    }
}

impl Shared {
    fn stopping(&self) -> bool {
        Instant::now() >= self.deadline
            || self
                .args
                .messages
                .is_some_and(|m| self.good_claimed.load(Ordering::Relaxed) >= m)
    }

    /// Claims one legitimate message of the budget; false when spent.
    fn claim_message(&self) -> bool {
        if Instant::now() >= self.deadline {
            return false;
        }
        let n = self.good_claimed.fetch_add(1, Ordering::Relaxed);
        self.args.messages.is_none_or(|m| n < m)
    }

    fn merge(&self, kind: Kind, s: SessionStats) {
        let mut t = self.totals.lock().expect("totals lock");
        match kind {
            Kind::Legit => {
                t.run.sessions.legit += 1;
                t.run.sessions.legit_cut_at_end += u64::from(s.cut_at_end);
            }
            Kind::Bounce => t.run.sessions.bounce += 1,
            Kind::Unfinished => t.run.sessions.unfinished += 1,
        }
        t.run.sent += s.sent;
        t.run.accepted += s.accepted;
        t.run.good += s.good;
        t.run.deliveries += s.deliveries;
        t.run.bytes += s.bytes;
        t.run.unknown_accepted += s.unknown_accepted;
        t.run.pipelining |= s.pipelining;
        for (k, v) in s.errors {
            *t.run.errors.entry(k).or_default() += v;
        }
        t.message.merge(&s.message);
        t.connect.merge(&s.connect);
        t.run.timeline.merge(&s.timeline);
    }
}

/// An SMTP reply: the code and the text of its last line.
struct Reply {
    code: u16,
    lines: Vec<String>,
}

async fn read_reply(conn: &mut Conn, line: &mut Vec<u8>) -> Result<Reply> {
    let mut lines = Vec::new();
    loop {
        conn.read_line(line).await?;
        if line.len() < 3 || !line[..3].iter().all(u8::is_ascii_digit) {
            return Err(BenchError::Protocol(format!(
                "bad reply {:?}",
                String::from_utf8_lossy(line)
            )));
        }
        let code =
            (line[0] - b'0') as u16 * 100 + (line[1] - b'0') as u16 * 10 + (line[2] - b'0') as u16;
        let text = String::from_utf8_lossy(line.get(4..).unwrap_or_default()).into_owned();
        lines.push(text);
        if line.get(3) != Some(&b'-') {
            return Ok(Reply { code, lines });
        }
    }
}

/// What the server offered in its EHLO reply.
#[derive(Default)]
struct Offer {
    pipelining: bool,
    size: bool,
}

/// Runs `sluice bench smtp`.
pub async fn run(args: SmtpArgs) -> anyhow::Result<()> {
    let report = execute(args.clone()).await?;
    if let Some(path) = &args.plot {
        plot_report(&report, path)?;
    }
    if args.json {
        print_json(&report)?;
    } else {
        print!("{}", render(&report));
    }
    let unverified: Vec<_> = report
        .runs
        .iter()
        .filter_map(|r| r.verified.as_ref())
        .filter(|v| v.arrived != v.expected)
        .collect();
    if let Some(v) = unverified.first() {
        anyhow::bail!(
            "verification failed: {} deliveries counted, {} arrived",
            v.expected,
            v.arrived
        );
    }
    Ok(())
}

/// Resolves `host:port` to one socket address.
pub(crate) async fn resolve(server: &str) -> Result<SocketAddr> {
    tokio::net::lookup_host(server)
        .await?
        .next()
        .ok_or_else(|| BenchError::Invalid(format!("cannot resolve {server}")))
}

/// Runs the workload and returns its report without printing it.
pub async fn execute(args: SmtpArgs) -> anyhow::Result<SmtpReport> {
    for &b in &args.bounce_ratio {
        anyhow::ensure!(
            (0.0..=1.0).contains(&b) && b + args.unfinished_ratio <= 1.0 + 1e-9,
            "bounce ratio {b} plus unfinished ratio {} must lie within 0..1",
            args.unfinished_ratio
        );
    }
    anyhow::ensure!(args.connections > 0, "--connections must be at least 1");
    if let Some(r) = args.rate {
        anyhow::ensure!(r > 0.0 && r.is_finite(), "--rate must be positive");
    }
    anyhow::ensure!(
        args.remote_domains.is_empty() || verifier(&args).is_none(),
        "mail to --remote-domains cannot be counted in the accounts' mailboxes"
    );
    let server = resolve(&args.server).await?;
    let tls = if args.tls || args.starttls {
        let host = args
            .server
            .rsplit_once(':')
            .map_or(args.server.as_str(), |(h, _)| h);
        let name = args
            .tls_name
            .as_deref()
            .unwrap_or(host.trim_matches(['[', ']']));
        Some(Tls::new(args.ca.as_deref(), name)?)
    } else {
        None
    };
    let accounts = args.users.accounts()?;
    let domain = UserArgs::domain_of(&accounts);
    let sources = if args.sources == 0 {
        SourcePlan::any()
    } else {
        SourcePlan::spread(args.sources, args.per_prefix, args.seed)?
    };
    let filler = Arc::new(crate::corpus::filler_text(args.seed, 2 << 20));
    let mut runs = Vec::new();
    for &bounce in &args.bounce_ratio {
        let before = match verifier(&args) {
            Some((via, addr)) => Some(count_arrived(via, &addr, &accounts).await?),
            None => None,
        };
        let target = Target {
            server,
            tls: tls.clone(),
            accounts: &accounts,
            domain: &domain,
        };
        let mut run = one_run(&args, &target, &sources, &filler, bounce).await;
        if let (Some(before), Some((via, addr))) = (before, verifier(&args)) {
            let expected = run.deliveries;
            let ended = Instant::now();
            let deadline = ended + Duration::from_secs_f64(args.verify_wait);
            let arrived = loop {
                let now = count_arrived(via, &addr, &accounts).await?;
                let arrived = now.saturating_sub(before);
                if arrived >= expected || Instant::now() >= deadline {
                    break arrived;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            };
            let drain_s = ended.elapsed().as_secs_f64();
            let delivered_per_s = arrived as f64 / (run.elapsed_s + drain_s).max(1e-9);
            run.verified = Some(Verified {
                via: via.into(),
                expected,
                arrived,
                drain_s,
                delivered_per_s,
            });
        }
        runs.push(run);
    }
    Ok(SmtpReport {
        server: args.server.clone(),
        model: match args.rate {
            Some(r) if args.legit_rate => format!("open, {r} legitimate sessions/s"),
            Some(r) => format!("open, {r} sessions/s"),
            None => format!("closed, {} connections", args.connections),
        },
        runs,
    })
}

fn verifier(args: &SmtpArgs) -> Option<(&'static str, String)> {
    if let Some(a) = &args.verify_pop3 {
        Some(("pop3", a.clone()))
    } else {
        args.verify_imap.as_ref().map(|a| ("imap", a.clone()))
    }
}

/// Messages in all the accounts' inboxes now.
async fn count_arrived(via: &str, addr: &str, accounts: &[Account]) -> anyhow::Result<u64> {
    let server = resolve(addr).await?;
    let mut total = 0;
    for a in accounts {
        total += match via {
            "pop3" => pop3::stat(server, a).await?.0,
            _ => crate::imap::status_messages(server, a).await?,
        };
    }
    Ok(total)
}

/// The server a run talks to, and the accounts it knows.
struct Target<'a> {
    server: SocketAddr,
    tls: Option<Tls>,
    accounts: &'a [Account],
    domain: &'a str,
}

async fn one_run(
    args: &SmtpArgs,
    target: &Target<'_>,
    sources: &SourcePlan,
    filler: &Arc<Vec<u8>>,
    bounce: f64,
) -> SmtpRun {
    let start = Instant::now();
    let duration = Duration::from_secs_f64(args.duration.max(0.0));
    let shared = Arc::new(Shared {
        args: args.clone(),
        server: target.server,
        tls: target.tls.clone(),
        accounts: target.accounts.to_vec(),
        domain: target.domain.to_string(),
        sources: sources.clone(),
        filler: Arc::clone(filler),
        bounce,
        start,
        deadline: start + duration,
        timeout: Duration::from_secs_f64(args.timeout),
        next_session: AtomicU64::new(0),
        good_claimed: AtomicU64::new(0),
        accepted: Arc::new(AtomicU64::new(0)),
        in_flight: AtomicUsize::new(0),
        totals: Mutex::new(Totals::default()),
    });
    let progress = Progress::timed(duration, "accepted", Arc::clone(&shared.accepted));
    let mut dropped = 0;
    let mut tasks = tokio::task::JoinSet::new();
    match args.rate {
        None => {
            for w in 0..args.connections {
                let shared = Arc::clone(&shared);
                tasks.spawn(async move {
                    let mut rng = StdRng::seed_from_u64(
                        shared.args.seed ^ (w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    );
                    while !shared.stopping() {
                        session(&shared, &mut rng).await;
                    }
                });
            }
        }
        Some(rate) => {
            let rate = if args.legit_rate {
                rate / (1.0 - bounce - args.unfinished_ratio).max(0.01)
            } else {
                rate
            };
            let mut rng = StdRng::seed_from_u64(args.seed);
            let mut at = start;
            loop {
                at += Duration::from_secs_f64(exponential(&mut rng, 1.0 / rate));
                if at >= shared.deadline {
                    break;
                }
                tokio::time::sleep_until(at).await;
                if shared.stopping() {
                    break;
                }
                if shared.in_flight.load(Ordering::Relaxed) >= args.connections {
                    dropped += 1;
                    continue;
                }
                shared.in_flight.fetch_add(1, Ordering::Relaxed);
                let shared = Arc::clone(&shared);
                let mut task_rng = StdRng::seed_from_u64(rng.gen());
                tasks.spawn(async move {
                    session(&shared, &mut task_rng).await;
                    shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                });
            }
        }
    }
    while tasks.join_next().await.is_some() {}
    progress.finish();
    let elapsed = start.elapsed().as_secs_f64();
    let mut t = std::mem::take(&mut *shared.totals.lock().expect("totals lock"));
    let mut run = std::mem::take(&mut t.run);
    run.bounce_ratio = bounce;
    run.unfinished_ratio = args.unfinished_ratio;
    run.elapsed_s = elapsed;
    run.dropped_arrivals = dropped;
    let per_s = |n: u64| {
        if elapsed > 0.0 {
            n as f64 / elapsed
        } else {
            0.0
        }
    };
    run.sent_per_s = per_s(run.sent);
    run.accepted_per_s = per_s(run.accepted);
    run.goodput_per_s = per_s(run.good);
    run.deliveries_per_s = per_s(run.deliveries);
    run.mb_per_s = per_s(run.bytes) / 1e6;
    run.message_latency = t.message.summary();
    run.connect_latency = t.connect.summary();
    run
}

/// One session of the kind the session counter says, start to QUIT.
async fn session(shared: &Shared, rng: &mut StdRng) {
    let i = shared.next_session.fetch_add(1, Ordering::Relaxed);
    let kind = kind_of(i, shared.bounce, shared.args.unfinished_ratio);
    let mut stats = SessionStats::default();
    if let Err(e) = session_inner(shared, rng, kind, &mut stats).await {
        let what = match e {
            BenchError::Timeout(_) => "timeout".to_string(),
            BenchError::Closed => "closed by server".to_string(),
            BenchError::Io(e) => format!("io: {}", e.kind()),
            other => other.to_string(),
        };
        stats.error(what);
        // Back off a little so a refusing server is not hammered in a loop;
        // this is pacing, not synchronisation.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    shared.merge(kind, stats);
}

async fn session_inner(
    shared: &Shared,
    rng: &mut StdRng,
    kind: Kind,
    stats: &mut SessionStats,
) -> Result<()> {
    let source = shared.sources.pick(rng);
    let t0 = Instant::now();
    let mut conn = Conn::connect(shared.server, source, shared.timeout).await?;
    if let (true, Some(tls)) = (shared.args.tls, &shared.tls) {
        conn = conn.start_tls(tls).await?;
    }
    let mut line = Vec::with_capacity(512);
    let greeting = read_reply(&mut conn, &mut line).await?;
    stats.connect.record(t0.elapsed());
    if greeting.code != 220 {
        stats.error(format!("greeting {}", greeting.code));
        return Ok(());
    }
    let Some(mut offer) = ehlo(shared, &mut conn, &mut line, stats).await? else {
        return quit(&mut conn, &mut line).await;
    };
    if let (true, Some(tls)) = (shared.args.starttls, &shared.tls) {
        conn.send(b"STARTTLS\r\n").await?;
        let go = read_reply(&mut conn, &mut line).await?;
        if go.code != 220 {
            stats.error(format!("STARTTLS {}", go.code));
            return quit(&mut conn, &mut line).await;
        }
        conn = conn.start_tls(tls).await?;
        let Some(again) = ehlo(shared, &mut conn, &mut line, stats).await? else {
            return quit(&mut conn, &mut line).await;
        };
        offer = again;
    }
    let login = if shared.args.auth {
        let account = &shared.accounts[rng.gen_range(0..shared.accounts.len())];
        if !auth_plain(&mut conn, &mut line, account, stats).await? {
            return quit(&mut conn, &mut line).await;
        }
        Some(account.address.as_str())
    } else {
        None
    };
    offer.pipelining &= !shared.args.no_pipelining;
    stats.pipelining = offer.pipelining;
    match kind {
        Kind::Unfinished => {}
        Kind::Bounce => {
            if shared.claim_bounce() {
                transaction(
                    shared, rng, &mut conn, &mut line, &offer, login, kind, stats,
                )
                .await?;
            }
        }
        Kind::Legit => {
            let n = shared.args.per_connection.sample(rng);
            for sent in 0..n {
                if !shared.claim_message() {
                    stats.cut_at_end = sent == 0 && Instant::now() >= shared.deadline;
                    break;
                }
                if !transaction(
                    shared, rng, &mut conn, &mut line, &offer, login, kind, stats,
                )
                .await?
                {
                    break;
                }
            }
        }
    }
    quit(&mut conn, &mut line).await
}

impl Shared {
    /// Whether a bounce session may still send its transaction.
    fn claim_bounce(&self) -> bool {
        !self.stopping()
    }
}

/// EHLO (HELO if refused); what the server offers, or `None` when it
/// took neither.
async fn ehlo(
    shared: &Shared,
    conn: &mut Conn,
    line: &mut Vec<u8>,
    stats: &mut SessionStats,
) -> Result<Option<Offer>> {
    conn.send(format!("EHLO {}\r\n", shared.args.helo).as_bytes())
        .await?;
    let ehlo = read_reply(conn, line).await?;
    let mut offer = Offer::default();
    if ehlo.code == 250 {
        for l in ehlo.lines.iter().skip(1) {
            let word = l
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_uppercase();
            offer.pipelining |= word == "PIPELINING";
            offer.size |= word == "SIZE";
        }
        return Ok(Some(offer));
    }
    stats.error(format!("EHLO {}", ehlo.code));
    conn.send(format!("HELO {}\r\n", shared.args.helo).as_bytes())
        .await?;
    let helo = read_reply(conn, line).await?;
    if helo.code != 250 {
        stats.error(format!("HELO {}", helo.code));
        return Ok(None);
    }
    Ok(Some(offer))
}

/// AUTH PLAIN (RFC 4616) as `account`; false when refused.
async fn auth_plain(
    conn: &mut Conn,
    line: &mut Vec<u8>,
    account: &Account,
    stats: &mut SessionStats,
) -> Result<bool> {
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD
        .encode(format!("\0{}\0{}", account.address, account.password));
    conn.send(format!("AUTH PLAIN {token}\r\n").as_bytes())
        .await?;
    let r = read_reply(conn, line).await?;
    if r.code != 235 {
        stats.error(format!("AUTH {}", r.code));
    }
    Ok(r.code == 235)
}

async fn quit(conn: &mut Conn, line: &mut Vec<u8>) -> Result<()> {
    conn.send(b"QUIT\r\n").await?;
    // The 221 may race the server's close; either ends the session.
    let _ = read_reply(conn, line).await;
    conn.shutdown().await;
    Ok(())
}

/// One MAIL/RCPT/DATA transaction, as `login` when logged in; false when
/// the session should end.
#[allow(clippy::too_many_arguments)]
async fn transaction(
    shared: &Shared,
    rng: &mut StdRng,
    conn: &mut Conn,
    line: &mut Vec<u8>,
    offer: &Offer,
    login: Option<&str>,
    kind: Kind,
    stats: &mut SessionStats,
) -> Result<bool> {
    let want = shared.args.recipients.sample(rng);
    let remote = &shared.args.remote_domains;
    let rcpts: Vec<(Option<usize>, String)> = match kind {
        Kind::Legit if !remote.is_empty() => (0..want)
            .map(|_| {
                let domain = &remote[rng.gen_range(0..remote.len())];
                (None, format!("rcpt{}@{domain}", rng.gen_range(0..1000)))
            })
            .collect(),
        Kind::Legit => {
            let n = want.min(shared.accounts.len());
            sample(rng, shared.accounts.len(), n)
                .into_iter()
                .map(|i| (Some(i), shared.accounts[i].address.clone()))
                .collect()
        }
        _ => (0..want)
            .map(|_| {
                (
                    None,
                    format!("nosuch{:08x}@{}", rng.gen::<u32>(), shared.domain),
                )
            })
            .collect(),
    };
    let size = shared.args.size.sample(rng);
    let sender = match login {
        Some(address) => address.to_string(),
        None => format!(
            "sender{}@{}",
            rng.gen_range(0..10_000),
            shared.args.sender_domain
        ),
    };
    let body = build_message(shared, rng, &sender, &rcpts, size);
    let mail = if offer.size {
        format!("MAIL FROM:<{sender}> SIZE={}\r\n", body.len())
    } else {
        format!("MAIL FROM:<{sender}>\r\n")
    };
    let t0 = Instant::now();
    stats.sent += 1;
    let send_data = kind == Kind::Legit;
    let mut accepted_rcpts = Vec::new();
    if offer.pipelining {
        // RFC 2920 §3.1: MAIL, RCPTs and DATA may go in one group; DATA is
        // the last command of the group.
        let mut group = mail.into_bytes();
        for (_, r) in &rcpts {
            group.extend_from_slice(format!("RCPT TO:<{r}>\r\n").as_bytes());
        }
        if send_data {
            group.extend_from_slice(b"DATA\r\n");
        }
        conn.send(&group).await?;
        let m = read_reply(conn, line).await?;
        let mail_ok = m.code == 250;
        if !mail_ok {
            stats.error(format!("MAIL {}", m.code));
        }
        for (i, _) in &rcpts {
            let r = read_reply(conn, line).await?;
            if r.code == 250 || r.code == 251 {
                accepted_rcpts.push(*i);
            } else if mail_ok && kind == Kind::Legit {
                stats.error(format!("RCPT {}", r.code));
            } else if kind == Kind::Bounce {
                stats.error(format!("RCPT {} (unknown)", r.code));
            }
        }
        if send_data {
            let d = read_reply(conn, line).await?;
            if d.code == 354 {
                return finish_data(shared, conn, line, &body, &accepted_rcpts, kind, t0, stats)
                    .await;
            }
            if mail_ok && !accepted_rcpts.is_empty() {
                stats.error(format!("DATA {}", d.code));
            }
            if d.code == 421 {
                return Ok(false);
            }
        }
    } else {
        conn.send(mail.as_bytes()).await?;
        let m = read_reply(conn, line).await?;
        if m.code != 250 {
            stats.error(format!("MAIL {}", m.code));
            return Ok(m.code != 421);
        }
        for (i, r) in &rcpts {
            conn.send(format!("RCPT TO:<{r}>\r\n").as_bytes()).await?;
            let reply = read_reply(conn, line).await?;
            if reply.code == 250 || reply.code == 251 {
                accepted_rcpts.push(*i);
            } else if kind == Kind::Bounce {
                stats.error(format!("RCPT {} (unknown)", reply.code));
            } else {
                stats.error(format!("RCPT {}", reply.code));
            }
            if reply.code == 421 {
                return Ok(false);
            }
        }
        if send_data && !accepted_rcpts.is_empty() {
            conn.send(b"DATA\r\n").await?;
            let d = read_reply(conn, line).await?;
            if d.code == 354 {
                return finish_data(shared, conn, line, &body, &accepted_rcpts, kind, t0, stats)
                    .await;
            }
            stats.error(format!("DATA {}", d.code));
            return Ok(d.code != 421);
        }
    }
    if kind == Kind::Bounce {
        stats.unknown_accepted += accepted_rcpts.len() as u64;
    }
    // Nothing was sent: reset the transaction for the next one.
    conn.send(b"RSET\r\n").await?;
    let r = read_reply(conn, line).await?;
    Ok(r.code == 250)
}

#[allow(clippy::too_many_arguments)]
async fn finish_data(
    shared: &Shared,
    conn: &mut Conn,
    line: &mut Vec<u8>,
    body: &[u8],
    rcpts: &[Option<usize>],
    kind: Kind,
    t0: Instant,
    stats: &mut SessionStats,
) -> Result<bool> {
    conn.send(body).await?;
    conn.send(b".\r\n").await?;
    let r = read_reply(conn, line).await?;
    if r.code == 250 {
        let took = t0.elapsed();
        stats.accepted += 1;
        stats.bytes += body.len() as u64;
        stats.deliveries += rcpts.len() as u64;
        stats.message.record(took);
        stats
            .timeline
            .record(t0.duration_since(shared.start) + took, took);
        shared.accepted.fetch_add(1, Ordering::Relaxed);
        if kind == Kind::Legit {
            stats.good += 1;
        } else {
            stats.unknown_accepted += rcpts.len() as u64;
        }
        Ok(true)
    } else {
        stats.error(format!("DATA-END {}", r.code));
        Ok(r.code != 421)
    }
}

/// A message of about `size` bytes (at least its headers), CRLF lines,
/// no line starting with a dot (so no dot-stuffing is needed), ending in
/// CRLF.
fn build_message(
    shared: &Shared,
    rng: &mut StdRng,
    from: &str,
    rcpts: &[(Option<usize>, String)],
    size: usize,
) -> Vec<u8> {
    let to = rcpts
        .first()
        .map(|(_, a)| a.as_str())
        .unwrap_or("undisclosed");
    let id: u64 = rng.gen();
    let head = format!(
        "From: Bench Sender <{from}>\r\nTo: <{to}>\r\nSubject: load test {id:016x}\r\nDate: {date}\r\nMessage-ID: <{id:016x}@{sd}>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n",
        sd = shared.args.sender_domain,
        date = crate::corpus::rfc2822_now(),
    );
    let mut msg = head.into_bytes();
    let want_body = size.saturating_sub(msg.len()).max(2);
    let filler = &shared.filler;
    let max_start = filler.len().saturating_sub(want_body + 200).max(1);
    // Start at a line start so the body is made of whole lines.
    let mut start = rng.gen_range(0..max_start);
    while start > 0 && filler[start - 1] != b'\n' {
        start -= 1;
    }
    let end = (start + want_body).min(filler.len());
    let mut chunk = &filler[start..end];
    // Cut back to a line end and pad the last line to the exact size.
    let cut = chunk.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let pad = chunk.len() - cut;
    chunk = &chunk[..cut];
    msg.extend_from_slice(chunk);
    if pad >= 2 {
        msg.extend(std::iter::repeat_n(b'x', pad - 2));
        msg.extend_from_slice(b"\r\n");
    } else if !msg.ends_with(b"\r\n") {
        msg.extend_from_slice(b"\r\n");
    }
    msg
}

/// The report as text tables.
pub fn render(report: &SmtpReport) -> String {
    let mut out = format!("SMTP load on {} ({})\n\n", report.server, report.model);
    let mut t = Table::new(&[
        "bounce",
        "secs",
        "sessions",
        "sent/s",
        "accepted/s",
        "goodput/s",
        "deliveries/s",
        "MB/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
    ]);
    for r in &report.runs {
        t.row(vec![
            num(r.bounce_ratio),
            num(r.elapsed_s),
            (r.sessions.legit + r.sessions.bounce + r.sessions.unfinished).to_string(),
            num(r.sent_per_s),
            num(r.accepted_per_s),
            num(r.goodput_per_s),
            num(r.deliveries_per_s),
            num(r.mb_per_s),
            num(r.message_latency.p50_ms),
            num(r.message_latency.p90_ms),
            num(r.message_latency.p99_ms),
        ]);
    }
    out.push_str(&t.render());
    for r in &report.runs {
        out.push_str(&format!(
            "\nbounce {}: sessions legit {} bounce {} unfinished {}; sent {} accepted {} good {} deliveries {}; connect p50 {} ms p99 {} ms{}{}\n",
            num(r.bounce_ratio),
            match r.sessions.legit_cut_at_end {
                0 => r.sessions.legit.to_string(),
                cut => format!("{} ({cut} overtaken by the end of the run)", r.sessions.legit),
            },
            r.sessions.bounce,
            r.sessions.unfinished,
            r.sent,
            r.accepted,
            r.good,
            r.deliveries,
            num(r.connect_latency.p50_ms),
            num(r.connect_latency.p99_ms),
            if r.pipelining { "; pipelined" } else { "" },
            if r.dropped_arrivals > 0 { format!("; {} arrivals dropped", r.dropped_arrivals) } else { String::new() },
        ));
        if r.unknown_accepted > 0 {
            out.push_str(&format!(
                "  warning: the server accepted {} unknown recipients\n",
                r.unknown_accepted
            ));
        }
        if !r.errors.is_empty() {
            let e: Vec<String> = r.errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            out.push_str(&format!("  replies/errors: {}\n", e.join(", ")));
        }
        if let Some(v) = &r.verified {
            out.push_str(&format!(
                "  verified via {}: {} deliveries counted, {} arrived, {} s after the run ({} deliveries/s overall){}\n",
                v.via,
                v.expected,
                v.arrived,
                num(v.drain_s),
                num(v.delivered_per_s),
                if v.expected == v.arrived { "" } else { "  MISMATCH" }
            ));
        }
    }
    out
}

pub(crate) fn plot_report(report: &SmtpReport, path: &std::path::Path) -> anyhow::Result<()> {
    if report.runs.len() > 1 {
        let points: Vec<(f64, f64)> = report
            .runs
            .iter()
            .map(|r| (r.bounce_ratio, r.goodput_per_s))
            .collect();
        crate::plot::line_chart(
            path,
            "goodput against bounce ratio",
            "bounce ratio",
            "good msgs/s",
            &[("goodput", points)],
        )
    } else {
        let r = &report.runs[0];
        // The last second is usually partial: leave it out.
        let full = r.timeline.count.len().saturating_sub(1).max(1);
        let counts: Vec<(f64, f64)> = r
            .timeline
            .count
            .iter()
            .take(full)
            .enumerate()
            .map(|(i, &c)| (i as f64, c as f64))
            .collect();
        let lat: Vec<(f64, f64)> = r
            .timeline
            .mean_ms()
            .into_iter()
            .take(full)
            .enumerate()
            .map(|(i, v)| (i as f64, v))
            .collect();
        crate::plot::panels(
            path,
            "accepted messages per second, and their mean latency",
            "second",
            &[
                ("accepted/s", vec![("accepted/s", counts)]),
                ("mean latency ms", vec![("latency", lat)]),
            ],
        )
    }
}

/// `per_account` plain messages for each account, sizes drawn from `size`:
/// the mail a POP3 or IMAP run needs in place first.
pub(crate) fn plain_messages(
    accounts: &[Account],
    per_account: usize,
    size: SizeDist,
    seed: u64,
) -> Vec<(String, Vec<u8>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let filler = crate::corpus::filler_text(seed, 1 << 20);
    let mut out = Vec::with_capacity(accounts.len() * per_account);
    for n in 0..per_account {
        for a in accounts {
            let mut msg = format!(
                "From: <fill@sender.example.net>\r\nTo: <{}>\r\nSubject: fill {n}\r\nDate: {}\r\nMessage-ID: <fill.{n}.{:x}@sender.example.net>\r\n\r\n",
                a.address,
                crate::corpus::rfc2822_now(),
                rng.gen::<u64>()
            )
            .into_bytes();
            let want = size.sample(&mut rng).saturating_sub(msg.len());
            let start = rng.gen_range(0..filler.len() - want.min(filler.len() - 1));
            let start = filler[..start]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1);
            let end = (start + want).min(filler.len());
            let end = filler[..end]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(start, |p| p + 1)
                .max(start);
            msg.extend_from_slice(&filler[start..end]);
            if !msg.ends_with(b"\r\n") {
                msg.extend_from_slice(b"\r\n");
            }
            out.push((a.address.clone(), msg));
        }
    }
    out
}

/// Sends each `(recipient, message)` over SMTP on `concurrency` connections
/// (pipelined when offered), dot-stuffing as needed; returns how many the
/// server accepted. Fails on the first refusal: a fill must be complete.
pub(crate) async fn deliver(
    server: SocketAddr,
    msgs: Vec<(String, Vec<u8>)>,
    concurrency: usize,
    timeout: Duration,
) -> Result<u64> {
    let total = msgs.len() as u64;
    let queue = Arc::new(Mutex::new(msgs.into_iter().rev().collect::<Vec<_>>()));
    let progress = Arc::new(Progress::counted(total, "messages sent"));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let queue = Arc::clone(&queue);
        let progress = Arc::clone(&progress);
        tasks.spawn(async move {
            let mut conn = Conn::connect(server, None, timeout).await?;
            let mut line = Vec::new();
            expect(read_reply(&mut conn, &mut line).await?, 220, "greeting")?;
            conn.send(b"EHLO fill.example.net\r\n").await?;
            expect(read_reply(&mut conn, &mut line).await?, 250, "EHLO")?;
            let mut sent = 0u64;
            loop {
                let next = queue.lock().expect("queue lock").pop();
                let Some((rcpt, msg)) = next else { break };
                conn.send(
                    format!("MAIL FROM:<fill@sender.example.net>\r\nRCPT TO:<{rcpt}>\r\nDATA\r\n")
                        .as_bytes(),
                )
                .await?;
                expect(read_reply(&mut conn, &mut line).await?, 250, "MAIL")?;
                expect(read_reply(&mut conn, &mut line).await?, 250, "RCPT")?;
                expect(read_reply(&mut conn, &mut line).await?, 354, "DATA")?;
                conn.send(&dot_stuff(&msg)).await?;
                conn.send(b".\r\n").await?;
                expect(read_reply(&mut conn, &mut line).await?, 250, "end of DATA")?;
                sent += 1;
                progress.inc(1);
            }
            quit(&mut conn, &mut line).await?;
            Ok::<u64, BenchError>(sent)
        });
    }
    let mut sent = 0;
    while let Some(r) = tasks.join_next().await {
        sent += r.map_err(|e| BenchError::Protocol(format!("fill task: {e}")))??;
    }
    if let Ok(p) = Arc::try_unwrap(progress) {
        p.finish();
    }
    Ok(sent)
}

fn expect(reply: Reply, code: u16, what: &str) -> Result<()> {
    if reply.code == code {
        Ok(())
    } else {
        Err(BenchError::Refused {
            command: what.to_string(),
            reply: format!(
                "{} {}",
                reply.code,
                reply.lines.last().cloned().unwrap_or_default()
            ),
        })
    }
}

/// RFC 5321 §4.5.2: a line starting with a dot gets one more; the result
/// ends in CRLF.
pub(crate) fn dot_stuff(msg: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(msg.len() + 16);
    let mut at_line_start = true;
    for &b in msg {
        if at_line_start && b == b'.' {
            out.push(b'.');
        }
        out.push(b);
        at_line_start = b == b'\n';
    }
    if !out.ends_with(b"\r\n") {
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn session_kinds_hold_their_shares(b in 0.0f64..1.0, u in 0.0f64..1.0, n in 1u64..3000) {
            prop_assume!(b + u <= 1.0);
            let kinds: Vec<Kind> = (0..n).map(|i| kind_of(i, b, u)).collect();
            let unfinished = kinds.iter().filter(|&&k| k == Kind::Unfinished).count() as f64;
            let bounce = kinds.iter().filter(|&&k| k == Kind::Bounce).count() as f64;
            prop_assert!((unfinished - n as f64 * u).abs() <= 1.0);
            prop_assert!((bounce - n as f64 * b).abs() <= 2.0, "bounce {} of {} at {}", bounce, n, b);
        }
    }

    #[test]
    fn dot_stuffing() {
        assert_eq!(dot_stuff(b".a\r\nb\r\n.\r\n"), b"..a\r\nb\r\n..\r\n");
        assert_eq!(dot_stuff(b"no end"), b"no end\r\n");
    }

    #[test]
    fn extreme_shares() {
        assert!((0..100).all(|i| kind_of(i, 0.0, 0.0) == Kind::Legit));
        assert!((0..100).all(|i| kind_of(i, 1.0, 0.0) == Kind::Bounce));
        assert!((0..100).all(|i| kind_of(i, 0.0, 1.0) == Kind::Unfinished));
    }
}
