//! `sluice bench web`: the webmail transactions of the seed — login page,
//! login, inbox, read a message, compose and send — timed per request,
//! with virtual users in a closed loop (`--users`) or paced at a fixed
//! rate each (`--rate`, an open model: latency counts from the scheduled
//! start, so a slow server is not hidden by waiting clients).
//!
//! `--target` names the webmail's URL and form shapes: `sluice`, or
//! `roundcube` (1.6, elastic skin), whose inbox is a page and then its
//! message list fetched by the page's script, and whose sending is the
//! compose page (a redirect to a compose id, then the form) and its POST;
//! each transaction counts every request a browser would make for it,
//! static files aside (cached after the first load).

use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::error::BenchError;
use crate::latency::{Histogram, Percentiles};
use crate::report::{num, print_json, Table};
use crate::users::{Account, UserArgs};
use crate::web_http::Client;

/// Which webmail is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum WebTarget {
    /// Sluice's own webmail.
    Sluice,
    /// Roundcube 1.6 (elastic skin) in front of an IMAP and SMTP server.
    Roundcube,
}

/// Options of `sluice bench web`.
#[derive(Debug, Clone, clap::Args)]
pub struct WebArgs {
    /// Webmail address, host:port.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub server: String,
    /// Whose URLs and forms to use.
    #[arg(long, value_enum, default_value = "sluice")]
    pub target: WebTarget,
    /// Virtual users, each with its own account and connection.
    #[arg(long, default_value_t = 10)]
    pub users: usize,
    /// Requests per second per user (open model); 0 runs each user in a
    /// closed loop, as fast as the server answers.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Length of the run, in seconds; a user still finishes the round of
    /// steps it is in, so each step is measured at least once.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Domain of the accounts (`user1@DOMAIN` …, one per virtual user).
    #[arg(long, default_value = "example.org")]
    pub domain: String,
    /// Local-part prefix of the accounts.
    #[arg(long, default_value = "user")]
    pub user_prefix: String,
    /// Password of the accounts.
    #[arg(long, default_value = "password")]
    pub password: String,
    /// Smallest message sent, in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size_min: usize,
    /// Largest message sent, in bytes.
    #[arg(long, default_value_t = 120 * 1024)]
    pub size_max: usize,
    /// Per-request timeout, in seconds.
    #[arg(long, default_value_t = 30.0)]
    pub timeout: f64,
    /// Random seed (message sizes, which message is read).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The transactions, in the order a user runs them.
const STEPS: [&str; 5] = ["login_get", "login_post", "inbox", "read", "send"];

/// One transaction's figures.
#[derive(Debug, Clone, Serialize)]
pub struct WebStep {
    /// `login_get`, `login_post`, `inbox`, `read`, `send`.
    pub name: String,
    /// Latency.
    pub latency: Percentiles,
    /// Completed per second, all users together.
    pub per_second: f64,
    /// Requests that failed (error, timeout, unexpected status).
    pub errors: u64,
}

/// The report of `sluice bench web`.
#[derive(Debug, Clone, Serialize)]
pub struct WebReport {
    /// Server address.
    pub server: String,
    /// Webmail measured.
    pub target: WebTarget,
    /// Virtual users.
    pub users: usize,
    /// Requests per second per user (0: closed loop).
    pub rate: f64,
    /// Seconds measured.
    pub seconds: f64,
    /// Per transaction.
    pub steps: Vec<WebStep>,
    /// Bytes of the first inbox page as received (headers and body).
    pub inbox_bytes: u64,
}

#[derive(Default)]
struct Tally {
    hist: [Histogram; 5],
    errors: [u64; 5],
    inbox_bytes: u64,
}

fn expect(
    r: Result<crate::web_http::Response, BenchError>,
    status: u16,
) -> Result<crate::web_http::Response, BenchError> {
    let r = r?;
    if r.status != status {
        return Err(BenchError::Protocol(format!(
            "HTTP {} where {status} was expected",
            r.status
        )));
    }
    Ok(r)
}

fn form(fields: &[(&str, &str)]) -> Vec<u8> {
    let enc = |s: &str| {
        let mut o = String::new();
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                o.push(b as char);
            } else {
                o.push_str(&format!("%{b:02X}"));
            }
        }
        o
    };
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
        .into_bytes()
}

/// What a value of `name="csrf" value="..."` says in a page.
fn csrf_of(page: &str) -> Option<String> {
    let at = page.find("name=\"csrf\" value=\"")? + 19;
    page[at..].split('"').next().map(str::to_string)
}

/// One user's state between transactions.
struct User {
    client: Client,
    account: Account,
    inbox: String,
    links: Vec<String>,
    csrf: String,
    rng: rand::rngs::StdRng,
}

/// The value of the first `name="NAME" value="..."` in a page.
fn input_value(page: &str, name: &str) -> Option<String> {
    let pat = format!("name=\"{name}\" value=\"");
    let at = page.find(&pat)? + pat.len();
    page[at..].split('"').next().map(str::to_string)
}

/// The value of `"key":"..."` in a page's script data.
fn json_string(page: &str, key: &str) -> Option<String> {
    let pat = format!("\"{key}\":\"");
    let at = page.find(&pat)? + pat.len();
    page[at..].split('"').next().map(str::to_string)
}

/// The value of the first `<option value="...">` after `marker` (the
/// default choice of a `<select>`).
fn first_option(page: &str, marker: &str) -> Option<String> {
    let rest = &page[page.find(marker)?..];
    let at = rest.find("<option value=\"")? + 15;
    rest[at..].split('"').next().map(str::to_string)
}

/// The UIDs of Roundcube's `add_message_row(UID, ...)` calls in a list
/// answer.
fn roundcube_uids(list: &str) -> Vec<u32> {
    list.match_indices("add_message_row(")
        .filter_map(|(at, m)| {
            list[at + m.len()..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|n| n.parse().ok())
        })
        .collect()
}

/// A message body of `size` bytes of plain text.
fn message_text(size: usize) -> String {
    let line = "The quick brown fox jumps over the lazy dog, again and again.\n";
    line.repeat(size / line.len() + 1)[..size].to_string()
}

impl User {
    async fn step(
        &mut self,
        i: usize,
        args: &WebArgs,
        tally: &mut Tally,
    ) -> Result<(), BenchError> {
        match args.target {
            WebTarget::Sluice => self.sluice_step(i, args, tally).await,
            WebTarget::Roundcube => self.roundcube_step(i, args, tally).await,
        }
    }

    async fn roundcube_step(
        &mut self,
        i: usize,
        args: &WebArgs,
        tally: &mut Tally,
    ) -> Result<(), BenchError> {
        const URLENCODED: Option<&str> = Some("application/x-www-form-urlencoded");
        let missing = |what: &str| BenchError::Protocol(format!("no {what} in Roundcube's answer"));
        match STEPS[i] {
            "login_get" => {
                self.client = Client::new(&args.server, Duration::from_secs_f64(args.timeout));
                let page = expect(self.client.request("GET", "/", None, b"").await, 200)?.text();
                self.csrf = input_value(&page, "_token").ok_or_else(|| missing("login token"))?;
            }
            "login_post" => {
                let body = form(&[
                    ("_token", &self.csrf),
                    ("_task", "login"),
                    ("_action", "login"),
                    ("_timezone", "UTC"),
                    ("_url", ""),
                    ("_user", &self.account.address),
                    ("_pass", &self.account.password),
                ]);
                let r = expect(
                    self.client
                        .request("POST", "/?_task=login", URLENCODED, &body)
                        .await,
                    302,
                )?;
                if !r.header("location").unwrap_or("").contains("_task=mail") {
                    return Err(BenchError::Protocol("Roundcube refused the login".into()));
                }
            }
            "inbox" => {
                let before = self.client.received;
                let page = expect(
                    self.client
                        .request("GET", "/?_task=mail&_mbox=INBOX", None, b"")
                        .await,
                    200,
                )?
                .text();
                self.csrf =
                    json_string(&page, "request_token").ok_or_else(|| missing("request token"))?;
                let list = expect(
                    self.client
                        .request_with(
                            "GET",
                            "/?_task=mail&_action=list&_mbox=INBOX&_page=1&_remote=1",
                            None,
                            &[("X-Roundcube-Request", &self.csrf)],
                            b"",
                        )
                        .await,
                    200,
                )?
                .text();
                if tally.inbox_bytes == 0 {
                    tally.inbox_bytes = self.client.received - before;
                }
                self.links = roundcube_uids(&list)
                    .into_iter()
                    .map(|uid| format!("/?_task=mail&_action=show&_uid={uid}&_mbox=INBOX"))
                    .collect();
            }
            "read" => {
                if self.links.is_empty() {
                    return Err(BenchError::Protocol(
                        "the inbox is empty: nothing to read".into(),
                    ));
                }
                let link = self.links[self.rng.gen_range(0..self.links.len())].clone();
                expect(self.client.request("GET", &link, None, b"").await, 200)?;
            }
            _ => {
                let r = expect(
                    self.client
                        .request("GET", "/?_task=mail&_action=compose", None, b"")
                        .await,
                    302,
                )?;
                let compose = r
                    .header("location")
                    .ok_or_else(|| missing("compose redirect"))?
                    .to_string();
                let page =
                    expect(self.client.request("GET", &compose, None, b"").await, 200)?.text();
                let id = input_value(&page, "_id").ok_or_else(|| missing("compose id"))?;
                let token = input_value(&page, "_token").ok_or_else(|| missing("compose token"))?;
                let identity =
                    first_option(&page, "id=\"_from\"").ok_or_else(|| missing("identity"))?;
                let size = self
                    .rng
                    .gen_range(args.size_min..=args.size_max.max(args.size_min));
                let text = message_text(size);
                let body = form(&[
                    ("_token", &token),
                    ("_task", "mail"),
                    ("_action", "send"),
                    ("_id", &id),
                    ("_attachments", ""),
                    ("_from", &identity),
                    ("_to", &self.account.address),
                    ("_subject", "bench message"),
                    ("_message", &text),
                    ("_is_html", "0"),
                    ("_framed", "1"),
                    ("_priority", "0"),
                    ("_store_target", "Sent"),
                ]);
                let r = expect(
                    self.client
                        .request(
                            "POST",
                            "/?_task=mail&_unlock=loading1&_framed=1&_lang=en",
                            URLENCODED,
                            &body,
                        )
                        .await,
                    200,
                )?;
                if !r.text().contains("sent_successfully") {
                    return Err(BenchError::Protocol(
                        "Roundcube did not send the message".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    async fn sluice_step(
        &mut self,
        i: usize,
        args: &WebArgs,
        tally: &mut Tally,
    ) -> Result<(), BenchError> {
        match STEPS[i] {
            "login_get" => {
                self.client = Client::new(&args.server, Duration::from_secs_f64(args.timeout));
                expect(self.client.request("GET", "/login", None, b"").await, 200)?;
            }
            "login_post" => {
                let body = form(&[
                    ("address", &self.account.address),
                    ("password", &self.account.password),
                ]);
                expect(
                    self.client
                        .request(
                            "POST",
                            "/login",
                            Some("application/x-www-form-urlencoded"),
                            &body,
                        )
                        .await,
                    303,
                )?;
            }
            "inbox" => {
                let before = self.client.received;
                let r = expect(self.client.request("GET", "/", None, b"").await, 303)?;
                self.inbox = r.header("location").unwrap_or("/").to_string();
                let page = expect(
                    self.client
                        .request("GET", &self.inbox.clone(), None, b"")
                        .await,
                    200,
                )?
                .text();
                if tally.inbox_bytes == 0 {
                    tally.inbox_bytes = self.client.received - before;
                }
                self.csrf = csrf_of(&page)
                    .ok_or_else(|| BenchError::Protocol("no CSRF token in the inbox".into()))?;
                let prefix = format!("href=\"{}/", self.inbox);
                self.links = page
                    .match_indices(&prefix)
                    .filter_map(|(at, _)| page[at + 6..].split('"').next().map(str::to_string))
                    .filter(|l| {
                        l[self.inbox.len() + 1..]
                            .bytes()
                            .all(|b| b.is_ascii_digit())
                    })
                    .collect();
            }
            "read" => {
                if self.links.is_empty() {
                    return Err(BenchError::Protocol(
                        "the inbox is empty: nothing to read".into(),
                    ));
                }
                let link = self.links[self.rng.gen_range(0..self.links.len())].clone();
                expect(self.client.request("GET", &link, None, b"").await, 200)?;
            }
            _ => {
                // The compose page first, as a browser opens it.
                let page =
                    expect(self.client.request("GET", "/compose", None, b"").await, 200)?.text();
                if let Some(csrf) = csrf_of(&page) {
                    self.csrf = csrf;
                }
                let size = self
                    .rng
                    .gen_range(args.size_min..=args.size_max.max(args.size_min));
                let text = message_text(size);
                let boundary = "----sluicebench";
                let mut body = Vec::with_capacity(size + 1024);
                for (k, v) in [
                    ("csrf", self.csrf.as_str()),
                    ("to", self.account.address.as_str()),
                    ("subject", "bench message"),
                    ("body", text.as_str()),
                    ("action", "send"),
                ] {
                    body.extend_from_slice(format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n").as_bytes());
                }
                body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
                let ct = format!("multipart/form-data; boundary={boundary}");
                expect(
                    self.client
                        .request("POST", "/compose", Some(&ct), &body)
                        .await,
                    303,
                )?;
            }
        }
        Ok(())
    }
}

async fn user_loop(mut user: User, args: WebArgs, start: Instant, end: Instant) -> Tally {
    let mut tally = Tally::default();
    let interval = (args.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / args.rate));
    let mut next = start;
    let mut i = 0;
    // A user finishes the round of steps it is in when the run ends, so
    // every step is measured at least once however slow the machine.
    while Instant::now() < end || i != 0 {
        let scheduled = match interval {
            Some(iv) => {
                tokio::time::sleep_until(next.into()).await;
                let s = next;
                next += iv;
                s
            }
            None => Instant::now(),
        };
        if scheduled >= end && i == 0 {
            break;
        }
        let ok = user.step(i, &args, &mut tally).await;
        let took = scheduled.elapsed();
        match ok {
            Ok(()) => tally.hist[i].record(took),
            Err(_) => {
                tally.errors[i] += 1;
                // Start over with a fresh login.
                i = 0;
                continue;
            }
        }
        i = (i + 1) % STEPS.len();
    }
    tally
}

/// Runs the benchmark and returns its report.
pub async fn execute(args: WebArgs) -> anyhow::Result<WebReport> {
    let accounts = UserArgs {
        users: None,
        domain: args.domain.clone(),
        user_count: args.users.max(1),
        user_prefix: args.user_prefix.clone(),
        password: args.password.clone(),
    }
    .accounts()?;
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(args.duration);
    let mut tasks = tokio::task::JoinSet::new();
    for (n, account) in accounts.into_iter().enumerate() {
        let user = User {
            client: Client::new(&args.server, Duration::from_secs_f64(args.timeout)),
            account,
            inbox: String::new(),
            links: Vec::new(),
            csrf: String::new(),
            rng: rand::rngs::StdRng::seed_from_u64(args.seed + n as u64),
        };
        tasks.spawn(user_loop(user, args.clone(), start, end));
    }
    let mut all = Tally::default();
    while let Some(t) = tasks.join_next().await {
        let t = t?;
        for i in 0..STEPS.len() {
            all.hist[i].merge(&t.hist[i]);
            all.errors[i] += t.errors[i];
        }
        if all.inbox_bytes == 0 {
            all.inbox_bytes = t.inbox_bytes;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(WebReport {
        server: args.server.clone(),
        target: args.target,
        users: args.users,
        rate: args.rate,
        seconds,
        steps: STEPS
            .iter()
            .enumerate()
            .map(|(i, name)| WebStep {
                name: name.to_string(),
                latency: all.hist[i].summary(),
                per_second: all.hist[i].len() as f64 / seconds,
                errors: all.errors[i],
            })
            .collect(),
        inbox_bytes: all.inbox_bytes,
    })
}

/// Runs the benchmark and prints its report.
pub async fn run(args: WebArgs) -> anyhow::Result<()> {
    let json = args.json;
    let r = execute(args).await?;
    if json {
        return print_json(&r);
    }
    println!(
        "webmail {} ({:?}), {} users, {}, {:.1} s; inbox page {} bytes",
        r.server,
        r.target,
        r.users,
        if r.rate > 0.0 {
            format!("{} req/s each", r.rate)
        } else {
            "closed loop".into()
        },
        r.seconds,
        r.inbox_bytes
    );
    let mut t = Table::new(&[
        "transaction",
        "count",
        "per s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "errors",
    ]);
    for s in &r.steps {
        t.row(vec![
            s.name.clone(),
            s.latency.count.to_string(),
            num(s.per_second),
            num(s.latency.p50_ms),
            num(s.latency.p90_ms),
            num(s.latency.p99_ms),
            s.errors.to_string(),
        ]);
    }
    print!("{}", t.render());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_encoded() {
        assert_eq!(form(&[("a b", "c&d=é")]), b"a%20b=c%26d%3D%C3%A9");
        assert_eq!(
            csrf_of("<input type=\"hidden\" name=\"csrf\" value=\"tok\">").as_deref(),
            Some("tok")
        );
    }

    #[test]
    fn roundcube_answers_are_read() {
        let page = r#"<input type="hidden" name="_token" value="T1"><select name="_from" id="_from" class="x"><option value="7">a</option></select>{"request_token":"R2","x":1}"#;
        assert_eq!(input_value(page, "_token").as_deref(), Some("T1"));
        assert_eq!(json_string(page, "request_token").as_deref(), Some("R2"));
        assert_eq!(first_option(page, "id=\"_from\"").as_deref(), Some("7"));
        let list = r#"this.add_message_row(12,{"subject":"a"});\nthis.add_message_row(3,{});"#;
        assert_eq!(roundcube_uids(list), vec![12, 3]);
        assert_eq!(message_text(100).len(), 100);
    }
}
