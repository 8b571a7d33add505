//! The SMTP client that hands a message to another server (RFC 5321):
//! greeting, EHLO (HELO when EHLO is refused), STARTTLS under the
//! destination's TLS policy, then one transaction with several recipients,
//! the message streamed in and dot-stuffed on the fly.
//!
//! Replies are read by a small reader of our own (three digits, a
//! separator, bounded lines, a timeout per reply) rather than through
//! smtp-proto's response parser: the client needs nothing of a reply but
//! its code and text, and the bounds stay in one place.
//!
//! Timeouts follow RFC 5321 §4.5.3.2: 5 minutes for the greeting, MAIL and
//! RCPT, 2 minutes for DATA's go-ahead, 3 minutes per block sent, 10
//! minutes for the reply to the final dot; [`Timeouts`] makes them
//! shorter where a test or an operator wants.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::tls_policy::{MxTls, TlsOutcome};
use net::DotStuffer;

/// The longest reply line read (RFC 5321 §4.5.3.1.5 says 512; some
/// servers send more), and the most lines one reply may have.
const MAX_LINE: usize = 4096;
const MAX_LINES: usize = 100;

/// Timeouts of one SMTP conversation.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// TCP connect.
    pub connect: Duration,
    /// The greeting, EHLO, STARTTLS, MAIL and RCPT replies.
    pub command: Duration,
    /// Writing one block of the message.
    pub data_block: Duration,
    /// The reply to the final dot.
    pub data_end: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(30),
            command: Duration::from_secs(300),
            data_block: Duration::from_secs(180),
            data_end: Duration::from_secs(600),
        }
    }
}

/// One SMTP reply: its code and its text (lines joined with a space).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The three-digit code.
    pub code: u16,
    /// The text after the code, every line.
    pub text: String,
}

impl Reply {
    /// 2xx.
    pub fn is_positive(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// 5xx: a permanent refusal (RFC 5321 §4.2.1).
    pub fn is_permanent(&self) -> bool {
        (500..600).contains(&self.code)
    }
}

impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.code, self.text)
    }
}

/// Why a conversation ended before its outcome was known.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The network failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The server did not answer in time.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    /// The server's bytes were not SMTP.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The server refused a step of the session (greeting, EHLO, MAIL, DATA).
    #[error("{stage}: {reply}")]
    Refused {
        /// What was refused.
        stage: &'static str,
        /// The server's reply.
        reply: Reply,
    },
    /// The TLS policy requires STARTTLS and it could not be done.
    #[error("TLS required by the {kind} policy: {reason}")]
    TlsRequired {
        /// The policy kind.
        kind: &'static str,
        /// What went wrong.
        reason: String,
    },
}

impl ClientError {
    /// Whether retrying cannot help (a 5xx refusal of the session).
    pub fn is_permanent(&self) -> bool {
        matches!(self, ClientError::Refused { reply, .. } if reply.is_permanent())
    }
}

/// What the server said it supports in its EHLO reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extensions {
    /// STARTTLS (RFC 3207).
    pub starttls: bool,
    /// PIPELINING (RFC 2920).
    pub pipelining: bool,
    /// 8BITMIME (RFC 6152).
    pub eight_bit_mime: bool,
    /// SMTPUTF8 (RFC 6531).
    pub smtputf8: bool,
    /// SIZE (RFC 1870): the limit, 0 for none given.
    pub size: Option<u64>,
    /// DSN (RFC 3461): the server takes NOTIFY, ORCPT, RET and ENVID and
    /// makes the reports from there on.
    pub dsn: bool,
    /// AUTH (RFC 4954): the mechanisms offered, upper case.
    pub auth: Vec<String>,
    /// CHUNKING (RFC 3030): the message goes in BDAT chunks, as stored,
    /// with no dot-stuffing and no end-of-data line to scan for.
    pub chunking: bool,
}

impl Extensions {
    /// Reads the keywords of an EHLO reply (the lines after the first).
    pub fn parse(lines: &[String]) -> Extensions {
        let mut ext = Extensions::default();
        for line in lines.iter().skip(1) {
            let mut words = line.split_whitespace();
            let Some(keyword) = words.next() else {
                continue;
            };
            match keyword.to_ascii_uppercase().as_str() {
                "STARTTLS" => ext.starttls = true,
                "PIPELINING" => ext.pipelining = true,
                "8BITMIME" => ext.eight_bit_mime = true,
                "SMTPUTF8" => ext.smtputf8 = true,
                "DSN" => ext.dsn = true,
                "CHUNKING" => ext.chunking = true,
                "AUTH" => ext
                    .auth
                    .extend(words.by_ref().map(|m| m.to_ascii_uppercase())),
                "SIZE" => ext.size = Some(words.next().and_then(|n| n.parse().ok()).unwrap_or(0)),
                _ => {}
            }
        }
        ext
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// An open SMTP session, greeted and past EHLO (and STARTTLS when done).
pub struct Session {
    io: BufReader<Box<dyn Io>>,
    timeouts: Timeouts,
    /// What the server supports (after STARTTLS, its second EHLO).
    pub extensions: Extensions,
    /// The TLS outcome, for the policy's records; `None` before any TLS
    /// decision was made.
    pub tls: TlsOutcome,
    /// The address connected to.
    pub peer: SocketAddr,
}

/// The envelope of one transaction.
#[derive(Debug, Clone, Default)]
pub struct Envelope {
    /// The reverse-path (empty for the null sender).
    pub sender: String,
    /// More MAIL parameters (DSN's RET and ENVID), each after a space.
    pub mail_params: String,
    /// The recipients, each with more RCPT parameters (NOTIFY, ORCPT).
    pub recipients: Vec<(String, String)>,
}

/// The reply to each recipient and to the data of one transaction.
#[derive(Debug, Clone)]
pub struct TransactionResult {
    /// Per recipient, in the order given: `Ok` when accepted at RCPT.
    pub recipients: Vec<Result<(), Reply>>,
    /// The reply to MAIL when it refused the whole transaction, else to
    /// the end of data (`None` when no recipient was accepted).
    pub data: Option<Reply>,
}

async fn read_reply(
    io: &mut BufReader<Box<dyn Io>>,
    limit: Duration,
    what: &'static str,
) -> Result<(Reply, Vec<String>), ClientError> {
    tokio::time::timeout(limit, read_reply_lines(io))
        .await
        .map_err(|_| ClientError::Timeout(what))?
}

async fn read_reply_lines(
    io: &mut BufReader<Box<dyn Io>>,
) -> Result<(Reply, Vec<String>), ClientError> {
    let mut lines = Vec::new();
    let mut code = 0u16;
    loop {
        let mut raw = Vec::new();
        let n = (&mut *io)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut raw)
            .await?;
        if n == 0 {
            return Err(ClientError::Protocol("connection closed".into()));
        }
        let line = String::from_utf8_lossy(&raw);
        let line = line.trim_end_matches(['\r', '\n']);
        let (this_code, more, text) = parse_reply_line(line)
            .ok_or_else(|| ClientError::Protocol(format!("not a reply: {line:?}")))?;
        if !lines.is_empty() && this_code != code {
            return Err(ClientError::Protocol(
                "reply codes differ between lines".into(),
            ));
        }
        code = this_code;
        lines.push(text.to_string());
        if !more {
            break;
        }
        if lines.len() > MAX_LINES {
            return Err(ClientError::Protocol("reply too long".into()));
        }
    }
    let reply = Reply {
        code,
        text: lines.join(" "),
    };
    Ok((reply, lines))
}

/// `250-text` → (250, true, "text"); `250 text` or `250` → (250, false, ...).
pub fn parse_reply_line(line: &str) -> Option<(u16, bool, &str)> {
    let digits = line.get(..3)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) || !(b'2'..=b'5').contains(&digits.as_bytes()[0])
    {
        return None;
    }
    let code = digits.parse().ok()?;
    match line.as_bytes().get(3) {
        None => Some((code, false, "")),
        Some(b'-') => Some((code, true, &line[4..])),
        Some(b' ') => Some((code, false, &line[4..])),
        Some(_) => None,
    }
}

async fn send_line(
    io: &mut BufReader<Box<dyn Io>>,
    line: &str,
    limit: Duration,
) -> Result<(), ClientError> {
    let w = io.get_mut();
    tokio::time::timeout(limit, async {
        w.write_all(line.as_bytes()).await?;
        w.write_all(b"\r\n").await?;
        w.flush().await
    })
    .await
    .map_err(|_| ClientError::Timeout("the server to take a command"))??;
    Ok(())
}

impl Session {
    /// Connects to `addr` (the MX `mx_host`), reads the greeting, says
    /// EHLO as `helo`, and does STARTTLS as `tls` says: when offered (or
    /// fails when `tls.required` and it is not offered or fails).
    pub async fn open(
        addr: SocketAddr,
        mx_host: &str,
        helo: &str,
        tls: &MxTls,
        timeouts: Timeouts,
    ) -> Result<Session, ClientError> {
        let tcp = connect(addr, timeouts).await?;
        let mut io: BufReader<Box<dyn Io>> = BufReader::new(Box::new(tcp));
        greeting(&mut io, timeouts).await?;
        let extensions = ehlo(&mut io, helo, timeouts).await?;
        let mut session = Session {
            io,
            timeouts,
            extensions,
            tls: TlsOutcome::no_starttls(tls),
            peer: addr,
        };
        if !session.extensions.starttls {
            if tls.required {
                return Err(ClientError::TlsRequired {
                    kind: tls.kind,
                    reason: "STARTTLS not offered".into(),
                });
            }
            return Ok(session);
        }
        send_line(&mut session.io, "STARTTLS", timeouts.command).await?;
        let (reply, _) = read_reply(&mut session.io, timeouts.command, "STARTTLS").await?;
        if !reply.is_positive() {
            if tls.required {
                return Err(ClientError::TlsRequired {
                    kind: tls.kind,
                    reason: format!("STARTTLS refused: {reply}"),
                });
            }
            return Ok(session);
        }
        // Nothing may be buffered past the 220 (RFC 3207 §4.2 forbids it;
        // a server that pipelines there is attempting an injection).
        if !session.io.buffer().is_empty() {
            return Err(ClientError::Protocol(
                "data after the STARTTLS reply".into(),
            ));
        }
        let plain = session.io.into_inner();
        let (stream, outcome) = handshake(plain, mx_host, tls, timeouts).await?;
        let mut io: BufReader<Box<dyn Io>> = BufReader::new(Box::new(stream));
        let extensions = ehlo(&mut io, helo, timeouts).await?;
        Ok(Session {
            io,
            timeouts,
            extensions,
            tls: outcome,
            peer: addr,
        })
    }

    /// Connects to a server that speaks TLS from the first byte (a relay
    /// on port 465, RFC 8314): the handshake, the greeting, EHLO.
    pub async fn open_implicit(
        addr: SocketAddr,
        host: &str,
        helo: &str,
        tls: &MxTls,
        timeouts: Timeouts,
    ) -> Result<Session, ClientError> {
        let tcp = connect(addr, timeouts).await?;
        let (stream, outcome) = handshake(Box::new(tcp), host, tls, timeouts).await?;
        let mut io: BufReader<Box<dyn Io>> = BufReader::new(Box::new(stream));
        greeting(&mut io, timeouts).await?;
        let extensions = ehlo(&mut io, helo, timeouts).await?;
        Ok(Session {
            io,
            timeouts,
            extensions,
            tls: outcome,
            peer: addr,
        })
    }

    /// Logs in (RFC 4954) with PLAIN, or LOGIN when only that is offered.
    /// Only over TLS: a password never goes out in clear text.
    pub async fn auth(&mut self, username: &str, password: &str) -> Result<(), ClientError> {
        use base64::Engine;
        let b64 = |text: &[u8]| base64::engine::general_purpose::STANDARD.encode(text);
        let t = self.timeouts;
        if self.tls.version.is_none() {
            return Err(ClientError::Protocol(
                "no TLS: the password is not sent in clear text".into(),
            ));
        }
        let offers = |m: &str| self.extensions.auth.iter().any(|a| a == m);
        let reply = if offers("PLAIN") || !offers("LOGIN") {
            let token = b64(format!("\0{username}\0{password}").as_bytes());
            send_line(&mut self.io, &format!("AUTH PLAIN {token}"), t.command).await?;
            read_reply(&mut self.io, t.command, "the reply to AUTH")
                .await?
                .0
        } else {
            send_line(&mut self.io, "AUTH LOGIN", t.command).await?;
            let mut reply = read_reply(&mut self.io, t.command, "the reply to AUTH")
                .await?
                .0;
            for answer in [username, password] {
                if reply.code != 334 {
                    break;
                }
                send_line(&mut self.io, &b64(answer.as_bytes()), t.command).await?;
                reply = read_reply(&mut self.io, t.command, "the reply to AUTH")
                    .await?
                    .0;
            }
            reply
        };
        if reply.code == 235 {
            Ok(())
        } else {
            Err(ClientError::Refused {
                stage: "AUTH",
                reply,
            })
        }
    }

    /// One transaction: MAIL FROM, RCPT TO for each recipient, then DATA
    /// with the message read piece by piece from `next_piece` (which
    /// returns `None` at the end) when a recipient was accepted.
    pub async fn send<F, Fut>(
        &mut self,
        envelope: &Envelope,
        size: u64,
        next_piece: F,
    ) -> Result<TransactionResult, ClientError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = std::io::Result<Option<Vec<u8>>>>,
    {
        let t = self.timeouts;
        let mut mail = format!("MAIL FROM:<{}>", envelope.sender);
        if self.extensions.size.is_some() {
            mail.push_str(&format!(" SIZE={size}"));
        }
        if self.extensions.eight_bit_mime {
            mail.push_str(" BODY=8BITMIME");
        }
        mail.push_str(&envelope.mail_params);
        let recipients: Vec<String> = envelope
            .recipients
            .iter()
            .map(|(rcpt, params)| format!("RCPT TO:<{rcpt}>{params}"))
            .collect();
        let recipients = recipients.as_slice();
        if self.extensions.pipelining {
            return self.send_pipelined(&mail, recipients, next_piece).await;
        }
        send_line(&mut self.io, &mail, t.command).await?;
        let (reply, _) = read_reply(&mut self.io, t.command, "the reply to MAIL").await?;
        if !reply.is_positive() {
            return Ok(TransactionResult {
                recipients: recipients.iter().map(|_| Err(reply.clone())).collect(),
                data: Some(reply),
            });
        }
        let mut results = Vec::with_capacity(recipients.len());
        for rcpt in recipients {
            send_line(&mut self.io, rcpt, t.command).await?;
            let (reply, _) = read_reply(&mut self.io, t.command, "the reply to RCPT").await?;
            results.push(if reply.is_positive() {
                Ok(())
            } else {
                Err(reply)
            });
        }
        if results.iter().all(|r| r.is_err()) {
            return self.abandon(results).await;
        }
        if self.extensions.chunking {
            return self.send_chunks(results, next_piece).await;
        }
        send_line(&mut self.io, "DATA", t.command).await?;
        let (go, _) = read_reply(
            &mut self.io,
            Duration::from_secs(120).min(t.command),
            "DATA",
        )
        .await?;
        self.send_data(go, results, next_piece).await
    }

    /// The envelope in one write (RFC 2920): MAIL, every RCPT and DATA go
    /// together and their replies are read in order, one round trip
    /// instead of one per command. `recipients` are whole RCPT lines.
    async fn send_pipelined<F, Fut>(
        &mut self,
        mail: &str,
        recipients: &[String],
        next_piece: F,
    ) -> Result<TransactionResult, ClientError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = std::io::Result<Option<Vec<u8>>>>,
    {
        let t = self.timeouts;
        let mut batch = format!("{mail}\r\n");
        for rcpt in recipients {
            batch.push_str(rcpt);
            batch.push_str("\r\n");
        }
        let chunking = self.extensions.chunking;
        if chunking {
            // BDAT follows once the recipients are known.
            batch.truncate(batch.len() - 2);
        } else {
            batch.push_str("DATA");
        }
        send_line(&mut self.io, &batch, t.command).await?;
        let (mail_reply, _) = read_reply(&mut self.io, t.command, "the reply to MAIL").await?;
        let mut results = Vec::with_capacity(recipients.len());
        for _ in recipients {
            let (reply, _) = read_reply(&mut self.io, t.command, "the reply to RCPT").await?;
            results.push(if reply.is_positive() && mail_reply.is_positive() {
                Ok(())
            } else if mail_reply.is_positive() {
                Err(reply)
            } else {
                Err(mail_reply.clone())
            });
        }
        // With CHUNKING no DATA was sent: there is no reply to read.
        let go = if chunking {
            None
        } else {
            Some(
                read_reply(
                    &mut self.io,
                    Duration::from_secs(120).min(t.command),
                    "DATA",
                )
                .await?
                .0,
            )
        };
        if go.as_ref().is_some_and(|g| g.code == 354) && results.iter().all(|r| r.is_err()) {
            // A server that took DATA without a recipient: end the empty
            // message at once and forget it.
            send_line(&mut self.io, ".", t.command).await?;
            read_reply(&mut self.io, t.command, "the reply to the end of data").await?;
        }
        if !mail_reply.is_positive() {
            return Ok(TransactionResult {
                recipients: results,
                data: Some(mail_reply),
            });
        }
        if results.iter().all(|r| r.is_err()) {
            return self.abandon(results).await;
        }
        match go {
            Some(go) => self.send_data(go, results, next_piece).await,
            None => self.send_chunks(results, next_piece).await,
        }
    }

    /// Ends a transaction no recipient was accepted for.
    async fn abandon(
        &mut self,
        results: Vec<Result<(), Reply>>,
    ) -> Result<TransactionResult, ClientError> {
        let t = self.timeouts;
        send_line(&mut self.io, "RSET", t.command).await?;
        read_reply(&mut self.io, t.command, "the reply to RSET").await?;
        Ok(TransactionResult {
            recipients: results,
            data: None,
        })
    }

    /// Sends the message in BDAT chunks (RFC 3030), one per stored piece,
    /// each answered before the next, then `BDAT 0 LAST`.
    async fn send_chunks<F, Fut>(
        &mut self,
        results: Vec<Result<(), Reply>>,
        mut next_piece: F,
    ) -> Result<TransactionResult, ClientError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = std::io::Result<Option<Vec<u8>>>>,
    {
        let t = self.timeouts;
        while let Some(piece) = next_piece().await? {
            if piece.is_empty() {
                continue;
            }
            let mut block = format!("BDAT {}\r\n", piece.len()).into_bytes();
            block.extend_from_slice(&piece);
            self.write_block(&block).await?;
            let (reply, _) = read_reply(&mut self.io, t.data_end, "the reply to BDAT").await?;
            if !reply.is_positive() {
                // The server dropped the message; the session is reset
                // for the next one.
                send_line(&mut self.io, "RSET", t.command).await?;
                read_reply(&mut self.io, t.command, "the reply to RSET").await?;
                return Ok(TransactionResult {
                    recipients: results,
                    data: Some(reply),
                });
            }
        }
        self.write_block(b"BDAT 0 LAST\r\n").await?;
        let (end, _) = read_reply(&mut self.io, t.data_end, "the reply to the last BDAT").await?;
        Ok(TransactionResult {
            recipients: results,
            data: Some(end),
        })
    }

    /// Given the reply `go` to DATA: after a `354`, sends the message,
    /// dot-stuffed, and reads the reply to its end; otherwise that reply
    /// ends the transaction.
    async fn send_data<F, Fut>(
        &mut self,
        go: Reply,
        results: Vec<Result<(), Reply>>,
        mut next_piece: F,
    ) -> Result<TransactionResult, ClientError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = std::io::Result<Option<Vec<u8>>>>,
    {
        if go.code != 354 {
            return Ok(TransactionResult {
                recipients: results,
                data: Some(go),
            });
        }
        let t = self.timeouts;
        let mut stuffer = DotStuffer::default();
        let mut out = Vec::with_capacity(64 * 1024);
        while let Some(piece) = next_piece().await? {
            out.clear();
            stuffer.push(&piece, &mut out);
            self.write_block(&out).await?;
        }
        out.clear();
        stuffer.finish(&mut out);
        self.write_block(&out).await?;
        let (end, _) = read_reply(&mut self.io, t.data_end, "the reply to the end of data").await?;
        Ok(TransactionResult {
            recipients: results,
            data: Some(end),
        })
    }

    async fn write_block(&mut self, block: &[u8]) -> Result<(), ClientError> {
        let w = self.io.get_mut();
        tokio::time::timeout(self.timeouts.data_block, async {
            w.write_all(block).await?;
            w.flush().await
        })
        .await
        .map_err(|_| ClientError::Timeout("the server to take the message"))??;
        Ok(())
    }

    /// Ends the session politely; errors do not matter any more.
    pub async fn quit(mut self) {
        if send_line(&mut self.io, "QUIT", Duration::from_secs(5))
            .await
            .is_ok()
        {
            let _ = read_reply(&mut self.io, Duration::from_secs(5), "QUIT").await;
        }
    }
}

async fn connect(addr: SocketAddr, timeouts: Timeouts) -> Result<TcpStream, ClientError> {
    let tcp = tokio::time::timeout(timeouts.connect, TcpStream::connect(addr))
        .await
        .map_err(|_| ClientError::Timeout("the connection"))??;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

async fn greeting(io: &mut BufReader<Box<dyn Io>>, timeouts: Timeouts) -> Result<(), ClientError> {
    let (greeting, _) = read_reply(io, timeouts.command, "the greeting").await?;
    if !greeting.is_positive() {
        return Err(ClientError::Refused {
            stage: "greeting",
            reply: greeting,
        });
    }
    Ok(())
}

/// The TLS handshake with `host` as `tls` says; a failure spends the
/// connection (the caller retries, in clear text only if the policy
/// allows, on a new one).
async fn handshake(
    plain: Box<dyn Io>,
    host: &str,
    tls: &MxTls,
    timeouts: Timeouts,
) -> Result<(tokio_rustls::client::TlsStream<Box<dyn Io>>, TlsOutcome), ClientError> {
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| ClientError::Protocol(format!("MX name {host:?}: {e}")))?;
    let connector = tokio_rustls::TlsConnector::from(Arc::clone(&tls.client_config));
    let handshake = tokio::time::timeout(timeouts.command, connector.connect(name, plain))
        .await
        .map_err(|_| ClientError::Timeout("the TLS handshake"))?;
    match handshake {
        Ok(stream) => {
            let outcome = TlsOutcome::from_handshake(tls, stream.get_ref().1);
            Ok((stream, outcome))
        }
        Err(e) => {
            let outcome = TlsOutcome::handshake_failed(tls, &e);
            Err(ClientError::TlsRequired {
                kind: tls.kind,
                reason: outcome.failure.unwrap_or_else(|| e.to_string()),
            })
        }
    }
}

async fn ehlo(
    io: &mut BufReader<Box<dyn Io>>,
    helo: &str,
    timeouts: Timeouts,
) -> Result<Extensions, ClientError> {
    send_line(io, &format!("EHLO {helo}"), timeouts.command).await?;
    let (reply, lines) = read_reply(io, timeouts.command, "the reply to EHLO").await?;
    if reply.is_positive() {
        return Ok(Extensions::parse(&lines));
    }
    // RFC 5321 §3.2: a server that does not know EHLO may know HELO.
    send_line(io, &format!("HELO {helo}"), timeouts.command).await?;
    let (reply, _) = read_reply(io, timeouts.command, "the reply to HELO").await?;
    if !reply.is_positive() {
        return Err(ClientError::Refused {
            stage: "HELO",
            reply,
        });
    }
    Ok(Extensions::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reply_lines_are_read() {
        assert_eq!(
            parse_reply_line("250-PIPELINING"),
            Some((250, true, "PIPELINING"))
        );
        assert_eq!(
            parse_reply_line("550 5.1.1 no"),
            Some((550, false, "5.1.1 no"))
        );
        assert_eq!(parse_reply_line("220"), Some((220, false, "")));
        assert_eq!(parse_reply_line("hello"), None);
        assert_eq!(parse_reply_line("250x"), None);
        assert_eq!(parse_reply_line("999 no"), None);
    }

    #[test]
    fn extensions_are_read_from_ehlo() {
        let lines: Vec<String> = [
            "mx.example",
            "PIPELINING",
            "SIZE 1000",
            "starttls",
            "8BITMIME",
            "AUTH PLAIN login",
            "CHUNKING",
            "DSN",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let ext = Extensions::parse(&lines);
        assert!(ext.starttls && ext.pipelining && ext.eight_bit_mime && !ext.smtputf8);
        assert!(ext.chunking && ext.dsn);
        assert_eq!(ext.auth, ["PLAIN", "LOGIN"]);
        assert_eq!(ext.size, Some(1000));
    }

    proptest! {
        /// Any line a server sends is read or refused, never a panic; what
        /// is read keeps its code.
        #[test]
        fn reply_lines_never_panic(line in "\\PC{0,12}") {
            if let Some((code, _, _)) = parse_reply_line(&line) {
                prop_assert!((200..600).contains(&code));
                prop_assert_eq!(code.to_string(), &line[..3]);
            }
        }
    }
}
