//! The data stage: the message streams from the client into the store in
//! pieces, never whole in memory. DATA's dot-stuffing (RFC 5321 §4.5.2) is
//! removed on the fly; BDAT chunks (RFC 3030) are counted out exactly.

use std::time::{Duration, Instant};

use net::{DotUnstuffer, Input, LineEnds, Stream};
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
    /// All data arrived, but the store failed to take it (`full`: for
    /// lack of space); nothing more was written after the failure, so the
    /// session can still answer in step.
    StoreFailed {
        /// The disk was full ([`store::StoreError::is_full`]).
        full: bool,
    },
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

/// The end of a transfer whose write to the store failed with `e`: the
/// rest of the data is still read (and dropped), so the reply comes in
/// step instead of a dropped connection.
fn store_failed(e: &store::StoreError) -> DataEnd {
    let full = e.is_full();
    if full {
        // Said once by the store's free-space watch; here per message at
        // debug only.
        tracing::debug!(error = %e, "message write failed: disk full");
    } else {
        tracing::error!(error = %e, "message write failed");
    }
    DataEnd::StoreFailed { full }
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
    let mut failed = None;
    loop {
        if input.buffered().is_empty() {
            if let Err(end) = more(input, stream, clock, received).await {
                return end;
            }
        }
        let (used, done) = unstuffer.feed(input.buffered(), &mut out);
        input.consume(used);
        received += used as u64;
        if !too_big && !infected && failed.is_none() {
            infected = taps.feed(&out);
            if writer.size() + out.len() as u64 > max {
                too_big = true;
            } else if let Err(e) = writer.write(&out).await {
                failed = Some(store_failed(&e));
            }
        }
        out.clear();
        if done {
            return if let Some(end) = failed {
                end
            } else if too_big {
                DataEnd::TooBig
            } else {
                DataEnd::Complete
            };
        }
    }
}

/// Receives exactly `count` bytes (one BDAT chunk) into `writer` and
/// `taps`, with bare line ends made CRLF as in DATA
/// ([`net::DotUnstuffer`]); `last` ends the message.
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
    let mut failed = None;
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
        if !too_big && !infected && failed.is_none() {
            infected = taps.feed(&out);
            if writer.size() + out.len() as u64 > max {
                too_big = true;
            } else if let Err(e) = writer.write(&out).await {
                failed = Some(store_failed(&e));
            }
        }
        if at_end {
            break;
        }
    }
    if let Some(end) = failed {
        end
    } else if too_big {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
