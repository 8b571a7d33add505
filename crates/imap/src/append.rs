//! APPEND (RFC 3501 §6.3.11, RFC 4315 APPENDUID). A message literal is
//! streamed from the socket into the store piece by piece, so a 50 MB
//! APPEND never sits in memory; small literals that arrived with the
//! command are written the same way.

use imap_codec::decode::Decoder;
use imap_codec::imap_types::command::{Command, CommandBody};
use imap_codec::imap_types::datetime::DateTime;
use imap_codec::imap_types::flag::Flag;
use imap_codec::imap_types::response::Code;
use imap_codec::CommandCodec;
use store::{Delivery, MailboxInfo};

use crate::auth::trim_crlf;
use crate::flags;
use crate::framing::{self, ReadError};
use crate::reply::{Kind, Reply};
use crate::session::{code, mailbox_name, tag_of, Next, Session};

/// What an APPEND needs before its message arrives.
struct Target {
    mailbox: MailboxInfo,
    flags: u32,
    keywords: Vec<String>,
    date: Option<i64>,
}

/// An APPEND's message on its way into the store. A `literal8` may carry
/// binary data (RFC 3516): its leaf parts are stored base64-encoded
/// ([`mime_tree::PartRewriter`]), so `BODY[...]` can return it in an
/// ordinary literal and `BINARY[...]` gives back the bytes sent. An
/// ordinary literal may not hold a NUL at all (RFC 3501 §4.3).
struct Incoming {
    literal8: bool,
    encoder: Option<mime_tree::PartRewriter>,
    converted: Vec<u8>,
    nul: bool,
}

impl Incoming {
    fn new(literal8: bool) -> Incoming {
        Incoming {
            literal8,
            encoder: literal8.then(mime_tree::PartRewriter::binary_to_base64),
            converted: Vec::new(),
            nul: false,
        }
    }

    /// What to store for the next piece of the literal.
    fn convert<'a>(&'a mut self, piece: &'a [u8]) -> &'a [u8] {
        let stored = match &mut self.encoder {
            None => piece,
            Some(encoder) => {
                self.converted.clear();
                encoder.push(piece, &mut self.converted);
                &self.converted
            }
        };
        self.nul |= stored.contains(&0);
        stored
    }

    /// What to store after the last piece.
    fn finish(&mut self) -> &[u8] {
        self.converted.clear();
        if let Some(encoder) = self.encoder.take() {
            encoder.finish(&mut self.converted);
        }
        self.nul |= self.converted.contains(&0);
        &self.converted
    }

    /// The answer when the message cannot be stored as it came.
    fn refusal(&self) -> Option<Reply> {
        if !self.nul {
            return None;
        }
        Some(if self.literal8 {
            Reply::no("A NUL in a part declared base64 or quoted-printable").code(Code::UnknownCte)
        } else {
            Reply::bad("A NUL in a literal: send binary data as a literal8 (~{n}, RFC 3516)")
        })
    }
}

impl Session<'_> {
    /// Checks the mailbox, flags, size and quota of an APPEND.
    async fn append_target(
        &mut self,
        name: &str,
        flag_list: &[Flag<'_>],
        date: Option<&DateTime>,
        size: u64,
    ) -> store::Result<Result<Target, Reply>> {
        let Some(mailbox) = self.ctx.store.mailbox(self.account_id(), name).await? else {
            return Ok(Err(Reply::no("No such mailbox").code(Code::TryCreate)));
        };
        let (flags, keywords) = match flags::from_command(flag_list) {
            Ok(f) => f,
            Err(flag) => return Ok(Err(Reply::bad(format!("Cannot store {flag}")))),
        };
        if size > self.ctx.config.max_message_bytes {
            return Ok(Err(Reply::no(format!(
                "Message too large (at most {} bytes)",
                self.ctx.config.max_message_bytes
            ))
            .code(Code::TooBig)));
        }
        if self.ctx.store.space().check().is_err() {
            // Before the literal is taken: a client that waits for the
            // continuation hears it without sending the message.
            return Ok(Err(disk_full()));
        }
        let quota = self.ctx.store.quota(self.account_id()).await?;
        if quota
            .limit_bytes
            .is_some_and(|l| quota.used_bytes + size > l)
        {
            return Ok(Err(Reply::no("Over quota").code(Code::OverQuota)));
        }
        Ok(Ok(Target {
            mailbox,
            flags,
            keywords,
            date: date.map(|d| d.as_ref().timestamp()),
        }))
    }

    async fn deliver(
        &mut self,
        target: Target,
        writer: Box<dyn store::MessageWriter>,
    ) -> store::Result<Reply> {
        let receipt = writer
            .deliver(Delivery {
                mailboxes: vec![target.mailbox.id],
                internal_date: target.date,
                flags: target.flags,
                keywords: target.keywords,
                ..Delivery::default()
            })
            .await?;
        let uid = receipt.entries.first().map_or(0, |(_, u)| *u);
        Ok(
            match (
                std::num::NonZeroU32::new(target.mailbox.uid_validity),
                std::num::NonZeroU32::new(uid),
            ) {
                (Some(uid_validity), Some(uid)) => {
                    Reply::ok("APPEND completed").code(Code::AppendUid { uid_validity, uid })
                }
                _ => Reply::ok("APPEND completed"),
            },
        )
    }

    /// APPEND whose literal came with the command.
    pub(crate) async fn append_small(
        &mut self,
        name: &str,
        flag_list: &[Flag<'_>],
        date: Option<&DateTime>,
        message: &[u8],
        literal8: bool,
    ) -> store::Result<Reply> {
        let target = match self
            .append_target(name, flag_list, date, message.len() as u64)
            .await?
        {
            Ok(t) => t,
            Err(reply) => return Ok(reply),
        };
        let mut incoming = Incoming::new(literal8);
        let mut writer = self.ctx.store.message_writer();
        writer.write(incoming.convert(message)).await?;
        writer.write(incoming.finish()).await?;
        if let Some(reply) = incoming.refusal() {
            writer.abort().await;
            return Ok(reply);
        }
        self.deliver(target, writer).await
    }

    /// APPEND whose message literal has not been read yet (see
    /// [`crate::framing::Frame::Append`]).
    pub(crate) async fn append_streamed(&mut self, head: Vec<u8>, length: u64, sync: bool) -> Next {
        let tag = tag_of(&head);
        let reply = match self.append_streamed_inner(&head, length, sync).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => match e {
                ReadError::Closed | ReadError::Timeout => return Next::Close,
            },
            Err(e) => {
                if e.is_full() {
                    tracing::debug!(error = %e, "imap append failed");
                } else {
                    tracing::warn!(error = %e, "imap append failed");
                }
                if e.is_full() {
                    disk_full()
                } else if e.is_unavailable() {
                    Reply::no("The mail store is unavailable; try again later")
                        .code(code("UNAVAILABLE"))
                } else {
                    Reply::no("Internal error; try again later").code(code("SERVERBUG"))
                }
            }
        };
        match self.sync(true).await {
            Ok(true) => {}
            Ok(false) => return Next::Close,
            Err(e) => tracing::warn!(error = %e, "imap sync failed"),
        }
        let text = reply.text.as_str();
        match reply.kind {
            Kind::Ok => self.out.ok(tag.as_ref(), reply.code, text),
            Kind::No => self.out.no(tag.as_ref(), reply.code, text),
            Kind::Bad => self.out.bad(tag.as_ref(), reply.code, text),
        }
        reply.next
    }

    async fn append_streamed_inner(
        &mut self,
        head: &[u8],
        length: u64,
        sync: bool,
    ) -> store::Result<Result<Reply, ReadError>> {
        let timeout = self.timeout();
        let max = self.ctx.config.max_command_bytes;
        // The command with an empty message in place of the literal gives
        // imap-codec's reading of the mailbox, flags and date.
        let mut probe = head.to_vec();
        probe.extend_from_slice(b"{0}\r\n\r\n");
        let parsed = match CommandCodec::default().decode(&probe) {
            Ok((
                _,
                Command {
                    body:
                        CommandBody::Append {
                            mailbox,
                            flags,
                            date,
                            ..
                        },
                    ..
                },
            )) => Some((mailbox_name(&mailbox), flags, date)),
            _ => None,
        };
        let parsed = match parsed {
            Some((name, flags, date)) => Some((self.stored(name).await?, flags, date)),
            None => None,
        };
        let checked = match (&parsed, self.account.is_some()) {
            (Some((name, flags, date)), true) => {
                self.append_target(name, flags, date.as_ref(), length)
                    .await?
            }
            (_, false) => Err(Reply::no("Log in first")),
            (None, true) => Err(Reply::bad("Invalid APPEND arguments")),
        };
        let target = match checked {
            Ok(t) => t,
            Err(reply) => {
                // A synchronising literal is not sent until we agree; a
                // non-synchronising one is on its way and must be drained.
                if !sync {
                    if let Err(e) =
                        framing::skip(&mut self.input, &mut self.stream, length, timeout).await
                    {
                        return Ok(Err(e));
                    }
                    if let Err(e) =
                        framing::read_rest(&mut self.input, &mut self.stream, max, timeout).await
                    {
                        return Ok(Err(e));
                    }
                }
                return Ok(Ok(reply));
            }
        };
        if sync {
            self.out.raw(b"+ Ready for literal data\r\n");
            if !self.flush().await {
                return Ok(Err(ReadError::Closed));
            }
        }
        let mut incoming = Incoming::new(head.ends_with(b"~"));
        let mut writer = self.ctx.store.message_writer();
        let mut left = length;
        while left > 0 {
            if self.input.buffered().is_empty() {
                if let Err(e) = framing::fill(&mut self.input, &mut self.stream, timeout).await {
                    writer.abort().await;
                    return Ok(Err(e));
                }
            }
            let take = (left as usize).min(self.input.buffered().len());
            let result = writer
                .write(incoming.convert(&self.input.buffered()[..take]))
                .await;
            self.input.consume(take);
            left -= take as u64;
            if let Err(e) = result {
                // Keep the protocol in step: drain the rest, then fail.
                let _ = framing::skip(&mut self.input, &mut self.stream, left, timeout).await;
                let _ = framing::read_rest(&mut self.input, &mut self.stream, max, timeout).await;
                writer.abort().await;
                return Err(e);
            }
        }
        let rest = match framing::read_rest(&mut self.input, &mut self.stream, max, timeout).await {
            Ok(r) => r,
            Err(e) => {
                writer.abort().await;
                return Ok(Err(e));
            }
        };
        if !trim_crlf(&rest).is_empty() {
            // MULTIAPPEND and CATENATE are not offered.
            writer.abort().await;
            return Ok(Ok(Reply::bad("Unexpected data after the APPEND message")));
        }
        if let Err(e) = writer.write(incoming.finish()).await {
            writer.abort().await;
            return Err(e);
        }
        if let Some(reply) = incoming.refusal() {
            writer.abort().await;
            return Ok(Ok(reply));
        }
        Ok(Ok(self.deliver(target, writer).await?))
    }
}

/// The answer to a write the server's disk has no room for. A tagged NO
/// with no response code: RFC 5530 has none for a full disk. `OVERQUOTA`
/// (§3) would blame the user's own quota, which is not what is wrong and
/// makes clients tell the user to delete mail; `LIMIT` names a limit the
/// same command would meet again; `UNAVAILABLE` says a subsystem is down.
/// The text says what happened and that trying later works (the store
/// takes writes again as soon as space returns).
pub(crate) fn disk_full() -> Reply {
    Reply::no("The server is out of disk space; nothing was stored, try again later")
}
