//! STARTTLS (RFC 3501 §6.2.1), LOGIN and AUTHENTICATE PLAIN (RFC 4616,
//! with RFC 4959 SASL-IR).

use base64::Engine;
use imap_codec::imap_types::auth::AuthMechanism;
use imap_codec::imap_types::core::Tag;

use crate::framing::{self, ReadError};
use crate::reply::Reply;
use crate::server::plaintext_ok;
use crate::session::{code, Account, Next, Session};

impl Session<'_> {
    pub(crate) async fn starttls(&mut self, tag: &Tag<'static>) -> store::Result<Next> {
        let Some(acceptor) = self.ctx.tls.clone() else {
            self.out.no(Some(tag), None, "STARTTLS is not available");
            return Ok(Next::Continue);
        };
        if self.tls {
            self.out.bad(Some(tag), None, "TLS is already active");
            return Ok(Next::Continue);
        }
        self.out.ok(Some(tag), None, "Begin TLS negotiation now");
        if !self.flush().await {
            return Ok(Next::Close);
        }
        // RFC 3501 §6.2.1: nothing sent before the handshake counts after it.
        self.input.clear();
        if net::start_tls(
            &mut self.stream,
            &acceptor,
            std::time::Duration::from_secs(60),
        )
        .await
        {
            self.tls = true;
            Ok(Next::Continue)
        } else {
            Ok(Next::Close)
        }
    }

    pub(crate) async fn login(&mut self, user: &str, password: &str) -> Reply {
        if !plaintext_ok(&self.ctx.config, self.peer, self.tls) {
            return Reply::no(
                "Plaintext authentication disallowed on non-secure connections; use STARTTLS",
            )
            .code(code("PRIVACYREQUIRED"));
        }
        match self.ctx.auth.login(self.peer.ip(), user, password).await {
            Ok(account) => {
                tracing::info!(user = %account.address, tls = self.tls, "imap login");
                self.account = Some(Account {
                    id: account.id,
                    address: account.address,
                });
                let code = self.capability_code();
                let reply = Reply::ok("Logged in");
                match code {
                    Some(c) => reply.code(c),
                    None => reply,
                }
            }
            // RFC 5530 §3: UNAVAILABLE, a subsystem is down for now.
            Err(store::AuthFailure::Unavailable) => {
                Reply::no("Logging in is not possible right now; try again later")
                    .code(code("UNAVAILABLE"))
            }
            Err(store::AuthFailure::Throttled) => {
                self.failures += 1;
                let reply =
                    Reply::no("Too many failed logins; try again later").code(code("UNAVAILABLE"));
                if self.failures >= self.ctx.config.max_auth_failures {
                    self.out.bye(None, "Too many failed logins");
                    return reply.close();
                }
                reply
            }
            Err(store::AuthFailure::BadCredentials) => {
                self.failures += 1;
                tracing::info!(
                    user,
                    failures = self.failures,
                    tls = self.tls,
                    "imap login failed"
                );
                let reply = Reply::no("Authentication failed").code(code("AUTHENTICATIONFAILED"));
                if self.failures >= self.ctx.config.max_auth_failures {
                    self.out.bye(None, "Too many failed logins");
                    reply.close()
                } else {
                    reply
                }
            }
        }
    }

    pub(crate) async fn authenticate(
        &mut self,
        _tag: &Tag<'static>,
        mechanism: AuthMechanism<'_>,
        initial: Option<Vec<u8>>,
    ) -> Reply {
        if !matches!(mechanism, AuthMechanism::Plain) {
            return Reply::no("Unsupported authentication mechanism");
        }
        if !plaintext_ok(&self.ctx.config, self.peer, self.tls) {
            return Reply::no(
                "Plaintext authentication disallowed on non-secure connections; use STARTTLS",
            )
            .code(code("PRIVACYREQUIRED"));
        }
        let response =
            match initial {
                Some(r) => r,
                None => {
                    self.out.raw(b"+ \r\n");
                    if !self.flush().await {
                        return Reply::bad("Connection lost").close();
                    }
                    let timeout = self.timeout();
                    let line =
                        match framing::read_rest(&mut self.input, &mut self.stream, 8192, timeout)
                            .await
                        {
                            Ok(l) => l,
                            Err(ReadError::Closed | ReadError::Timeout) => {
                                return Reply::bad("Connection lost").close()
                            }
                        };
                    let line = trim_crlf(&line);
                    if line == b"*" {
                        return Reply::bad("Authentication cancelled");
                    }
                    match base64::engine::general_purpose::STANDARD.decode(line) {
                        Ok(r) => r,
                        Err(_) => return Reply::bad("Invalid base64 in authentication response"),
                    }
                }
            };
        // authzid NUL authcid NUL passwd
        let mut parts = response.split(|&b| b == 0);
        let (Some(authz), Some(user), Some(pass), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Reply::bad("Malformed PLAIN response");
        };
        let (Ok(authz), Ok(user), Ok(pass)) = (
            std::str::from_utf8(authz),
            std::str::from_utf8(user),
            std::str::from_utf8(pass),
        ) else {
            return Reply::bad("Malformed PLAIN response");
        };
        if !authz.is_empty() && !authz.eq_ignore_ascii_case(user) {
            return Reply::no("Logging in as another user is not allowed")
                .code(code("AUTHORIZATIONFAILED"));
        }
        self.login(user, pass).await
    }
}

pub(crate) fn trim_crlf(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}
