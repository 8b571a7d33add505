//! One ManageSieve session through its two states (RFC 5804 §2):
//! non-authenticated (CAPABILITY, STARTTLS, AUTHENTICATE) and
//! authenticated (the script commands).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use net::{Input, LineError, Stream};
use store::{AccountId, ScriptOwner, StoreError};
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::proto::{self, Code, ParseError, Status, Token};
use crate::server::{plaintext_ok, Context};

/// Longest command line, literals aside. Names are at most 512 bytes;
/// a quoted SASL PLAIN response fits with room to spare.
const MAX_LINE: usize = 8192;
/// Literals in one command: PUTSCRIPT has the most, two.
const MAX_LITERALS: usize = 4;
/// Bytes a command may hold besides its script (names, the line).
const COMMAND_ROOM: u64 = 16 * 1024;
/// Timeout of the TLS handshake after STARTTLS.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// The account of a logged-in session.
struct Account {
    id: AccountId,
    address: String,
}

/// A command as read from the client.
enum Read {
    /// Its elements; `oversize` when a literal was over the script size
    /// limit and was dropped (replaced by an empty string).
    Command { tokens: Vec<Token>, oversize: bool },
    /// Not a command; the client's bytes up to its end were consumed.
    Syntax(&'static str),
    /// Reading on would let the client make the server work without
    /// bound: the session ends with this text.
    Abort(&'static str),
}

/// Why reading stopped.
enum ReadError {
    /// A line longer than [`MAX_LINE`], skipped.
    TooLong,
    /// The connection closed or failed.
    Closed,
    /// The client was silent too long, or did not log in in time.
    TimedOut,
}

enum Next {
    Continue,
    Close,
}

pub(crate) struct Session<'a> {
    ctx: &'a Context,
    stream: Stream,
    peer: SocketAddr,
    tls: bool,
    input: Input,
    out: Vec<u8>,
    account: Option<Account>,
    failures: u32,
    /// A session that has not logged in by then is closed, however busy
    /// it keeps itself.
    login_deadline: Instant,
}

impl<'a> Session<'a> {
    pub(crate) fn new(ctx: &'a Context, stream: Stream, peer: SocketAddr) -> Session<'a> {
        Session {
            ctx,
            stream,
            peer,
            tls: false,
            input: Input::new(MAX_LINE),
            out: Vec::new(),
            account: None,
            failures: 0,
            login_deadline: Instant::now() + Duration::from_secs(ctx.config.login_timeout_secs),
        }
    }

    fn respond(&mut self, status: Status, code: Option<Code>, text: &str) {
        proto::write_response(&mut self.out, status, code.as_ref(), text);
    }

    fn ok(&mut self, text: &str) {
        self.respond(Status::Ok, None, text);
    }

    fn no(&mut self, code: Option<Code>, text: &str) {
        self.respond(Status::No, code, text);
    }

    async fn flush(&mut self) -> bool {
        let timeout = Duration::from_secs(self.ctx.config.idle_timeout_secs);
        net::send_buffered(&mut self.stream, &mut self.out, timeout, 4096).await
    }

    pub(crate) async fn run(&mut self) {
        // RFC 5804 §1.7: the greeting is the capability list.
        self.capabilities();
        let greeting = format!("{} ManageSieve ready", self.ctx.hostname);
        self.ok(&greeting);
        let ctx = self.ctx;
        loop {
            if !self.input.buffered().contains(&b'\n') && !self.flush().await {
                break;
            }
            let read = tokio::select! {
                r = self.read_command() => r,
                _ = ctx.shutdown.token.cancelled() => {
                    self.respond(Status::Bye, Some(Code::TryLater), "Server shutting down");
                    break;
                }
            };
            let next = match read {
                Ok(Read::Command { tokens, oversize }) => self.command(tokens, oversize).await,
                Ok(Read::Syntax(why)) => {
                    self.no(None, &format!("Syntax error: {why}"));
                    Next::Continue
                }
                Ok(Read::Abort(why)) => {
                    self.respond(Status::Bye, None, why);
                    Next::Close
                }
                Err(ReadError::TooLong) => {
                    self.no(None, "Line too long");
                    Next::Continue
                }
                Err(ReadError::TimedOut) => {
                    let why = if self.account.is_none() {
                        "No login in time"
                    } else {
                        "Idle for too long"
                    };
                    self.respond(Status::Bye, None, why);
                    Next::Close
                }
                Err(ReadError::Closed) => Next::Close,
            };
            if matches!(next, Next::Close) {
                break;
            }
        }
        self.flush().await;
        let _ = self.stream.shutdown().await;
    }

    /// When the next read must be done by: the idle timeout, and before
    /// login the login deadline too.
    fn read_deadline(&self) -> Instant {
        let idle = Instant::now() + Duration::from_secs(self.ctx.config.idle_timeout_secs);
        match self.account {
            None => idle.min(self.login_deadline),
            Some(_) => idle,
        }
    }

    async fn line(&mut self) -> Result<Vec<u8>, ReadError> {
        let deadline = self.read_deadline();
        match tokio::time::timeout_at(deadline, self.input.read_line(&mut self.stream)).await {
            Ok(Ok(line)) => Ok(line.to_vec()),
            Ok(Err(LineError::TooLong)) => Err(ReadError::TooLong),
            Ok(Err(_)) => Err(ReadError::Closed),
            Err(_) => Err(ReadError::TimedOut),
        }
    }

    /// Reads `n` bytes into `into`, or drops them.
    async fn bytes(&mut self, mut n: u64, mut into: Option<&mut Vec<u8>>) -> Result<(), ReadError> {
        while n > 0 {
            if self.input.buffered().is_empty() {
                let deadline = self.read_deadline();
                match tokio::time::timeout_at(deadline, self.input.fill(&mut self.stream)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => return Err(ReadError::Closed),
                    Ok(Ok(_)) => {}
                    Err(_) => return Err(ReadError::TimedOut),
                }
            }
            let buffered = self.input.buffered();
            let take = (buffered.len() as u64).min(n) as usize;
            if let Some(into) = into.as_deref_mut() {
                into.extend_from_slice(&buffered[..take]);
            }
            self.input.consume(take);
            n -= take as u64;
        }
        Ok(())
    }

    /// A literal so large that reading and dropping it is not worth it.
    fn absurd(&self) -> u64 {
        self.ctx
            .config
            .max_script_size
            .saturating_mul(16)
            .max(1 << 20)
    }

    /// Reads one command: its first line, then each literal and the line
    /// after it. A literal over the script size limit is read and
    /// dropped; one beyond all reason ends the session.
    async fn read_command(&mut self) -> Result<Read, ReadError> {
        let mut buf = self.line().await?;
        let limit = self.ctx.config.max_script_size;
        let mut oversize = false;
        let mut literals = 0;
        loop {
            match proto::parse_command(&buf) {
                Ok(tokens) => return Ok(Read::Command { tokens, oversize }),
                Err(ParseError::Syntax(why)) => {
                    // The client sends a literal it announced whatever we
                    // think of the line: skip it, so its bytes are not
                    // taken for commands.
                    let mut last = buf;
                    while let Some(size) = proto::trailing_literal(&last) {
                        literals += 1;
                        if literals > MAX_LITERALS || size > self.absurd() {
                            return Ok(Read::Abort("Too much data in a malformed command"));
                        }
                        self.bytes(size, None).await?;
                        last = self.line().await?;
                    }
                    return Ok(Read::Syntax(why));
                }
                Err(ParseError::NeedLiteral { size, marker }) => {
                    literals += 1;
                    if literals > MAX_LITERALS {
                        return Ok(Read::Abort("Too many literals in one command"));
                    }
                    if size > limit || buf.len() as u64 + size > limit + COMMAND_ROOM {
                        if size > self.absurd() {
                            return Ok(Read::Abort("Literal too large"));
                        }
                        self.bytes(size, None).await?;
                        buf.truncate(marker);
                        buf.extend_from_slice(b"\"\"");
                        oversize = true;
                    } else {
                        self.bytes(size, Some(&mut buf)).await?;
                    }
                    let line = match self.line().await {
                        Err(ReadError::TooLong) => return Ok(Read::Syntax("line too long")),
                        other => other?,
                    };
                    buf.extend_from_slice(&line);
                }
            }
        }
    }

    async fn command(&mut self, tokens: Vec<Token>, oversize: bool) -> Next {
        let Some(Token::Atom(name)) = tokens.first() else {
            self.no(None, "Syntax error: a command starts with its name");
            return Next::Continue;
        };
        let verb = name.to_ascii_uppercase();
        let args = &tokens[1..];
        if oversize {
            let limit = self.ctx.config.max_script_size;
            if verb == "PUTSCRIPT" {
                let script = args.first().and_then(text).unwrap_or_default();
                self.log_change("PUTSCRIPT", &script, "refused: too large");
            }
            self.no(
                Some(Code::QuotaMaxSize),
                &format!("Script too large: at most {limit} bytes"),
            );
            return Next::Continue;
        }
        let logged_in = self.account.is_some();
        match (verb.as_str(), logged_in) {
            ("CAPABILITY", _) => {
                self.capabilities();
                self.ok("Capability completed");
            }
            ("LOGOUT", _) => {
                self.ok("Logout completed");
                return Next::Close;
            }
            // RFC 5804 §2.11: NOOP, with a tag echoed back.
            ("NOOP", _) => match args {
                [] => self.ok("Done"),
                [Token::Str(tag)] => {
                    let tag = tag.clone();
                    self.respond(Status::Ok, Some(Code::Tag(tag)), "Done");
                }
                _ => self.no(None, "Syntax: NOOP [tag]"),
            },
            ("STARTTLS", false) => return self.starttls().await,
            ("AUTHENTICATE", false) => return self.authenticate(args).await,
            ("STARTTLS" | "AUTHENTICATE", true) => self.no(None, "Already logged in"),
            ("UNAUTHENTICATE", true) => {
                // RFC 5804 §2.14.1: back to the non-authenticated state.
                if let Some(a) = self.account.take() {
                    tracing::info!(user = %a.address, "managesieve unauthenticate");
                }
                self.login_deadline =
                    Instant::now() + Duration::from_secs(self.ctx.config.login_timeout_secs);
                self.ok("Unauthenticated");
            }
            ("HAVESPACE", true) => self.havespace(args).await,
            ("PUTSCRIPT", true) => self.putscript(args).await,
            ("CHECKSCRIPT", true) => self.checkscript(args).await,
            ("LISTSCRIPTS", true) => self.listscripts(args).await,
            ("GETSCRIPT", true) => self.getscript(args).await,
            ("SETACTIVE", true) => self.setactive(args).await,
            ("DELETESCRIPT", true) => self.deletescript(args).await,
            ("RENAMESCRIPT", true) => self.renamescript(args).await,
            (
                "UNAUTHENTICATE" | "HAVESPACE" | "PUTSCRIPT" | "CHECKSCRIPT" | "LISTSCRIPTS"
                | "GETSCRIPT" | "SETACTIVE" | "DELETESCRIPT" | "RENAMESCRIPT",
                false,
            ) => self.no(None, "Log in first (AUTHENTICATE)"),
            _ => self.no(None, "Unknown command"),
        }
        Next::Continue
    }

    /// The capability list (RFC 5804 §1.7), without the OK after it.
    fn capabilities(&mut self) {
        let ctx = self.ctx;
        let sasl = if plaintext_ok(&ctx.config, self.peer, self.tls) {
            "PLAIN"
        } else {
            // Allowed only with STARTTLS on offer (§1.7).
            ""
        };
        let mut caps: Vec<(&str, Option<String>)> = vec![
            ("IMPLEMENTATION", Some("Sluice".into())),
            ("SASL", Some(sasl.into())),
            ("SIEVE", Some(ctx.language.extensions.join(" "))),
        ];
        if ctx.tls.is_some() && !self.tls && self.account.is_none() {
            caps.push(("STARTTLS", None));
        }
        if let Some(n) = ctx.language.max_redirects {
            caps.push(("MAXREDIRECTS", Some(n.to_string())));
        }
        if let Some(a) = &self.account {
            caps.push(("OWNER", Some(a.address.clone())));
        }
        caps.push(("UNAUTHENTICATE", None));
        caps.push(("VERSION", Some("1.0".into())));
        for (name, value) in caps {
            proto::write_string(&mut self.out, name.as_bytes(), false);
            if let Some(v) = value {
                self.out.push(b' ');
                proto::write_string(&mut self.out, v.as_bytes(), false);
            }
            self.out.extend_from_slice(b"\r\n");
        }
    }

    /// RFC 5804 §2.2: after the handshake the server sends its
    /// capabilities again, unasked.
    async fn starttls(&mut self) -> Next {
        let Some(acceptor) = self.ctx.tls.clone() else {
            self.no(None, "STARTTLS not available");
            return Next::Continue;
        };
        if self.tls {
            self.no(None, "Already using TLS");
            return Next::Continue;
        }
        self.ok("Begin TLS negotiation now");
        if !self.flush().await {
            return Next::Close;
        }
        // RFC 3207 §4.2 and its kin: nothing sent before the handshake
        // counts after it.
        self.input.clear();
        if !net::start_tls(&mut self.stream, &acceptor, HANDSHAKE_TIMEOUT).await {
            return Next::Close;
        }
        self.tls = true;
        self.capabilities();
        self.ok("TLS negotiation successful");
        Next::Continue
    }

    /// RFC 5804 §2.1 AUTHENTICATE "PLAIN", with an initial response or
    /// after an empty challenge.
    async fn authenticate(&mut self, args: &[Token]) -> Next {
        let (mech, initial) = match args {
            [m] => (m, None),
            [m, Token::Str(r)] => (m, Some(r.clone())),
            _ => {
                self.no(None, "Syntax: AUTHENTICATE mechanism [initial-response]");
                return Next::Continue;
            }
        };
        let mech = match mech {
            Token::Atom(a) => a.as_bytes(),
            Token::Str(s) => s.as_slice(),
        };
        if !mech.eq_ignore_ascii_case(b"PLAIN") {
            self.no(None, "Unsupported authentication mechanism");
            return Next::Continue;
        }
        if !plaintext_ok(&self.ctx.config, self.peer, self.tls) {
            self.no(
                Some(Code::EncryptNeeded),
                "Passwords only over TLS: use STARTTLS first",
            );
            return Next::Continue;
        }
        let response = match initial {
            Some(r) => r,
            None => {
                self.out.extend_from_slice(b"\"\"\r\n");
                if !self.flush().await {
                    return Next::Close;
                }
                match self.read_command().await {
                    Ok(Read::Command {
                        tokens,
                        oversize: false,
                    }) => match <[Token; 1]>::try_from(tokens) {
                        Ok([Token::Str(r)]) => r,
                        _ => {
                            self.no(None, "Expected one string as the response");
                            return Next::Continue;
                        }
                    },
                    Ok(Read::Command { .. }) | Ok(Read::Syntax(_)) | Err(ReadError::TooLong) => {
                        self.no(None, "Malformed authentication response");
                        return Next::Continue;
                    }
                    Ok(Read::Abort(why)) => {
                        self.respond(Status::Bye, None, why);
                        return Next::Close;
                    }
                    Err(_) => return Next::Close,
                }
            }
        };
        if response == b"*" {
            self.no(None, "Authentication cancelled");
            return Next::Continue;
        }
        let credentials = std::str::from_utf8(&response)
            .map_err(|_| "Invalid PLAIN response")
            .and_then(plain_credentials);
        match credentials {
            Ok((user, password)) => self.login(&user, &password).await,
            Err(why) => {
                self.no(None, why);
                Next::Continue
            }
        }
    }

    async fn login(&mut self, user: &str, password: &str) -> Next {
        match self.ctx.auth.login(self.peer.ip(), user, password).await {
            Ok(account) => {
                tracing::info!(user = %account.address, tls = self.tls, "managesieve login");
                self.account = Some(Account {
                    id: account.id,
                    address: account.address,
                });
                self.ok("Logged in");
                Next::Continue
            }
            Err(e) => {
                self.failures += 1;
                tracing::info!(
                    user,
                    failures = self.failures,
                    tls = self.tls,
                    "managesieve login failed"
                );
                match e {
                    store::AuthFailure::Throttled => self.no(
                        Some(Code::TryLater),
                        "Too many failed logins; try again later",
                    ),
                    store::AuthFailure::BadCredentials => self.no(None, "Authentication failed"),
                    store::AuthFailure::Unavailable => self.no(
                        Some(Code::TryLater),
                        "Logging in is not possible right now; try again later",
                    ),
                }
                if self.failures >= self.ctx.config.max_auth_failures {
                    self.respond(Status::Bye, None, "Too many failed logins");
                    return Next::Close;
                }
                Next::Continue
            }
        }
    }

    fn owner(&self) -> ScriptOwner {
        ScriptOwner::Account(self.account.as_ref().expect("logged in").id)
    }

    /// One line per change an operator may look for.
    fn log_change(&self, command: &str, script: &str, result: &str) {
        let user = self.account.as_ref().map_or("", |a| a.address.as_str());
        tracing::info!(user, command, script, result, "managesieve change");
    }

    /// The answer to a store error; a failure of the store itself is
    /// logged and told as temporary.
    fn store_refusal(&mut self, e: &StoreError) {
        match e {
            StoreError::NotFound(_) => self.no(Some(Code::Nonexistent), "No such script"),
            StoreError::Exists(_) => {
                self.no(Some(Code::AlreadyExists), "A script of that name exists")
            }
            StoreError::InUse(_) => self.no(
                Some(Code::Active),
                "The script is active; deactivate it first",
            ),
            StoreError::Invalid(why) => {
                let why = why.clone();
                self.no(None, &why)
            }
            other => {
                tracing::error!(error = %other, "managesieve store failure");
                self.no(Some(Code::TryLater), "Temporary failure; try again later")
            }
        }
    }

    /// Runs the compiler off the runtime's threads.
    async fn check(&self, source: String) -> Result<(), String> {
        let check = Arc::clone(&self.ctx.language.check);
        tokio::task::spawn_blocking(move || check(&source))
            .await
            .unwrap_or_else(|_| Err("internal error while checking the script".into()))
    }

    /// The account's scripts, or `None` after answering a store failure.
    async fn scripts(&mut self) -> Option<Vec<store::SieveScriptInfo>> {
        match self.ctx.store.sieve_scripts(self.owner()).await {
            Ok(s) => Some(s),
            Err(e) => {
                self.store_refusal(&e);
                None
            }
        }
    }

    /// Whether a script of `size` bytes named `name` fits the limits;
    /// refuses it if not. `None` after a store failure.
    async fn fits(&mut self, name: &str, size: u64) -> Option<bool> {
        let max = self.ctx.config.max_script_size;
        if size > max {
            self.no(
                Some(Code::QuotaMaxSize),
                &format!("Script too large: at most {max} bytes"),
            );
            return Some(false);
        }
        let scripts = self.scripts().await?;
        let max = self.ctx.config.max_scripts;
        if !scripts.iter().any(|s| s.name == name) && scripts.len() >= max {
            self.no(
                Some(Code::QuotaMaxScripts),
                &format!("Too many scripts: at most {max}"),
            );
            return Some(false);
        }
        Some(true)
    }

    /// RFC 5804 §2.5.
    async fn havespace(&mut self, args: &[Token]) {
        let (name, size) = match args {
            [Token::Str(n), Token::Atom(size)] => (n, size.parse::<u64>().ok()),
            _ => (&Vec::new(), None),
        };
        let (Ok(name), Some(size)) = (script_name(name), size) else {
            self.no(None, "Syntax: HAVESPACE name size");
            return;
        };
        if self.fits(&name, size).await == Some(true) {
            self.ok("Putscript would succeed");
        }
    }

    /// RFC 5804 §2.6: the script is compiled first; a script that does
    /// not compile is not stored.
    async fn putscript(&mut self, args: &[Token]) {
        let [Token::Str(name), Token::Str(source)] = args else {
            self.no(None, "Syntax: PUTSCRIPT name script");
            return;
        };
        let name = match script_name(name) {
            Ok(n) => n,
            Err(why) => {
                self.no(None, why);
                return;
            }
        };
        let Ok(source) = String::from_utf8(source.clone()) else {
            self.log_change("PUTSCRIPT", &name, "refused: not UTF-8");
            self.no(None, "A script is UTF-8 text");
            return;
        };
        match self.fits(&name, source.len() as u64).await {
            Some(true) => {}
            Some(false) => {
                self.log_change("PUTSCRIPT", &name, "refused: quota");
                return;
            }
            None => return,
        }
        if let Err(why) = self.check(source.clone()).await {
            self.log_change("PUTSCRIPT", &name, "refused: does not compile");
            self.no(None, &why);
            return;
        }
        match self
            .ctx
            .store
            .put_sieve_script(self.owner(), &name, &source)
            .await
        {
            Ok(()) => {
                self.log_change("PUTSCRIPT", &name, "stored");
                self.ok("Script stored");
            }
            Err(e) => {
                self.log_change("PUTSCRIPT", &name, "refused by the store");
                self.store_refusal(&e);
            }
        }
    }

    /// RFC 5804 §2.12: compile only.
    async fn checkscript(&mut self, args: &[Token]) {
        let [Token::Str(source)] = args else {
            self.no(None, "Syntax: CHECKSCRIPT script");
            return;
        };
        let max = self.ctx.config.max_script_size;
        if source.len() as u64 > max {
            self.no(
                Some(Code::QuotaMaxSize),
                &format!("Script too large: at most {max} bytes"),
            );
            return;
        }
        let Ok(source) = String::from_utf8(source.clone()) else {
            self.no(None, "A script is UTF-8 text");
            return;
        };
        match self.check(source).await {
            Ok(()) => self.ok("Script is valid"),
            Err(why) => self.no(None, &why),
        }
    }

    /// RFC 5804 §2.7.
    async fn listscripts(&mut self, args: &[Token]) {
        if !args.is_empty() {
            self.no(None, "Syntax: LISTSCRIPTS");
            return;
        }
        let Some(scripts) = self.scripts().await else {
            return;
        };
        for s in scripts {
            proto::write_string(&mut self.out, s.name.as_bytes(), false);
            if s.active {
                self.out.extend_from_slice(b" ACTIVE");
            }
            self.out.extend_from_slice(b"\r\n");
        }
        self.ok("Listscripts completed");
    }

    /// RFC 5804 §2.9: the script as a literal.
    async fn getscript(&mut self, args: &[Token]) {
        let [Token::Str(name)] = args else {
            self.no(None, "Syntax: GETSCRIPT name");
            return;
        };
        let Ok(name) = script_name(name) else {
            self.no(Some(Code::Nonexistent), "No such script");
            return;
        };
        match self.ctx.store.sieve_script(self.owner(), &name).await {
            Ok(Some(source)) => {
                self.out
                    .extend_from_slice(format!("{{{}}}\r\n", source.len()).as_bytes());
                self.out.extend_from_slice(source.as_bytes());
                self.out.extend_from_slice(b"\r\n");
                self.ok("Getscript completed");
            }
            Ok(None) => self.no(Some(Code::Nonexistent), "No such script"),
            Err(e) => self.store_refusal(&e),
        }
    }

    /// RFC 5804 §2.8: `""` deactivates.
    async fn setactive(&mut self, args: &[Token]) {
        let [Token::Str(name)] = args else {
            self.no(None, "Syntax: SETACTIVE name");
            return;
        };
        let name = if name.is_empty() {
            None
        } else {
            match script_name(name) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.no(Some(Code::Nonexistent), "No such script");
                    return;
                }
            }
        };
        let account = self.account.as_ref().expect("logged in").id;
        let shown = name.clone().unwrap_or_default();
        match self
            .ctx
            .store
            .activate_sieve_script(account, name.as_deref())
            .await
        {
            Ok(()) => {
                let result = if name.is_some() {
                    "activated"
                } else {
                    "deactivated"
                };
                self.log_change("SETACTIVE", &shown, result);
                self.ok("Setactive completed");
            }
            Err(e) => {
                self.log_change("SETACTIVE", &shown, "refused");
                self.store_refusal(&e);
            }
        }
    }

    /// RFC 5804 §2.10: not the active script.
    async fn deletescript(&mut self, args: &[Token]) {
        let [Token::Str(name)] = args else {
            self.no(None, "Syntax: DELETESCRIPT name");
            return;
        };
        let Ok(name) = script_name(name) else {
            self.no(Some(Code::Nonexistent), "No such script");
            return;
        };
        match self
            .ctx
            .store
            .delete_sieve_script(self.owner(), &name)
            .await
        {
            Ok(()) => {
                self.log_change("DELETESCRIPT", &name, "deleted");
                self.ok("Deletescript completed");
            }
            Err(e) => {
                self.log_change("DELETESCRIPT", &name, "refused");
                self.store_refusal(&e);
            }
        }
    }

    /// RFC 5804 §2.11.1.
    async fn renamescript(&mut self, args: &[Token]) {
        let [Token::Str(from), Token::Str(to)] = args else {
            self.no(None, "Syntax: RENAMESCRIPT old-name new-name");
            return;
        };
        let Ok(from) = script_name(from) else {
            self.no(Some(Code::Nonexistent), "No such script");
            return;
        };
        let to = match script_name(to) {
            Ok(n) => n,
            Err(why) => {
                self.no(None, why);
                return;
            }
        };
        match self
            .ctx
            .store
            .rename_sieve_script(self.owner(), &from, &to)
            .await
        {
            Ok(()) => {
                self.log_change("RENAMESCRIPT", &format!("{from} -> {to}"), "renamed");
                self.ok("Renamescript completed");
            }
            Err(e) => {
                self.log_change("RENAMESCRIPT", &format!("{from} -> {to}"), "refused");
                self.store_refusal(&e);
            }
        }
    }
}

/// A string argument as text, for logs.
fn text(t: &Token) -> Option<String> {
    match t {
        Token::Str(s) => Some(String::from_utf8_lossy(s).into_owned()),
        Token::Atom(a) => Some(a.clone()),
    }
}

/// RFC 5804 §1.6: a script name is UTF-8 without control characters
/// (nor the line and paragraph separators); the store bounds its length.
fn script_name(raw: &[u8]) -> Result<String, &'static str> {
    let name = std::str::from_utf8(raw).map_err(|_| "A script name is UTF-8")?;
    let bad = |c: char| c.is_control() || c == '\u{2028}' || c == '\u{2029}';
    if name.is_empty() || name.len() > 512 || name.chars().any(bad) {
        return Err("Not a valid script name");
    }
    Ok(name.to_string())
}

/// A SASL PLAIN response read by the decoder every protocol shares, with
/// the reason it was refused in words for a `NO`.
pub(crate) fn plain_credentials(response: &str) -> Result<(String, String), &'static str> {
    store::decode_plain(response).map_err(|e| match e {
        store::PlainError::Malformed => "Invalid PLAIN response",
        store::PlainError::ForeignAuthorization => {
            "Authorization identity must be empty or the user's own"
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn plain_responses_are_read_as_rfc_4616_says() {
        let b64 = |t: &str| base64::engine::general_purpose::STANDARD.encode(t);
        assert_eq!(
            plain_credentials(&b64("\0ann@example.org\0pw")),
            Ok(("ann@example.org".into(), "pw".into()))
        );
        assert_eq!(
            plain_credentials(&b64("ann@example.org\0ann@example.org\0pw")),
            Ok(("ann@example.org".into(), "pw".into()))
        );
        assert!(plain_credentials(&b64("bob\0ann\0pw"))
            .unwrap_err()
            .contains("Authorization"));
        assert!(plain_credentials(&b64("\0ann")).is_err());
        assert!(plain_credentials(&b64("\0a\0b\0c")).is_err());
        assert!(plain_credentials("not base64!").is_err());
        assert!(plain_credentials("").is_err());
    }

    #[test]
    fn script_names_follow_rfc_5804() {
        assert_eq!(
            script_name("vacation ü".as_bytes()),
            Ok("vacation ü".into())
        );
        for bad in [&b""[..], b"a\nb", b"a\0b", b"\xff", "a\u{2028}".as_bytes()] {
            assert!(script_name(bad).is_err(), "{bad:?}");
        }
    }
}
