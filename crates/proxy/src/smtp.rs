//! The SMTP proxy (RFC 5321).
//!
//! Commands go to the upstream and its replies come back, one command at a
//! time in the order the client sent them (pipelined commands are passed
//! on as a group and their replies relayed in order). The proxy answers
//! STARTTLS itself, filters the EHLO capabilities to the ones it
//! understands, and refuses XCLIENT and XFORWARD from clients.
//!
//! A message (DATA or BDAT) goes to the upstream as it arrives while the
//! same bytes feed the scanner; only its end is held back (the final dot,
//! or `BDAT 0 LAST` after the client's last chunk went on as a plain one).
//! Clean: the end goes on (in one write with the text that came with it)
//! and the upstream's reply is relayed. Otherwise
//! the upstream connection is closed without the end, so the upstream
//! drops the transaction, and the client gets `554 5.7.1`; a fresh
//! upstream connection takes over for the rest of the session.
//!
//! DATA is dot-unstuffed for the scanner and stuffed again for the
//! upstream ([`net::DotUnstuffer`], [`net::DotStuffer`]): the upstream sees
//! the bytes the scanner saw, and a bare LF or CR in the client's text
//! reaches it as CRLF, so no end of data can look different to the two
//! (SMTP smuggling). Well-formed text passes unchanged.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use net::{DotStuffer, DotUnstuffer, Input, LineEnds, LineError, Stream};
use tokio::net::TcpStream;

use crate::config::{ClientAddress, ClientTls, UpstreamTls};
use crate::pool::{Kept, Lease, Pool};
use crate::upstream::{Route, Upstream, UpstreamError};
use crate::Context;

/// The client's input buffer: the longest command line, and the piece of
/// message text handled at once.
const CLIENT_BUFFER: usize = 16 * 1024;

/// Longest reply the proxy collects from the upstream (an EHLO list).
const MAX_REPLY: usize = 64 * 1024;

/// EHLO keywords passed on (RFC 5321 §4.1.1.1): the ones whose commands
/// and parameters the proxy understands. STARTTLS is the proxy's own.
const KEPT: &[&str] = &[
    "PIPELINING",
    "CHUNKING",
    "SIZE",
    "8BITMIME",
    "SMTPUTF8",
    "AUTH",
    "ENHANCEDSTATUSCODES",
    "DSN",
];

/// One complete reply from the upstream.
struct Reply {
    code: u16,
    /// Every line, as received.
    raw: Vec<u8>,
}

impl Reply {
    fn positive(&self) -> bool {
        (200..400).contains(&self.code)
    }
}

/// The code of a reply line, and whether more lines follow.
fn reply_line(line: &[u8]) -> Option<(u16, bool)> {
    let code = line.get(..3)?;
    if !code.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let code = std::str::from_utf8(code).ok()?.parse().ok()?;
    Some((code, line.get(3) == Some(&b'-')))
}

impl Upstream {
    async fn reply(&mut self) -> Result<Reply, UpstreamError> {
        let mut raw = Vec::new();
        loop {
            let line = self.line().await?;
            let Some((code, more)) = reply_line(line) else {
                return Err(UpstreamError::Refused(
                    String::from_utf8_lossy(line).trim_end().to_string(),
                ));
            };
            raw.extend_from_slice(line);
            if raw.len() > MAX_REPLY {
                return Err(UpstreamError::TooLong);
            }
            if !more {
                self.refused |= code >= 400;
                return Ok(Reply { code, raw });
            }
        }
    }

    /// Sends a command and reads its reply.
    async fn command(&mut self, line: &[u8]) -> Result<Reply, UpstreamError> {
        self.send(line).await?;
        self.reply().await
    }
}

/// The EHLO reply for the client: the upstream's, with only [`KEPT`]
/// keywords, plus STARTTLS when the proxy offers it.
fn filter_ehlo(reply: &Reply, starttls: bool) -> Vec<u8> {
    let text = String::from_utf8_lossy(&reply.raw);
    let mut lines: Vec<&str> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let rest = line.get(4..).unwrap_or("").trim_end();
        if i == 0 {
            lines.push(rest);
            continue;
        }
        let keyword = rest
            .split([' ', '='])
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        if KEPT.contains(&keyword.as_str()) {
            lines.push(rest);
        }
    }
    if starttls {
        lines.push("STARTTLS");
    }
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let sep = if i + 1 == lines.len() { ' ' } else { '-' };
        out.extend_from_slice(format!("{}{sep}{line}\r\n", reply.code).as_bytes());
    }
    out
}

/// The verb of a command line, upper-cased.
fn verb(line: &[u8]) -> String {
    let end = line
        .iter()
        .position(|b| b.is_ascii_whitespace())
        .unwrap_or(line.len());
    String::from_utf8_lossy(&line[..end]).to_ascii_uppercase()
}

/// Commands that take one reply and may be passed on as a pipelined group
/// (RFC 2920 §3.1); the others are handled one by one.
fn groupable(verb: &str) -> bool {
    matches!(
        verb,
        "MAIL" | "RCPT" | "RSET" | "NOOP" | "VRFY" | "EXPN" | "HELP"
    )
}

/// What a message transfer ended with.
enum Transfer {
    /// The whole message came; the end is held back, and so is the text
    /// that arrived with it, which goes upstream in one write with the end
    /// once the verdict allows.
    Complete(Vec<u8>),
    /// The client went away or stopped sending.
    ClientGone,
    /// The upstream failed while the message was going to it.
    UpstreamGone,
}

/// One SMTP transaction in progress.
struct Txn {
    sender: String,
    recipients: usize,
    started: Instant,
    size: u64,
    scan: Option<crate::Scan>,
    /// BDAT text made CRLF for the scanner.
    line_ends: LineEnds,
}

impl Txn {
    fn new(ctx: &Context, sender: &str, recipients: usize) -> Txn {
        Txn {
            sender: sender.to_string(),
            recipients,
            started: Instant::now(),
            size: 0,
            scan: ctx.scan.as_ref().map(|c| c.start()),
            line_ends: LineEnds::default(),
        }
    }

    fn infected(&self) -> bool {
        self.scan.as_ref().is_some_and(|s| s.infected().is_some())
    }

    fn feed(&mut self, text: &[u8]) {
        self.size += text.len() as u64;
        if let Some(s) = &mut self.scan {
            if s.infected().is_none() {
                s.feed(text);
            }
        }
    }

    /// The verdict's name for the log, and the reply refusing the
    /// message, if it is refused.
    fn judge(self, ctx: &Context) -> (String, Option<String>) {
        let (Some(s), Some(check)) = (self.scan, &ctx.scan) else {
            return ("unscanned".to_string(), None);
        };
        match s.finish() {
            Ok(verdict) => {
                let name = match &verdict {
                    scan::Verdict::Clean => "clean".to_string(),
                    scan::Verdict::Infected { name } => format!("infected:{name}"),
                    scan::Verdict::LimitExceeded(k) => format!("limit:{}", k.as_str()),
                    scan::Verdict::Encrypted => "encrypted".to_string(),
                };
                let refusal = check
                    .refusal(&verdict)
                    .map(|why| format!("554 5.7.1 Message rejected: {why}"));
                (name, refusal)
            }
            // Nothing unscanned goes through: the sender tries again later.
            Err(e) => (
                format!("error:{e}"),
                Some(
                    "451 4.3.0 Message not accepted: the virus scanner failed, try again later"
                        .to_string(),
                ),
            ),
        }
    }
}

/// A client session.
struct Session<'a> {
    ctx: &'a Context,
    client: Stream,
    input: Input,
    up: Option<Upstream>,
    /// What is known of `up`, to keep it for another client.
    lease: Lease,
    /// Where clean upstream connections wait for the next client; `None`
    /// when the entry does not reuse them.
    pool: Option<&'a Pool>,
    /// `up` came from the pool and has not answered yet: if it turns out
    /// closed at the first command, a new connection takes over.
    unproven: bool,
    /// The client tried AUTH: the upstream connection keeps what came of
    /// it, so it is not kept for another client.
    auth_tried: bool,
    route: Route,
    timeout: Duration,
    client_tls: bool,
    /// The last EHLO or HELO line, replayed on a fresh upstream connection.
    helo: Option<Vec<u8>>,
    /// AUTH succeeded upstream: that cannot be replayed, so a refused
    /// message ends such a session.
    authenticated: bool,
    sender: String,
    recipients: usize,
    /// The BDAT transaction in progress.
    bdat: Option<Txn>,
}

/// Runs one proxied SMTP connection.
pub(crate) async fn session(
    ctx: &Context,
    pool: Option<&Pool>,
    socket: TcpStream,
    peer: SocketAddr,
) {
    let route = Route::of(ctx, &socket, peer);
    let timeout = ctx.timeout();
    let implicit = ctx.client_tls(ClientTls::Implicit);
    let Some(mut client) = net::open_stream(socket, implicit, timeout).await else {
        return;
    };
    let opened = match route {
        Ok(route) => upstream_for(ctx, pool, &route)
            .await
            .map(|(kept, greeting, reused)| (kept, greeting, reused, route)),
        Err(e) => Err(e),
    };
    let (kept, greeting, reused, route) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            tracing::warn!(upstream = %ctx.config.upstream, error = %e, "upstream unavailable");
            let text = format!(
                "421 4.3.0 {} Service not available: the mail server behind this proxy cannot be reached\r\n",
                ctx.hostname
            );
            net::send(&mut client, text.as_bytes(), timeout).await;
            return;
        }
    };
    if !net::send(&mut client, &greeting.raw, timeout).await || greeting.code != 220 {
        return;
    }
    let mut s = Session {
        ctx,
        client,
        input: Input::new(CLIENT_BUFFER),
        up: Some(kept.up),
        lease: kept.lease,
        pool,
        unproven: reused,
        auth_tried: false,
        route,
        timeout,
        client_tls: implicit.is_some(),
        helo: None,
        authenticated: false,
        sender: String::new(),
        recipients: 0,
        bdat: None,
    };
    s.run().await;
}

/// An upstream connection for a new client: a kept one when the pool has
/// one, else a new one. Returns it, the greeting the client should see,
/// and whether it was kept from an earlier client.
async fn upstream_for(
    ctx: &Context,
    pool: Option<&Pool>,
    route: &Route,
) -> Result<(Kept, Reply, bool), UpstreamError> {
    if let Some(kept) = pool.and_then(Pool::take) {
        let greeting = Reply {
            code: 220,
            raw: kept.lease.greeting.clone(),
        };
        return Ok((kept, greeting, true));
    }
    let (up, greeting) = open_upstream(ctx, route).await?;
    let lease = Lease::new(greeting.raw.clone());
    Ok((Kept { up, lease }, greeting, false))
}

/// Connects to the upstream, sets up TLS and XCLIENT as configured, and
/// returns the greeting the client should see.
async fn open_upstream(ctx: &Context, route: &Route) -> Result<(Upstream, Reply), UpstreamError> {
    let mut up = Upstream::connect(ctx, route).await?;
    let mut greeting = up.reply().await?;
    if greeting.code != 220 {
        return Ok((up, greeting));
    }
    let ehlo = format!("EHLO {}\r\n", ctx.hostname);
    if ctx.config.upstream_tls == UpstreamTls::Starttls {
        let caps = up.command(ehlo.as_bytes()).await?;
        if caps.code != 250 {
            return Err(UpstreamError::Refused(lossy(&caps.raw)));
        }
        let go = up.command(b"STARTTLS\r\n").await?;
        if go.code != 220 {
            return Err(UpstreamError::Refused(lossy(&go.raw)));
        }
        up.start_tls(ctx).await?;
    }
    if ctx.config.client_address == ClientAddress::Xclient {
        let caps = up.command(ehlo.as_bytes()).await?;
        if lossy(&caps.raw).to_ascii_uppercase().contains("XCLIENT") {
            // Postfix XCLIENT_README: the reply is a fresh greeting, and
            // the session starts over as if the client had connected.
            let line = format!(
                "XCLIENT ADDR={} PORT={}\r\n",
                xclient_addr(route.client),
                route.client.port()
            );
            greeting = up.command(line.as_bytes()).await?;
        } else {
            tracing::warn!(upstream = %ctx.config.upstream, "the upstream does not offer XCLIENT to the proxy: it sees the proxy's address");
            // EHLO was said; RSET keeps the client's own EHLO meaningful.
            up.command(b"RSET\r\n").await?;
        }
    }
    Ok((up, greeting))
}

/// An address as XCLIENT writes it (`IPV6:` before IPv6 ones).
fn xclient_addr(peer: SocketAddr) -> String {
    match peer.ip() {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => format!("IPV6:{v6}"),
        },
    }
}

fn lossy(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw)
        .trim_end()
        .replace("\r\n", " | ")
}

/// Why a session ends.
struct End;

impl Session<'_> {
    async fn run(&mut self) {
        while self.step().await.is_ok() {}
    }

    async fn reply(&mut self, text: &str) -> Result<(), End> {
        self.send(format!("{text}\r\n").as_bytes()).await
    }

    async fn send(&mut self, bytes: &[u8]) -> Result<(), End> {
        if net::send(&mut self.client, bytes, self.timeout).await {
            Ok(())
        } else {
            Err(End)
        }
    }

    /// The upstream connection, or the client is told it is gone.
    async fn upstream_failed(&mut self, e: UpstreamError) -> End {
        tracing::warn!(upstream = %self.ctx.config.upstream, error = %e, "upstream connection failed");
        self.up = None;
        let _ = self
            .reply("421 4.4.2 Connection to the mail server behind this proxy lost")
            .await;
        End
    }

    async fn client_line(&mut self) -> Result<Vec<u8>, End> {
        loop {
            let token = self.ctx.shutdown.token.clone();
            let read = tokio::time::timeout(self.timeout, self.input.read_line(&mut self.client));
            // Waiting for a command is where a stop signal ends a session;
            // a message in transfer is left to finish.
            let read = tokio::select! {
                biased;
                r = read => Some(r),
                _ = token.cancelled() => None,
            };
            let Some(read) = read else {
                let _ = self.reply("421 4.3.0 Shutting down, try again later").await;
                return Err(End);
            };
            match read {
                Err(_) => {
                    let _ = self.reply("421 4.4.2 Timeout, closing connection").await;
                    return Err(End);
                }
                Ok(Ok(line)) => return Ok(line.to_vec()),
                Ok(Err(LineError::TooLong)) => self.reply("500 5.5.2 Line too long").await?,
                Ok(Err(_)) => return Err(End),
            }
        }
    }

    /// Handles one command (or a pipelined group).
    async fn step(&mut self) -> Result<(), End> {
        let line = self.client_line().await?;
        let unproven = std::mem::take(&mut self.unproven);
        if self.up.is_none() {
            // A refused message ended an authenticated upstream session.
            self.reply("421 4.3.0 Closing connection after the refused message")
                .await?;
            return Err(End);
        }
        let v = verb(&line);
        match v.as_str() {
            "STARTTLS" => self.starttls().await,
            "EHLO" | "HELO" => {
                let reply = if unproven {
                    self.command_or_reopen(&line).await?
                } else {
                    self.command(&line).await?
                };
                self.helo = Some(line);
                self.sender.clear();
                self.recipients = 0;
                self.bdat = None;
                if v == "EHLO" && reply.code == 250 {
                    let offer =
                        !self.client_tls && self.ctx.client_tls(ClientTls::Starttls).is_some();
                    let filtered = filter_ehlo(&reply, offer);
                    self.send(&filtered).await
                } else {
                    self.send(&reply.raw).await
                }
            }
            "AUTH" => self.auth(&line).await,
            "DATA" => self.data(&line).await,
            "BDAT" => self.bdat(&line).await,
            "QUIT" => {
                if let Some(kept) = self.reusable() {
                    // The upstream's session stays open for the next client.
                    let _ = self.reply("221 2.0.0 Bye").await;
                    if let Some(pool) = self.pool {
                        pool.put(kept);
                    }
                    return Err(End);
                }
                let reply = self.command(&line).await?;
                let _ = self.send(&reply.raw).await;
                Err(End)
            }
            "XCLIENT" | "XFORWARD" => self.reply("502 5.5.1 Command not recognized").await,
            _ if groupable(&v) => self.group(line).await,
            // Anything else: passed on, one reply back.
            _ => {
                let reply = self.command(&line).await?;
                self.send(&reply.raw).await
            }
        }
    }

    /// The upstream connection, for the pool, if the session leaves it as
    /// a new client may find it: nothing refused, no AUTH tried, no
    /// transaction open.
    fn reusable(&mut self) -> Option<Kept> {
        self.pool?;
        let clean = self.up.as_ref().is_some_and(|up| !up.refused);
        if !clean || self.auth_tried || !self.sender.is_empty() || self.bdat.is_some() {
            return None;
        }
        let up = self.up.take()?;
        let lease = std::mem::replace(&mut self.lease, Lease::new(Vec::new()));
        Some(Kept { up, lease })
    }

    /// The first command on a kept connection: if the upstream closed it
    /// meanwhile (it may time out idle sessions), a new connection is
    /// opened and the command sent there; the client sees no difference.
    async fn command_or_reopen(&mut self, line: &[u8]) -> Result<Reply, End> {
        let up = self.up.as_mut().ok_or(End)?;
        match up.command(line).await {
            Ok(r) => Ok(r),
            Err(UpstreamError::Closed) => {
                tracing::debug!("a kept upstream connection had closed: opening a new one");
                if let Err(e) = self.open_fresh().await {
                    return Err(self.upstream_failed(e).await);
                }
                self.command(line).await
            }
            Err(e) => Err(self.upstream_failed(e).await),
        }
    }

    /// Replaces the upstream connection with a new one, greeted.
    async fn open_fresh(&mut self) -> Result<(), UpstreamError> {
        let (up, greeting) = open_upstream(self.ctx, &self.route).await?;
        if greeting.code != 220 {
            return Err(UpstreamError::Refused(lossy(&greeting.raw)));
        }
        self.up = Some(up);
        self.lease = Lease::new(greeting.raw);
        Ok(())
    }

    /// Sends a command upstream and reads the reply; an upstream failure
    /// ends the session with 421.
    async fn command(&mut self, line: &[u8]) -> Result<Reply, End> {
        let up = self.up.as_mut().ok_or(End)?;
        match up.command(line).await {
            Ok(r) => Ok(r),
            Err(e) => Err(self.upstream_failed(e).await),
        }
    }

    async fn starttls(&mut self) -> Result<(), End> {
        let Some(acceptor) = self.ctx.client_tls(ClientTls::Starttls).cloned() else {
            return self.reply("502 5.5.1 STARTTLS not available").await;
        };
        if self.client_tls {
            return self.reply("503 5.5.1 TLS already active").await;
        }
        self.reply("220 2.0.0 Ready to start TLS").await?;
        // RFC 3207 §4.2: nothing sent before the handshake counts after it.
        self.input.clear();
        if !net::start_tls(&mut self.client, &acceptor, self.timeout).await {
            return Err(End);
        }
        self.client_tls = true;
        Ok(())
    }

    /// MAIL, RCPT, RSET...: this command and the ones pipelined after it
    /// that are already here go upstream together; the replies come back
    /// in order.
    async fn group(&mut self, first: Vec<u8>) -> Result<(), End> {
        let mut lines = vec![first];
        while lines.len() < 100 {
            let buffered = self.input.buffered();
            let Some(end) = memchr::memchr(b'\n', buffered) else {
                break;
            };
            if !groupable(&verb(&buffered[..end])) {
                break;
            }
            let next = self.client_line().await?;
            lines.push(next);
        }
        let batch: Vec<u8> = lines.concat();
        let up = self.up.as_mut().ok_or(End)?;
        if let Err(e) = up.send(&batch).await {
            return Err(self.upstream_failed(e).await);
        }
        for line in &lines {
            let up = self.up.as_mut().ok_or(End)?;
            let reply = match up.reply().await {
                Ok(r) => r,
                Err(e) => return Err(self.upstream_failed(e).await),
            };
            match verb(line).as_str() {
                "MAIL" if reply.positive() => {
                    self.sender = mail_from(line);
                    self.recipients = 0;
                    self.bdat = None;
                }
                "RCPT" if reply.positive() => self.recipients += 1,
                "RSET" => {
                    self.sender.clear();
                    self.recipients = 0;
                    self.bdat = None;
                }
                _ => {}
            }
            self.send(&reply.raw).await?;
        }
        Ok(())
    }

    /// AUTH passes through, challenge by challenge (RFC 4954 §4).
    async fn auth(&mut self, line: &[u8]) -> Result<(), End> {
        self.auth_tried = true;
        let mut reply = self.command(line).await?;
        while reply.code == 334 {
            self.send(&reply.raw).await?;
            let answer = self.client_line().await?;
            reply = self.command(&answer).await?;
        }
        if reply.code == 235 {
            self.authenticated = true;
        }
        self.send(&reply.raw).await
    }

    async fn data(&mut self, line: &[u8]) -> Result<(), End> {
        if self.recipients == 0 {
            // The upstream's refusal (no valid recipients) is the answer.
            let reply = self.command(line).await?;
            return self.send(&reply.raw).await;
        }
        // With a recipient accepted, the upstream's 354 is all but
        // certain: the client is told to go ahead at once, which saves it
        // a round trip through the proxy, and the upstream's answer is
        // read while the text starts to come in. Should the upstream
        // refuse after all, the text is read and dropped, and the refusal
        // answers its end: the client learns the message was not taken,
        // as RFC 5321 §4.2.5 lets a server say after the text.
        let up = self.up.as_mut().ok_or(End)?;
        if let Err(e) = up.send(line).await {
            return Err(self.upstream_failed(e).await);
        }
        self.reply("354 End data with <CR><LF>.<CR><LF>").await?;
        let up = self.up.as_mut().ok_or(End)?;
        let reply = match up.reply().await {
            Ok(r) => r,
            Err(e) => return Err(self.upstream_failed(e).await),
        };
        if reply.code != 354 {
            if !self.skip_dot_stuffed().await {
                return Err(End);
            }
            self.sender.clear();
            self.recipients = 0;
            return self.send(&reply.raw).await;
        }
        let mut txn = Txn::new(self.ctx, &self.sender, self.recipients);
        let mut end = match self.transfer_dot_stuffed(&mut txn).await {
            Transfer::Complete(tail) => tail,
            Transfer::ClientGone => {
                log_aborted(&txn, "client gone during DATA");
                return Err(End);
            }
            Transfer::UpstreamGone => {
                log_aborted(&txn, "upstream gone during DATA");
                let _ = self
                    .reply("451 4.4.2 Connection to the mail server behind this proxy lost")
                    .await;
                return Err(End);
            }
        };
        end.extend_from_slice(b".\r\n");
        self.finish(txn, &end).await
    }

    /// More message text from the client into the input buffer; false if
    /// it went away or stayed silent past the timeout.
    async fn fill_from_client(&mut self) -> bool {
        let fill = tokio::time::timeout(self.timeout, self.input.fill(&mut self.client));
        matches!(fill.await, Ok(Ok(n)) if n > 0)
    }

    /// Reads the DATA text up to the end marker and drops it; false if the
    /// client went away first.
    async fn skip_dot_stuffed(&mut self) -> bool {
        let mut unstuffer = DotUnstuffer::default();
        let mut text = Vec::with_capacity(CLIENT_BUFFER);
        loop {
            if self.input.buffered().is_empty() && !self.fill_from_client().await {
                return false;
            }
            let (used, done) = unstuffer.feed(self.input.buffered(), &mut text);
            self.input.consume(used);
            text.clear();
            if done {
                return true;
            }
        }
    }

    /// Reads the DATA text up to the end marker: unstuffed for the scan,
    /// stuffed again on its way upstream. The marker is not sent, nor the
    /// text read with it: that is returned, to go with the marker. Once
    /// the scanner has found something, the upstream connection is closed
    /// at once (the message will be refused whatever follows) and the rest
    /// of the text only read.
    async fn transfer_dot_stuffed(&mut self, txn: &mut Txn) -> Transfer {
        let mut unstuffer = DotUnstuffer::default();
        let mut stuffer = DotStuffer::default();
        let mut text = Vec::with_capacity(CLIENT_BUFFER);
        let mut forward = Vec::with_capacity(CLIENT_BUFFER + CLIENT_BUFFER / 8);
        let mut upstream_ok = true;
        loop {
            if self.input.buffered().is_empty() && !self.fill_from_client().await {
                return Transfer::ClientGone;
            }
            let (used, done) = unstuffer.feed(self.input.buffered(), &mut text);
            self.input.consume(used);
            txn.feed(&text);
            if self.up.is_some() && txn.infected() {
                self.up = None;
            }
            stuffer.push(&text, &mut forward);
            text.clear();
            if done {
                return if upstream_ok {
                    Transfer::Complete(forward)
                } else {
                    Transfer::UpstreamGone
                };
            }
            if upstream_ok && !forward.is_empty() {
                if let Some(up) = self.up.as_mut() {
                    upstream_ok = up.send(&forward).await.is_ok();
                }
            }
            forward.clear();
        }
    }

    async fn bdat(&mut self, line: &[u8]) -> Result<(), End> {
        let text = String::from_utf8_lossy(line);
        let mut words = text.split_ascii_whitespace().skip(1);
        let size = words.next().and_then(|n| n.parse::<u64>().ok());
        let last = match words.next() {
            None => false,
            Some(w) if w.eq_ignore_ascii_case("LAST") => true,
            Some(_) => return self.reply("501 5.5.4 Syntax: BDAT size [LAST]").await,
        };
        let Some(size) = size else {
            return self.reply("501 5.5.4 Syntax: BDAT size [LAST]").await;
        };
        if self.bdat.is_none() {
            self.bdat = Some(Txn::new(self.ctx, &self.sender, self.recipients));
        }
        if size == 0 && last {
            // Nothing to pass on: the end waits for the verdict.
            let txn = self.bdat.take().ok_or(End)?;
            return self.finish_bdat(txn).await;
        }
        // The chunk goes on as a plain one: LAST waits for the verdict.
        let header = format!("BDAT {size}\r\n");
        let up = self.up.as_mut().ok_or(End)?;
        if let Err(e) = up.send(header.as_bytes()).await {
            return Err(self.upstream_failed(e).await);
        }
        let mut left = size;
        let mut normal = Vec::with_capacity(CLIENT_BUFFER + 16);
        while left > 0 {
            if self.input.buffered().is_empty() && !self.fill_from_client().await {
                if let Some(txn) = &self.bdat {
                    log_aborted(txn, "client gone during BDAT");
                }
                return Err(End);
            }
            let n = (self.input.buffered().len() as u64).min(left) as usize;
            let txn = self.bdat.as_mut().ok_or(End)?;
            normal.clear();
            txn.line_ends.push(&self.input.buffered()[..n], &mut normal);
            txn.feed(&normal);
            let up = self.up.as_mut().ok_or(End)?;
            let sent = up.send(&self.input.buffered()[..n]).await;
            self.input.consume(n);
            left -= n as u64;
            if let Err(e) = sent {
                return Err(self.upstream_failed(e).await);
            }
        }
        let up = self.up.as_mut().ok_or(End)?;
        let reply = match up.reply().await {
            Ok(r) => r,
            Err(e) => return Err(self.upstream_failed(e).await),
        };
        if !last || !reply.positive() {
            if !reply.positive() {
                self.bdat = None;
            }
            return self.send(&reply.raw).await;
        }
        let txn = self.bdat.take().ok_or(End)?;
        self.finish_bdat(txn).await
    }

    /// The client's last chunk has gone on: the verdict decides whether
    /// `BDAT 0 LAST` follows it.
    async fn finish_bdat(&mut self, mut txn: Txn) -> Result<(), End> {
        let mut normal = Vec::new();
        txn.line_ends.finish(&mut normal);
        txn.feed(&normal);
        self.finish(txn, b"BDAT 0 LAST\r\n").await
    }

    /// The end of a message: the verdict decides whether `end` goes
    /// upstream (and its reply to the client) or the upstream transaction
    /// is dropped and the client refused.
    async fn finish(&mut self, txn: Txn, end: &[u8]) -> Result<(), End> {
        let (sender, recipients, size, started) =
            (txn.sender.clone(), txn.recipients, txn.size, txn.started);
        let (verdict, refusal) = txn.judge(self.ctx);
        self.sender.clear();
        self.recipients = 0;
        if let Some(refusal) = refusal {
            // Closing the connection before the end of data makes the
            // upstream drop the transaction (RFC 5321 §4.1.1.4: a message
            // counts only once the end is acknowledged).
            self.up = None;
            tracing::info!(
                from = %sender, recipients, size, verdict = %verdict,
                ms = started.elapsed().as_millis() as u64,
                "message refused"
            );
            self.reply(&refusal).await?;
            return self.reconnect().await;
        }
        let reply = self.command(end).await?;
        tracing::info!(
            from = %sender, recipients, size, verdict = %verdict,
            reply = reply.code,
            ms = started.elapsed().as_millis() as u64,
            "message proxied"
        );
        self.send(&reply.raw).await
    }

    /// A fresh upstream connection after a refused message, brought to the
    /// state the client expects (greeted, EHLO said). An authenticated
    /// session cannot be brought back: it is closed at the next command.
    async fn reconnect(&mut self) -> Result<(), End> {
        if self.authenticated {
            return Ok(());
        }
        if let Err(e) = self.open_fresh().await {
            tracing::warn!(error = %e, "upstream reconnection failed");
            return Ok(());
        }
        if let Some(helo) = self.helo.clone() {
            let up = self.up.as_mut().ok_or(End)?;
            match up.command(&helo).await {
                Ok(r) if r.code == 250 => {}
                _ => self.up = None,
            }
        }
        Ok(())
    }
}

fn log_aborted(txn: &Txn, why: &str) {
    tracing::info!(
        from = %txn.sender,
        recipients = txn.recipients,
        size = txn.size,
        verdict = "aborted",
        ms = txn.started.elapsed().as_millis() as u64,
        "{why}: the upstream did not get the end of the message"
    );
}

/// The address of `MAIL FROM:<a>`, for the log.
fn mail_from(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let start = text.find('<').map_or(0, |i| i + 1);
    let end = text[start..].find('>').map_or(text.len(), |i| start + i);
    text[start..end].trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ehlo_keeps_what_the_proxy_understands() {
        let raw = b"250-mx.example\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n250-VRFY\r\n250-ETRN\r\n250-STARTTLS\r\n250-AUTH PLAIN LOGIN\r\n250-XCLIENT NAME ADDR\r\n250-ENHANCEDSTATUSCODES\r\n250-8BITMIME\r\n250-DSN\r\n250-SMTPUTF8\r\n250 CHUNKING\r\n".to_vec();
        let reply = Reply { code: 250, raw };
        let out = String::from_utf8(filter_ehlo(&reply, true)).unwrap();
        assert_eq!(
            out,
            "250-mx.example\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n250-AUTH PLAIN LOGIN\r\n250-ENHANCEDSTATUSCODES\r\n250-8BITMIME\r\n250-DSN\r\n250-SMTPUTF8\r\n250-CHUNKING\r\n250 STARTTLS\r\n"
        );
        let out = String::from_utf8(filter_ehlo(&reply, false)).unwrap();
        assert!(out.ends_with("250 CHUNKING\r\n") && !out.contains("STARTTLS"));
        let one = Reply {
            code: 250,
            raw: b"250 mx.example\r\n".to_vec(),
        };
        assert_eq!(filter_ehlo(&one, false), b"250 mx.example\r\n");
    }

    #[test]
    fn reply_lines_and_verbs() {
        assert_eq!(reply_line(b"250-x\r\n"), Some((250, true)));
        assert_eq!(reply_line(b"354 go\r\n"), Some((354, false)));
        assert_eq!(reply_line(b"25"), None);
        assert_eq!(reply_line(b"abc def"), None);
        assert_eq!(verb(b"mail FROM:<a@b>\r\n"), "MAIL");
        assert_eq!(verb(b"DATA\r\n"), "DATA");
        assert!(groupable("RCPT") && !groupable("DATA") && !groupable("BDAT"));
        assert_eq!(
            mail_from(b"MAIL FROM:<a@b.example> SIZE=10\r\n"),
            "a@b.example"
        );
        assert_eq!(mail_from(b"MAIL FROM:<>\r\n"), "");
    }

    #[test]
    fn xclient_addresses() {
        assert_eq!(xclient_addr("192.0.2.7:1".parse().unwrap()), "192.0.2.7");
        assert_eq!(
            xclient_addr("[2001:db8::1]:1".parse().unwrap()),
            "IPV6:2001:db8::1"
        );
    }
}
