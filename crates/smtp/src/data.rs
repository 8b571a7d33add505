//! The data stage: the message streams from the client into the store in
//! pieces, never whole in memory. DATA's dot-stuffing (RFC 5321 §4.5.2) is
//! removed on the fly; BDAT chunks (RFC 3030) are counted out exactly.

use std::time::{Duration, Instant};

use net::{Input, Stream};
use store::MessageWriter;

use crate::content::ContentScan;
use crate::message_auth::Collector;

/// How a message transfer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataEnd {
    /// All data arrived and was written.
    Complete,
    /// All data arrived but it was over the size limit; nothing more was
    /// written after the limit.
    TooBig,
    /// The client stopped sending for longer than the data timeout.
    Timeout,
    /// The connection went away.
    Closed,
}

/// How long a transfer may take: each block of data must come within
/// `block` (RFC 5321 §4.5.3.2.5), and the whole transfer within `block`
/// plus one second per `min_rate` bytes received (as Postfix's
/// `smtpd_min_data_rate`), so a client trickling a byte now and then
/// cannot hold a connection and its buffers for ever. A `min_rate` of 0
/// leaves only the per-block limit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DataClock {
    start: Instant,
    block: Duration,
    min_rate: u64,
}

impl DataClock {
    pub(crate) fn new(block: Duration, min_rate: u64) -> DataClock {
        DataClock {
            start: Instant::now(),
            block,
            min_rate,
        }
    }

    /// How long to wait for the next block, after `received` bytes;
    /// `Err` once the transfer has used its time.
    fn timeout(&self, received: u64) -> Result<Duration, DataEnd> {
        if self.min_rate == 0 {
            return Ok(self.block);
        }
        let allowed = self.block + Duration::from_secs_f64(received as f64 / self.min_rate as f64);
        let spent = self.start.elapsed();
        if spent >= allowed {
            Err(DataEnd::Timeout)
        } else {
            Ok((allowed - spent).min(self.block))
        }
    }
}

/// Waits for more input; `Err` ends the transfer.
async fn more(
    input: &mut Input,
    stream: &mut Stream,
    clock: &DataClock,
    received: u64,
) -> Result<(), DataEnd> {
    let timeout = clock.timeout(received)?;
    match tokio::time::timeout(timeout, input.fill(stream)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Err(DataEnd::Closed),
        Ok(Ok(_)) => Ok(()),
        Err(_) => Err(DataEnd::Timeout),
    }
}

/// What watches a message as it streams into the store.
#[derive(Default)]
pub(crate) struct Taps {
    /// The content scan.
    pub scan: Option<ContentScan>,
    /// What the DKIM, ARC and DMARC checks need.
    pub auth: Option<Collector>,
    /// A byte outside ASCII went by (the message needs 8BITMIME to go on).
    pub eight_bit: bool,
    /// The head of the message, for the recipients' Sieve scripts.
    pub head: Option<crate::filter::Head>,
}

impl Taps {
    /// Feeds a piece of the message to each; true once the scanner found
    /// something, after which there is no point storing more.
    fn feed(&mut self, piece: &[u8]) -> bool {
        self.eight_bit = self.eight_bit || !piece.is_ascii();
        if let Some(auth) = &mut self.auth {
            auth.feed(piece);
        }
        if let Some(head) = &mut self.head {
            head.feed(piece);
        }
        match &mut self.scan {
            Some(session) => {
                session.feed(piece);
                session.infected()
            }
            None => false,
        }
    }
}

/// Receives a DATA body up to the end-of-data marker into `writer` and
/// `taps`. Once more than `max` bytes were written the rest
/// is read and dropped, so the session can still answer `552` in step.
pub(crate) async fn receive_dot_stuffed(
    input: &mut Input,
    stream: &mut Stream,
    writer: &mut dyn MessageWriter,
    taps: &mut Taps,
    max: u64,
    clock: &DataClock,
) -> DataEnd {
    let mut received = 0u64;
    let mut unstuffer = DotUnstuffer::default();
    let mut out = Vec::with_capacity(input.capacity());
    let mut too_big = false;
    let mut infected = false;
    loop {
        if input.buffered().is_empty() {
            if let Err(end) = more(input, stream, clock, received).await {
                return end;
            }
        }
        let (used, done) = unstuffer.feed(input.buffered(), &mut out);
        input.consume(used);
        received += used as u64;
        if !too_big && !infected {
            infected = taps.feed(&out);
            if writer.size() + out.len() as u64 > max {
                too_big = true;
            } else if writer.write(&out).await.is_err() {
                return DataEnd::Closed;
            }
        }
        out.clear();
        if done {
            return if too_big {
                DataEnd::TooBig
            } else {
                DataEnd::Complete
            };
        }
    }
}

/// Receives exactly `count` bytes (one BDAT chunk) into `writer` and
/// `taps`, with bare line ends made CRLF as in DATA
/// ([`DotUnstuffer`]); `last` ends the message.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn receive_exact(
    input: &mut Input,
    stream: &mut Stream,
    writer: &mut dyn MessageWriter,
    taps: &mut Taps,
    line_ends: &mut LineEnds,
    count: u64,
    max: u64,
    last: bool,
    clock: &DataClock,
) -> DataEnd {
    let mut left = count;
    let mut too_big = false;
    let mut infected = false;
    let mut out = Vec::with_capacity(input.capacity());
    while left > 0 || last {
        if left > 0 && input.buffered().is_empty() {
            if let Err(end) = more(input, stream, clock, count - left).await {
                return end;
            }
        }
        let n = (input.buffered().len() as u64).min(left) as usize;
        out.clear();
        line_ends.push(&input.buffered()[..n], &mut out);
        input.consume(n);
        left -= n as u64;
        let at_end = left == 0 && last;
        if at_end {
            line_ends.finish(&mut out);
        }
        if !too_big && !infected {
            infected = taps.feed(&out);
            if writer.size() + out.len() as u64 > max {
                too_big = true;
            } else if writer.write(&out).await.is_err() {
                return DataEnd::Closed;
            }
        }
        if at_end {
            break;
        }
    }
    if too_big {
        DataEnd::TooBig
    } else {
        DataEnd::Complete
    }
}

/// Makes bare CR and bare LF into CRLF in text that arrives in pieces
/// (BDAT here; `sluice import` for mbox and Maildir files).
#[derive(Debug, Clone, Default)]
pub struct LineEnds {
    /// The last byte seen was a CR.
    after_cr: bool,
}

impl LineEnds {
    /// Appends `input` to `out` with its line ends made CRLF.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &b in input {
            match b {
                b'\n' if !self.after_cr => out.extend_from_slice(b"\r\n"),
                b'\n' => out.push(b'\n'),
                _ => {
                    if self.after_cr {
                        out.push(b'\n');
                    }
                    out.push(b);
                }
            }
            self.after_cr = b == b'\r';
        }
    }

    /// The end of the text: a CR left last gets its LF.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if std::mem::take(&mut self.after_cr) {
            out.push(b'\n');
        }
    }
}

/// Reads and drops exactly `count` bytes.
pub(crate) async fn skip_exact(
    input: &mut Input,
    stream: &mut Stream,
    count: u64,
    clock: &DataClock,
) -> Result<(), DataEnd> {
    let mut left = count;
    while left > 0 {
        if input.buffered().is_empty() {
            more(input, stream, clock, count - left).await?;
        }
        let n = (input.buffered().len() as u64).min(left) as usize;
        input.consume(n);
        left -= n as u64;
    }
    Ok(())
}

/// Where the unstuffer is within the current line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a line (after CRLF, or at the start of the data).
    LineStart,
    /// Inside a line.
    Middle,
    /// Just after a CR inside a line.
    Cr,
    /// A dot at the start of a line, not yet written.
    Dot,
    /// Dot then CR at the start of a line.
    DotCr,
}

/// Turns the DATA stream into the message: leading dots are removed and
/// the stream ends at `CRLF . CRLF`. Only CRLF starts a line: a bare LF
/// followed by `.` is message text, never the end of data, which keeps the
/// SMTP smuggling trick (`LF . LF` seen differently by two servers) out.
///
/// Bare line ends are stored as CRLF: a lone LF, and a CR not followed by
/// LF, each become CRLF (RFC 5321 §2.3.8 allows no other line end). So
/// mail Sluice forwards later carries no bare CR or LF for the next server
/// to read as a line end; what the sender meant as text lines stays lines.
/// Postfix 3.9 offers the same as `smtpd_forbid_bare_newline = normalize`;
/// refusing such mail instead would bounce what old scripts still send.
#[derive(Debug, Clone)]
pub struct DotUnstuffer {
    state: State,
}

impl Default for DotUnstuffer {
    fn default() -> Self {
        DotUnstuffer {
            state: State::LineStart,
        }
    }
}

impl DotUnstuffer {
    /// Feeds DATA bytes, appending message bytes to `out`. Returns how many
    /// input bytes were used and whether the end-of-data marker was seen
    /// (bytes after it are left unused: they are the next command).
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> (usize, bool) {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Middle => {
                    // Copy up to the next CR or LF in one go.
                    match memchr::memchr2(b'\r', b'\n', &input[i..]) {
                        Some(p) => {
                            out.extend_from_slice(&input[i..i + p]);
                            if input[i + p] == b'\r' {
                                out.push(b'\r');
                                self.state = State::Cr;
                            } else {
                                // A bare LF: stored as CRLF, but it does not
                                // start a line (see above).
                                out.extend_from_slice(b"\r\n");
                            }
                            i += p + 1;
                        }
                        None => {
                            out.extend_from_slice(&input[i..]);
                            i = input.len();
                        }
                    }
                    continue;
                }
                State::LineStart => match input[i] {
                    b'.' => self.state = State::Dot,
                    b'\r' => {
                        out.push(b'\r');
                        self.state = State::Cr;
                    }
                    _ => {
                        self.state = State::Middle;
                        continue; // Middle takes it, bare LF included
                    }
                },
                State::Cr => {
                    if input[i] == b'\n' {
                        out.push(b'\n');
                        self.state = State::LineStart;
                    } else {
                        // The CR was bare: it ends its line as CRLF, and
                        // this byte is text again.
                        out.push(b'\n');
                        self.state = State::Middle;
                        continue;
                    }
                }
                State::Dot => match input[i] {
                    b'\r' => self.state = State::DotCr,
                    _ => {
                        // The dot was stuffing; this byte is text.
                        self.state = State::Middle;
                        continue;
                    }
                },
                State::DotCr => {
                    if input[i] == b'\n' {
                        self.state = State::LineStart;
                        return (i + 1, true);
                    }
                    out.push(b'\r');
                    self.state = State::Cr;
                    continue; // look at this byte again, after the CR
                }
            }
            i += 1;
        }
        (i, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(data: &[u8], pieces: &[usize]) -> (Vec<u8>, usize) {
        let mut u = DotUnstuffer::default();
        let mut out = Vec::new();
        let mut pos = 0;
        let mut k = 0;
        while pos < data.len() {
            let n = pieces
                .get(k)
                .copied()
                .unwrap_or(3)
                .max(1)
                .min(data.len() - pos);
            k += 1;
            let (used, done) = u.feed(&data[pos..pos + n], &mut out);
            pos += used;
            if done {
                return (out, pos);
            }
        }
        panic!("no end of data in {:?}", String::from_utf8_lossy(data));
    }

    /// What a client does: double every leading dot, end with CRLF.CRLF.
    fn stuff(message: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for line in message.split_inclusive(|&b| b == b'\n') {
            if line.starts_with(b".") {
                out.push(b'.');
            }
            out.extend_from_slice(line);
        }
        out.extend_from_slice(b".\r\n");
        out
    }

    #[test]
    fn the_data_clock_allows_the_block_time_plus_time_per_byte() {
        let clock = DataClock {
            start: Instant::now() - Duration::from_secs(100),
            block: Duration::from_secs(60),
            min_rate: 500,
        };
        // 100 s spent: 60 s plus 20,000 bytes at 500 B/s is 100 s.
        assert!(clock.timeout(10_000).is_err());
        assert!(clock.timeout(20_000).is_err());
        let left = clock.timeout(30_000).unwrap();
        assert!(left <= Duration::from_secs(20) && left > Duration::from_secs(19));
        // Plenty received: each block still has its own limit.
        assert_eq!(clock.timeout(10_000_000).unwrap(), Duration::from_secs(60));
        let off = DataClock {
            min_rate: 0,
            ..clock
        };
        assert_eq!(off.timeout(0).unwrap(), Duration::from_secs(60));
    }

    #[test]
    fn removes_stuffing_and_stops_at_the_marker() {
        let (msg, used) = run(b"a\r\n..b\r\n.\r\nQUIT\r\n", &[100]);
        assert_eq!(msg, b"a\r\n.b\r\n");
        assert_eq!(used, 11);
    }

    #[test]
    fn empty_message() {
        assert_eq!(run(b".\r\n", &[1]).0, b"");
    }

    #[test]
    fn bare_lf_dot_is_not_the_end_and_is_stored_as_crlf() {
        let (msg, _) = run(b"a\n.\nb\r\n.\r\n", &[100]);
        assert_eq!(msg, b"a\r\n.\r\nb\r\n");
    }

    #[test]
    fn dot_cr_without_lf_is_text_with_a_crlf() {
        let (msg, _) = run(b".\rx\r\n.\r\n", &[1]);
        assert_eq!(msg, b"\r\nx\r\n");
    }

    #[test]
    fn smuggling_sequences_are_stored_as_plain_lines() {
        for (data, stored) in [
            (
                &b"a\r\n.\nMAIL FROM:<x>\r\n.\r\n"[..],
                &b"a\r\n\r\nMAIL FROM:<x>\r\n"[..],
            ),
            (b"a\n.\r\nb\r\n.\r\n", b"a\r\n.\r\nb\r\n"),
            (b"a\r.\rb\r\n.\r\n", b"a\r\n.\r\nb\r\n"),
            (b"a\r\r\n\n\r\n.\r\n", b"a\r\n\r\n\r\n\r\n"),
        ] {
            for pieces in [&[100][..], &[1]] {
                let (msg, used) = run(data, pieces);
                assert_eq!(
                    String::from_utf8_lossy(&msg),
                    String::from_utf8_lossy(stored),
                    "{:?}",
                    String::from_utf8_lossy(data)
                );
                assert_eq!(used, data.len());
            }
        }
    }

    /// True if every CR and LF in `text` is part of a CRLF.
    fn only_crlf(text: &[u8]) -> bool {
        text.iter().enumerate().all(|(i, &b)| match b {
            b'\r' => text.get(i + 1) == Some(&b'\n'),
            b'\n' => i > 0 && text[i - 1] == b'\r',
            _ => true,
        })
    }

    #[test]
    fn bdat_line_ends_are_made_crlf_across_pieces() {
        let mut l = LineEnds::default();
        let mut out = Vec::new();
        for piece in [&b"a\r"[..], b"\nb\n", b"c\r", b"d\r"] {
            l.push(piece, &mut out);
        }
        l.finish(&mut out);
        assert_eq!(out, b"a\r\nb\r\nc\r\nd\r\n");
    }

    proptest! {
        #[test]
        fn whatever_comes_only_crlf_is_stored(
            data in proptest::collection::vec(prop_oneof![Just(b'\r'), Just(b'\n'), Just(b'.'), Just(b'a')], 0..40),
            pieces in proptest::collection::vec(1usize..9, 0..64),
        ) {
            let mut data = data;
            data.extend_from_slice(b"\r\n.\r\n");
            let (got, _) = run(&data, &pieces);
            prop_assert!(only_crlf(&got), "{:?} -> {:?}", data, got);
            let whole = run(&data, &[data.len()]).0;
            prop_assert_eq!(got, whole);
        }

        #[test]
        fn any_split_gives_the_original_message(
            lines in proptest::collection::vec("[.a-z]{0,12}", 0..12),
            pieces in proptest::collection::vec(1usize..9, 0..64),
        ) {
            let message: Vec<u8> = lines.iter().flat_map(|l| format!("{l}\r\n").into_bytes()).collect();
            let data = stuff(&message);
            let mut with_tail = data.clone();
            with_tail.extend_from_slice(b"RSET\r\n");
            let (got, used) = run(&with_tail, &pieces);
            prop_assert_eq!(got, message);
            prop_assert_eq!(used, data.len());
        }
    }
}
