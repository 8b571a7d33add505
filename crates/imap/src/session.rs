//! One IMAP session through its states (RFC 3501 §3): not authenticated,
//! authenticated, selected, logout.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Duration;

use imap_codec::decode::{CommandDecodeError, Decoder};
use imap_codec::imap_types::auth::AuthMechanism;
use imap_codec::imap_types::command::{Command, CommandBody};
use imap_codec::imap_types::core::{AString, IString, Tag, Vec1};
use imap_codec::imap_types::extensions::quota::Resource;
use imap_codec::imap_types::extensions::utf8::QuotedUtf8;
use imap_codec::imap_types::mailbox::Mailbox;
use imap_codec::imap_types::response::{Capability, Code};
use imap_codec::imap_types::IntoStatic;
use imap_codec::CommandCodec;
use net::{Input, Stream};
use store::{AccountId, StoreError};

use crate::framing::{self, Frame, ReadError};
use crate::out::Out;
use crate::preparse::{self, Saved};
use crate::reply::Reply;
use crate::search;
use crate::selected::Selected;
use crate::server::{plaintext_ok, Context};
use crate::utf7;

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
    /// When a session that has not logged in is closed, however busy it
    /// keeps itself (a byte now and then must not keep it open).
    login_deadline: tokio::time::Instant,
    /// RFC 9051 §6.3.1: the client enabled IMAP4rev2 (UTF-8 mailbox
    /// names, ESEARCH only, no RECENT).
    pub(crate) rev2: bool,
    pub(crate) failures: u32,
    /// The RFC 8474 FETCH items of the command being run, taken out of
    /// it before imap-codec read it ([`preparse::take_fetch_objects`]).
    pub(crate) fetch_objects: preparse::ObjectItems,
    /// RFC 8474 §4.2: the STATUS being run asked for MAILBOXID (`Some`),
    /// and nothing else (`Some(true)`).
    pub(crate) status_mailbox_id: Option<bool>,
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

/// A mailbox name in UTF-8 for an IMAP4rev2 client: a quoted string when
/// it has non-ASCII characters (RFC 9051 §4.3 allows UTF-8 there).
fn utf8_mailbox(name: &str) -> Mailbox<'static> {
    if name.is_ascii() {
        return wire_mailbox(name);
    }
    match QuotedUtf8::try_from(name.to_string()) {
        Ok(q) => Mailbox::from(AString::String(IString::QuotedUtf8(q))),
        Err(_) => wire_mailbox(name),
    }
}

impl<'a> Session<'a> {
    /// Turns CONDSTORE on (RFC 7162 §3.1). The first enabling command
    /// while a mailbox is selected brings an untagged `OK [HIGHESTMODSEQ]`
    /// (SELECT and EXAMINE send one anyway).
    pub(crate) fn enable_condstore(&mut self) {
        if self.condstore {
            return;
        }
        self.condstore = true;
        if let Some(m) = self
            .selected
            .as_ref()
            .and_then(|sel| std::num::NonZeroU64::new(sel.highest_modseq))
        {
            self.out.ok(None, Some(Code::HighestModSeq(m)), "Highest");
        }
    }

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
            login_deadline: tokio::time::Instant::now()
                + Duration::from_secs(ctx.config.login_timeout_secs),
            rev2: false,
            failures: 0,
            fetch_objects: preparse::ObjectItems::default(),
            status_mailbox_id: None,
        }
    }

    /// A stored name as this client sees it: modified UTF-7 for IMAP4rev1
    /// (as stored), UTF-8 for IMAP4rev2. A stored name that is not valid
    /// modified UTF-7 is shown as it is, so it can still be listed.
    pub(crate) fn shown_name<'n>(&self, stored: &'n str) -> Cow<'n, str> {
        if !self.rev2 || utf7::is_plain(stored) {
            return Cow::Borrowed(stored);
        }
        match utf7::decode(stored) {
            Some(name) => Cow::Owned(name),
            None => Cow::Borrowed(stored),
        }
    }

    /// A stored name on the wire, for LIST, STATUS and the like.
    pub(crate) fn wire_mailbox(&self, stored: &str) -> Mailbox<'static> {
        if self.rev2 {
            utf8_mailbox(&self.shown_name(stored))
        } else {
            wire_mailbox(stored)
        }
    }

    /// The stored form of a name the client gives for a new mailbox
    /// (CREATE, the target of RENAME).
    pub(crate) fn new_name(&self, mailbox: &Mailbox<'_>) -> String {
        let name = mailbox_name(mailbox);
        if self.rev2 {
            utf7::encode(&name)
        } else {
            name
        }
    }

    /// The stored name of an existing mailbox the client names. For an
    /// IMAP4rev2 client that is the name in modified UTF-7, or, when no
    /// such mailbox exists, a stored name that is not valid modified
    /// UTF-7 and was shown as it is (see [`Session::shown_name`]).
    pub(crate) async fn stored_name(&self, mailbox: &Mailbox<'_>) -> store::Result<String> {
        self.stored(mailbox_name(mailbox)).await
    }

    /// [`Session::stored_name`] of a name as the client wrote it.
    pub(crate) async fn stored(&self, name: String) -> store::Result<String> {
        if !self.rev2 || utf7::is_plain(&name) {
            return Ok(name);
        }
        let encoded = utf7::encode(&name);
        if utf7::decode(&name).is_none() {
            let account = self.account.as_ref().map_or(0, |a| a.id);
            let store = &self.ctx.store;
            if store.mailbox(account, &encoded).await?.is_none()
                && store.mailbox(account, &name).await?.is_some()
            {
                return Ok(name);
            }
        }
        Ok(encoded)
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
        let timeout = Duration::from_secs(60);
        net::send_buffered(&mut self.stream, &mut self.out.buf, timeout, 1024).await
    }

    pub(crate) fn capabilities(&self) -> Vec<Capability<'static>> {
        let mut caps = vec![Capability::Imap4Rev1];
        let rev2 = imap_codec::imap_types::core::Atom::try_from("IMAP4rev2")
            .expect("IMAP4rev2 is an atom");
        caps.push(Capability::from(rev2));
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
        caps.push(Capability::Binary);
        caps.extend(
            [
                "CHILDREN",
                "SPECIAL-USE",
                "ESEARCH",
                "SEARCHRES",
                "LIST-EXTENDED",
                "LIST-STATUS",
                "SORT",
                "SORT=DISPLAY",
                "ESORT",
                "THREAD=ORDEREDSUBJECT",
                "THREAD=REFERENCES",
                "THREAD=REFS",
                "OBJECTID",
            ]
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

    /// The RFC 9051 §3 state, as the sessions gauge names it.
    fn state_name(&self) -> &'static str {
        match (&self.account, &self.selected) {
            (_, Some(_)) => "selected",
            (Some(_), None) => "authenticated",
            (None, None) => "not_authenticated",
        }
    }

    pub(crate) async fn run(&mut self) {
        let greeting = format!("Sluice IMAP server ready on {}", self.ctx.hostname);
        let code = self.capability_code();
        self.out.ok(None, code, &greeting);
        let mut state = metrics::SessionState::new("imap", self.state_name());
        loop {
            state.set(self.state_name());
            if !self.flush().await {
                break;
            }
            let max = self.ctx.config.max_command_bytes;
            let timeout = self.timeout();
            let logged_in = self.account.is_some();
            let frame = tokio::select! {
                f = framing::read_command(&mut self.input, &mut self.stream, max, timeout, is_append_message) => f,
                _ = tokio::time::sleep_until(self.login_deadline), if !logged_in => {
                    self.out.bye(None, "Login timeout");
                    break;
                }
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
        metrics::inc(
            &metrics::get().imap_commands,
            "command",
            command_label(&bytes),
        );
        // ESEARCH's RETURN clause is not in imap-codec's grammar.
        let (bytes, esearch) = match search::take_return(&bytes) {
            None => (bytes, None),
            Some(Ok((cmd, opts))) => (cmd, Some(opts)),
            Some(Err(e)) => {
                self.out.bad(tag_of(&bytes).as_ref(), None, &e);
                return Next::Continue;
            }
        };
        // Nor is LIST-EXTENDED's: such a LIST is parsed whole.
        if let Some(list) = preparse::take_list(&bytes) {
            let Some(tag) = tag_of(&bytes) else {
                self.out.bad(None, None, "Invalid tag or command");
                return Next::Continue;
            };
            let result = match list {
                Err(e) => Ok(Reply::bad(e)),
                Ok(_) if self.account.is_none() => Ok(Reply::no("Log in first")),
                Ok(list) => self.list_extended(list).await,
            };
            let result = match result {
                Ok(reply) => self.finish(&tag, reply).await,
                Err(e) => Err(e),
            };
            return self.outcome(&tag, result);
        }
        // Nor OBJECTID's search keys (RFC 8474 §6): each becomes the UIDs
        // of the selected mailbox it names.
        let bytes = match (preparse::object_keys(&bytes), self.selected.is_some()) {
            (None, _) | (Some(_), false) => bytes,
            (Some(Err(e)), true) => {
                self.out.bad(tag_of(&bytes).as_ref(), None, &e);
                return Next::Continue;
            }
            (Some(Ok(keys)), true) => match self.object_sets(&keys).await {
                Ok(edits) => preparse::rewrite(&bytes, &edits),
                Err(e) => {
                    let Some(tag) = tag_of(&bytes) else {
                        self.out.bad(None, None, "Invalid tag or command");
                        return Next::Continue;
                    };
                    return self.outcome(&tag, Err(e));
                }
            },
        };
        // Nor its FETCH items, answered beside imap-codec's.
        self.fetch_objects = preparse::ObjectItems::default();
        let bytes = match preparse::take_fetch_objects(&bytes) {
            None => bytes,
            Some(Err(e)) => {
                self.out.bad(tag_of(&bytes).as_ref(), None, &e);
                return Next::Continue;
            }
            Some(Ok((cmd, objects))) => {
                self.fetch_objects = objects;
                cmd
            }
        };
        // Nor its STATUS item.
        let (bytes, status_mailbox_id) = match preparse::take_status_mailbox_id(&bytes) {
            None => (bytes, None),
            Some((cmd, only)) => (cmd, Some(only)),
        };
        self.status_mailbox_id = status_mailbox_id;
        // Nor SEARCHRES's `$`: it becomes the set it stands for.
        let bytes = match self.selected.as_ref() {
            None => bytes,
            Some(sel) => match preparse::substitute_saved(&bytes, |uid| sel.saved_set(uid)) {
                Saved::Unused => bytes,
                Saved::Rewritten(b) => b,
                Saved::Empty => {
                    let tag = tag_of(&bytes);
                    let reply = Reply::ok("The saved search result is empty; nothing done");
                    let result = match &tag {
                        Some(tag) => self.finish(tag, reply).await,
                        None => Ok(Next::Continue),
                    };
                    return match tag {
                        Some(tag) => self.outcome(&tag, result),
                        None => Next::Continue,
                    };
                }
            },
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
        let result = self.dispatch(&tag, command.body, esearch).await;
        self.outcome(&tag, result)
    }

    /// What each RFC 8474 §6 search key stands for in the selected
    /// mailbox: `UID <set>` of the messages that are that email or in that
    /// thread, or a key no message matches.
    async fn object_sets(
        &self,
        keys: &[(usize, usize, preparse::ObjectKey)],
    ) -> store::Result<Vec<(usize, usize, String)>> {
        let Some(sel) = self.selected.as_ref() else {
            return Ok(Vec::new());
        };
        let store = &self.ctx.store;
        let rows = store.list_messages(sel.info.id).await?;
        let mut edits = Vec::with_capacity(keys.len());
        for (start, end, key) in keys {
            let blobs: Vec<store::BlobId> = match key {
                preparse::ObjectKey::Email(id) => store::ids::parse_email(id).into_iter().collect(),
                preparse::ObjectKey::Thread(id) => match store::ids::parse_thread(id) {
                    Some(t) => store
                        .thread_emails(self.account.as_ref().map_or(0, |a| a.id), &[t])
                        .await?
                        .into_iter()
                        .flat_map(|(_, b)| b)
                        .collect(),
                    None => Vec::new(),
                },
            };
            let mut uids: Vec<u32> = rows
                .iter()
                .filter(|e| blobs.contains(&e.blob))
                .map(|e| e.uid)
                .collect();
            uids.sort_unstable();
            let set = if uids.is_empty() {
                "(NOT ALL)".to_string()
            } else {
                format!("UID {}", search::compact_set(&uids))
            };
            edits.push((*start, *end, set));
        }
        Ok(edits)
    }

    /// Ends a command: a store error becomes its tagged NO.
    fn outcome(&mut self, tag: &Tag<'static>, result: store::Result<Next>) -> Next {
        match result {
            Ok(next) => next,
            Err(e) if e.is_full() => {
                // Said once by the store's free-space watch.
                tracing::debug!(error = %e, "imap command failed");
                let reply = crate::append::disk_full();
                self.out.no(Some(tag), reply.code, &reply.text);
                Next::Continue
            }
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
                    e if e.is_unavailable() => (
                        Some(code("UNAVAILABLE")),
                        "The mail store is unavailable; try again later".into(),
                    ),
                    _ => (
                        Some(code("SERVERBUG")),
                        "Internal error; try again later".into(),
                    ),
                };
                self.out.no(Some(tag), code, &text);
                Next::Continue
            }
        }
    }
}

/// Every step a command's bytes go through before the session acts on
/// them, for the proptest below and the fuzz target (`crates/imap/fuzz`):
/// none may panic, whatever the bytes.
pub(crate) fn pre_decode(cmd: &[u8]) {
    let _ = tag_of(cmd);
    let _ = is_append_message(cmd);
    let _ = crate::framing::literal_announcement(cmd);
    let _ = crate::search::take_return(cmd);
    let _ = crate::preparse::take_list(cmd);
    if let Some(Ok(keys)) = crate::preparse::object_keys(cmd) {
        let edits: Vec<(usize, usize, String)> = keys
            .into_iter()
            .map(|(s, e, _)| (s, e, "UID 1".into()))
            .collect();
        let _ = crate::preparse::rewrite(cmd, &edits);
    }
    let _ = crate::preparse::take_fetch_objects(cmd);
    let _ = crate::preparse::take_status_mailbox_id(cmd);
    let _ = crate::preparse::substitute_saved(cmd, |_| Some("1:3".into()));
    let _ = CommandCodec::default().decode(cmd);
}

/// RFC 8474 §4.1: the `MAILBOXID (<id>)` response code, with the id JMAP
/// gives the same mailbox.
pub(crate) fn mailbox_id_code(id: store::MailboxId) -> Code<'static> {
    Code::Other(imap_codec::imap_types::response::CodeOther::unvalidated(
        format!("MAILBOXID ({})", store::ids::mailbox(id)).into_bytes(),
    ))
}

/// A response code imap-codec has no variant for (RFC 5530).
pub(crate) fn code(name: &'static str) -> Code<'static> {
    Code::Other(imap_codec::imap_types::response::CodeOther::unvalidated(
        name.as_bytes(),
    ))
}

/// The command name of a command line (`UID FETCH` as `UID`), as a static
/// label for metrics; `other` for anything not in RFC 9051 and the
/// extensions offered.
fn command_label(line: &[u8]) -> &'static str {
    const KNOWN: [&str; 37] = [
        "CAPABILITY",
        "NOOP",
        "LOGOUT",
        "STARTTLS",
        "AUTHENTICATE",
        "LOGIN",
        "ENABLE",
        "SELECT",
        "EXAMINE",
        "CREATE",
        "DELETE",
        "RENAME",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "LIST",
        "LSUB",
        "NAMESPACE",
        "STATUS",
        "APPEND",
        "IDLE",
        "CHECK",
        "CLOSE",
        "UNSELECT",
        "EXPUNGE",
        "SEARCH",
        "FETCH",
        "STORE",
        "COPY",
        "MOVE",
        "UID",
        "ID",
        "GETQUOTA",
        "GETQUOTAROOT",
        "SETQUOTA",
        "ESEARCH",
        "SORT",
        "THREAD",
    ];
    let name = line
        .split(|&b| b == b' ')
        .nth(1)
        .map(|w| w.strip_suffix(b"\r\n").unwrap_or(w))
        .unwrap_or_default();
    KNOWN
        .iter()
        .find(|k| k.as_bytes().eq_ignore_ascii_case(name))
        .copied()
        .unwrap_or("other")
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
        // RFC 3516 literal8.
        assert!(is_append_message(b"a APPEND INBOX ~"));
        assert!(is_append_message(b"a APPEND INBOX (\\Seen) ~"));
    }

    proptest::proptest! {
        /// Whatever a client sends, the steps a command goes through before
        /// the session acts on it return an answer and never panic.
        #[test]
        fn command_pipeline_never_panics(
            text in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(b"SEARCH ".to_vec()),
                    proptest::strategy::Just(b"SORT ".to_vec()),
                    proptest::strategy::Just(b"THREAD ".to_vec()),
                    proptest::strategy::Just(b"(REVERSE SUBJECT DISPLAYFROM ".to_vec()),
                    proptest::strategy::Just(b"REFERENCES UTF-8 ".to_vec()),
                    proptest::strategy::Just(b"RETURN (".to_vec()),
                    proptest::strategy::Just(b"LIST (".to_vec()),
                    proptest::strategy::Just(b"UID ".to_vec()),
                    proptest::strategy::Just(b"FETCH 1 (".to_vec()),
                    proptest::strategy::Just(b"EMAILID ".to_vec()),
                    proptest::strategy::Just(b"THREADID ".to_vec()),
                    proptest::strategy::Just(b"APPEND ".to_vec()),
                    proptest::strategy::Just(b"$".to_vec()),
                    proptest::strategy::Just(b"{3}\r\n".to_vec()),
                    proptest::strategy::Just(b"\"".to_vec()),
                    proptest::strategy::Just(b")".to_vec()),
                    proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
                ],
                0..12,
            )
        ) {
            let mut cmd = b"a ".to_vec();
            cmd.extend(text.concat());
            cmd.extend_from_slice(b"\r\n");
            pre_decode(&cmd);
        }
    }

    #[test]
    fn tags_of_bad_commands() {
        assert_eq!(tag_of(b"a1 FOO\r\n").unwrap().inner(), "a1");
        assert!(tag_of(b"\r\n").is_none());
        assert!(tag_of(b"a{ FOO\r\n").is_none());
    }
}
