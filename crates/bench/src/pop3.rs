//! `sluice bench pop3`: rabid-like POP3 load. Each client loops over the
//! accounts: connect, log in, STAT and LIST, RETR up to k messages, DELE
//! them, QUIT. A completed session is one transaction, as rabid and the
//! file-system study count them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use serde::Serialize;
use tokio::time::Instant;

use crate::distribution::SizeDist;
use crate::error::{BenchError, Result};
use crate::latency::{Histogram, Percentiles, Timeline};
use crate::progress::Progress;
use crate::report::{num, print_json, Table};
use crate::smtp::resolve;
use crate::users::{Account, UserArgs};
use crate::wire::Conn;

/// Options of `sluice bench pop3`.
#[derive(Debug, Clone, clap::Args)]
pub struct Pop3Args {
    /// POP3 server to load, host:port.
    #[arg(long, default_value = "127.0.0.1:1110")]
    pub server: String,
    /// The accounts to log in as.
    #[command(flatten)]
    pub users: UserArgs,
    /// Concurrent clients (rabid's -p).
    #[arg(long, default_value_t = 5)]
    pub clients: usize,
    /// Most messages retrieved per session (rabid's -r max per connection).
    #[arg(long, default_value_t = 5)]
    pub retrieve: usize,
    /// Leave messages on the server (no DELE).
    #[arg(long)]
    pub keep: bool,
    /// Log in with AUTH PLAIN (RFC 5034) instead of USER/PASS.
    #[arg(long)]
    pub auth_plain: bool,
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Stop after this many sessions instead (or whichever comes first).
    #[arg(long)]
    pub sessions: Option<u64>,
    /// Stop when a full pass over the accounts found every mailbox empty.
    #[arg(long)]
    pub until_empty: bool,
    /// Before the run, send this many messages to each account over SMTP
    /// (at --smtp) and wait until POP3 shows them.
    #[arg(long, default_value_t = 0)]
    pub fill: usize,
    /// SMTP server for --fill, host:port.
    #[arg(long, default_value = "127.0.0.1:2525")]
    pub smtp: String,
    /// Size of --fill messages: `4k`, `0-5k` or `realistic`.
    #[arg(long, default_value = "0-5k")]
    pub fill_size: SizeDist,
    /// Per-reply timeout, in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Seed for the fill messages.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Draw sessions per second over time as a PNG.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<std::path::PathBuf>,
}

/// The report of `sluice bench pop3`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Pop3Report {
    /// Server address.
    pub server: String,
    /// Concurrent clients.
    pub clients: usize,
    /// Messages sent by --fill before the run.
    pub filled: u64,
    /// Wall time of the run, in seconds.
    pub elapsed_s: f64,
    /// Completed sessions (login to QUIT): rabid's transactions.
    pub sessions: u64,
    /// Completed sessions that found the mailbox empty.
    pub empty_sessions: u64,
    /// Messages retrieved.
    pub retrieved: u64,
    /// Messages deleted (committed by QUIT).
    pub deleted: u64,
    /// Bytes of retrieved messages.
    pub bytes: u64,
    /// Sessions per minute.
    pub sessions_per_min: f64,
    /// Messages retrieved per minute.
    pub retrieved_per_min: f64,
    /// Megabytes (10^6) retrieved per minute.
    pub mb_per_min: f64,
    /// Whole session latency.
    pub session_latency: Percentiles,
    /// RETR latency (command to the end of the message).
    pub retr_latency: Percentiles,
    /// Failures by command and reply or kind.
    pub errors: BTreeMap<String, u64>,
    /// Sessions completed per second of the run.
    pub timeline: Timeline,
}

/// Runs `sluice bench pop3`.
pub async fn run(args: Pop3Args) -> anyhow::Result<()> {
    let report = execute(args.clone()).await?;
    if let Some(path) = &args.plot {
        let points: Vec<(f64, f64)> = report
            .timeline
            .count
            .iter()
            .enumerate()
            .map(|(i, &c)| (i as f64, c as f64))
            .collect();
        crate::plot::line_chart(
            path,
            "POP3 sessions per second",
            "second",
            "sessions/s",
            &[("sessions/s", points)],
        )?;
    }
    if args.json {
        print_json(&report)?;
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// The report as a text table.
pub fn render(r: &Pop3Report) -> String {
    let mut t = Table::new(&[
        "clients",
        "secs",
        "sessions",
        "sessions/min",
        "retrieved",
        "retr/min",
        "MB/min",
        "empty",
        "session p50 ms",
        "p99 ms",
        "RETR p50 ms",
        "p99 ms",
    ]);
    t.row(vec![
        r.clients.to_string(),
        num(r.elapsed_s),
        r.sessions.to_string(),
        num(r.sessions_per_min),
        r.retrieved.to_string(),
        num(r.retrieved_per_min),
        num(r.mb_per_min),
        r.empty_sessions.to_string(),
        num(r.session_latency.p50_ms),
        num(r.session_latency.p99_ms),
        num(r.retr_latency.p50_ms),
        num(r.retr_latency.p99_ms),
    ]);
    let mut out = format!(
        "POP3 load on {} (filled {} messages first)\n\n",
        r.server, r.filled
    );
    out.push_str(&t.render());
    if !r.errors.is_empty() {
        let e: Vec<String> = r.errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        out.push_str(&format!("errors: {}\n", e.join(", ")));
    }
    out
}

struct Shared {
    args: Pop3Args,
    server: SocketAddr,
    accounts: Vec<Account>,
    deadline: Instant,
    start: Instant,
    timeout: Duration,
    next: AtomicU64,
    done: Arc<AtomicU64>,
    /// Consecutive sessions that found an empty mailbox (for --until-empty).
    empty_streak: AtomicU64,
    totals: Mutex<(Pop3Report, Histogram, Histogram)>,
}

impl Shared {
    fn stopping(&self) -> bool {
        Instant::now() >= self.deadline
            || self
                .args
                .sessions
                .is_some_and(|n| self.done.load(Ordering::Relaxed) >= n)
            || (self.args.until_empty
                && self.empty_streak.load(Ordering::Relaxed) >= self.accounts.len() as u64)
    }

    fn claim(&self) -> Option<u64> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        if self.args.sessions.is_some_and(|n| i >= n) {
            return None;
        }
        Some(i)
    }
}

/// Runs the workload and returns its report without printing it.
pub async fn execute(args: Pop3Args) -> anyhow::Result<Pop3Report> {
    anyhow::ensure!(args.clients > 0, "--clients must be at least 1");
    let server = resolve(&args.server).await?;
    let accounts = args.users.accounts()?;
    let mut filled = 0;
    if args.fill > 0 {
        let before: u64 = {
            let mut n = 0;
            for a in &accounts {
                n += stat(server, a).await?.0;
            }
            n
        };
        let smtp = resolve(&args.smtp).await?;
        let msgs = crate::smtp::plain_messages(&accounts, args.fill, args.fill_size, args.seed);
        filled = crate::smtp::deliver(smtp, msgs, 4, Duration::from_secs_f64(args.timeout)).await?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let mut n = 0;
            for a in &accounts {
                n += stat(server, a).await?.0;
            }
            if n >= before + filled {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "filled {filled} messages but only {} arrived",
                n - before
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let start = Instant::now();
    let duration = Duration::from_secs_f64(args.duration.max(0.0));
    let shared = Arc::new(Shared {
        args: args.clone(),
        server,
        accounts,
        deadline: start + duration,
        start,
        timeout: Duration::from_secs_f64(args.timeout),
        next: AtomicU64::new(0),
        done: Arc::new(AtomicU64::new(0)),
        empty_streak: AtomicU64::new(0),
        totals: Mutex::default(),
    });
    let progress = Progress::timed(duration, "sessions", Arc::clone(&shared.done));
    let mut tasks = tokio::task::JoinSet::new();
    for client in 0..args.clients {
        let shared = Arc::clone(&shared);
        tasks.spawn(async move {
            // Each client walks its own slice of the accounts (client,
            // client + clients, …) so that with at least as many accounts
            // as clients no two clients fight over a mailbox lock.
            let n = shared.accounts.len();
            let mut k = 0usize;
            while !shared.stopping() {
                if shared.claim().is_none() {
                    break;
                }
                let account = &shared.accounts[(client + k * shared.args.clients) % n];
                k += 1;
                let mut s = SessionStats::default();
                let t0 = Instant::now();
                match pop_session(&shared, account, &mut s).await {
                    Ok(()) => {
                        let took = t0.elapsed();
                        s.session.record(took);
                        s.timeline
                            .record(t0.duration_since(shared.start) + took, took);
                        shared.done.fetch_add(1, Ordering::Relaxed);
                        if s.retrieved == 0 {
                            shared.empty_streak.fetch_add(1, Ordering::Relaxed);
                        } else {
                            shared.empty_streak.store(0, Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        let what = match e {
                            BenchError::Refused { command, reply } => {
                                format!(
                                    "{command} -ERR {}",
                                    reply.chars().take(40).collect::<String>()
                                )
                            }
                            BenchError::Io(e) => format!("io: {}", e.kind()),
                            other => other.to_string(),
                        };
                        *s.errors.entry(what).or_default() += 1;
                        s.failed = true;
                        // Pace a failing server rather than spin on it.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                let mut t = shared.totals.lock().expect("totals lock");
                let (r, sess, retr) = &mut *t;
                if !s.failed {
                    r.sessions += 1;
                    r.empty_sessions += u64::from(s.retrieved == 0);
                    r.retrieved += s.retrieved;
                    r.deleted += s.deleted;
                    r.bytes += s.bytes;
                }
                for (k, v) in s.errors {
                    *r.errors.entry(k).or_default() += v;
                }
                sess.merge(&s.session);
                retr.merge(&s.retr);
                r.timeline.merge(&s.timeline);
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    progress.finish();
    let elapsed = start.elapsed().as_secs_f64();
    let (mut r, sess, retr) = std::mem::take(&mut *shared.totals.lock().expect("totals lock"));
    r.server = args.server.clone();
    r.clients = args.clients;
    r.filled = filled;
    r.elapsed_s = elapsed;
    let per_min = |n: f64| {
        if elapsed > 0.0 {
            n * 60.0 / elapsed
        } else {
            0.0
        }
    };
    r.sessions_per_min = per_min(r.sessions as f64);
    r.retrieved_per_min = per_min(r.retrieved as f64);
    r.mb_per_min = per_min(r.bytes as f64) / 1e6;
    r.session_latency = sess.summary();
    r.retr_latency = retr.summary();
    Ok(r)
}

#[derive(Default)]
struct SessionStats {
    retrieved: u64,
    deleted: u64,
    bytes: u64,
    failed: bool,
    errors: BTreeMap<String, u64>,
    session: Histogram,
    retr: Histogram,
    timeline: Timeline,
}

/// A logged-in POP3 connection.
pub(crate) struct Pop3 {
    conn: Conn,
    line: Vec<u8>,
}

impl Pop3 {
    /// Connects and logs in as `account`.
    pub(crate) async fn login(
        server: SocketAddr,
        account: &Account,
        plain: bool,
        timeout: Duration,
    ) -> Result<Pop3> {
        let conn = Conn::connect(server, None, timeout).await?;
        let mut p = Pop3 {
            conn,
            line: Vec::with_capacity(512),
        };
        p.status("greeting").await?;
        if plain {
            let token = base64::engine::general_purpose::STANDARD
                .encode(format!("\0{}\0{}", account.address, account.password));
            p.command(&format!("AUTH PLAIN {token}"), "AUTH").await?;
        } else {
            p.command(&format!("USER {}", account.address), "USER")
                .await?;
            p.command(&format!("PASS {}", account.password), "PASS")
                .await?;
        }
        Ok(p)
    }

    async fn status(&mut self, what: &str) -> Result<String> {
        self.conn.read_line(&mut self.line).await?;
        if self.line.starts_with(b"+OK") {
            Ok(String::from_utf8_lossy(&self.line[3..]).trim().to_string())
        } else {
            Err(BenchError::Refused {
                command: what.to_string(),
                reply: String::from_utf8_lossy(&self.line).into_owned(),
            })
        }
    }

    async fn command(&mut self, cmd: &str, what: &str) -> Result<String> {
        self.conn.send(format!("{cmd}\r\n").as_bytes()).await?;
        self.status(what).await
    }

    /// Reads a multi-line body up to the lone dot; returns its bytes
    /// (unstuffed, without the terminator).
    async fn multiline(&mut self) -> Result<u64> {
        let mut bytes = 0;
        loop {
            self.conn.read_line(&mut self.line).await?;
            if self.line == b"." {
                return Ok(bytes);
            }
            // RFC 1939 §3: a leading dot of a line is stuffed.
            let stuffed = u64::from(self.line.first() == Some(&b'.'));
            bytes += self.line.len() as u64 + 2 - stuffed;
        }
    }

    /// STAT: messages and octets.
    pub(crate) async fn stat(&mut self) -> Result<(u64, u64)> {
        let s = self.command("STAT", "STAT").await?;
        let mut it = s.split_whitespace().map(|w| w.parse::<u64>());
        match (it.next(), it.next()) {
            (Some(Ok(n)), Some(Ok(b))) => Ok((n, b)),
            _ => Err(BenchError::Protocol(format!("bad STAT reply {s:?}"))),
        }
    }

    /// QUIT, which commits deletions (RFC 1939 §6).
    pub(crate) async fn quit(mut self) -> Result<()> {
        self.command("QUIT", "QUIT").await?;
        self.conn.shutdown().await;
        Ok(())
    }
}

/// The message count and size of `account`'s mailbox.
pub(crate) async fn stat(server: SocketAddr, account: &Account) -> Result<(u64, u64)> {
    let mut p = Pop3::login(server, account, false, Duration::from_secs(30)).await?;
    let s = p.stat().await?;
    p.quit().await?;
    Ok(s)
}

async fn pop_session(shared: &Shared, account: &Account, s: &mut SessionStats) -> Result<()> {
    let mut p = Pop3::login(
        shared.server,
        account,
        shared.args.auth_plain,
        shared.timeout,
    )
    .await?;
    let (count, _) = p.stat().await?;
    p.command("LIST", "LIST").await?;
    p.multiline().await?;
    let k = (shared.args.retrieve as u64).min(count);
    for i in 1..=k {
        let t0 = Instant::now();
        p.command(&format!("RETR {i}"), "RETR").await?;
        let n = p.multiline().await?;
        s.retr.record(t0.elapsed());
        s.retrieved += 1;
        s.bytes += n;
        if !shared.args.keep {
            p.command(&format!("DELE {i}"), "DELE").await?;
        }
    }
    p.quit().await?;
    if !shared.args.keep {
        s.deleted += k;
    }
    Ok(())
}
