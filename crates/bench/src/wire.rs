//! A line-oriented client connection: connect (optionally from a chosen
//! source address), write commands, read CRLF lines and exact byte counts,
//! every read under a timeout.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpSocket, TcpStream};

use crate::error::{BenchError, Result};

/// The longest line we accept from a server; longer means a broken peer.
const MAX_LINE: usize = 1 << 20;

/// A client connection with a buffered reader and a per-read timeout.
pub struct Conn {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    timeout: Duration,
    /// Bytes read so far (protocol overhead included).
    pub bytes_in: u64,
}

impl Conn {
    /// Connects to `server`, from `source` when given (the socket is bound
    /// to that address, port 0, before connecting).
    pub async fn connect(
        server: SocketAddr,
        source: Option<IpAddr>,
        timeout: Duration,
    ) -> Result<Conn> {
        let connect = async {
            let stream = match source {
                None => TcpStream::connect(server).await?,
                Some(ip) => {
                    let socket = if ip.is_ipv4() {
                        TcpSocket::new_v4()?
                    } else {
                        TcpSocket::new_v6()?
                    };
                    socket.bind(SocketAddr::new(ip, 0))?;
                    socket.connect(server).await?
                }
            };
            stream.set_nodelay(true)?;
            Ok::<_, std::io::Error>(stream)
        };
        let stream = tokio::time::timeout(timeout, connect)
            .await
            .map_err(|_| BenchError::Timeout(timeout))??;
        let (r, w) = stream.into_split();
        Ok(Conn {
            reader: BufReader::with_capacity(64 * 1024, r),
            writer: w,
            timeout,
            bytes_in: 0,
        })
    }

    /// Writes all of `bytes`.
    pub async fn send(&mut self, bytes: &[u8]) -> Result<()> {
        tokio::time::timeout(self.timeout, self.writer.write_all(bytes))
            .await
            .map_err(|_| BenchError::Timeout(self.timeout))??;
        Ok(())
    }

    /// Reads one line into `line` (cleared first), without its CRLF.
    pub async fn read_line(&mut self, line: &mut Vec<u8>) -> Result<()> {
        line.clear();
        let read = async {
            loop {
                let buf = self.reader.fill_buf().await?;
                if buf.is_empty() {
                    return Err(BenchError::Closed);
                }
                match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        line.extend_from_slice(&buf[..i]);
                        self.reader.consume(i + 1);
                        self.bytes_in += i as u64 + 1;
                        break;
                    }
                    None => {
                        let n = buf.len();
                        line.extend_from_slice(buf);
                        self.reader.consume(n);
                        self.bytes_in += n as u64;
                    }
                }
                if line.len() > MAX_LINE {
                    return Err(BenchError::Protocol("line too long".into()));
                }
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            Ok(())
        };
        tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| BenchError::Timeout(self.timeout))?
    }

    /// Reads exactly `n` bytes and throws them away (an IMAP literal).
    pub async fn skip_exact(&mut self, n: u64) -> Result<()> {
        let read = async {
            let copied =
                tokio::io::copy(&mut (&mut self.reader).take(n), &mut tokio::io::sink()).await?;
            if copied < n {
                return Err(BenchError::Closed);
            }
            Ok(())
        };
        tokio::time::timeout(self.timeout, read)
            .await
            .map_err(|_| BenchError::Timeout(self.timeout))??;
        self.bytes_in += n;
        Ok(())
    }

    /// Closes the write side; the server sees end of input.
    pub async fn shutdown(&mut self) {
        let _ = self.writer.shutdown().await;
    }
}
