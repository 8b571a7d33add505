//! A fixed-size input buffer that hands out complete lines.
//!
//! A pre-trust SMTP session owns nothing else: its buffer is small and
//! never grows, whatever the client sends. A session that needs more room
//! (the SMTP data stage, an IMAP literal) asks for it explicitly.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Why no line came back.
#[derive(Debug, PartialEq, Eq)]
pub enum LineError {
    /// The line did not fit in the buffer; it has been skipped up to and
    /// including its line feed.
    TooLong,
    /// The client closed the connection.
    Closed,
    /// The socket failed.
    Io(std::io::ErrorKind),
}

/// Buffered input from one connection.
pub struct Input {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl Input {
    /// A buffer of `capacity` bytes; the longest line it returns is that.
    pub fn new(capacity: usize) -> Input {
        Input {
            buf: vec![0; capacity].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Current capacity.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Changes the capacity, keeping buffered bytes (never below them).
    pub fn set_capacity(&mut self, capacity: usize) {
        let keep = self.end - self.start;
        let mut buf = vec![0; capacity.max(keep)].into_boxed_slice();
        buf[..keep].copy_from_slice(&self.buf[self.start..self.end]);
        self.buf = buf;
        self.start = 0;
        self.end = keep;
    }

    /// Bytes received but not consumed yet.
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Marks `n` buffered bytes as consumed.
    pub fn consume(&mut self, n: usize) {
        assert!(n <= self.end - self.start);
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Drops everything buffered (RFC 3207 §4.2: nothing sent before the
    /// TLS handshake may be acted on after it).
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// Reads more bytes from `io` into free space; returns how many (0 at
    /// end of stream).
    pub async fn fill<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        io: &mut R,
    ) -> std::io::Result<usize> {
        if self.start > 0 && (self.end == self.buf.len() || self.start == self.end) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            return Ok(0);
        }
        let n = io.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n)
    }

    /// The next complete line, including its line feed, consumed from the
    /// buffer. The slice is valid until the next call.
    pub async fn read_line<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        io: &mut R,
    ) -> Result<&[u8], LineError> {
        let mut scanned = 0;
        let mut skipping = false;
        loop {
            if let Some(pos) = self.buf[self.start + scanned..self.end]
                .iter()
                .position(|&b| b == b'\n')
            {
                let line_end = self.start + scanned + pos + 1;
                if skipping {
                    self.start = line_end;
                    return Err(LineError::TooLong);
                }
                let line_start = self.start;
                // Offsets are reset lazily (in fill) so the slice stays valid.
                self.start = line_end;
                return Ok(&self.buf[line_start..line_end]);
            }
            scanned = self.end - self.start;
            if self.end - self.start == self.buf.len() {
                // Full and no line feed: the line is too long. Drop it and
                // keep reading until its end.
                skipping = true;
                self.start = 0;
                self.end = 0;
                scanned = 0;
            } else if self.start > 0 && self.end == self.buf.len() {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            match io.read(&mut self.buf[self.end..]).await {
                Ok(0) => return Err(LineError::Closed),
                Ok(n) => self.end += n,
                Err(e) => return Err(LineError::Io(e.kind())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A reader that hands out its data in the given piece sizes.
    struct Pieces {
        data: Vec<u8>,
        sizes: Vec<usize>,
        pos: usize,
        i: usize,
    }

    impl AsyncRead for Pieces {
        fn poll_read(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            let size = self.sizes.get(self.i).copied().unwrap_or(7).max(1);
            self.i += 1;
            let n = size.min(self.data.len() - self.pos).min(buf.remaining());
            let pos = self.pos;
            buf.put_slice(&self.data[pos..pos + n]);
            self.pos += n;
            std::task::Poll::Ready(Ok(()))
        }
    }

    async fn lines(data: &[u8], sizes: Vec<usize>, cap: usize) -> Vec<Result<Vec<u8>, LineError>> {
        let mut io = Pieces {
            data: data.to_vec(),
            sizes,
            pos: 0,
            i: 0,
        };
        let mut input = Input::new(cap);
        let mut out = Vec::new();
        loop {
            match input.read_line(&mut io).await {
                Ok(l) => out.push(Ok(l.to_vec())),
                Err(LineError::Closed) => break,
                Err(e) => out.push(Err(e)),
            }
        }
        out
    }

    #[tokio::test]
    async fn long_lines_are_skipped_whole() {
        let data = b"short\r\n0123456789abcdef\r\nnext\r\n";
        let got = lines(data, vec![3, 5, 100], 10).await;
        assert_eq!(
            got,
            vec![
                Ok(b"short\r\n".to_vec()),
                Err(LineError::TooLong),
                Ok(b"next\r\n".to_vec())
            ]
        );
    }

    proptest! {
        #[test]
        fn any_read_pattern_gives_the_same_lines(
            lines_in in proptest::collection::vec("[a-z ]{0,20}", 0..20),
            sizes in proptest::collection::vec(1usize..40, 0..50),
        ) {
            let data: Vec<u8> = lines_in.iter().flat_map(|l| format!("{l}\r\n").into_bytes()).collect();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got = rt.block_on(lines(&data, sizes, 64));
            let want: Vec<_> = lines_in.iter().map(|l| Ok(format!("{l}\r\n").into_bytes())).collect();
            prop_assert_eq!(got, want);
        }
    }
}
