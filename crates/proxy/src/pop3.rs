//! The POP3 proxy (RFC 1939, RFC 2449, RFC 5034).
//!
//! Commands and responses pass through one at a time; the proxy answers
//! STLS itself and offers it in CAPA. RETR and TOP responses are scanned
//! as they stream to the client, in batches of lines (see [`Batch`]), one
//! line held back: a line goes to the client only once the batch after it
//! has been scanned, so neither the batch that completes a find nor the
//! line before it (which may end the infected part) is ever sent.
//!
//! What a client receives when a message is found infected:
//!
//! 1. The message as the upstream sent it, up to the held-back line: the
//!    header, the parts before the infected one, and the start of the
//!    infected part: its header, and its body up to the batch in which
//!    the find completed (a batch holds at most one read's lines, so none
//!    of a body that came in one read). Never the whole part: at least
//!    its last line is missing, so a hash signature over the whole file
//!    does not match what arrives either.
//! 2. If the message is multipart: a line break, then a new `text/plain`
//!    part (`removed-by-sluice.txt`) in the innermost open multipart,
//!    saying what was found and that the rest was removed, then the
//!    closing delimiter of every open multipart, innermost first. Parts
//!    after the infected one are not sent.
//! 3. A message of a single part just ends after the cut (nothing can be
//!    added to a body whose header was already sent).
//! 4. The terminating `.` line, so the session goes on normally; the
//!    upstream's remaining lines of that message are read and dropped.
//!
//! The response's first line (`+OK`, with the size the upstream counted)
//! was already sent, so the client may see fewer octets than announced.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use net::{Input, LineError, Stream};
use tokio::net::TcpStream;

use crate::config::{ClientTls, UpstreamTls};
use crate::structure::Structure;
use crate::upstream::{Route, Upstream, UpstreamError};
use crate::Context;

/// Longest command line from a client (SASL answers included).
const CLIENT_LINE: usize = 8 * 1024;

/// Message text collected before it is written to the client.
const OUT_FLUSH: usize = 16 * 1024;

struct Session<'a> {
    ctx: &'a Context,
    client: Stream,
    input: Input,
    up: Upstream,
    timeout: Duration,
    client_tls: bool,
}

/// Why a session ends.
struct End;

/// Runs one proxied POP3 connection.
pub(crate) async fn session(ctx: &Context, socket: TcpStream, peer: SocketAddr) {
    let route = Route::of(ctx, &socket, peer);
    let timeout = ctx.timeout();
    let implicit = ctx.client_tls(ClientTls::Implicit);
    let Some(mut client) = net::open_stream(socket, implicit, timeout).await else {
        return;
    };
    let opened = match route {
        Ok(route) => open_upstream(ctx, &route).await,
        Err(e) => Err(e),
    };
    let (up, greeting) = match opened {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!(upstream = %ctx.config.upstream, error = %e, "upstream unavailable");
            net::send(
                &mut client,
                b"-ERR [SYS/TEMP] The mail server behind this proxy cannot be reached\r\n",
                timeout,
            )
            .await;
            return;
        }
    };
    if !net::send(&mut client, &greeting, timeout).await {
        return;
    }
    let mut s = Session {
        ctx,
        client,
        input: Input::new(CLIENT_LINE),
        up,
        timeout,
        client_tls: implicit.is_some(),
    };
    while s.step().await.is_ok() {}
}

async fn open_upstream(ctx: &Context, route: &Route) -> Result<(Upstream, Vec<u8>), UpstreamError> {
    let mut up = Upstream::connect(ctx, route).await?;
    let greeting = up.line().await?.to_vec();
    if !greeting.starts_with(b"+OK") {
        return Err(UpstreamError::Refused(
            String::from_utf8_lossy(&greeting).trim_end().to_string(),
        ));
    }
    if ctx.config.upstream_tls == UpstreamTls::Starttls {
        up.send(b"STLS\r\n").await?;
        let reply = up.line().await?;
        if !reply.starts_with(b"+OK") {
            return Err(UpstreamError::Refused(
                String::from_utf8_lossy(reply).trim_end().to_string(),
            ));
        }
        up.start_tls(ctx).await?;
    }
    Ok((up, greeting))
}

fn verb_and_args(line: &[u8]) -> (String, bool) {
    let text = String::from_utf8_lossy(line);
    let mut words = text.split_ascii_whitespace();
    let verb = words.next().unwrap_or("").to_ascii_uppercase();
    (verb, words.next().is_some())
}

fn is_end(line: &[u8]) -> bool {
    line == b".\r\n" || line == b".\n"
}

impl Session<'_> {
    async fn send(&mut self, bytes: &[u8]) -> Result<(), End> {
        if net::send(&mut self.client, bytes, self.timeout).await {
            Ok(())
        } else {
            Err(End)
        }
    }

    async fn upstream_failed(&mut self, e: UpstreamError) -> End {
        tracing::warn!(upstream = %self.ctx.config.upstream, error = %e, "upstream connection failed");
        let _ = self
            .send(b"-ERR [SYS/TEMP] Connection to the mail server behind this proxy lost\r\n")
            .await;
        End
    }

    async fn up_line(&mut self) -> Result<Vec<u8>, End> {
        match self.up.line().await {
            Ok(l) => Ok(l.to_vec()),
            Err(e) => Err(self.upstream_failed(e).await),
        }
    }

    async fn up_send(&mut self, bytes: &[u8]) -> Result<(), End> {
        match self.up.send(bytes).await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.upstream_failed(e).await),
        }
    }

    async fn client_line(&mut self) -> Result<Vec<u8>, End> {
        loop {
            let token = self.ctx.shutdown.token.clone();
            let read = tokio::time::timeout(self.timeout, self.input.read_line(&mut self.client));
            let read = tokio::select! {
                biased;
                r = read => Some(r),
                _ = token.cancelled() => None,
            };
            let Some(read) = read else {
                let _ = self
                    .send(b"-ERR [SYS/TEMP] Shutting down, try again later\r\n")
                    .await;
                return Err(End);
            };
            match read {
                Err(_) => return Err(End),
                Ok(Ok(line)) => return Ok(line.to_vec()),
                Ok(Err(LineError::TooLong)) => self.send(b"-ERR Line too long\r\n").await?,
                Ok(Err(_)) => return Err(End),
            }
        }
    }

    async fn step(&mut self) -> Result<(), End> {
        let line = self.client_line().await?;
        let (verb, has_args) = verb_and_args(&line);
        match verb.as_str() {
            "STLS" => self.stls().await,
            "CAPA" => {
                self.up_send(&line).await?;
                let status = self.up_line().await?;
                self.send(&status).await?;
                if status.starts_with(b"+OK") {
                    self.relay_list(true).await?;
                }
                Ok(())
            }
            "RETR" | "TOP" => {
                self.up_send(&line).await?;
                let status = self.up_line().await?;
                if status.starts_with(b"+OK") {
                    self.message(&line, &status).await
                } else {
                    self.send(&status).await
                }
            }
            "LIST" | "UIDL" | "AUTH" if !has_args => {
                self.up_send(&line).await?;
                let status = self.up_line().await?;
                self.send(&status).await?;
                if status.starts_with(b"+OK") {
                    self.relay_list(false).await?;
                }
                Ok(())
            }
            "AUTH" => {
                // RFC 5034 §4: continuations start with "+ " until the end.
                self.up_send(&line).await?;
                loop {
                    let reply = self.up_line().await?;
                    self.send(&reply).await?;
                    if !(reply.starts_with(b"+ ") || reply.starts_with(b"+\r\n")) {
                        return Ok(());
                    }
                    let answer = self.client_line().await?;
                    self.up_send(&answer).await?;
                }
            }
            "QUIT" => {
                self.up_send(&line).await?;
                let reply = self.up_line().await?;
                let _ = self.send(&reply).await;
                Err(End)
            }
            _ => {
                self.up_send(&line).await?;
                let reply = self.up_line().await?;
                self.send(&reply).await
            }
        }
    }

    async fn stls(&mut self) -> Result<(), End> {
        let Some(acceptor) = self.ctx.client_tls(ClientTls::Starttls).cloned() else {
            return self.send(b"-ERR STLS not available\r\n").await;
        };
        if self.client_tls {
            return self.send(b"-ERR Already in TLS\r\n").await;
        }
        self.send(b"+OK Begin TLS negotiation\r\n").await?;
        self.input.clear();
        if !net::start_tls(&mut self.client, &acceptor, self.timeout).await {
            return Err(End);
        }
        self.client_tls = true;
        Ok(())
    }

    /// Relays a multi-line response up to its `.` line. For CAPA, the
    /// upstream's STLS is left out and the proxy's own offered instead.
    async fn relay_list(&mut self, capa: bool) -> Result<(), End> {
        let mut out = Vec::new();
        loop {
            let line = self.up_line().await?;
            if is_end(&line) {
                if capa && !self.client_tls && self.ctx.client_tls(ClientTls::Starttls).is_some() {
                    out.extend_from_slice(b"STLS\r\n");
                }
                out.extend_from_slice(&line);
                return self.send(&out).await;
            }
            if capa && line.trim_ascii().eq_ignore_ascii_case(b"STLS") {
                continue;
            }
            out.extend_from_slice(&line);
            if out.len() >= OUT_FLUSH {
                self.send(&out).await?;
                out.clear();
            }
        }
    }

    /// Streams a RETR or TOP response to the client through the scanner,
    /// starting with its `+OK` line. That line waits to go with the first
    /// text: one write and one wake-up of the client, not two, for a
    /// message that fits in a write.
    ///
    /// The text goes to the scanner a batch at a time ([`Batch`]), not a
    /// line at a time; a batch is sent, but its last line, once it has
    /// been scanned, and that last line once the next batch has.
    async fn message(&mut self, command: &[u8], status: &[u8]) -> Result<(), End> {
        let started = Instant::now();
        let check = self.ctx.scan.clone();
        let mut scan = check.as_ref().map(|c| c.start());
        let depth = check.as_ref().map_or(32, |c| c.max_mime_depth());
        let mut sent = Structure::new(depth);
        let mut out: Vec<u8> = Vec::with_capacity(OUT_FLUSH + crate::upstream::LINE);
        out.extend_from_slice(status);
        // The held-back line, as received (dot-stuffed), and whether it
        // starts with a stuffing dot.
        let mut pending: Vec<u8> = Vec::with_capacity(crate::upstream::LINE);
        let mut pending_dot = false;
        let mut at_line_start = true;
        let mut cut: Option<String> = None;
        let mut size = 0u64;
        loop {
            // At least one piece: a line, or as much of a long one as fits.
            while memchr::memchr(b'\n', self.up.input.buffered()).is_none()
                && self.up.input.buffered().len() < self.up.input.capacity()
            {
                if !out.is_empty() {
                    self.send(&out).await?;
                    out.clear();
                }
                if let Err(e) = self.up.fill().await {
                    return Err(self.upstream_failed(e).await);
                }
            }
            let buffered = self.up.input.buffered();
            let batch = Batch::of(buffered, at_line_start);
            if batch.len == 0 {
                // The end line.
                self.up.input.consume(batch.end_line);
                let verdict = scan.map(|s| s.finish());
                if cut.is_none() {
                    let refusal = match (&check, &verdict) {
                        (Some(c), Some(Ok(v))) => c.refusal(v),
                        (Some(_), Some(Err(e))) => Some(format!("the virus scanner failed ({e})")),
                        _ => None,
                    };
                    match refusal {
                        Some(why) => {
                            out.extend_from_slice(&sent.close(&notice(&why)));
                            cut = Some(why);
                        }
                        None => {
                            push_sent(&mut sent, &pending, pending_dot);
                            out.extend_from_slice(&pending);
                        }
                    }
                }
                out.extend_from_slice(b".\r\n");
                self.send(&out).await?;
                let verdict = match (&cut, verdict) {
                    (Some(why), _) => format!("cut: {why}"),
                    (None, Some(Ok(v))) => format!("{v:?}"),
                    (None, Some(Err(e))) => format!("error: {e}"),
                    (None, None) => "unscanned".into(),
                };
                tracing::info!(
                    command = %String::from_utf8_lossy(command).trim_end(),
                    size,
                    verdict = %verdict,
                    ms = started.elapsed().as_millis() as u64,
                    "message proxied"
                );
                return Ok(());
            }
            let text = &buffered[..batch.len];
            at_line_start = text.ends_with(b"\n");
            if cut.is_some() {
                // The rest of the upstream's response is dropped.
                self.up.input.consume(batch.len);
                continue;
            }
            size += (batch.len - batch.dots) as u64;
            if let (Some(s), Some(c)) = (scan.as_mut(), &check) {
                for run in batch.runs(text) {
                    s.feed(run);
                }
                if let Some(name) = s.infected() {
                    let why = c
                        .refusal(&scan::Verdict::Infected { name: name.into() })
                        .unwrap_or_default();
                    // Neither the held-back line nor this batch is sent.
                    out.extend_from_slice(&sent.close(&notice(&why)));
                    cut = Some(why);
                    self.up.input.consume(batch.len);
                    continue;
                }
            }
            push_sent(&mut sent, &pending, pending_dot);
            out.extend_from_slice(&pending);
            let mut starts = batch.starts_line;
            let mut rest = text;
            while !rest.is_empty() {
                let len = memchr::memchr(b'\n', rest).map_or(rest.len(), |p| p + 1);
                let (piece, after) = rest.split_at(len);
                let stuffed = starts && piece[0] == b'.';
                if after.is_empty() {
                    pending.clear();
                    pending.extend_from_slice(piece);
                    pending_dot = stuffed;
                } else {
                    push_sent(&mut sent, piece, stuffed);
                    out.extend_from_slice(piece);
                }
                starts = true;
                rest = after;
            }
            self.up.input.consume(batch.len);
            if out.len() >= OUT_FLUSH {
                self.send(&out).await?;
                out.clear();
            }
        }
    }
}

/// The message text at the front of the upstream's buffer that is scanned
/// in one go: whole lines (or the buffer's whole content when one line
/// fills it), up to the `.` line that ends the response. A batch also
/// ends after an empty line (the end of a header block), and a line that
/// starts with `--` (a MIME boundary, maybe) is a batch of its own. So a
/// find is placed as closely as the structure needs: a part whose
/// boundary line scanned clean ends with its last line sent; a part found
/// infected past its header keeps the header and loses its body.
#[derive(Debug, PartialEq, Eq)]
struct Batch {
    /// Bytes of text, dot-stuffed as received.
    len: usize,
    /// Whether the text starts a line.
    starts_line: bool,
    /// Stuffing dots in the text.
    dots: usize,
    /// When `len` is 0: the length of the end line at the front.
    end_line: usize,
}

impl Batch {
    fn of(buffered: &[u8], starts_line: bool) -> Batch {
        let mut len = 0;
        let mut dots = 0;
        let mut starts = starts_line;
        let mut end_line = 0;
        for piece in buffered.split_inclusive(|&b| b == b'\n') {
            let whole = piece.ends_with(b"\n");
            if !whole && len > 0 {
                break; // the rest of this line comes with the next read
            }
            if starts && is_end(piece) {
                if len == 0 {
                    end_line = piece.len();
                }
                break;
            }
            let dashes = starts && piece.starts_with(b"--");
            if dashes && len > 0 {
                break;
            }
            dots += usize::from(starts && piece[0] == b'.');
            len += piece.len();
            if dashes || (starts && (piece == b"\r\n" || piece == b"\n")) {
                break;
            }
            starts = whole;
        }
        Batch {
            len,
            starts_line,
            dots,
            end_line,
        }
    }

    /// The unstuffed text, in runs between the stuffing dots.
    fn runs<'t>(&self, text: &'t [u8]) -> impl Iterator<Item = &'t [u8]> + 't {
        let mut starts = self.starts_line;
        let mut rest = text;
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let skip = usize::from(starts && rest[0] == b'.');
            // Within a batch every line that starts with a dot is stuffed:
            // the end line is never part of one.
            let end = match memchr::memmem::find(&rest[skip..], b"\n.") {
                Some(at) => skip + at + 1,
                None => rest.len(),
            };
            let run = &rest[skip..end];
            starts = true;
            rest = &rest[end..];
            Some(run)
        })
    }
}

fn push_sent(sent: &mut Structure, pending: &[u8], dot: bool) {
    if pending.is_empty() {
        return;
    }
    sent.push(if dot { &pending[1..] } else { pending });
}

/// The text of the part that replaces what was removed.
fn notice(why: &str) -> String {
    format!(
        "This message was cut short by the mail server's virus scanner: {why}.\r\n\
         The part it was found in ends where it was found, and the parts after\r\n\
         it were removed. Ask the sender for a clean copy if you need it.\r\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_ends() {
        assert_eq!(verb_and_args(b"retr 1\r\n"), ("RETR".into(), true));
        assert_eq!(verb_and_args(b"LIST\r\n"), ("LIST".into(), false));
        assert!(is_end(b".\r\n") && !is_end(b"..\r\n"));
        assert!(notice("virus found (X)").contains("virus found (X)"));
    }

    /// The text a batch carries, unstuffed as a line-by-line reading does
    /// it: a line's leading dot dropped when the line starts in it.
    fn unstuffed_by_line(text: &[u8], mut starts: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for piece in text.split_inclusive(|&b| b == b'\n') {
            out.extend_from_slice(if starts && piece[0] == b'.' {
                &piece[1..]
            } else {
                piece
            });
            starts = piece.ends_with(b"\n");
        }
        out
    }

    fn batches(buffered: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = buffered;
        let mut starts = true;
        loop {
            let b = Batch::of(rest, starts);
            if b.len == 0 {
                return out;
            }
            out.push(String::from_utf8_lossy(&rest[..b.len]).into_owned());
            starts = rest[..b.len].ends_with(b"\n");
            rest = &rest[b.len..];
        }
    }

    #[test]
    fn batches_end_at_header_ends_boundaries_and_the_end_line() {
        let text = b"Subject: x\r\nMIME-Version: 1.0\r\n\r\npreamble\r\n--b\r\n\
Content-Type: text/plain\r\n\r\nhello\r\n..dotted\r\n\r\nbye\r\n--b--\r\n.\r\n+OK";
        assert_eq!(
            batches(text),
            [
                "Subject: x\r\nMIME-Version: 1.0\r\n\r\n",
                "preamble\r\n",
                "--b\r\n",
                "Content-Type: text/plain\r\n\r\n",
                "hello\r\n..dotted\r\n\r\n",
                "bye\r\n",
                "--b--\r\n",
            ]
        );
        let b = Batch::of(b"hello\r\n..dotted\r\n\r\n", true);
        assert_eq!(b.dots, 1);
        assert_eq!(
            b.runs(b"hello\r\n..dotted\r\n\r\n").collect::<Vec<_>>(),
            [&b"hello\r\n"[..], b".dotted\r\n\r\n"]
        );
        let b = Batch::of(b".\r\n", true);
        assert_eq!((b.len, b.end_line), (0, 3));
        // A long line's next piece: its dot is text, and ".\r\n" there ends nothing.
        let b = Batch::of(b".\r\nmore\r\n", false);
        assert_eq!((b.len, b.dots), (9, 0));
        // A buffer holding only part of a line is taken whole.
        let b = Batch::of(b"..partial", true);
        assert_eq!((b.len, b.dots), (9, 1));
        assert_eq!(b.runs(b"..partial").collect::<Vec<_>>(), [b".partial"]);
    }

    proptest::proptest! {
        #[test]
        fn batches_unstuff_as_lines_do(
            lines in proptest::collection::vec(
                proptest::string::string_regex("[.a\\r-]{0,6}\n?").unwrap(), 0..12),
            starts: bool,
        ) {
            let buffered = lines.concat().into_bytes();
            let b = Batch::of(&buffered, starts);
            let text = &buffered[..b.len];
            let expected = unstuffed_by_line(text, starts);
            proptest::prop_assert_eq!(b.runs(text).collect::<Vec<_>>().concat(), expected.clone());
            proptest::prop_assert_eq!(b.len - b.dots, expected.len());
            // An end line is never inside a batch, and one at the front is named.
            let mut at = starts;
            for piece in text.split_inclusive(|&c| c == b'\n') {
                proptest::prop_assert!(!(at && is_end(piece)));
                at = piece.ends_with(b"\n");
            }
            let first = buffered.split_inclusive(|&c| c == b'\n').next().unwrap_or(b"");
            let end_first = starts && is_end(first);
            proptest::prop_assert_eq!(b.end_line, if end_first { first.len() } else { 0 });
            proptest::prop_assert_eq!(b.len == 0, buffered.is_empty() || end_first);
        }
    }
}
