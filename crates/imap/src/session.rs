//! One IMAP session through its states (RFC 3501 §3): not authenticated,
//! authenticated, selected, logout.

use std::net::SocketAddr;
use std::time::Duration;

use imap_codec::decode::{CommandDecodeError, Decoder};
use imap_codec::imap_types::auth::AuthMechanism;
use imap_codec::imap_types::command::{Command, CommandBody};
use imap_codec::imap_types::core::{Tag, Vec1};
use imap_codec::imap_types::extensions::quota::Resource;
use imap_codec::imap_types::mailbox::Mailbox;
use imap_codec::imap_types::response::{Capability, Code};
use imap_codec::imap_types::IntoStatic;
use imap_codec::CommandCodec;
use net::{Input, Stream};
use store::{AccountId, StoreError};

use crate::framing::{self, Frame, ReadError};
use crate::out::Out;
use crate::search;
use crate::selected::Selected;
use crate::server::{plaintext_ok, Context};

/// Input buffer per session; commands longer than this are gathered in a
/// separate buffer, so an idle session costs only this much.
const INPUT_BUFFER: usize = 4096;

/// Who is logged in.
pub(crate) struct Account {
    pub(crate) id: AccountId,
    pub(crate) address: String,
}

pub(crate) struct Session<'a> {
    pub(crate) ctx: &'a Context,
    pub(crate) stream: Stream,
    pub(crate) peer: SocketAddr,
    pub(crate) tls: bool,
    pub(crate) input: Input,
    pub(crate) out: Out,
    pub(crate) account: Option<Account>,
    pub(crate) selected: Option<Selected>,
    /// RFC 7162: CONDSTORE enabled (ENABLE, SELECT (CONDSTORE), or a
    /// CONDSTORE-only command).
    pub(crate) condstore: bool,
    pub(crate) failures: u32,
}

/// What the session does after a command.
pub(crate) enum Next {
    Continue,
    Close,
}

/// Whether `head` (a command up to a literal announcement) is an APPEND
/// whose message that literal is: decoding it with an empty message in
/// place of the literal succeeds exactly then.
fn is_append_message(head: &[u8]) -> bool {
    let mut probe = head.to_vec();
    probe.extend_from_slice(b"{0}\r\n\r\n");
    matches!(
        CommandCodec::default().decode(&probe),
        Ok((
            _,
            Command {
                body: CommandBody::Append { .. },
                ..
            }
        ))
    )
}

/// The tag of a command that could not be parsed, if it has a valid one.
pub(crate) fn tag_of(bytes: &[u8]) -> Option<Tag<'static>> {
    let end = bytes
        .iter()
        .position(|&b| b == b' ' || b == b'\r' || b == b'\n')?;
    Tag::try_from(bytes[..end].to_vec()).ok()
}

pub(crate) fn mailbox_name(mailbox: &Mailbox<'_>) -> String {
    match mailbox {
        Mailbox::Inbox => "INBOX".to_string(),
        Mailbox::Other(other) => String::from_utf8_lossy(other.as_ref()).into_owned(),
    }
}

pub(crate) fn wire_mailbox(name: &str) -> Mailbox<'static> {
    Mailbox::try_from(name.to_string()).unwrap_or(Mailbox::Inbox)
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
            input: Input::new(INPUT_BUFFER),
            out: Out::default(),
            account: None,
            selected: None,
            condstore: false,
            failures: 0,
        }
    }

    pub(crate) fn timeout(&self) -> Duration {
        let secs = if self.account.is_some() {
            self.ctx.config.idle_timeout_secs
        } else {
            self.ctx.config.login_timeout_secs
        };
        Duration::from_secs(secs)
    }

    pub(crate) async fn flush(&mut self) -> bool {
        if self.out.buf.is_empty() {
            return true;
        }
        let ok = net::send(&mut self.stream, &self.out.buf, Duration::from_secs(60)).await;
        self.out.buf.clear();
        if self.out.buf.capacity() > 64 * 1024 {
            self.out.buf.shrink_to(1024);
        }
        ok
    }

    pub(crate) fn capabilities(&self) -> Vec<Capability<'static>> {
        let mut caps = vec![Capability::Imap4Rev1];
        let other = |s: &str| {
            imap_codec::imap_types::core::Atom::try_from(s.to_string())
                .ok()
                .map(Capability::from)
        };
        if self.account.is_none() {
            if !self.tls && self.ctx.tls.is_some() {
                caps.push(Capability::StartTls);
            }
            if plaintext_ok(&self.ctx.config, self.peer, self.tls) {
                caps.push(Capability::Auth(AuthMechanism::Plain));
            } else {
                caps.push(Capability::LoginDisabled);
            }
            caps.push(Capability::SaslIr);
        }
        caps.extend([
            Capability::LiteralPlus,
            Capability::Enable,
            Capability::Id,
            Capability::Idle,
            Capability::Namespace,
            Capability::Unselect,
            Capability::UidPlus,
            Capability::Move,
            Capability::CondStore,
            Capability::Quota,
            Capability::QuotaRes(Resource::Storage),
        ]);
        caps.push(Capability::StatusSize);
        caps.extend(
            ["CHILDREN", "SPECIAL-USE", "ESEARCH"]
                .into_iter()
                .filter_map(other),
        );
        caps
    }

    pub(crate) fn capability_code(&self) -> Option<Code<'static>> {
        Vec1::try_from(self.capabilities())
            .ok()
            .map(Code::Capability)
    }

    pub(crate) async fn run(&mut self) {
        let greeting = format!("Sluice IMAP server ready on {}", self.ctx.hostname);
        let code = self.capability_code();
        self.out.ok(None, code, &greeting);
        loop {
            if !self.flush().await {
                break;
            }
            let max = self.ctx.config.max_command_bytes;
            let timeout = self.timeout();
            let frame = tokio::select! {
                f = framing::read_command(&mut self.input, &mut self.stream, max, timeout, is_append_message) => f,
                _ = self.ctx.shutdown.token.cancelled() => {
                    self.out.bye(None, "Server shutting down");
                    break;
                }
            };
            let next = match frame {
                Ok(Frame::Command(bytes)) => self.command(bytes).await,
                Ok(Frame::Append { head, length, sync }) => {
                    self.append_streamed(head, length, sync).await
                }
                Ok(Frame::TooLong { head }) => {
                    self.out
                        .bad(tag_of(&head).as_ref(), None, "Command too long");
                    Next::Continue
                }
                Ok(Frame::LiteralRefused { head }) => {
                    self.out.no(
                        tag_of(&head).as_ref(),
                        Some(Code::TooBig),
                        "Literal too large for this command",
                    );
                    Next::Continue
                }
                Err(ReadError::Timeout) => {
                    self.out.bye(None, "Autologout; idle for too long");
                    break;
                }
                Err(ReadError::Closed) => break,
            };
            if matches!(next, Next::Close) {
                break;
            }
        }
        self.flush().await;
        framing::close(&mut self.stream).await;
    }

    async fn command(&mut self, bytes: Vec<u8>) -> Next {
        // ESEARCH's RETURN clause is not in imap-codec's grammar.
        let (bytes, esearch) = match search::take_return(&bytes) {
            None => (bytes, None),
            Some(Ok((cmd, opts))) => (cmd, Some(opts)),
            Some(Err(e)) => {
                self.out.bad(tag_of(&bytes).as_ref(), None, &e);
                return Next::Continue;
            }
        };
        let command = match CommandCodec::default().decode(&bytes) {
            Ok(([], command)) => command,
            Ok(_) | Err(CommandDecodeError::Failed | CommandDecodeError::Incomplete) => {
                let tag = tag_of(&bytes);
                let text = if tag.is_some() {
                    "Unknown command or invalid arguments"
                } else {
                    "Invalid tag or command"
                };
                self.out.bad(tag.as_ref(), None, text);
                return Next::Continue;
            }
            Err(CommandDecodeError::LiteralFound { tag, .. }) => {
                self.out.bad(Some(&tag), None, "Incomplete literal");
                return Next::Continue;
            }
        };
        let tag = command.tag.clone().into_static();
        match self.dispatch(&tag, command.body, esearch).await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "imap command failed");
                let (code, text) = match &e {
                    StoreError::NotFound(what) => {
                        (Some(code("NONEXISTENT")), format!("No such {what}"))
                    }
                    StoreError::Exists(what) => (
                        Some(code("ALREADYEXISTS")),
                        format!("{what} already exists"),
                    ),
                    StoreError::Invalid(why) => (None, why.clone()),
                    _ => (
                        Some(code("SERVERBUG")),
                        "Internal error; try again later".into(),
                    ),
                };
                self.out.no(Some(&tag), code, &text);
                Next::Continue
            }
        }
    }
}

/// A response code imap-codec has no variant for (RFC 5530).
pub(crate) fn code(name: &'static str) -> Code<'static> {
    Code::Other(imap_codec::imap_types::response::CodeOther::unvalidated(
        name.as_bytes(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_message_literals_are_recognised() {
        assert!(is_append_message(b"a APPEND INBOX "));
        assert!(is_append_message(b"a APPEND INBOX (\\Seen) "));
        assert!(is_append_message(
            b"a APPEND \"Sent\" (\\Seen $Foo) \"01-Jan-2024 10:00:00 +0000\" "
        ));
        assert!(is_append_message(b"a append {5}\r\nINBOX "));
        // The literal is the mailbox name, or not an APPEND at all.
        assert!(!is_append_message(b"a APPEND "));
        assert!(!is_append_message(b"a LOGIN "));
        assert!(!is_append_message(b"a LOGIN user "));
    }

    #[test]
    fn tags_of_bad_commands() {
        assert_eq!(tag_of(b"a1 FOO\r\n").unwrap().inner(), "a1");
        assert!(tag_of(b"\r\n").is_none());
        assert!(tag_of(b"a{ FOO\r\n").is_none());
    }
}
