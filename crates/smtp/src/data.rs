//! The data stage: the message streams from the client into the store in
//! pieces, never whole in memory. DATA's dot-stuffing (RFC 5321 §4.5.2) is
//! removed on the fly; BDAT chunks (RFC 3030) are counted out exactly.

use std::time::Duration;

use net::{Input, Stream};
use store::MessageWriter;

use crate::content::ContentScan;

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

/// Waits for more input; `Err` ends the transfer.
async fn more(input: &mut Input, stream: &mut Stream, timeout: Duration) -> Result<(), DataEnd> {
    match tokio::time::timeout(timeout, input.fill(stream)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Err(DataEnd::Closed),
        Ok(Ok(_)) => Ok(()),
        Err(_) => Err(DataEnd::Timeout),
    }
}

/// Feeds a piece of the message to the scanner; true once it found
/// something, after which there is no point storing more.
fn scan_piece(scan: &mut Option<&mut ContentScan>, piece: &[u8]) -> bool {
    match scan {
        Some(session) => {
            session.feed(piece);
            session.infected()
        }
        None => false,
    }
}

/// Receives a DATA body up to the end-of-data marker into `writer`, and
/// into `scan` if given. Once more than `max` bytes were written the rest
/// is read and dropped, so the session can still answer `552` in step.
pub(crate) async fn receive_dot_stuffed(
    input: &mut Input,
    stream: &mut Stream,
    writer: &mut dyn MessageWriter,
    mut scan: Option<&mut ContentScan>,
    max: u64,
    timeout: Duration,
) -> DataEnd {
    let mut unstuffer = DotUnstuffer::default();
    let mut out = Vec::with_capacity(input.capacity());
    let mut too_big = false;
    let mut infected = false;
    loop {
        if input.buffered().is_empty() {
            if let Err(end) = more(input, stream, timeout).await {
                return end;
            }
        }
        let (used, done) = unstuffer.feed(input.buffered(), &mut out);
        input.consume(used);
        if !too_big && !infected {
            infected = scan_piece(&mut scan, &out);
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

/// Receives exactly `count` bytes (one BDAT chunk) into `writer`, and
/// into `scan` if given.
pub(crate) async fn receive_exact(
    input: &mut Input,
    stream: &mut Stream,
    writer: &mut dyn MessageWriter,
    mut scan: Option<&mut ContentScan>,
    count: u64,
    max: u64,
    timeout: Duration,
) -> DataEnd {
    let mut left = count;
    let mut too_big = false;
    let mut infected = false;
    while left > 0 {
        if input.buffered().is_empty() {
            if let Err(end) = more(input, stream, timeout).await {
                return end;
            }
        }
        let n = (input.buffered().len() as u64).min(left) as usize;
        if !too_big && !infected {
            infected = scan_piece(&mut scan, &input.buffered()[..n]);
            if writer.size() + n as u64 > max {
                too_big = true;
            } else if writer.write(&input.buffered()[..n]).await.is_err() {
                return DataEnd::Closed;
            }
        }
        input.consume(n);
        left -= n as u64;
    }
    if too_big {
        DataEnd::TooBig
    } else {
        DataEnd::Complete
    }
}

/// Reads and drops exactly `count` bytes.
pub(crate) async fn skip_exact(
    input: &mut Input,
    stream: &mut Stream,
    count: u64,
    timeout: Duration,
) -> Result<(), DataEnd> {
    let mut left = count;
    while left > 0 {
        if input.buffered().is_empty() {
            more(input, stream, timeout).await?;
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
                    // Copy up to the next CR in one go.
                    match input[i..].iter().position(|&b| b == b'\r') {
                        Some(p) => {
                            out.extend_from_slice(&input[i..i + p + 1]);
                            i += p + 1;
                            self.state = State::Cr;
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
                    b => {
                        out.push(b);
                        self.state = State::Middle;
                    }
                },
                State::Cr => {
                    let b = input[i];
                    out.push(b);
                    self.state = match b {
                        b'\n' => State::LineStart,
                        b'\r' => State::Cr,
                        _ => State::Middle,
                    };
                }
                State::Dot => match input[i] {
                    b'\r' => self.state = State::DotCr,
                    b => {
                        // The dot was stuffing; this byte is text.
                        out.push(b);
                        self.state = State::Middle;
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
    fn bare_lf_dot_is_not_the_end() {
        let (msg, _) = run(b"a\n.\nb\r\n.\r\n", &[100]);
        assert_eq!(msg, b"a\n.\nb\r\n");
    }

    #[test]
    fn dot_cr_without_lf_is_text() {
        let (msg, _) = run(b".\rx\r\n.\r\n", &[1]);
        assert_eq!(msg, b"\rx\r\n");
    }

    proptest! {
        #[test]
        fn any_split_gives_the_original_message(
            lines in proptest::collection::vec("[.a-z\r]{0,12}", 0..12),
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
