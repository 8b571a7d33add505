//! One POP3 session through its three states (RFC 1939 §3):
//! AUTHORIZATION, TRANSACTION and UPDATE.

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use net::{Input, LineError, Stream};
use store::{AccountId, MailboxId, MessageEntry, Uid};
use tokio::io::AsyncWriteExt;

use crate::lock::MailboxLock;
use crate::server::{plaintext_ok, Context};
use crate::stuffing::Stuffer;

/// RFC 2449 §4: commands are at most 255 octets; AUTH PLAIN initial
/// responses (RFC 5034) can be longer, so allow some room.
const MAX_LINE: usize = 2048;

/// A message as the session sees it: numbered from 1 in the order of the
/// maildrop when the session started (RFC 1939 §5).
struct Message {
    entry: MessageEntry,
    deleted: bool,
}

/// The maildrop of a logged-in session.
struct Maildrop {
    account: AccountId,
    address: String,
    mailbox: MailboxId,
    uid_validity: u32,
    messages: Vec<Message>,
    _lock: MailboxLock,
    /// The lock across the nodes sharing the store.
    _shared_lock: store::MaildropLock,
}

pub(crate) struct Session<'a> {
    ctx: &'a Context,
    stream: Stream,
    peer: SocketAddr,
    tls: bool,
    input: Input,
    out: Vec<u8>,
    user: Option<String>,
    failures: u32,
    maildrop: Option<Maildrop>,
    /// A session that has not logged in by then is closed, however busy
    /// it keeps itself (a command now and then must not keep it open).
    login_deadline: tokio::time::Instant,
}

enum Next {
    Continue,
    Close,
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
            tls,
            input: Input::new(MAX_LINE),
            out: Vec::new(),
            user: None,
            failures: 0,
            maildrop: None,
            login_deadline: tokio::time::Instant::now()
                + Duration::from_secs(ctx.config.idle_timeout_secs),
        }
    }

    fn ok(&mut self, text: &str) {
        self.out
            .extend_from_slice(format!("+OK {text}\r\n").as_bytes());
    }

    fn err(&mut self, text: &str) {
        self.out
            .extend_from_slice(format!("-ERR {text}\r\n").as_bytes());
    }

    async fn flush(&mut self) -> bool {
        let timeout = Duration::from_secs(self.ctx.config.idle_timeout_secs);
        net::send_buffered(&mut self.stream, &mut self.out, timeout, 1024).await
    }

    /// The RFC 1939 §3 state, as the sessions gauge names it (UPDATE
    /// lasts only while QUIT runs).
    fn state_name(&self) -> &'static str {
        if self.maildrop.is_some() {
            "transaction"
        } else {
            "authorization"
        }
    }

    pub(crate) async fn run(&mut self) {
        let greeting = format!("Sluice POP3 server ready on {}", self.ctx.hostname);
        self.ok(&greeting);
        let idle = Duration::from_secs(self.ctx.config.idle_timeout_secs);
        let mut state = metrics::SessionState::new("pop3", self.state_name());
        loop {
            state.set(self.state_name());
            if !self.input.buffered().contains(&b'\n') && !self.flush().await {
                break;
            }
            let line = tokio::select! {
                r = tokio::time::timeout(idle, self.input.read_line(&mut self.stream)) => match r {
                    Ok(Ok(l)) => Ok(l.to_vec()),
                    Ok(Err(e)) => Err(e),
                    Err(_) => {
                        // RFC 1939 §3: the autologout timer closes without UPDATE.
                        self.err("Autologout; idle for too long");
                        break;
                    }
                },
                _ = tokio::time::sleep_until(self.login_deadline), if self.maildrop.is_none() => {
                    self.err("Autologout; no login in time");
                    break;
                }
                _ = self.ctx.shutdown.token.cancelled() => {
                    self.err("[SYS/TEMP] Server shutting down");
                    break;
                }
            };
            let next = match line {
                Ok(line) => self.command(&line).await,
                Err(LineError::TooLong) => {
                    self.err("Line too long");
                    Next::Continue
                }
                Err(_) => break,
            };
            if matches!(next, Next::Close) {
                break;
            }
        }
        self.flush().await;
        let _ = self.stream.shutdown().await;
    }

    async fn command(&mut self, line: &[u8]) -> Next {
        let Ok(text) = std::str::from_utf8(line) else {
            self.err("Invalid characters in command");
            return Next::Continue;
        };
        let text = text.trim_end_matches(['\r', '\n']);
        let (verb, rest) = text.split_once(' ').unwrap_or((text, ""));
        let verb = verb.to_ascii_uppercase();
        metrics::inc(
            &metrics::get().pop3_commands,
            "command",
            command_label(&verb),
        );
        let args: Vec<&str> = rest.split(' ').filter(|a| !a.is_empty()).collect();
        if self.maildrop.is_none() {
            self.authorization(&verb, rest, &args).await
        } else {
            self.transaction(&verb, &args).await
        }
    }

    fn capa(&mut self) {
        self.ok("Capability list follows");
        let mut caps = vec![
            "TOP",
            "UIDL",
            "USER",
            "RESP-CODES",
            "AUTH-RESP-CODE",
            "PIPELINING",
            "SASL PLAIN",
        ];
        if self.ctx.tls.is_some() && !self.tls {
            caps.push("STLS");
        }
        caps.push("IMPLEMENTATION Sluice");
        for c in caps {
            self.out.extend_from_slice(c.as_bytes());
            self.out.extend_from_slice(b"\r\n");
        }
        self.out.extend_from_slice(b".\r\n");
    }

    async fn authorization(&mut self, verb: &str, rest: &str, args: &[&str]) -> Next {
        match verb {
            "CAPA" => self.capa(),
            "QUIT" => {
                self.ok("Bye");
                return Next::Close;
            }
            "STLS" => return self.stls().await,
            "USER" if args.len() == 1 => {
                if !plaintext_ok(&self.ctx.config, self.peer, self.tls) {
                    self.err("[AUTH] Plaintext authentication disallowed on non-secure connections; use STLS");
                } else {
                    self.user = Some(args[0].to_string());
                    self.ok("Send your password");
                }
            }
            "PASS" if !rest.is_empty() => {
                // RFC 1939 §7: the password may contain spaces.
                match self.user.take() {
                    Some(user) => return self.login(&user, rest).await,
                    None => self.err("USER first"),
                }
            }
            "AUTH" => return self.auth(args).await,
            "USER" | "PASS" => self.err("Syntax error"),
            _ => self.err("Unknown command or not allowed before login"),
        }
        Next::Continue
    }

    /// RFC 5034 AUTH PLAIN, with or without an initial response.
    async fn auth(&mut self, args: &[&str]) -> Next {
        let Some(mech) = args.first() else {
            // RFC 5034 §4: AUTH without arguments lists mechanisms.
            self.ok("Supported mechanisms follow");
            self.out.extend_from_slice(b"PLAIN\r\n.\r\n");
            return Next::Continue;
        };
        if !mech.eq_ignore_ascii_case("PLAIN") {
            self.err("Unsupported authentication mechanism");
            return Next::Continue;
        }
        if !plaintext_ok(&self.ctx.config, self.peer, self.tls) {
            self.err(
                "[AUTH] Plaintext authentication disallowed on non-secure connections; use STLS",
            );
            return Next::Continue;
        }
        let response = match args.get(1) {
            Some(r) => r.to_string(),
            None => {
                self.out.extend_from_slice(b"+ \r\n");
                if !self.flush().await {
                    return Next::Close;
                }
                match self.input.read_line(&mut self.stream).await {
                    Ok(l) => String::from_utf8_lossy(l).trim_end().to_string(),
                    Err(_) => return Next::Close,
                }
            }
        };
        if response == "*" {
            self.err("Authentication cancelled");
            return Next::Continue;
        }
        match plain_credentials(&response) {
            Some((user, pass)) => self.login(&user, &pass).await,
            None => {
                self.err("[AUTH] Invalid AUTH PLAIN response");
                Next::Continue
            }
        }
    }

    async fn login(&mut self, user: &str, password: &str) -> Next {
        if !plaintext_ok(&self.ctx.config, self.peer, self.tls) {
            self.err(
                "[AUTH] Plaintext authentication disallowed on non-secure connections; use STLS",
            );
            return Next::Continue;
        }
        let account = match self.ctx.auth.login(self.peer.ip(), user, password).await {
            Ok(a) => a,
            Err(e) => {
                self.failures += 1;
                tracing::info!(
                    user,
                    failures = self.failures,
                    tls = self.tls,
                    "pop3 login failed"
                );
                match e {
                    // RFC 3206: a temporary condition, not the password.
                    store::AuthFailure::Throttled => {
                        self.err("[SYS/TEMP] Too many failed logins; try again later")
                    }
                    store::AuthFailure::BadCredentials => self.err("[AUTH] Authentication failed"),
                    store::AuthFailure::Unavailable => {
                        self.err("[SYS/TEMP] Logging in is not possible right now; try again later")
                    }
                }
                if self.failures >= self.ctx.config.max_auth_failures {
                    self.err("[AUTH] Too many failures, closing connection");
                    return Next::Close;
                }
                return Next::Continue;
            }
        };
        let Some(lock) = self.ctx.locks.acquire(account.id) else {
            // RFC 2449 §8.1.1.
            self.err("[IN-USE] Mailbox is locked by another POP3 session");
            return Next::Continue;
        };
        // Sessions on the other nodes sharing the store.
        let shared_lock = match self.ctx.store.lock_maildrop(account.id).await {
            Ok(Some(l)) => l,
            Ok(None) => {
                self.err("[IN-USE] Mailbox is locked by another POP3 session");
                return Next::Continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "pop3 maildrop lock failed");
                self.err("[SYS/TEMP] Cannot open maildrop");
                return Next::Continue;
            }
        };
        let mailbox = match self.ctx.store.mailbox(account.id, "INBOX").await {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => {
                self.err("[SYS/TEMP] Cannot open maildrop");
                return Next::Continue;
            }
        };
        let messages = match self.ctx.store.list_messages(mailbox.id).await {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(error = %e, "cannot list maildrop");
                self.err("[SYS/TEMP] Cannot open maildrop");
                return Next::Continue;
            }
        };
        let count = messages.len();
        let size: u64 = messages.iter().map(|m| m.size).sum();
        self.maildrop = Some(Maildrop {
            account: account.id,
            address: account.address.clone(),
            mailbox: mailbox.id,
            uid_validity: mailbox.uid_validity,
            messages: messages
                .into_iter()
                .map(|entry| Message {
                    entry,
                    deleted: false,
                })
                .collect(),
            _lock: lock,
            _shared_lock: shared_lock,
        });
        tracing::info!(user = %account.address, count, size, tls = self.tls, "pop3 login");
        self.ok(&format!("Logged in, {count} messages ({size} octets)"));
        Next::Continue
    }

    async fn stls(&mut self) -> Next {
        let Some(acceptor) = self.ctx.tls.clone() else {
            self.err("STLS not available");
            return Next::Continue;
        };
        if self.tls {
            self.err("Already using TLS");
            return Next::Continue;
        }
        self.ok("Begin TLS negotiation");
        if !self.flush().await {
            return Next::Close;
        }
        self.input.clear();
        self.user = None;
        if net::start_tls(&mut self.stream, &acceptor, Duration::from_secs(60)).await {
            self.tls = true;
            Next::Continue
        } else {
            Next::Close
        }
    }

    /// The message numbered `arg` (1-based), if it exists and is not
    /// marked deleted.
    fn message(&self, arg: Option<&&str>) -> Result<(usize, &MessageEntry), &'static str> {
        let drop = self.maildrop.as_ref().expect("logged in");
        let n: usize = arg
            .and_then(|a| a.parse().ok())
            .ok_or("Invalid message number")?;
        match drop.messages.get(n.wrapping_sub(1)) {
            Some(m) if !m.deleted => Ok((n, &m.entry)),
            Some(_) => Err("Message is deleted"),
            None => Err("No such message"),
        }
    }

    fn uidl_of(&self, uid: Uid) -> String {
        let drop = self.maildrop.as_ref().expect("logged in");
        // Unique and never reused while UIDVALIDITY stands (RFC 1939 §7).
        format!("{:08x}{:08x}", drop.uid_validity, uid)
    }

    async fn transaction(&mut self, verb: &str, args: &[&str]) -> Next {
        match verb {
            "STAT" => {
                let drop = self.maildrop.as_ref().expect("logged in");
                let live = drop.messages.iter().filter(|m| !m.deleted);
                let (n, size) = live.fold((0, 0u64), |(n, s), m| (n + 1, s + m.entry.size));
                self.ok(&format!("{n} {size}"));
            }
            "LIST" | "UIDL" => {
                let uidl = verb == "UIDL";
                if args.is_empty() {
                    let drop = self.maildrop.as_ref().expect("logged in");
                    let lines: Vec<(usize, u64, Uid)> = drop
                        .messages
                        .iter()
                        .enumerate()
                        .filter(|(_, m)| !m.deleted)
                        .map(|(i, m)| (i + 1, m.entry.size, m.entry.uid))
                        .collect();
                    self.ok("Listing follows");
                    for (n, size, uid) in lines {
                        let line = if uidl {
                            format!("{n} {}\r\n", self.uidl_of(uid))
                        } else {
                            format!("{n} {size}\r\n")
                        };
                        self.out.extend_from_slice(line.as_bytes());
                    }
                    self.out.extend_from_slice(b".\r\n");
                } else {
                    match self.message(args.first()) {
                        Ok((n, m)) => {
                            let line = if uidl {
                                format!("{n} {}", self.uidl_of(m.uid))
                            } else {
                                format!("{n} {}", m.size)
                            };
                            self.ok(&line);
                        }
                        Err(e) => self.err(e),
                    }
                }
            }
            "RETR" => match self.message(args.first()) {
                Ok((_, m)) => {
                    let (blob, size) = (m.blob, m.size);
                    return self.send_message(blob, size, None).await;
                }
                Err(e) => self.err(e),
            },
            "TOP" => {
                let lines: Option<usize> = args.get(1).and_then(|a| a.parse().ok());
                match (self.message(args.first()), lines) {
                    (Ok((_, m)), Some(lines)) => {
                        let (blob, size) = (m.blob, m.size);
                        return self.send_message(blob, size, Some(lines)).await;
                    }
                    (Err(e), _) => self.err(e),
                    (_, None) => self.err("Syntax: TOP msg lines"),
                }
            }
            "DELE" => match self.message(args.first()) {
                Ok((n, _)) => {
                    self.maildrop.as_mut().expect("logged in").messages[n - 1].deleted = true;
                    self.ok(&format!("Message {n} deleted"));
                }
                Err(e) => self.err(e),
            },
            "RSET" => {
                let drop = self.maildrop.as_mut().expect("logged in");
                drop.messages.iter_mut().for_each(|m| m.deleted = false);
                let n = drop.messages.len();
                self.ok(&format!("{n} messages"));
            }
            "NOOP" => self.ok(""),
            "CAPA" => self.capa(),
            "QUIT" => return self.update().await,
            _ => self.err("Unknown command"),
        }
        Next::Continue
    }

    /// RETR (`lines` = None) or TOP: the message, streamed from the store
    /// piece by piece and byte-stuffed on the way.
    async fn send_message(&mut self, blob: store::BlobId, size: u64, lines: Option<usize>) -> Next {
        let first = match self.ctx.store.read_chunk(blob, 0).await {
            Ok(Some(c)) => c,
            Ok(None) | Err(_) => {
                self.err("[SYS/TEMP] Message cannot be read");
                return Next::Continue;
            }
        };
        self.ok(&format!("{size} octets"));
        let mut stuffer = Stuffer::default();
        let mut top = lines.map(TopCutter::new);
        let mut chunk = first;
        let mut seq = 0;
        loop {
            let piece: &[u8] = match top.as_mut() {
                Some(t) => t.cut(&chunk),
                None => &chunk,
            };
            stuffer.push(piece, &mut self.out);
            if top.as_ref().is_some_and(|t| t.done) {
                break;
            }
            if !self.flush().await {
                return Next::Close;
            }
            seq += 1;
            chunk = match self.ctx.store.read_chunk(blob, seq).await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    // Mid-response there is no way to say -ERR: close.
                    tracing::error!(error = %e, blob, "reading message failed");
                    return Next::Close;
                }
            };
        }
        stuffer.finish(&mut self.out);
        Next::Continue
    }

    /// Enters the UPDATE state: removes the messages marked deleted, then
    /// ends the session (RFC 1939 §6).
    async fn update(&mut self) -> Next {
        let drop = self.maildrop.take().expect("logged in");
        let uids: Vec<Uid> = drop
            .messages
            .iter()
            .filter(|m| m.deleted)
            .map(|m| m.entry.uid)
            .collect();
        match self.ctx.store.expunge(drop.mailbox, &uids).await {
            Ok(()) => {
                tracing::info!(user = %drop.address, account = drop.account, deleted = uids.len(), "pop3 update");
                let left = drop.messages.len() - uids.len();
                self.ok(&format!("Bye, {left} messages left"));
            }
            Err(e) => {
                tracing::error!(error = %e, "pop3 update failed");
                self.err("[SYS/TEMP] Some deleted messages not removed");
            }
        }
        Next::Close
    }
}

/// Cuts a message after its header and `lines` body lines (TOP).
struct TopCutter {
    lines: usize,
    in_body: bool,
    /// The header line read so far is empty or a lone CR: if a LF ends it,
    /// it is the blank line that ends the header.
    blank_so_far: bool,
    /// The lone CR of a blank line has been seen.
    blank_cr: bool,
    done: bool,
}

impl TopCutter {
    fn new(lines: usize) -> TopCutter {
        TopCutter {
            lines,
            in_body: false,
            blank_so_far: true,
            blank_cr: false,
            done: false,
        }
    }

    /// The part of `chunk` that belongs to the response.
    fn cut<'c>(&mut self, chunk: &'c [u8]) -> &'c [u8] {
        let mut end = 0;
        for line in chunk.split_inclusive(|&b| b == b'\n') {
            let ends = line.ends_with(b"\n");
            if self.in_body {
                if self.lines == 0 {
                    self.done = true;
                    break;
                }
                end += line.len();
                if ends {
                    self.lines -= 1;
                }
                continue;
            }
            end += line.len();
            let content = if ends { &line[..line.len() - 1] } else { line };
            for &b in content {
                // Only "" or "\r" stays blank.
                self.blank_so_far =
                    self.blank_so_far && b == b'\r' && !std::mem::replace(&mut self.blank_cr, true);
            }
            if ends {
                self.in_body = self.blank_so_far;
                self.blank_so_far = true;
                self.blank_cr = false;
            }
        }
        if self.in_body && self.lines == 0 {
            self.done = true;
        }
        &chunk[..end]
    }
}

/// The user and password of a SASL PLAIN response (RFC 4616: base64 of
/// authzid NUL authcid NUL passwd; `=` is the empty response). An authzid
/// other than the user is refused.
pub(crate) fn plain_credentials(response: &str) -> Option<(String, String)> {
    let decoded = if response == "=" {
        Vec::new()
    } else {
        base64::engine::general_purpose::STANDARD
            .decode(response.as_bytes())
            .ok()?
    };
    let mut it = decoded.split(|&b| b == 0);
    let authz = it.next()?;
    let user = std::str::from_utf8(it.next()?).ok()?.to_string();
    let pass = std::str::from_utf8(it.next()?).ok()?.to_string();
    if it.next().is_some() || (!authz.is_empty() && authz != user.as_bytes()) {
        return None;
    }
    Some((user, pass))
}

/// A POP3 command name as a static label for metrics; `other` for what
/// RFC 1939, 2449, 5034 and 2595 do not define.
fn command_label(verb: &str) -> &'static str {
    const KNOWN: [&str; 16] = [
        "USER", "PASS", "APOP", "AUTH", "CAPA", "STLS", "STAT", "LIST", "RETR", "DELE", "NOOP",
        "RSET", "QUIT", "TOP", "UIDL", "UTF8",
    ];
    KNOWN
        .iter()
        .find(|k| **k == verb)
        .copied()
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_responses_are_read_as_rfc_4616_says() {
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        assert_eq!(
            plain_credentials(&b64("\0alice@example.org\0pw")),
            Some(("alice@example.org".into(), "pw".into()))
        );
        assert_eq!(
            plain_credentials(&b64("alice@example.org\0alice@example.org\0pw")),
            Some(("alice@example.org".into(), "pw".into()))
        );
        // Another authorization identity, a missing part, too many parts,
        // not base64, the empty response.
        assert_eq!(plain_credentials(&b64("bob\0alice\0pw")), None);
        assert_eq!(plain_credentials(&b64("\0alice")), None);
        assert_eq!(plain_credentials(&b64("\0a\0b\0c")), None);
        assert_eq!(plain_credentials("not base64!"), None);
        assert_eq!(plain_credentials("="), None);
    }

    #[test]
    fn top_keeps_header_and_n_lines_across_pieces() {
        let msg = b"A: 1\r\nB: 2\r\n\r\nl1\r\nl2\r\nl3\r\n";
        for split in 0..msg.len() {
            let mut t = TopCutter::new(2);
            let mut out = t.cut(&msg[..split]).to_vec();
            if !t.done {
                out.extend_from_slice(t.cut(&msg[split..]));
            }
            assert_eq!(out, b"A: 1\r\nB: 2\r\n\r\nl1\r\nl2\r\n", "split at {split}");
        }
        let mut t = TopCutter::new(0);
        assert_eq!(t.cut(msg), b"A: 1\r\nB: 2\r\n\r\n");
    }
}
