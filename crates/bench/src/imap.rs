//! `sluice bench imap`: the seven requests of the database-driven mail
//! server study, timed from the client as the study did (command sent to
//! tagged reply), on a mailbox loaded with a generated corpus whose search
//! answers are known: all headers of INBOX; TEXT search for a word in ~1%
//! and one in ~25% of the messages; a FROM search; a date search; expunge
//! 1% and then 20%. Each search runs warm `--repeat` times, and once cold
//! first when `--cold-cmd` says how to restart the server. `--clients`
//! adds a concurrent mix of SELECT/FETCH/SEARCH/STORE.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::time::Instant;

use crate::corpus::{imap_date, imap_date_time, search_day, Corpus, CorpusSpec};
use crate::error::{BenchError, Result};
use crate::imap_frame::{self, quoted, sequence_set, Start};
use crate::latency::{Histogram, Percentiles};
use crate::progress::Progress;
use crate::report::{num, print_json, Table};
use crate::smtp::resolve;
use crate::users::Account;
use crate::wire::Conn;

/// Options of `sluice bench imap`.
#[derive(Debug, Clone, clap::Args)]
pub struct ImapArgs {
    /// IMAP server, host:port.
    #[arg(long, default_value = "127.0.0.1:1143")]
    pub server: String,
    /// Account to use (its INBOX is emptied when --load is given).
    #[arg(long, default_value = "user1@example.org")]
    pub user: String,
    /// Its password.
    #[arg(long, default_value = "password")]
    pub password: String,
    /// Empty INBOX and load this many corpus messages first (the study
    /// used 1046, 8734 and 21282). 0 uses the mailbox as it is, and
    /// search results are then not checked.
    #[arg(long, default_value_t = 1046)]
    pub load: usize,
    /// How to load: `append` (IMAP APPEND with the corpus dates) or `smtp`.
    #[arg(long, default_value = "append")]
    pub load_via: String,
    /// SMTP server for --load-via smtp, host:port.
    #[arg(long, default_value = "127.0.0.1:2525")]
    pub smtp: String,
    /// Connections used to load.
    #[arg(long, default_value_t = 4)]
    pub load_connections: usize,
    /// Corpus seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Warm repetitions of each search and of the header fetch.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Shell command that makes the next request cold (restart the server,
    /// drop the page cache); run before the cold run of each request.
    #[arg(long, value_name = "CMD")]
    pub cold_cmd: Option<String>,
    /// Skip the two expunge requests (they remove 21% of the mailbox).
    #[arg(long)]
    pub no_expunge: bool,
    /// Concurrent mode: this many clients, each logged in once for the
    /// whole run (long sessions), run a mix of FETCH, SEARCH, STORE,
    /// SELECT, APPEND and EXPUNGE for --duration after the timed requests
    /// (0: off).
    #[arg(long, default_value_t = 0)]
    pub clients: usize,
    /// Run only the concurrent mix (after --load, if given), not the seven
    /// timed requests.
    #[arg(long)]
    pub mix_only: bool,
    /// What the mix's SEARCH commands look for: `text` (a word in the
    /// whole message: a full-text index helps) or `header` (a sender
    /// address: both sides answer it from cached headers).
    #[arg(long, value_enum, default_value_t = MixSearch::Text)]
    pub mix_search: MixSearch,
    /// Length of the concurrent mix, in seconds. Each client first runs
    /// one command of each kind, however long that takes, then the random
    /// mix until the time is up.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Per-reply timeout, in seconds.
    #[arg(long, default_value_t = 300.0)]
    pub timeout: f64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Draw the warm request times as a PNG.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
}

/// The SEARCH of the concurrent mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MixSearch {
    /// `SEARCH TEXT word`.
    Text,
    /// `SEARCH FROM address`.
    Header,
}

/// The report of `sluice bench imap`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImapReport {
    /// Server address.
    pub server: String,
    /// Messages in INBOX when the requests started.
    pub messages: u64,
    /// Seconds the load took (0 without --load).
    pub load_s: f64,
    /// Messages loaded per second.
    pub load_per_s: f64,
    /// The timed requests, in the study's order.
    pub requests: Vec<RequestTiming>,
    /// The concurrent mix, when asked for.
    pub concurrent: Option<ConcurrentReport>,
}

/// Times of one of the seven requests.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RequestTiming {
    /// Short name (`headers`, `text-1%`, …).
    pub name: String,
    /// The IMAP command sent.
    pub command: String,
    /// Cold time in ms, when --cold-cmd was given.
    pub cold_ms: Option<f64>,
    /// Warm times in ms.
    pub warm_ms: Vec<f64>,
    /// Mean of the warm times.
    pub warm_mean_ms: f64,
    /// Messages the corpus says should answer (None when not known).
    pub expected: Option<u64>,
    /// Messages the server answered with (FETCH, SEARCH hits, EXPUNGE).
    pub got: u64,
}

/// Figures of the concurrent mix.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConcurrentReport {
    /// Clients.
    pub clients: usize,
    /// Wall time in seconds.
    pub elapsed_s: f64,
    /// Commands completed per second, all kinds.
    pub ops_per_s: f64,
    /// Latency per kind of command.
    pub latency: BTreeMap<String, Percentiles>,
    /// Failures by kind.
    pub errors: BTreeMap<String, u64>,
}

/// A tagged reply and what came before it.
#[derive(Debug, Default)]
pub(crate) struct Response {
    /// Whether the tagged status was OK.
    pub ok: bool,
    /// The tagged line.
    pub tagged: String,
    /// Untagged lines (literals skipped; only the line parts kept).
    pub untagged: Vec<Vec<u8>>,
}

/// A logged-in IMAP connection.
pub(crate) struct Imap {
    conn: Conn,
    line: Vec<u8>,
    tag: u64,
    literal_plus: bool,
}

impl Imap {
    /// Connects and logs in.
    pub(crate) async fn login(
        server: SocketAddr,
        user: &str,
        password: &str,
        timeout: Duration,
    ) -> Result<Imap> {
        let conn = Conn::connect(server, None, timeout).await?;
        let mut imap = Imap {
            conn,
            line: Vec::with_capacity(1024),
            tag: 0,
            literal_plus: false,
        };
        imap.conn.read_line(&mut imap.line).await?;
        if !imap.line.starts_with(b"* OK") && !imap.line.starts_with(b"* PREAUTH") {
            return Err(BenchError::Refused {
                command: "greeting".into(),
                reply: String::from_utf8_lossy(&imap.line).into(),
            });
        }
        let r = imap
            .command(&format!("LOGIN {} {}", quoted(user), quoted(password)))
            .await?;
        if !r.ok {
            return Err(BenchError::Refused {
                command: "LOGIN".into(),
                reply: r.tagged,
            });
        }
        let caps = imap.command("CAPABILITY").await?;
        imap.literal_plus = caps.untagged.iter().any(|l| {
            let l = String::from_utf8_lossy(l).to_ascii_uppercase();
            l.split_whitespace()
                .any(|w| w == "LITERAL+" || w == "LITERAL-")
        });
        Ok(imap)
    }

    fn next_tag(&mut self) -> String {
        self.tag += 1;
        format!("b{}", self.tag)
    }

    /// Sends a command and reads everything up to its tagged reply.
    pub(crate) async fn command(&mut self, cmd: &str) -> Result<Response> {
        let tag = self.next_tag();
        self.conn
            .send(format!("{tag} {cmd}\r\n").as_bytes())
            .await?;
        self.read_until(&tag).await
    }

    async fn read_until(&mut self, tag: &str) -> Result<Response> {
        let mut resp = Response::default();
        let mut current: Vec<u8> = Vec::new();
        loop {
            self.conn.read_line(&mut self.line).await?;
            let continuing = !current.is_empty();
            if let Some(n) = imap_frame::trailing_literal(&self.line) {
                self.conn.skip_exact(n).await?;
                current.extend_from_slice(&self.line);
                continue;
            }
            if continuing {
                current.extend_from_slice(&self.line);
                resp.untagged.push(std::mem::take(&mut current));
                continue;
            }
            match imap_frame::start(&self.line) {
                Some(Start::Tagged { tag: t, ok }) if t == tag.as_bytes() => {
                    resp.ok = ok;
                    resp.tagged = String::from_utf8_lossy(&self.line).into_owned();
                    return Ok(resp);
                }
                Some(Start::Continuation) => {
                    return Err(BenchError::Protocol(
                        "unexpected continuation request".into(),
                    ))
                }
                _ => resp.untagged.push(self.line.clone()),
            }
        }
    }

    /// APPENDs one message to INBOX, with an internal date when given.
    pub(crate) async fn append(&mut self, msg: &[u8], date: Option<&str>) -> Result<Vec<Vec<u8>>> {
        let tag = self.next_tag();
        let date = date.map(|d| format!(" {d}")).unwrap_or_default();
        if self.literal_plus {
            // RFC 7888: the literal follows without waiting for "+".
            let mut out = format!("{tag} APPEND INBOX{date} {{{}+}}\r\n", msg.len()).into_bytes();
            out.extend_from_slice(msg);
            out.extend_from_slice(b"\r\n");
            self.conn.send(&out).await?;
        } else {
            self.conn
                .send(format!("{tag} APPEND INBOX{date} {{{}}}\r\n", msg.len()).as_bytes())
                .await?;
            loop {
                self.conn.read_line(&mut self.line).await?;
                match imap_frame::start(&self.line) {
                    Some(Start::Continuation) => break,
                    Some(Start::Tagged { .. }) => {
                        return Err(BenchError::Refused {
                            command: "APPEND".into(),
                            reply: String::from_utf8_lossy(&self.line).into(),
                        })
                    }
                    _ => {}
                }
            }
            self.conn.send(msg).await?;
            self.conn.send(b"\r\n").await?;
        }
        let r = self.read_until(&tag).await?;
        if r.ok {
            Ok(r.untagged)
        } else {
            Err(BenchError::Refused {
                command: "APPEND".into(),
                reply: r.tagged,
            })
        }
    }

    /// SELECTs INBOX; returns its message count.
    pub(crate) async fn select(&mut self) -> Result<u64> {
        let r = self.command("SELECT INBOX").await?;
        if !r.ok {
            return Err(BenchError::Refused {
                command: "SELECT".into(),
                reply: r.tagged,
            });
        }
        Ok(r.untagged
            .iter()
            .filter_map(|l| imap_frame::exists(l))
            .next_back()
            .unwrap_or(0))
    }

    /// LOGOUT.
    pub(crate) async fn logout(mut self) {
        let _ = self.command("LOGOUT").await;
        self.conn.shutdown().await;
    }
}

/// The MESSAGES count of `account`'s INBOX (STATUS).
pub(crate) async fn status_messages(server: SocketAddr, account: &Account) -> Result<u64> {
    let mut imap = Imap::login(
        server,
        &account.address,
        &account.password,
        Duration::from_secs(30),
    )
    .await?;
    let r = imap.command("STATUS INBOX (MESSAGES)").await?;
    imap.logout().await;
    r.untagged
        .iter()
        .find_map(|l| imap_frame::status_messages(l))
        .ok_or_else(|| BenchError::Protocol("no STATUS data".into()))
}

/// Runs `sluice bench imap`.
pub async fn run(args: ImapArgs) -> anyhow::Result<()> {
    let report = execute(args.clone()).await?;
    if let Some(path) = &args.plot {
        let points: Vec<(f64, f64)> = report
            .requests
            .iter()
            .enumerate()
            .map(|(i, r)| (i as f64, r.warm_mean_ms))
            .collect();
        crate::plot::line_chart(
            path,
            "IMAP request times (warm mean, ms), in the study's order",
            "request",
            "ms",
            &[("warm ms", points)],
        )?;
    }
    if args.json {
        print_json(&report)?;
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// The report as text tables.
pub fn render(r: &ImapReport) -> String {
    let mut out = format!(
        "IMAP requests on {} with {} messages in INBOX",
        r.server, r.messages
    );
    if r.load_s > 0.0 {
        out.push_str(&format!(
            " (loaded in {} s, {} msgs/s)",
            num(r.load_s),
            num(r.load_per_s)
        ));
    }
    out.push_str("\n\n");
    let mut t = Table::new(&[
        "request",
        "cold ms",
        "warm mean ms",
        "warm min ms",
        "answer",
        "expected",
    ]);
    for q in &r.requests {
        let min = q.warm_ms.iter().copied().fold(f64::INFINITY, f64::min);
        t.row(vec![
            q.name.clone(),
            q.cold_ms.map(num).unwrap_or_else(|| "-".into()),
            if q.warm_ms.is_empty() {
                "-".into()
            } else {
                num(q.warm_mean_ms)
            },
            if q.warm_ms.is_empty() {
                "-".into()
            } else {
                num(min)
            },
            q.got.to_string(),
            match q.expected {
                Some(e) if e == q.got => e.to_string(),
                Some(e) => format!("{e} MISMATCH"),
                None => "-".into(),
            },
        ]);
    }
    out.push_str(&t.render());
    if let Some(c) = &r.concurrent {
        out.push_str(&format!(
            "\nconcurrent mix: {} clients, {} s, {} commands/s\n",
            c.clients,
            num(c.elapsed_s),
            num(c.ops_per_s)
        ));
        let mut t = Table::new(&["command", "count", "p50 ms", "p90 ms", "p99 ms"]);
        for (k, p) in &c.latency {
            t.row(vec![
                k.clone(),
                p.count.to_string(),
                num(p.p50_ms),
                num(p.p90_ms),
                num(p.p99_ms),
            ]);
        }
        out.push_str(&t.render());
        if !c.errors.is_empty() {
            let e: Vec<String> = c.errors.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            out.push_str(&format!("errors: {}\n", e.join(", ")));
        }
    }
    out
}

/// `word` without its first and last letters (at least three kept).
fn infix(word: &str) -> String {
    if word.len() < 5 {
        return word.to_string();
    }
    word[1..word.len() - 1].to_string()
}

/// Runs the workload and returns its report without printing it.
pub async fn execute(args: ImapArgs) -> anyhow::Result<ImapReport> {
    let server = resolve(&args.server).await?;
    let timeout = Duration::from_secs_f64(args.timeout);
    let mut report = ImapReport {
        server: args.server.clone(),
        ..Default::default()
    };
    let spec = CorpusSpec {
        to: args.user.clone(),
        ..CorpusSpec::seed_study(args.load, args.seed)
    };
    let corpus = Arc::new(Corpus::new(spec)?);
    if args.load > 0 {
        let t0 = Instant::now();
        load(&args, server, &corpus, timeout).await?;
        report.load_s = t0.elapsed().as_secs_f64();
        report.load_per_s = args.load as f64 / report.load_s.max(1e-9);
    }
    let known = args.load > 0;
    let mut imap = Imap::login(server, &args.user, &args.password, timeout).await?;
    report.messages = imap.select().await?;
    if args.mix_only {
        imap.logout().await;
        if args.clients > 0 {
            report.concurrent = Some(concurrent(&args, server, &corpus, timeout).await?);
        }
        return Ok(report);
    }
    if known {
        anyhow::ensure!(
            report.messages == args.load as u64,
            "INBOX has {} messages after loading {}",
            report.messages,
            args.load
        );
    }
    let expect = |n: usize| known.then_some(n as u64);
    let from = corpus
        .spec()
        .from_marker
        .as_ref()
        .map(|(a, _)| a.clone())
        .unwrap_or_default();
    let day = search_day(corpus.spec().year);
    let queries: Vec<(&str, String, Option<u64>)> = vec![
        (
            "headers",
            "FETCH 1:* (BODY.PEEK[HEADER])".into(),
            Some(report.messages),
        ),
        (
            "text-1%",
            format!("SEARCH TEXT {}", quoted(&corpus.spec().markers[0].word)),
            expect(corpus.marker_count(0)),
        ),
        (
            "text-25%",
            format!("SEARCH TEXT {}", quoted(&corpus.spec().markers[1].word)),
            expect(corpus.marker_count(1)),
        ),
        // Substrings (RFC 3501 §6.4.4): the 1% marker without its ends,
        // so a word index alone finds nothing; and two words of it with
        // the space between. Other words may hold them: no expected count.
        (
            "text-infix",
            format!(
                "SEARCH TEXT {}",
                quoted(&infix(&corpus.spec().markers[0].word))
            ),
            None,
        ),
        (
            "body-2char",
            format!(
                "SEARCH BODY {}",
                quoted(&corpus.spec().markers[1].word[..2])
            ),
            None,
        ),
        (
            "from",
            format!("SEARCH FROM {}", quoted(&from)),
            expect(corpus.from_count()),
        ),
        (
            "date",
            format!("SEARCH SENTON {}", imap_date(day)),
            known.then(|| corpus.count_on(day) as u64),
        ),
    ];
    for (name, cmd, expected) in queries {
        let mut timing = RequestTiming {
            name: name.into(),
            command: cmd.clone(),
            expected,
            ..Default::default()
        };
        if let Some(cold) = &args.cold_cmd {
            imap.logout().await;
            make_cold(cold, server, &args, timeout).await?;
            imap = Imap::login(server, &args.user, &args.password, timeout).await?;
            imap.select().await?;
            let (ms, got) = timed(&mut imap, &cmd).await?;
            timing.cold_ms = Some(ms);
            timing.got = got;
        }
        for _ in 0..args.repeat {
            let (ms, got) = timed(&mut imap, &cmd).await?;
            timing.warm_ms.push(ms);
            timing.got = got;
        }
        timing.warm_mean_ms = mean(&timing.warm_ms);
        report.requests.push(timing);
    }
    if !args.no_expunge {
        let mut rng = StdRng::seed_from_u64(args.seed ^ 0xE8);
        for (name, share) in [("expunge-1%", 0.01), ("expunge-20%", 0.20)] {
            let n = imap.select().await?;
            let k = (n as f64 * share).round() as usize;
            let mut picked: Vec<u32> = sample(&mut rng, n as usize, k.min(n as usize))
                .into_iter()
                .map(|i| i as u32 + 1)
                .collect();
            picked.sort_unstable();
            let mut timing = RequestTiming {
                name: name.into(),
                command: "EXPUNGE".into(),
                expected: Some(k as u64),
                ..Default::default()
            };
            if !picked.is_empty() {
                let r = imap
                    .command(&format!(
                        "STORE {} +FLAGS.SILENT (\\Deleted)",
                        sequence_set(&picked)
                    ))
                    .await?;
                anyhow::ensure!(r.ok, "STORE \\Deleted refused: {}", r.tagged);
            }
            if let Some(cold) = &args.cold_cmd {
                imap.logout().await;
                make_cold(cold, server, &args, timeout).await?;
                imap = Imap::login(server, &args.user, &args.password, timeout).await?;
                imap.select().await?;
                let (ms, got) = timed(&mut imap, "EXPUNGE").await?;
                timing.cold_ms = Some(ms);
                timing.got = got;
            } else {
                let (ms, got) = timed(&mut imap, "EXPUNGE").await?;
                timing.warm_ms.push(ms);
                timing.warm_mean_ms = ms;
                timing.got = got;
            }
            report.requests.push(timing);
        }
    }
    imap.logout().await;
    if args.clients > 0 {
        report.concurrent = Some(concurrent(&args, server, &corpus, timeout).await?);
    }
    Ok(report)
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Times one command; returns milliseconds and the number of messages in
/// the answer (FETCH responses, SEARCH hits or EXPUNGE responses).
async fn timed(imap: &mut Imap, cmd: &str) -> anyhow::Result<(f64, u64)> {
    let t0 = Instant::now();
    let r = imap.command(cmd).await?;
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    anyhow::ensure!(r.ok, "{cmd}: {}", r.tagged);
    let mut got = 0u64;
    for l in &r.untagged {
        if let Some(hits) = imap_frame::search_hits(l) {
            got += hits.len() as u64;
        } else if let Some(w) = imap_frame::numbered(l) {
            got +=
                u64::from(w.eq_ignore_ascii_case(b"FETCH") || w.eq_ignore_ascii_case(b"EXPUNGE"));
        }
    }
    Ok((ms, got))
}

/// Runs the cold command, then waits until the server takes logins again.
async fn make_cold(
    cmd: &str,
    server: SocketAddr,
    args: &ImapArgs,
    timeout: Duration,
) -> anyhow::Result<()> {
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .status()
        .await?;
    anyhow::ensure!(status.success(), "--cold-cmd failed: {status}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match Imap::login(server, &args.user, &args.password, timeout).await {
            Ok(i) => {
                i.logout().await;
                return Ok(());
            }
            Err(e) if Instant::now() >= deadline => {
                anyhow::bail!("server not back after --cold-cmd: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Empties INBOX and loads the corpus.
async fn load(
    args: &ImapArgs,
    server: SocketAddr,
    corpus: &Arc<Corpus>,
    timeout: Duration,
) -> anyhow::Result<()> {
    let mut imap = Imap::login(server, &args.user, &args.password, timeout).await?;
    if imap.select().await? > 0 {
        let r = imap.command("STORE 1:* +FLAGS.SILENT (\\Deleted)").await?;
        anyhow::ensure!(r.ok, "emptying INBOX: {}", r.tagged);
        let r = imap.command("EXPUNGE").await?;
        anyhow::ensure!(r.ok, "emptying INBOX: {}", r.tagged);
    }
    imap.logout().await;
    let n = corpus.len();
    match args.load_via.as_str() {
        "append" => {
            let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let progress = Arc::new(Progress::counted(n as u64, "messages appended"));
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..args.load_connections.max(1) {
                let (corpus, next, progress) =
                    (Arc::clone(corpus), Arc::clone(&next), Arc::clone(&progress));
                let (user, pass) = (args.user.clone(), args.password.clone());
                tasks.spawn(async move {
                    let mut imap = Imap::login(server, &user, &pass, timeout).await?;
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if i >= corpus.len() {
                            break;
                        }
                        let m = corpus.message(i);
                        imap.append(&m.bytes, Some(&imap_date_time(m.date))).await?;
                        progress.inc(1);
                    }
                    imap.logout().await;
                    Ok::<(), BenchError>(())
                });
            }
            while let Some(r) = tasks.join_next().await {
                r??;
            }
            if let Ok(p) = Arc::try_unwrap(progress) {
                p.finish();
            }
        }
        "smtp" => {
            let smtp = resolve(&args.smtp).await?;
            let msgs: Vec<(String, Vec<u8>)> = (0..n)
                .map(|i| (args.user.clone(), corpus.message(i).bytes))
                .collect();
            crate::smtp::deliver(smtp, msgs, args.load_connections, timeout).await?;
            let account = Account {
                address: args.user.clone(),
                password: args.password.clone(),
            };
            let deadline = Instant::now() + Duration::from_secs(300);
            while status_messages(server, &account).await? < n as u64 {
                anyhow::ensure!(Instant::now() < deadline, "loaded mail did not all arrive");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        other => anyhow::bail!("--load-via must be append or smtp, not {other:?}"),
    }
    Ok(())
}

/// Latency per command kind and failures, summed over clients.
type MixTotals = (BTreeMap<String, Histogram>, BTreeMap<String, u64>);

/// The mailbox size after a reply's untagged lines (`* n EXISTS` sets it,
/// each `* n EXPUNGE` takes one away), never below 1 so a sequence number
/// can always be drawn: other clients append and expunge meanwhile.
fn track_size(mut n: u64, untagged: &[Vec<u8>]) -> u64 {
    for l in untagged {
        if let Some(e) = imap_frame::exists(l) {
            n = e;
        } else if imap_frame::expunged(l).is_some() {
            n = n.saturating_sub(1);
        }
    }
    n.max(1)
}

/// The concurrent mix: each client logs in and selects INBOX once, then
/// loops random FETCH (a 20-message window, 30%), SEARCH (20%, as
/// `--mix-search` says), STORE
/// (\Seen on and off, 20%), re-SELECT (10%), APPEND of a corpus message
/// (10%) and EXPUNGE of one message marked \Deleted (10%), so the
/// mailbox keeps its size while every kind of change reaches the others.
async fn concurrent(
    args: &ImapArgs,
    server: SocketAddr,
    corpus: &Arc<Corpus>,
    timeout: Duration,
) -> anyhow::Result<ConcurrentReport> {
    // On a mailbox used as it is (--load 0), the APPENDs still need
    // messages: those of the study's smallest corpus.
    let corpus = &if !corpus.is_empty() {
        Arc::clone(corpus)
    } else {
        Arc::new(Corpus::new(CorpusSpec {
            to: args.user.clone(),
            ..CorpusSpec::seed_study(1046, args.seed)
        })?)
    };
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.duration);
    let totals: Arc<Mutex<MixTotals>> = Arc::default();
    let mut tasks = tokio::task::JoinSet::new();
    let searches: Vec<String> = match (args.mix_search, &corpus.spec().from_marker) {
        (MixSearch::Header, Some((from, _))) => vec![format!("SEARCH FROM {}", quoted(from))],
        (MixSearch::Header, None) => {
            anyhow::bail!("--mix-search header: the corpus has no sender marker")
        }
        (MixSearch::Text, _) => corpus
            .spec()
            .markers
            .iter()
            .map(|m| format!("SEARCH TEXT {}", quoted(&m.word)))
            .collect(),
    };
    for c in 0..args.clients {
        let (user, pass, totals, searches) = (
            args.user.clone(),
            args.password.clone(),
            Arc::clone(&totals),
            searches.clone(),
        );
        let seed = args.seed ^ (c as u64 + 1).wrapping_mul(0x9E37_79B9);
        let corpus = Arc::clone(corpus);
        tasks.spawn(async move {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut hist: BTreeMap<String, Histogram> = BTreeMap::new();
            let mut errors: BTreeMap<String, u64> = BTreeMap::new();
            let result = async {
                let mut imap = Imap::login(server, &user, &pass, timeout).await?;
                let mut n = imap.select().await?.max(1);
                // One of each kind first, whatever the deadline, so that
                // every kind is measured even on a slow machine; then a
                // random mix until the deadline.
                let mut first_round = [0, 3, 5, 7, 8, 9].into_iter();
                loop {
                    let pick = match first_round.next() {
                        Some(k) => k,
                        None if Instant::now() < deadline => rng.gen_range(0..10),
                        None => break,
                    };
                    let (kind, cmd) = match pick {
                        8 => {
                            let m = corpus.message(rng.gen_range(0..corpus.len()));
                            let t0 = Instant::now();
                            let r = imap.append(&m.bytes, None).await;
                            match r {
                                // Expunges by others may be announced here.
                                Ok(untagged) => {
                                    hist.entry("APPEND".into())
                                        .or_default()
                                        .record(t0.elapsed());
                                    n = track_size(n, &untagged);
                                }
                                Err(_) => *errors.entry("APPEND NO/BAD".into()).or_default() += 1,
                            }
                            continue;
                        }
                        9 => {
                            let a = rng.gen_range(1..=n);
                            let r = imap
                                .command(&format!("STORE {a} +FLAGS.SILENT (\\Deleted)"))
                                .await?;
                            n = track_size(n, &r.untagged);
                            ("EXPUNGE", "EXPUNGE".to_string())
                        }
                        0..=2 => {
                            let a = rng.gen_range(1..=n);
                            (
                                "FETCH",
                                format!(
                                    "FETCH {}:{} (FLAGS ENVELOPE RFC822.SIZE)",
                                    a,
                                    (a + 19).min(n)
                                ),
                            )
                        }
                        3..=4 => ("SEARCH", searches[rng.gen_range(0..searches.len())].clone()),
                        5..=6 => {
                            let a = rng.gen_range(1..=n);
                            let op = if rng.gen_bool(0.5) { "+" } else { "-" };
                            ("STORE", format!("STORE {a} {op}FLAGS.SILENT (\\Seen)"))
                        }
                        _ => ("SELECT", "SELECT INBOX".to_string()),
                    };
                    let t0 = Instant::now();
                    let r = imap.command(&cmd).await?;
                    hist.entry(kind.to_string())
                        .or_default()
                        .record(t0.elapsed());
                    n = track_size(n, &r.untagged);
                    if !r.ok {
                        *errors.entry(format!("{kind} NO/BAD")).or_default() += 1;
                    }
                }
                imap.logout().await;
                Ok::<(), BenchError>(())
            }
            .await;
            if let Err(e) = result {
                *errors.entry(e.to_string()).or_default() += 1;
            }
            let mut t = totals.lock().expect("totals lock");
            for (k, h) in hist {
                t.0.entry(k).or_default().merge(&h);
            }
            for (k, v) in errors {
                *t.1.entry(k).or_default() += v;
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let elapsed = start.elapsed().as_secs_f64();
    let (hists, errors) = std::mem::take(&mut *totals.lock().expect("totals lock"));
    let ops: usize = hists.values().map(Histogram::len).sum();
    Ok(ConcurrentReport {
        clients: args.clients,
        elapsed_s: elapsed,
        ops_per_s: ops as f64 / elapsed.max(1e-9),
        latency: hists.into_iter().map(|(k, h)| (k, h.summary())).collect(),
        errors,
    })
}
