//! Entry points for the fuzz targets in `fuzz/`; not an API.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

use crate::input::{Input, LineError};

/// Bytes handed out in reads of the given sizes, in turn.
struct Chunked<'a> {
    data: &'a [u8],
    sizes: &'a [u8],
    turn: usize,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let size = match self.sizes.get(self.turn % self.sizes.len().max(1)) {
            Some(s) => usize::from(*s).max(1),
            None => usize::MAX,
        };
        self.turn += 1;
        let n = size.min(buf.remaining()).min(self.data.len());
        let (now, later) = self.data.split_at(n);
        buf.put_slice(now);
        self.data = later;
        Poll::Ready(Ok(()))
    }
}

/// What reading lines must give: each line (with its LF) that fits in
/// `capacity`, `TooLong` for each that does not, then `Closed`.
fn expected(data: &[u8], capacity: usize) -> Vec<Result<Vec<u8>, LineError>> {
    let mut out = Vec::new();
    for line in data.split_inclusive(|b| *b == b'\n') {
        if !line.ends_with(b"\n") {
            break;
        }
        out.push(if line.len() <= capacity {
            Ok(line.to_vec())
        } else {
            Err(LineError::TooLong)
        });
    }
    out.push(Err(LineError::Closed));
    out
}

/// Input: a capacity byte, a count of read sizes, the read sizes, then
/// the bytes the client sends.
pub fn line_input(data: &[u8]) {
    let [capacity, n, rest @ ..] = data else {
        return;
    };
    let capacity = usize::from(*capacity).max(1);
    let (sizes, sent) = rest.split_at(usize::from(*n).min(rest.len()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let got = runtime.block_on(async {
        let mut input = Input::new(capacity);
        let mut io = Chunked {
            data: sent,
            sizes,
            turn: 0,
        };
        let mut got = Vec::new();
        loop {
            match input.read_line(&mut io).await {
                Ok(line) => {
                    assert!(line.len() <= capacity);
                    got.push(Ok(line.to_vec()));
                }
                Err(e) => {
                    let end = e == LineError::Closed;
                    got.push(Err(e));
                    if end {
                        break;
                    }
                }
            }
        }
        got
    });
    assert_eq!(got, expected(sent, capacity));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_fit_and_lines_that_do_not() {
        // Capacity 8, reads of 3 then 1 byte.
        line_input(b"\x08\x02\x03\x01ab\nccccccccccc\nd\nrest");
        line_input(b"\x01\x00\n\n\nx");
        line_input(b"");
    }
}
