//! One SMTP session: the pre-trust gate (greeting, EHLO, MAIL, RCPT and
//! the rest of RFC 5321's commands) and, once a recipient is accepted, the
//! hand-over to the data stage.
//!
//! Before the first accepted RCPT a session holds only this struct and a
//! fixed line buffer: no message buffer, no store writer, no transaction.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use net::{Input, LineError, Stream};
use smtp_proto::{
    Request, MAIL_BODY_7BIT, MAIL_BODY_8BITMIME, MAIL_RET_FULL, MAIL_RET_HDRS, MAIL_SMTPUTF8,
    RCPT_NOTIFY_DELAY, RCPT_NOTIFY_FAILURE, RCPT_NOTIFY_NEVER, RCPT_NOTIFY_SUCCESS,
};
use store::{MailboxId, MessageWriter, Resolution};
use tokio::io::AsyncWriteExt;

use crate::data::{self, DataEnd, Taps};
use crate::filter::{Filters, Head, Input as FilterInput, Plan, Recipient};
use crate::header_fix::{Fixes, HeaderFix, Seen};
use crate::message_auth::{Collector, Sender};
use crate::received::{queue_id, Trace};
use crate::reply::{write_multiline, Reply};
use crate::server::Context;
use crate::spam_check::Known;
use crate::submission::{self, SenderCheck, Submission};

/// Input buffer of a trusted session in the data stage.
const DATA_BUFFER: usize = 16 * 1024;

/// The envelope being built by MAIL and RCPT.
struct Envelope {
    sender: String,
    utf8: bool,
    /// Accepted recipients as given (for logs and the trace field).
    recipients: Vec<String>,
    mailboxes: Vec<MailboxId>,
    /// The address given at RCPT that led to each of `mailboxes`.
    mailbox_rcpts: Vec<String>,
    remote: Vec<String>,
    /// What the sender asked of reports for each of `remote` (RFC 3461).
    remote_dsn: Vec<store::RecipientDsn>,
    /// Local recipients whose sender asked to hear of the delivery
    /// (NOTIFY=SUCCESS), with their ORCPT.
    local_notify: Vec<(String, Option<String>)>,
    /// ENVID (RFC 3461 §4.4).
    envid: Option<String>,
    /// RET=FULL (RFC 3461 §4.3).
    ret_full: bool,
    /// The local domain of the first alias that forwards this message to
    /// a remote target (it seals the message with ARC).
    forwarder: Option<String>,
    started: Instant,
}

/// A message arriving in BDAT chunks.
struct Bdat {
    id: String,
    writer: Box<dyn MessageWriter>,
    /// Bytes the writer may hold: the size limit plus our trace fields.
    limit: u64,
    /// Over the limit: later chunks are read and dropped until LAST.
    too_big: bool,
    /// The content scan and the authentication checks, fed chunk by chunk.
    taps: Taps,
    /// Bare CR or LF become CRLF across chunk boundaries.
    line_ends: net::LineEnds,
}

/// Where the DNSBL check of this connection stands.
enum Blocklist {
    /// Not checked (off, or the client is on the allow list).
    Unchecked,
    /// Lookups running since the connection was accepted.
    Pending(dnsbl::PendingCheck),
    /// Decided: the reason if listed.
    Decided(Option<String>),
}

/// What to do after a command.
enum Next {
    Continue,
    Close,
}

pub(crate) struct Session<'a> {
    ctx: &'a Context,
    stream: Stream,
    peer: SocketAddr,
    input: Input,
    out: Vec<u8>,
    helo: Option<String>,
    esmtp: bool,
    tls: bool,
    envelope: Option<Envelope>,
    /// A BDAT transfer in progress (RFC 3030).
    bdat: Option<Bdat>,
    errors: u32,
    junk: u32,
    blocklist: Blocklist,
    /// The account authenticated with AUTH (submission only).
    account: Option<store::AccountEntry>,
    /// What the header fixer saw of the message in the data stage.
    seen: Option<Arc<Mutex<Seen>>>,
    /// The `Received-SPF:` field of the transaction starting its data.
    spf_field: Option<String>,
    /// Its SPF result, for DMARC and `Authentication-Results:`.
    spf_output: Option<mail_auth::SpfOutput>,
}

impl Envelope {
    /// Adds a remote recipient once, with the reports asked for it.
    fn add_remote(&mut self, address: String, dsn: &store::RecipientDsn) {
        if !self.remote.contains(&address) {
            self.remote.push(address);
            self.remote_dsn.push(dsn.clone());
        }
    }
}

/// The transaction verdicts the log uses, as static labels for metrics.
fn verdict_label(verdict: &str) -> &'static str {
    const KNOWN: [&str; 13] = [
        "accepted",
        "quarantined",
        "discarded",
        "rejected-sieve",
        "rejected-content",
        "rejected-dmarc",
        "rejected-sender",
        "scan-error",
        "store-error",
        "store-full",
        "too-big",
        "timeout",
        "connection-lost",
    ];
    KNOWN
        .iter()
        .find(|k| **k == verdict)
        .copied()
        .unwrap_or("other")
}

/// The reply for mail the store has no room for: `452 4.3.1`, a
/// temporary failure the client retries (RFC 5321 §4.2.2, RFC 3463 §3.4:
/// "mail system full"), never a `250` for mail that was not stored.
fn insufficient_storage() -> Reply {
    Reply::new(452, "4.3.1", "Insufficient system storage, try again later")
}

/// Counts a reply by its class for `/metrics`.
fn count_reply(code: u16) {
    let class = match code / 100 {
        2 => "2xx",
        3 => "3xx",
        4 => "4xx",
        _ => "5xx",
    };
    metrics::inc(&metrics::get().smtp_replies, "class", class);
}

/// The DSN parameters of a RCPT command (RFC 3461 §4.1, §4.2).
fn recipient_dsn(
    to: &smtp_proto::RcptTo<std::borrow::Cow<'_, str>>,
) -> Result<store::RecipientDsn, Reply> {
    let mut notify = 0;
    for (flag, bit) in [
        (RCPT_NOTIFY_SUCCESS, store::NOTIFY_SUCCESS),
        (RCPT_NOTIFY_FAILURE, store::NOTIFY_FAILURE),
        (RCPT_NOTIFY_DELAY, store::NOTIFY_DELAY),
        (RCPT_NOTIFY_NEVER, store::NOTIFY_NEVER),
    ] {
        if to.flags & flag != 0 {
            notify |= bit;
        }
    }
    if notify & store::NOTIFY_NEVER != 0 && notify != store::NOTIFY_NEVER {
        return Err(Reply::new(
            501,
            "5.5.4",
            "NOTIFY=NEVER cannot be combined with other values",
        ));
    }
    Ok(store::RecipientDsn {
        notify,
        orcpt: to.orcpt.as_ref().map(|o| o.to_string()),
    })
}

/// The SIZE parameter of a MAIL command line, as a number however large;
/// `None` when there is none or it is not a number.
fn declared_size(line: &[u8]) -> Option<u128> {
    let text = std::str::from_utf8(line).ok()?;
    let param = text
        .split_ascii_whitespace()
        .find(|w| w.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("SIZE=")))?;
    let digits = &param[5..];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Anything longer than u128 holds is over any limit.
    Some(digits.parse().unwrap_or(u128::MAX))
}

/// Whether a RCPT line names `<Postmaster>` without a domain.
fn is_bare_postmaster(line: &[u8]) -> bool {
    let text = String::from_utf8_lossy(line).to_ascii_lowercase();
    text.split_once(':')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with("<postmaster>"))
}

impl<'a> Session<'a> {
    pub(crate) fn new(
        ctx: &'a Context,
        stream: Stream,
        peer: SocketAddr,
        tls: bool,
    ) -> Session<'a> {
        Session {
            ctx,
            stream,
            peer,
            input: Input::new(ctx.config.max_line_length),
            out: Vec::new(),
            helo: None,
            esmtp: false,
            tls,
            envelope: None,
            bdat: None,
            errors: 0,
            junk: 0,
            blocklist: Blocklist::Unchecked,
            account: None,
            seen: None,
            spf_field: None,
            spf_output: None,
        }
    }

    /// The submission settings, on a submission listener.
    fn submission(&self) -> Option<&Submission> {
        self.ctx.submission.as_deref()
    }

    /// Whether AUTH may be used now: over TLS, or without it only where
    /// the configuration allows plain text (RFC 6409 §4.3 asks for TLS
    /// before a password is sent).
    fn auth_allowed(&self, s: &Submission) -> bool {
        self.tls || s.config.allow_plaintext_auth
    }

    fn reply(&mut self, r: Reply) -> Next {
        if r.is_error() {
            self.errors += 1;
        }
        count_reply(r.code);
        r.write(&mut self.out, self.esmtp);
        if r.closes() {
            return Next::Close;
        }
        if self.errors >= self.ctx.config.max_errors {
            count_reply(421);
            Reply::new(421, "4.7.0", "Too many errors, closing connection")
                .write(&mut self.out, self.esmtp);
            return Next::Close;
        }
        Next::Continue
    }

    async fn flush(&mut self) -> bool {
        let timeout = Duration::from_secs(self.ctx.config.command_timeout_secs);
        net::send_buffered(&mut self.stream, &mut self.out, timeout, 512).await
    }

    pub(crate) async fn run(&mut self) {
        if let Some(policy) = &self.ctx.blocklist {
            if policy.applies_to(self.peer.ip()) {
                // The lookups run while the greeting goes out.
                self.blocklist = Blocklist::Pending(policy.client.spawn_check(self.peer.ip()));
                if policy.reject_at_connect {
                    if let Some(reason) = self.blocklist_verdict().await {
                        // RFC 5321 §3.1: a 554 greeting refuses the session.
                        Reply::new(554, "", format!("5.7.1 {reason}")).write(&mut self.out, false);
                        self.flush().await;
                        return;
                    }
                }
            }
        }
        let greeting = format!("{} ESMTP Sluice", self.ctx.hostname);
        Reply::new(220, "", greeting).write(&mut self.out, false);
        loop {
            // RFC 2920: replies to pipelined commands may wait until the
            // client's batch is consumed; flush before blocking for input.
            if !self.input.buffered().contains(&b'\n') && !self.flush().await {
                break;
            }
            let timeout = Duration::from_secs(self.ctx.config.command_timeout_secs);
            let line = tokio::select! {
                r = tokio::time::timeout(timeout, self.input.read_line(&mut self.stream)) => match r {
                    Ok(Ok(line)) => Ok(line.to_vec()),
                    Ok(Err(e)) => Err(e),
                    Err(_) => {
                        self.reply(Reply::new(421, "4.4.2", format!("{} Timeout, closing connection", self.ctx.hostname)));
                        break;
                    }
                },
                _ = self.ctx.shutdown.token.cancelled() => {
                    self.reply(Reply::new(421, "4.3.2", format!("{} Service shutting down", self.ctx.hostname)));
                    break;
                }
            };
            let next = match line {
                Ok(line) => self.command(&line).await,
                Err(LineError::TooLong) => self.reply(Reply::new(500, "5.5.2", "Line too long")),
                Err(LineError::Closed | LineError::Io(_)) => break,
            };
            if matches!(next, Next::Close) {
                break;
            }
        }
        self.flush().await;
        let _ = self.stream.shutdown().await;
    }

    /// Counts a command that does not move a mail transaction forward.
    fn junk(&mut self) -> Option<Next> {
        self.junk += 1;
        (self.junk > self.ctx.config.max_junk_commands).then(|| {
            self.reply(Reply::new(
                421,
                "4.7.0",
                "Too many commands without a mail transaction",
            ))
        })
    }

    async fn command(&mut self, line: &[u8]) -> Next {
        let request = Request::parse(&mut line.iter());
        let request = match request {
            Ok(r) => r,
            Err(e) => return self.syntax_error(e),
        };
        match request {
            Request::Ehlo { host } => self.hello(&host, true),
            Request::Helo { host } => self.hello(&host, false),
            Request::Lhlo { .. } => self.reply(Reply::new(500, "5.5.1", "LHLO is for LMTP")),
            Request::Mail { from } => {
                // smtp-proto's SIZE overflows on absurd values: read it
                // from the line (RFC 1870 §6: over the limit is 552).
                let max = self.ctx.config.max_message_size;
                if declared_size(line).is_some_and(|size| size > u128::from(max)) {
                    return self.reply(Reply::new(
                        552,
                        "5.3.4",
                        format!("Message size exceeds fixed limit of {max} bytes"),
                    ));
                }
                self.mail(from)
            }
            Request::Rcpt { to } => {
                let dsn = match recipient_dsn(&to) {
                    Ok(dsn) => dsn,
                    Err(reply) => return self.reply(reply),
                };
                if to.address.is_empty() && is_bare_postmaster(line) {
                    // RFC 5321 §4.5.1: `<Postmaster>` without a domain must
                    // be accepted; the parser reads it as an empty address.
                    return self.rcpt("postmaster", dsn).await;
                }
                self.rcpt(&to.address, dsn).await
            }
            Request::Data => self.data().await,
            Request::Bdat {
                chunk_size,
                is_last,
            } => self.bdat(chunk_size, is_last).await,
            Request::Rset => {
                self.reset().await;
                if let Some(n) = self.junk() {
                    return n;
                }
                self.reply(Reply::new(250, "2.0.0", "Reset OK"))
            }
            Request::Noop { .. } => {
                if let Some(n) = self.junk() {
                    return n;
                }
                self.reply(Reply::new(250, "2.0.0", "OK"))
            }
            Request::Vrfy { .. } => {
                if let Some(n) = self.junk() {
                    return n;
                }
                // RFC 5321 §3.5.3: VRFY disabled, without lying.
                self.reply(Reply::new(
                    252,
                    "2.5.2",
                    "Cannot VRFY user, but will accept message and attempt delivery",
                ))
            }
            Request::Expn { .. } => self.reply(Reply::new(502, "5.5.1", "EXPN not available")),
            Request::Help { .. } => {
                if let Some(n) = self.junk() {
                    return n;
                }
                self.reply(Reply::new(214, "2.0.0", "See RFC 5321"))
            }
            Request::StartTls => self.starttls().await,
            Request::Quit => self.reply(Reply::new(
                221,
                "2.0.0",
                format!("{} Bye", self.ctx.hostname),
            )),
            Request::Auth {
                mechanism,
                initial_response,
            } => self.auth(mechanism, initial_response.to_string()).await,
            Request::Etrn { .. } | Request::Atrn { .. } | Request::Burl { .. } => {
                self.reply(Reply::new(502, "5.5.1", "Command not implemented"))
            }
        }
    }

    fn syntax_error(&mut self, e: smtp_proto::Error) -> Next {
        use smtp_proto::Error as E;
        let r = match e {
            E::UnknownCommand => Reply::new(500, "5.5.2", "Command unrecognized"),
            E::InvalidSenderAddress => Reply::new(553, "5.1.7", "Sender address is not valid"),
            E::InvalidRecipientAddress => {
                Reply::new(553, "5.1.3", "Recipient address is not valid")
            }
            E::SyntaxError { syntax } => Reply::new(501, "5.5.4", format!("Syntax: {syntax}")),
            E::InvalidParameter { param } => {
                Reply::new(501, "5.5.4", format!("Invalid parameter {param}"))
            }
            E::UnsupportedParameter { param } => {
                Reply::new(555, "5.5.4", format!("Unsupported parameter {param}"))
            }
            _ => Reply::new(500, "5.5.2", "Syntax error"),
        };
        self.reply(r)
    }

    fn hello(&mut self, host: &str, esmtp: bool) -> Next {
        if let Some(n) = self.junk() {
            return n;
        }
        if host.is_empty() || host.len() > 255 {
            return self.reply(Reply::new(501, "5.5.4", "Syntax: EHLO hostname"));
        }
        // RFC 5321 §4.1.4: EHLO resets the transaction.
        self.envelope = None;
        self.bdat = None;
        self.helo = Some(host.to_string());
        self.esmtp = esmtp;
        if !esmtp {
            return self.reply(Reply::new(250, "", self.ctx.hostname.clone()));
        }
        let mut lines = vec![
            format!("{} Hello {}", self.ctx.hostname, self.peer.ip()),
            "PIPELINING".into(),
            "8BITMIME".into(),
            "SMTPUTF8".into(),
            "ENHANCEDSTATUSCODES".into(),
            format!("SIZE {}", self.ctx.config.max_message_size),
            "CHUNKING".into(),
            "DSN".into(),
        ];
        if self.ctx.tls.is_some() && !self.tls {
            lines.push("STARTTLS".into());
        }
        if let Some(s) = self.submission() {
            if self.account.is_none() && self.auth_allowed(s) {
                lines.push("AUTH PLAIN LOGIN".into());
            }
        }
        write_multiline(&mut self.out, 250, &lines);
        Next::Continue
    }

    fn mail(&mut self, from: smtp_proto::MailFrom<std::borrow::Cow<'_, str>>) -> Next {
        if self.helo.is_none() {
            return self.reply(Reply::new(503, "5.5.1", "Say EHLO first"));
        }
        if self.envelope.is_some() {
            return self.reply(Reply::new(503, "5.5.1", "Nested MAIL command"));
        }
        let known =
            MAIL_BODY_7BIT | MAIL_BODY_8BITMIME | MAIL_SMTPUTF8 | MAIL_RET_FULL | MAIL_RET_HDRS;
        if from.flags & !known != 0 || from.trans_id.is_some() || from.auth.is_some() {
            return self.reply(Reply::new(555, "5.5.4", "Unsupported MAIL parameter"));
        }
        let max = self.ctx.config.max_message_size;
        if from.size as u64 > max {
            return self.reply(Reply::new(
                552,
                "5.3.4",
                format!("Message size exceeds fixed limit of {max} bytes"),
            ));
        }
        if let Some(s) = self.submission() {
            let Some(account) = &self.account else {
                return self.reply(Reply::new(530, "5.7.0", "Authentication required"));
            };
            if s.config.sender_check != SenderCheck::Off
                && !submission::may_send_as(&self.ctx.directory.get(), account, &from.address)
            {
                tracing::info!(account = %account.address, sender = %from.address, "sender refused: not the account's address");
                return self.reply(Reply::new(
                    553,
                    "5.7.1",
                    format!(
                        "<{}>: Sender address not owned by {}",
                        from.address, account.address
                    ),
                ));
            }
        }
        let utf8 = from.flags & MAIL_SMTPUTF8 != 0;
        if !utf8 && !from.address.is_ascii() {
            return self.reply(Reply::new(
                553,
                "5.6.7",
                "Non-ASCII address requires SMTPUTF8",
            ));
        }
        self.envelope = Some(Envelope {
            sender: from.address.to_string(),
            utf8,
            recipients: Vec::new(),
            mailboxes: Vec::new(),
            mailbox_rcpts: Vec::new(),
            remote: Vec::new(),
            remote_dsn: Vec::new(),
            local_notify: Vec::new(),
            envid: from.env_id.as_ref().map(|e| e.to_string()),
            ret_full: from.flags & MAIL_RET_FULL != 0,
            forwarder: None,
            started: Instant::now(),
        });
        self.reply(Reply::new(250, "2.1.0", "Sender OK"))
    }

    /// Waits for the DNSBL check if it is still running; the listing
    /// reason if the client is listed.
    async fn blocklist_verdict(&mut self) -> Option<String> {
        if let Blocklist::Pending(_) = self.blocklist {
            let Blocklist::Pending(pending) =
                std::mem::replace(&mut self.blocklist, Blocklist::Unchecked)
            else {
                unreachable!("matched above")
            };
            let outcome = pending.outcome().await;
            let zones: Vec<&str> = outcome.hits.iter().map(|h| h.zone.as_str()).collect();
            if outcome.listed
                || !zones.is_empty()
                || outcome.any_timed_out()
                || !outcome.failed.is_empty()
            {
                tracing::info!(
                    client = %self.peer.ip(),
                    listed = outcome.listed,
                    score = outcome.score,
                    zones = %zones.join(","),
                    timed_out = %outcome.timed_out.join(","),
                    failed = %outcome.failed.join(","),
                    "dnsbl"
                );
            }
            let reason = outcome.listed.then(|| {
                outcome.reason().map(str::to_string).unwrap_or_else(|| {
                    format!(
                        "Client host [{}] blocked using {}",
                        self.peer.ip(),
                        zones.join(", ")
                    )
                })
            });
            self.blocklist = Blocklist::Decided(reason);
        }
        match &self.blocklist {
            Blocklist::Decided(reason) => reason.clone(),
            _ => None,
        }
    }

    async fn rcpt(&mut self, address: &str, dsn: store::RecipientDsn) -> Next {
        if self.envelope.is_none() {
            return self.reply(Reply::new(503, "5.5.1", "Need MAIL before RCPT"));
        }
        // RFC 5321 §4.5.1: postmaster stays reachable, even from listed hosts.
        let postmaster = address.eq_ignore_ascii_case("postmaster")
            || address
                .rsplit_once('@')
                .is_some_and(|(local, _)| local.eq_ignore_ascii_case("postmaster"));
        if !postmaster && self.submission().is_none() {
            if let Some(reason) = self.blocklist_verdict().await {
                return self.reply(Reply::new(554, "5.7.1", reason));
            }
        }
        let Some(env) = self.envelope.as_ref() else {
            return self.reply(Reply::new(503, "5.5.1", "Need MAIL before RCPT"));
        };
        if env.recipients.len() >= self.ctx.config.max_recipients {
            return self.reply(Reply::new(452, "4.5.3", "Too many recipients"));
        }
        if !env.utf8 && !address.is_ascii() {
            return self.reply(Reply::new(
                553,
                "5.6.7",
                "Non-ASCII address requires SMTPUTF8",
            ));
        }
        if let Some(srs) = self.ctx.srs.as_ref().filter(|s| s.is_srs(address)) {
            // A bounce to an address we rewrote: back to the real sender.
            return match srs.reverse(address, crate::srs::today()) {
                Ok(original) => {
                    if let Some(refusal) = self.no_room() {
                        return self.reply(refusal);
                    }
                    let env = self.envelope.as_mut().expect("checked above");
                    env.add_remote(original, &dsn);
                    env.recipients.push(address.to_string());
                    self.reply(Reply::new(250, "2.1.5", "Recipient OK"))
                }
                Err(e) => {
                    tracing::info!(rcpt = %address, error = %e, "recipient refused: SRS");
                    self.reply(Reply::new(550, "5.1.1", format!("<{address}>: {e}")))
                }
            };
        }
        let resolution = self.ctx.directory.get().resolve(address);
        match resolution {
            Resolution::Deliver { mailboxes, remote } => {
                if let Some(refusal) = self.no_room() {
                    return self.reply(refusal);
                }
                let env = self.envelope.as_mut().expect("checked above");
                let mailboxes_empty = mailboxes.is_empty();
                if !remote.is_empty() && env.forwarder.is_none() {
                    env.forwarder = address
                        .rsplit_once('@')
                        .map(|(_, d)| d.to_ascii_lowercase());
                }
                for m in mailboxes {
                    if !env.mailboxes.contains(&m) {
                        env.mailboxes.push(m);
                        env.mailbox_rcpts.push(address.to_string());
                    }
                }
                if !mailboxes_empty && dsn.notify & store::NOTIFY_SUCCESS != 0 {
                    env.local_notify
                        .push((address.to_string(), dsn.orcpt.clone()));
                }
                for r in remote {
                    // An alias target reports as the alias it was sent to
                    // (RFC 3461 §4.2 allows adding ORCPT).
                    let mut dsn = dsn.clone();
                    if dsn.orcpt.is_none() && !r.eq_ignore_ascii_case(address) {
                        dsn.orcpt = Some(address.to_string());
                    }
                    env.add_remote(r, &dsn);
                }
                env.recipients.push(address.to_string());
                self.reply(Reply::new(250, "2.1.5", "Recipient OK"))
            }
            Resolution::UnknownUser => {
                tracing::info!(rcpt = %address, "recipient refused: unknown user");
                self.reply(Reply::new(
                    550,
                    "5.1.1",
                    format!("<{address}>: Recipient address rejected: User unknown"),
                ))
            }
            Resolution::NotLocal if self.account.is_some() => {
                // Submission: an authenticated account may send anywhere.
                let Some(remote) = store::normalize_address(address) else {
                    return self.reply(Reply::new(553, "5.1.3", "Recipient address is not valid"));
                };
                if let Some(refusal) = self.no_room() {
                    return self.reply(refusal);
                }
                let env = self.envelope.as_mut().expect("checked above");
                env.add_remote(remote, &dsn);
                env.recipients.push(address.to_string());
                self.reply(Reply::new(250, "2.1.5", "Recipient OK"))
            }
            Resolution::NotLocal => {
                tracing::info!(rcpt = %address, "recipient refused: relay denied");
                self.reply(Reply::new(
                    550,
                    "5.7.1",
                    format!("<{address}>: Relay access denied"),
                ))
            }
        }
    }

    /// `452 4.3.1` while the store's disk has less free than its reserve:
    /// the client hears it before sending the data, and tries again later
    /// (RFC 5321 §4.2.2 and §4.5.3.1.10, RFC 3463 §3.4). The store's
    /// free-space watch logs the state once; each refusal is not logged.
    fn no_room(&self) -> Option<Reply> {
        self.ctx
            .store
            .space()
            .check()
            .err()
            .map(|_| insufficient_storage())
    }

    async fn reset(&mut self) {
        self.envelope = None;
        if let Some(b) = self.bdat.take() {
            b.writer.abort().await;
        }
        self.shrink_input();
    }

    /// Back to the gate's small buffer once a transaction is over.
    fn shrink_input(&mut self) {
        if self.input.capacity() > self.ctx.config.max_line_length
            && self.input.buffered().len() <= self.ctx.config.max_line_length
        {
            self.input.set_capacity(self.ctx.config.max_line_length);
        }
    }

    /// Why DATA or BDAT cannot start now, if it cannot.
    fn envelope_problem(&self) -> Option<Reply> {
        match &self.envelope {
            None => Some(Reply::new(503, "5.5.1", "Need MAIL first")),
            Some(e) if e.recipients.is_empty() => {
                Some(Reply::new(554, "5.5.1", "No valid recipients"))
            }
            Some(_) => None,
        }
    }

    /// Starts the message: the trust point. The store writer and the larger
    /// buffer exist from here on.
    async fn open_message(
        &mut self,
        id: &str,
    ) -> Result<Box<dyn MessageWriter>, store::StoreError> {
        self.input.set_capacity(DATA_BUFFER);
        let env = self.envelope.as_ref().expect("trusted envelope");
        let trace = Trace {
            helo: self.helo.as_deref().unwrap_or_default(),
            ip: self.peer.ip(),
            hostname: &self.ctx.hostname,
            esmtp: self.esmtp,
            tls: self.tls,
            utf8: env.utf8,
            queue_id: id,
            sender: &env.sender,
            single_recipient: (env.recipients.len() == 1).then(|| env.recipients[0].as_str()),
        };
        let mut writer = self.ctx.store.message_writer();
        writer.write(trace.header().as_bytes()).await?;
        if let Some(field) = self.spf_field.take() {
            writer.write(field.as_bytes()).await?;
        }
        // Our trace fields are written before the header fixer so that it
        // sees only what the client sent.
        let scored = self.ctx.filters.as_ref().is_some_and(|f| f.scores());
        let fixes = match (self.submission(), &self.ctx.message_auth) {
            (Some(_), _) => Some(Fixes::Submission {
                hostname: self.ctx.hostname.clone(),
            }),
            (None, None) if !scored => None,
            (None, auth) => Some(Fixes::Arriving {
                authserv_id: auth.as_ref().map(|a| a.authserv_id().to_string()),
                spam_fields: scored,
            }),
        };
        if let Some(fixes) = fixes {
            let (fixer, seen) = HeaderFix::new(writer, fixes);
            writer = Box::new(fixer);
            self.seen = Some(seen);
        }
        Ok(writer)
    }

    /// What watches a new message: the content scan, and on mail from
    /// other servers the authentication checks.
    fn taps(&self) -> Taps {
        Taps {
            scan: self.ctx.content.as_ref().map(|c| c.start()),
            eight_bit: false,
            head: match (&self.ctx.filters, &self.envelope) {
                (Some(filters), Some(env)) => filters.head(
                    &self.ctx.directory.get(),
                    &env.mailboxes,
                    self.submission().is_none(),
                ),
                _ => None,
            },
            auth: match &self.ctx.message_auth {
                Some(auth) if self.submission().is_none() => {
                    let forwarded = self
                        .envelope
                        .as_ref()
                        .is_some_and(|e| e.forwarder.is_some());
                    Some(if forwarded && auth.seals() {
                        Collector::for_sealing()
                    } else {
                        Collector::default()
                    })
                }
                _ => None,
            },
        }
    }

    /// Checks SPF as the data stage starts (spf.rs): keeps the
    /// `Received-SPF:` field for the message, or returns the refusal.
    /// Authenticated submission is not checked.
    async fn spf_refusal(&mut self) -> Option<Reply> {
        self.spf_field = None;
        self.spf_output = None;
        let check = self.ctx.spf.as_ref()?;
        if self.submission().is_some() {
            return None;
        }
        let sender = self.envelope.as_ref()?.sender.clone();
        let helo = self.helo.clone().unwrap_or_default();
        let verdict = check
            .check(self.peer.ip(), &helo, &sender, &self.ctx.hostname)
            .await;
        tracing::info!(spf = verdict.result, sender = %sender, helo = %helo, "spf");
        if verdict.refuse {
            return Some(Reply::new(
                550,
                "5.7.23",
                format!(
                    "SPF check failed: {} may not send for <{sender}>",
                    self.peer.ip()
                ),
            ));
        }
        self.spf_field = verdict.field;
        self.spf_output = Some(verdict.output);
        None
    }

    async fn data(&mut self) -> Next {
        if self.bdat.is_some() {
            return self.reply(Reply::new(
                503,
                "5.5.1",
                "DATA not allowed during BDAT transfer",
            ));
        }
        if let Some(problem) = self.envelope_problem() {
            return self.reply(problem);
        }
        if let Some(refusal) = self.over_rate() {
            self.envelope = None;
            return self.reply(refusal);
        }
        if let Some(refusal) = self.spf_refusal().await {
            self.envelope = None;
            return self.reply(refusal);
        }
        if let Some(refusal) = self.no_room() {
            self.envelope = None;
            return self.reply(refusal);
        }
        let id = queue_id();
        let mut writer = match self.open_message(&id).await {
            Ok(w) => w,
            Err(e) => return self.local_error(&id, e),
        };
        self.reply(Reply::new(354, "", "End data with <CR><LF>.<CR><LF>"));
        if !self.flush().await {
            return Next::Close;
        }
        let header_size = writer.size();
        let max = self.ctx.config.max_message_size;
        let clock = self.data_clock();
        let mut taps = self.taps();
        let end = data::receive_dot_stuffed(
            &mut self.input,
            &mut self.stream,
            writer.as_mut(),
            &mut taps,
            max + header_size,
            &clock,
        )
        .await;
        self.finish(id, writer, taps, end).await
    }

    /// The time limits of one DATA transfer or BDAT chunk.
    fn data_clock(&self) -> data::DataClock {
        data::DataClock::new(
            Duration::from_secs(self.ctx.config.data_timeout_secs),
            self.ctx.config.min_data_rate,
        )
    }

    async fn bdat(&mut self, size: usize, last: bool) -> Next {
        let timeout = self.data_clock();
        if let Some(problem) = self.envelope_problem() {
            // RFC 3030 §2: the chunk is sent anyway; read it past.
            if data::skip_exact(&mut self.input, &mut self.stream, size as u64, &timeout)
                .await
                .is_err()
            {
                return Next::Close;
            }
            return self.reply(problem);
        }
        let mut bdat = match self.bdat.take() {
            Some(b) => b,
            None => {
                let refusal = match self.over_rate() {
                    Some(r) => Some(r),
                    None => self.spf_refusal().await,
                };
                if let Some(refusal) = refusal {
                    self.envelope = None;
                    if data::skip_exact(&mut self.input, &mut self.stream, size as u64, &timeout)
                        .await
                        .is_err()
                    {
                        return Next::Close;
                    }
                    return self.reply(refusal);
                }
                let id = queue_id();
                match self.open_message(&id).await {
                    Ok(writer) => Bdat {
                        limit: self.ctx.config.max_message_size + writer.size(),
                        id,
                        writer,
                        too_big: false,
                        taps: self.taps(),
                        line_ends: net::LineEnds::default(),
                    },
                    Err(e) => return self.local_error(&id, e),
                }
            }
        };
        let end = if bdat.too_big {
            data::skip_exact(&mut self.input, &mut self.stream, size as u64, &timeout)
                .await
                .map(|_| DataEnd::TooBig)
                .unwrap_or_else(|e| e)
        } else {
            data::receive_exact(
                &mut self.input,
                &mut self.stream,
                bdat.writer.as_mut(),
                &mut bdat.taps,
                &mut bdat.line_ends,
                size as u64,
                bdat.limit,
                last,
                &timeout,
            )
            .await
        };
        match end {
            DataEnd::Complete | DataEnd::TooBig if !last => {
                // Past the limit, keep reading chunks until LAST, then
                // refuse once.
                bdat.too_big |= end == DataEnd::TooBig;
                self.bdat = Some(bdat);
                self.reply(Reply::new(250, "2.0.0", format!("{size} octets received")))
            }
            end => self.finish(bdat.id, bdat.writer, bdat.taps, end).await,
        }
    }

    fn local_error(&mut self, id: &str, e: store::StoreError) -> Next {
        self.envelope = None;
        if e.is_full() {
            tracing::debug!(queue_id = %id, error = %e, "store full");
            return self.reply(insufficient_storage());
        }
        tracing::error!(queue_id = %id, error = %e, "store failed");
        self.reply(Reply::new(
            451,
            "4.3.0",
            "Local error in processing, try again later",
        ))
    }

    /// Ends a transaction after its data: deliver durably, then reply.
    async fn finish(
        &mut self,
        id: String,
        writer: Box<dyn MessageWriter>,
        taps: Taps,
        end: DataEnd,
    ) -> Next {
        let env = self.envelope.take().expect("trusted envelope");
        let size = writer.size();
        let verdict: &str;
        let eight_bit = taps.eight_bit;
        let head = taps.head;
        let mut filter_log = String::new();
        let scanned = match (&end, taps.scan) {
            (DataEnd::Complete, Some(session)) => Some(session.finish()),
            _ => None,
        };
        let refusal = match (&scanned, &self.ctx.content) {
            (Some(Ok(v)), Some(policy)) => policy.judge(v),
            _ => None,
        };
        // DNS lookups only for mail that is otherwise going to be taken.
        let auth = match (&end, taps.auth, &self.ctx.message_auth) {
            (DataEnd::Complete, Some(collector), Some(checker))
                if refusal.is_none() && !matches!(scanned, Some(Err(_))) =>
            {
                let sender = Sender {
                    ip: self.peer.ip(),
                    helo: self.helo.as_deref().unwrap_or_default(),
                    mail_from: &env.sender,
                    spf: self.spf_output.as_ref(),
                    forwarder: env.forwarder.as_deref(),
                };
                Some(checker.check(collector, sender).await)
            }
            _ => None,
        };
        let next = match end {
            DataEnd::Complete if refusal.is_some() => {
                writer.abort().await;
                verdict = "rejected-content";
                self.reply(refusal.expect("checked"))
            }
            DataEnd::Complete if matches!(scanned, Some(Err(_))) => {
                // Never deliver what could not be scanned: the client retries.
                writer.abort().await;
                verdict = "scan-error";
                self.reply(Reply::new(
                    451,
                    "4.3.0",
                    "Content scanner unavailable, try again later",
                ))
            }
            DataEnd::Complete if self.header_sender_refused() => {
                writer.abort().await;
                verdict = "rejected-sender";
                self.reply(Reply::new(
                    553,
                    "5.7.1",
                    "From: header address not owned by the authenticated account",
                ))
            }
            DataEnd::Complete if auth.as_ref().is_some_and(|a| a.reject.is_some()) => {
                writer.abort().await;
                verdict = "rejected-dmarc";
                let text = auth.as_ref().and_then(|a| a.reject.clone());
                self.reply(Reply::new(550, "5.7.1", text.unwrap_or_default()))
            }
            DataEnd::Complete => {
                let quarantine = auth.as_ref().is_some_and(|a| a.quarantine);
                let auth_field = auth.as_ref().map(|a| a.field.clone());
                let plan = self
                    .filter(
                        &env,
                        head,
                        size,
                        quarantine,
                        scanned.is_some(),
                        auth_field.clone(),
                    )
                    .await;
                let mut lead = auth_field.unwrap_or_default();
                if let Ok(Some(fields)) = plan.as_ref().map(|p| p.spam_fields.as_ref()) {
                    lead.push_str(fields);
                }
                let lead = lead.into_bytes();
                match plan {
                    Err(e) => {
                        writer.abort().await;
                        verdict = "store-error";
                        tracing::error!(queue_id = %id, error = %e, "delivery failed");
                        self.reply(Reply::new(
                            451,
                            "4.3.0",
                            "Local error in processing, try again later",
                        ))
                    }
                    Ok(plan)
                        if plan.mailboxes.is_empty()
                            && plan.remote.is_empty()
                            && env.remote.is_empty() =>
                    {
                        writer.abort().await;
                        filter_log = plan.summary.join(" ");
                        if let Some((_, reason)) = plan.rejected.first() {
                            // RFC 5429 §2.1: refused in the protocol when
                            // every recipient's script rejected it.
                            verdict = "rejected-sieve";
                            self.reply(Reply::new(550, "5.7.1", reason.replace(['\r', '\n'], " ")))
                        } else {
                            verdict = "discarded";
                            let directory = self.ctx.directory.get();
                            Filters::after_delivery(&self.ctx.store, &directory, plan).await;
                            self.reply(Reply::new(250, "2.0.0", format!("OK queued as {id}")))
                        }
                    }
                    Ok(plan) => {
                        filter_log = plan.summary.join(" ");
                        let redirected = !plan.remote.is_empty();
                        let mut remote = env.remote.clone();
                        remote.extend(
                            plan.remote
                                .iter()
                                .filter(|r| !env.remote.contains(r))
                                .cloned(),
                        );
                        let delivery = store::Delivery {
                            sender: self.queue_sender(&env, redirected),
                            mailboxes: plan.mailboxes.clone(),
                            mailbox_flags: plan.mailbox_flags.clone(),
                            remote,
                            remote_dsn: env.remote_dsn.clone(),
                            envid: env.envid.clone(),
                            ret_full: env.ret_full,
                            eight_bit,
                            lead,
                            ..Default::default()
                        };
                        match writer.deliver(delivery).await {
                            Ok(receipt) => {
                                self.notify_delivered(&env, receipt.blob);
                                let directory = self.ctx.directory.get();
                                Filters::after_delivery(&self.ctx.store, &directory, plan).await;
                                verdict = if quarantine {
                                    "quarantined"
                                } else {
                                    "accepted"
                                };
                                self.reply(Reply::new(250, "2.0.0", format!("OK queued as {id}")))
                            }
                            Err(e) if e.is_full() => {
                                verdict = "store-full";
                                tracing::debug!(queue_id = %id, error = %e, "delivery failed");
                                self.reply(insufficient_storage())
                            }
                            Err(e) => {
                                verdict = "store-error";
                                tracing::error!(queue_id = %id, error = %e, "delivery failed");
                                self.reply(Reply::new(
                                    451,
                                    "4.3.0",
                                    "Local error in processing, try again later",
                                ))
                            }
                        }
                    }
                }
            }
            DataEnd::TooBig => {
                writer.abort().await;
                verdict = "too-big";
                let max = self.ctx.config.max_message_size;
                self.reply(Reply::new(
                    552,
                    "5.3.4",
                    format!("Message size exceeds fixed limit of {max} bytes"),
                ))
            }
            DataEnd::Timeout => {
                writer.abort().await;
                verdict = "timeout";
                self.reply(Reply::new(
                    421,
                    "4.4.2",
                    format!("{} Timeout during data transfer", self.ctx.hostname),
                ))
            }
            DataEnd::Closed => {
                writer.abort().await;
                verdict = "connection-lost";
                Next::Close
            }
            DataEnd::StoreFailed { full } => {
                writer.abort().await;
                if full {
                    verdict = "store-full";
                    self.reply(insufficient_storage())
                } else {
                    verdict = "store-error";
                    self.reply(Reply::new(
                        451,
                        "4.3.0",
                        "Local error in processing, try again later",
                    ))
                }
            }
        };
        let m = metrics::get();
        metrics::inc(&m.smtp_transactions, "verdict", verdict_label(verdict));
        if verdict == "accepted" || verdict == "quarantined" {
            m.smtp_accepted_bytes.inc_by(size);
        }
        if let Some(scanned) = &scanned {
            let kind = match scanned {
                Ok(scan::Verdict::Clean) => "clean",
                Ok(scan::Verdict::Infected { .. }) => "infected",
                Ok(_) => "unscanned",
                Err(_) => "error",
            };
            metrics::inc(&m.scan_verdicts, "verdict", kind);
            m.scan_bytes.inc_by(size);
        }
        tracing::info!(
            client = %self.peer.ip(),
            helo = self.helo.as_deref().unwrap_or_default(),
            queue_id = %id,
            from = %env.sender,
            rcpts = %env.recipients.join(","),
            size,
            tls = self.tls,
            account = self.account.as_ref().map_or("-", |a| a.address.as_str()),
            verdict = %verdict,
            auth_results = %auth.as_ref().map_or("-", |a| a.summary.as_str()),
            scan = %match &scanned {
                None => "-".to_string(),
                Some(Ok(v)) => v.to_string(),
                Some(Err(e)) => format!("error: {e}"),
            },
            filter = %if filter_log.is_empty() { "-" } else { filter_log.as_str() },
            ms = env.started.elapsed().as_millis() as u64,
            "smtp transaction"
        );
        self.junk = 0;
        self.shrink_input();
        next
    }

    /// Tells the sender of local deliveries it asked to hear of
    /// (NOTIFY=SUCCESS, RFC 3461 §5.2.2).
    fn notify_delivered(&self, env: &Envelope, blob: store::BlobId) {
        let Some(report) = &self.ctx.delivered else {
            return;
        };
        if env.local_notify.is_empty() || env.sender.is_empty() {
            return;
        }
        report(store::DeliveryNotice {
            blob,
            sender: env.sender.clone(),
            envid: env.envid.clone(),
            recipients: env.local_notify.clone(),
        });
    }

    /// Where the message goes: the recipients' INBOXes (Junk when
    /// quarantined), or wherever their Sieve scripts say.
    async fn filter(
        &mut self,
        env: &Envelope,
        head: Option<Head>,
        size: u64,
        quarantine: bool,
        scanned: bool,
        auth_results: Option<String>,
    ) -> store::Result<Plan> {
        let defaults = if quarantine {
            self.ctx
                .store
                .special_use_of(&env.mailboxes, "\\Junk")
                .await?
        } else {
            env.mailboxes.clone()
        };
        let (Some(filters), Some(head)) = (&self.ctx.filters, head) else {
            return Ok(Plan::unfiltered(defaults));
        };
        let recipients = env
            .mailboxes
            .iter()
            .zip(defaults)
            .zip(&env.mailbox_rcpts)
            .map(|((&inbox, default), address)| Recipient {
                inbox,
                default,
                address: address.clone(),
            })
            .collect();
        let input = FilterInput {
            sender: &env.sender,
            recipients,
            size,
            virus: scanned.then_some(1),
            auth: self.account.as_ref().map(|a| a.address.clone()),
            known: self.submission().is_none().then(|| Known {
                dnsbl: match &self.blocklist {
                    Blocklist::Decided(Some(reason)) => vec![reason.clone()],
                    _ => Vec::new(),
                },
                auth_results,
            }),
        };
        let directory = self.ctx.directory.get();
        Ok(filters
            .plan(&self.ctx.store, directory, &self.ctx.hostname, head, input)
            .await)
    }

    /// The envelope sender the queued copies go out with: forwarded mail
    /// from another domain is rewritten with SRS, so the next hop's SPF
    /// check looks at our domain (RFC 7208 §10.1.3).
    fn queue_sender(&self, env: &Envelope, redirected: bool) -> String {
        let Some(srs) = &self.ctx.srs else {
            return env.sender.clone();
        };
        let forwarded = self.submission().is_none() && (redirected || !env.remote.is_empty());
        let foreign = env.sender.rsplit_once('@').is_some_and(|(_, domain)| {
            !self.ctx.directory.get().is_local_domain(domain) && !srs.is_srs(&env.sender)
        });
        if forwarded && foreign {
            srs.forward(&env.sender, crate::srs::today())
        } else {
            env.sender.clone()
        }
    }

    /// A submission over the account's hourly limits, counted otherwise.
    fn over_rate(&self) -> Option<Reply> {
        let s = self.submission()?;
        let account = self.account.as_ref()?;
        let rcpts = self.envelope.as_ref().map_or(0, |e| e.recipients.len()) as u32;
        let ok = s.rates.take(
            account.id,
            rcpts,
            s.config.max_messages_per_hour,
            s.config.max_recipients_per_hour,
            Instant::now(),
        );
        if ok {
            return None;
        }
        tracing::warn!(account = %account.address, "submission rate limit reached");
        Some(Reply::new(
            451,
            "4.7.1",
            format!(
                "Rate limit reached for {}: at most {} messages and {} recipients per hour",
                account.address, s.config.max_messages_per_hour, s.config.max_recipients_per_hour
            ),
        ))
    }

    /// Whether a submitted message's `From:` names an address the account
    /// may not use (`sender_check = "strict"`).
    fn header_sender_refused(&self) -> bool {
        let (Some(s), Some(account)) = (self.submission(), &self.account) else {
            return false;
        };
        if s.config.sender_check != SenderCheck::Strict {
            return false;
        }
        let seen = match &self.seen {
            Some(seen) => seen.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            None => return true,
        };
        let directory = self.ctx.directory.get();
        !seen.complete
            || seen.from.is_empty()
            || seen
                .from
                .iter()
                .any(|a| !submission::may_send_as(&directory, account, a))
    }

    /// AUTH (RFC 4954) with PLAIN or LOGIN.
    async fn auth(&mut self, mechanism: u64, initial: String) -> Next {
        let Some(s) = self.submission() else {
            return self.reply(Reply::new(503, "5.5.1", "AUTH not available on this port"));
        };
        let allowed = self.auth_allowed(s);
        let auth = Arc::clone(&s.auth);
        if self.account.is_some() {
            return self.reply(Reply::new(503, "5.5.1", "Already authenticated"));
        }
        if self.helo.is_none() {
            return self.reply(Reply::new(503, "5.5.1", "Say EHLO first"));
        }
        if self.envelope.is_some() {
            return self.reply(Reply::new(
                503,
                "5.5.1",
                "AUTH not allowed during a mail transaction",
            ));
        }
        if !allowed {
            return self.reply(Reply::new(
                538,
                "5.7.11",
                "Encryption required for requested authentication mechanism",
            ));
        }
        let credentials = match mechanism {
            smtp_proto::AUTH_PLAIN => {
                let response = if initial.is_empty() {
                    match self.challenge("").await {
                        Ok(r) => r,
                        Err(next) => return next,
                    }
                } else {
                    initial
                };
                submission::decode_plain(&response)
            }
            smtp_proto::AUTH_LOGIN => {
                let user = if initial.is_empty() {
                    match self.challenge(&submission::encode("Username:")).await {
                        Ok(r) => submission::decode_line(&r),
                        Err(next) => return next,
                    }
                } else {
                    submission::decode_line(&initial)
                };
                match user {
                    Some(user) => match self.challenge(&submission::encode("Password:")).await {
                        Ok(r) => submission::decode_line(&r).map(|p| (user, p)),
                        Err(next) => return next,
                    },
                    None => None,
                }
            }
            _ => {
                return self.reply(Reply::new(504, "5.5.4", "Unrecognized authentication type"));
            }
        };
        let Some((user, password)) = credentials else {
            return self.reply(Reply::new(501, "5.5.2", "Cannot decode the response"));
        };
        match auth.login(self.peer.ip(), &user, &password).await {
            Ok(account) => {
                tracing::info!(account = %account.address, tls = self.tls, "authenticated");
                self.account = Some(account);
                self.reply(Reply::new(235, "2.7.0", "Authentication successful"))
            }
            Err(store::AuthFailure::Throttled) => self.reply(Reply::new(
                454,
                "4.7.0",
                "Temporary authentication failure: too many failed logins, try later",
            )),
            // RFC 4954 §6: 454 4.7.0 for a failure of the server's own.
            Err(store::AuthFailure::Unavailable) => self.reply(Reply::new(
                454,
                "4.7.0",
                "Temporary authentication failure, try later",
            )),
            Err(e) => {
                // A fixed format an operator can feed to fail2ban.
                tracing::warn!(client = %self.peer.ip(), user = %user, "smtp auth failed: {e}");
                self.reply(Reply::new(
                    535,
                    "5.7.8",
                    "Authentication credentials invalid",
                ))
            }
        }
    }

    /// Sends a `334` challenge and reads the client's line; `*` cancels
    /// (RFC 4954 §4).
    async fn challenge(&mut self, text: &str) -> Result<String, Next> {
        write_multiline(&mut self.out, 334, &[text.to_string()]);
        if !self.flush().await {
            return Err(Next::Close);
        }
        let timeout = Duration::from_secs(self.ctx.config.command_timeout_secs);
        let line = match tokio::time::timeout(timeout, self.input.read_line(&mut self.stream)).await
        {
            Ok(Ok(line)) => String::from_utf8_lossy(line).trim_end().to_string(),
            Ok(Err(LineError::TooLong)) => {
                return Err(self.reply(Reply::new(
                    500,
                    "5.5.6",
                    "Authentication exchange line is too long",
                )))
            }
            _ => return Err(Next::Close),
        };
        if line == "*" {
            return Err(self.reply(Reply::new(501, "5.0.0", "Authentication cancelled")));
        }
        Ok(line)
    }

    async fn starttls(&mut self) -> Next {
        let Some(acceptor) = self.ctx.tls.clone() else {
            return self.reply(Reply::new(502, "5.5.1", "STARTTLS not available"));
        };
        if self.tls {
            return self.reply(Reply::new(503, "5.5.1", "TLS already active"));
        }
        self.reply(Reply::new(220, "2.0.0", "Ready to start TLS"));
        if !self.flush().await {
            return Next::Close;
        }
        // RFC 3207 §4.2: discard anything pipelined after STARTTLS, and
        // forget what the client said before it.
        self.input.clear();
        self.helo = None;
        self.envelope = None;
        self.esmtp = false;
        self.account = None;
        let timeout = Duration::from_secs(self.ctx.config.command_timeout_secs);
        if net::start_tls(&mut self.stream, &acceptor, timeout).await {
            self.tls = true;
            Next::Continue
        } else {
            tracing::info!("TLS handshake failed");
            Next::Close
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_sizes_are_read_however_large() {
        assert_eq!(declared_size(b"MAIL FROM:<a@b> SIZE=1000"), Some(1000));
        assert_eq!(
            declared_size(b"MAIL FROM:<a@b> size=100000000000000000000000"),
            Some(100_000_000_000_000_000_000_000)
        );
        assert_eq!(
            declared_size(&[b"MAIL FROM:<a@b> SIZE=".as_slice(), &[b'9'; 60]].concat()),
            Some(u128::MAX)
        );
        assert_eq!(declared_size(b"MAIL FROM:<a@b>"), None);
        assert_eq!(declared_size(b"MAIL FROM:<a@b> SIZE=12x"), None);
        assert_eq!(
            declared_size("MAIL FROM:<a@b> SIé=1 SIZE=".as_bytes()),
            None
        );
    }

    #[test]
    fn bare_postmaster_is_recognised() {
        assert!(is_bare_postmaster(b"RCPT TO:<Postmaster>"));
        assert!(is_bare_postmaster(b"rcpt to: <postmaster>"));
        assert!(!is_bare_postmaster(b"RCPT TO:<postmaster@example.org>"));
        assert!(!is_bare_postmaster(b"RCPT TO:<>"));
    }
}
