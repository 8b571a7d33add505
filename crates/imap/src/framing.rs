//! Splits the client's byte stream into commands: lines and the literals
//! they announce (RFC 3501 §4.3, RFC 7888 LITERAL+), within a size bound.
//!
//! imap-codec parses a command once it is whole; this module decides when
//! it is whole, answers synchronising literals with a continuation request,
//! and hands an APPEND's message literal to the session unread, so the
//! session can stream it into the store instead of holding it in memory.

use std::time::Duration;

use net::{Input, Stream};
use tokio::io::AsyncWriteExt;

/// What the reader produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A whole command, literals included, ready for the decoder.
    Command(Vec<u8>),
    /// An APPEND whose message literal has not been read: `head` is the
    /// command up to the literal's announcement (exclusive), `length` the
    /// message size, `sync` whether the client waits for a continuation.
    Append {
        head: Vec<u8>,
        length: u64,
        sync: bool,
    },
    /// The command was longer than allowed and has been skipped (its
    /// literals included). `head` is its start, for the tag.
    TooLong { head: Vec<u8> },
    /// A synchronising literal that would make the command too long: the
    /// client waits and will not send it.
    LiteralRefused { head: Vec<u8> },
}

/// Why no frame came back.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The client closed the connection or the socket failed.
    Closed,
    /// Nothing arrived in time.
    Timeout,
}

/// The literal announced at the end of `cmd`'s last line: `{N}`, `{N+}`
/// (LITERAL+), as (length, synchronising, offset of the `{`).
pub(crate) fn literal_announcement(line: &[u8]) -> Option<(u64, bool, usize)> {
    let line = line.strip_suffix(b"\n")?;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let body = line.strip_suffix(b"}")?;
    let open = body.iter().rposition(|&b| b == b'{')?;
    let mut digits = &body[open + 1..];
    let sync = match digits.strip_suffix(b"+") {
        Some(d) => {
            digits = d;
            false
        }
        None => true,
    };
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some((n, sync, open))
}

/// Reads one command. `is_append_message` tells, for a command that stops
/// at a literal, whether that literal is an APPEND's message.
pub(crate) async fn read_command(
    input: &mut Input,
    stream: &mut Stream,
    max: usize,
    timeout: Duration,
    is_append_message: impl Fn(&[u8]) -> bool,
) -> Result<Frame, ReadError> {
    let mut cmd = Vec::new();
    let mut too_long = false;
    loop {
        let fits = read_line(input, stream, &mut cmd, max, timeout).await?;
        too_long |= !fits;
        if too_long {
            // The line was cut: a literal it announced is lost with it, so
            // nothing more can be skipped reliably than this line.
            return Ok(Frame::TooLong { head: cmd });
        }
        let Some((length, sync, at)) = literal_announcement(&cmd) else {
            return Ok(Frame::Command(cmd));
        };
        if is_append_message(&cmd[..at]) {
            cmd.truncate(at);
            return Ok(Frame::Append {
                head: cmd,
                length,
                sync,
            });
        }
        if cmd.len() as u64 + length > max as u64 {
            if sync {
                return Ok(Frame::LiteralRefused { head: cmd });
            }
            // Non-synchronising: the bytes are coming; drop them and the
            // rest of the command.
            skip(input, stream, length, timeout).await?;
            let mut rest = Vec::new();
            loop {
                rest.clear();
                read_line(input, stream, &mut rest, max, timeout).await?;
                match literal_announcement(&rest) {
                    Some((n, false, _)) => skip(input, stream, n, timeout).await?,
                    _ => break,
                }
            }
            return Ok(Frame::TooLong { head: cmd });
        }
        if sync {
            let ok = net::send(stream, b"+ Ready for literal data\r\n", timeout).await;
            if !ok {
                return Err(ReadError::Closed);
            }
        }
        read_exact(input, stream, &mut cmd, length as usize, timeout).await?;
    }
}

/// Appends one line (through its LF) to `out`. Returns false if it did not
/// fit in `max` (the rest of the line is consumed and dropped).
async fn read_line(
    input: &mut Input,
    stream: &mut Stream,
    out: &mut Vec<u8>,
    max: usize,
    timeout: Duration,
) -> Result<bool, ReadError> {
    let mut fits = true;
    loop {
        let buffered = input.buffered();
        let (take, done) = match buffered.iter().position(|&b| b == b'\n') {
            Some(p) => (p + 1, true),
            None => (buffered.len(), false),
        };
        if fits && out.len() + take <= max {
            out.extend_from_slice(&buffered[..take]);
        } else {
            fits = false;
        }
        input.consume(take);
        if done {
            return Ok(fits);
        }
        fill(input, stream, timeout).await?;
    }
}

/// Appends exactly `n` bytes to `out`.
async fn read_exact(
    input: &mut Input,
    stream: &mut Stream,
    out: &mut Vec<u8>,
    mut n: usize,
    timeout: Duration,
) -> Result<(), ReadError> {
    out.reserve(n);
    while n > 0 {
        if input.buffered().is_empty() {
            fill(input, stream, timeout).await?;
        }
        let take = n.min(input.buffered().len());
        out.extend_from_slice(&input.buffered()[..take]);
        input.consume(take);
        n -= take;
    }
    Ok(())
}

/// Drops `n` bytes of input.
pub(crate) async fn skip(
    input: &mut Input,
    stream: &mut Stream,
    mut n: u64,
    timeout: Duration,
) -> Result<(), ReadError> {
    while n > 0 {
        if input.buffered().is_empty() {
            fill(input, stream, timeout).await?;
        }
        let take = (n as usize).min(input.buffered().len());
        input.consume(take);
        n -= take as u64;
    }
    Ok(())
}

/// Reads the rest of a command line after a streamed literal.
pub(crate) async fn read_rest(
    input: &mut Input,
    stream: &mut Stream,
    max: usize,
    timeout: Duration,
) -> Result<Vec<u8>, ReadError> {
    let mut out = Vec::new();
    read_line(input, stream, &mut out, max, timeout).await?;
    Ok(out)
}

pub(crate) async fn fill(
    input: &mut Input,
    stream: &mut Stream,
    timeout: Duration,
) -> Result<(), ReadError> {
    match tokio::time::timeout(timeout, input.fill(stream)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Err(ReadError::Closed),
        Ok(Ok(_)) => Ok(()),
        Err(_) => Err(ReadError::Timeout),
    }
}

/// Flushes and shuts the stream down.
pub(crate) async fn close(stream: &mut Stream) {
    let _ = stream.flush().await;
    let _ = stream.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tokio::io::AsyncReadExt;

    /// Runs `read_command` over `input` sent in `pieces`; returns the
    /// frames and what the server wrote back.
    fn frames(input: &[u8], pieces: &[usize], max: usize) -> (Vec<Frame>, Vec<u8>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (client, server) = tokio::io::duplex(1 << 20);
            let mut stream: Stream = Box::new(server);
            let (mut rd, mut wr) = tokio::io::split(client);
            let data = input.to_vec();
            let cuts = pieces.to_vec();
            let writer = tokio::spawn(async move {
                let mut rest = &data[..];
                for c in cuts {
                    let (now, later) = rest.split_at(c.min(rest.len()));
                    wr.write_all(now).await.unwrap();
                    rest = later;
                    tokio::task::yield_now().await;
                }
                wr.write_all(rest).await.unwrap();
                wr.shutdown().await.unwrap();
            });
            let mut input = Input::new(64);
            let mut out = Vec::new();
            let timeout = Duration::from_secs(5);
            while let Ok(f) = read_command(&mut input, &mut stream, max, timeout, |_| false).await {
                out.push(f);
            }
            writer.await.unwrap();
            drop(stream);
            let mut echoed = Vec::new();
            rd.read_to_end(&mut echoed).await.unwrap();
            (out, echoed)
        })
    }

    #[test]
    fn literals_are_read_whole() {
        let (f, echoed) = frames(
            b"a LOGIN {3}\r\nbob {5+}\r\nsecre\r\nb NOOP\r\n",
            &[5, 9, 3],
            1000,
        );
        assert_eq!(
            f,
            vec![
                Frame::Command(b"a LOGIN {3}\r\nbob {5+}\r\nsecre\r\n".to_vec()),
                Frame::Command(b"b NOOP\r\n".to_vec())
            ]
        );
        // One continuation, for the synchronising literal only.
        assert_eq!(echoed, b"+ Ready for literal data\r\n");
    }

    #[test]
    fn oversized_commands_are_skipped() {
        let long = format!("a NOOP {}\r\nb NOOP\r\n", "x".repeat(300));
        let (f, _) = frames(long.as_bytes(), &[], 100);
        assert!(matches!(&f[0], Frame::TooLong { .. }));
        assert_eq!(f[1], Frame::Command(b"b NOOP\r\n".to_vec()));
        let (f, echoed) = frames(b"a LOGIN {500}\r\nb NOOP\r\n", &[], 100);
        assert!(matches!(&f[0], Frame::LiteralRefused { .. }));
        assert_eq!(f[1], Frame::Command(b"b NOOP\r\n".to_vec()));
        assert!(echoed.is_empty());
        // A non-synchronising literal is on its way: it is drained.
        let mut big = b"a LOGIN {500+}\r\n".to_vec();
        big.extend(std::iter::repeat_n(b'z', 500));
        big.extend_from_slice(b" x\r\nb NOOP\r\n");
        let (f, _) = frames(&big, &[7, 100], 100);
        assert!(matches!(&f[0], Frame::TooLong { .. }));
        assert_eq!(f[1], Frame::Command(b"b NOOP\r\n".to_vec()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// However the bytes arrive, the same commands come out.
        #[test]
        fn chunking_does_not_matter(
            words in proptest::collection::vec("[a-z]{1,12}", 1..6),
            literal in proptest::collection::vec(any::<u8>(), 0..200),
            pieces in proptest::collection::vec(1usize..40, 0..20),
        ) {
            let mut cmd = format!("t1 X {} {{{}+}}\r\n", words.join(" "), literal.len()).into_bytes();
            cmd.extend_from_slice(&literal);
            cmd.extend_from_slice(b"\r\nt2 NOOP\r\n");
            let (f, _) = frames(&cmd, &pieces, 10_000);
            let first_len = cmd.len() - b"t2 NOOP\r\n".len();
            prop_assert_eq!(f.len(), 2);
            prop_assert_eq!(&f[0], &Frame::Command(cmd[..first_len].to_vec()));
        }
    }

    #[test]
    fn announcements() {
        assert_eq!(literal_announcement(b"a LOGIN {5}\r\n"), Some((5, true, 8)));
        assert_eq!(
            literal_announcement(b"a LOGIN {5+}\r\n"),
            Some((5, false, 8))
        );
        assert_eq!(literal_announcement(b"a LOGIN {5}\n"), Some((5, true, 8)));
        assert_eq!(literal_announcement(b"a LOGIN {}\r\n"), None);
        assert_eq!(literal_announcement(b"a LOGIN {x}\r\n"), None);
        assert_eq!(literal_announcement(b"a LOGIN a b\r\n"), None);
        assert_eq!(
            literal_announcement(b"a APPEND INBOX {99999999999999999999}\r\n"),
            None
        );
    }
}
