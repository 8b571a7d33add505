//! A line-oriented client connection: connect (optionally from a chosen
//! source address), write commands, read CRLF lines and exact byte counts,
//! every read under a timeout; in clear or TLS (implicit, or after
//! STARTTLS).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadBuf,
};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;

use crate::error::{BenchError, Result};
use crate::tls::Tls;

/// The longest line we accept from a server; longer means a broken peer.
const MAX_LINE: usize = 1 << 20;

/// The byte stream under a connection.
enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A client connection with a buffered reader and a per-read timeout.
/// (tokio's `BufReader` passes writes through to the stream under it.)
pub struct Conn {
    stream: BufReader<Io>,
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
        Ok(Conn {
            stream: BufReader::with_capacity(64 * 1024, Io::Plain(stream)),
            timeout,
            bytes_in: 0,
        })
    }

    /// Starts TLS on the connection (right after connecting for implicit
    /// TLS, or after the server's go-ahead to STARTTLS).
    pub async fn start_tls(self, tls: &Tls) -> Result<Conn> {
        if !self.stream.buffer().is_empty() {
            // Bytes read before the handshake would be injected plaintext.
            return Err(BenchError::Protocol("data after the STARTTLS reply".into()));
        }
        let Io::Plain(tcp) = self.stream.into_inner() else {
            return Err(BenchError::Protocol("TLS is already on".into()));
        };
        let handshake = tls.connector.connect(tls.name.clone(), tcp);
        let stream = tokio::time::timeout(self.timeout, handshake)
            .await
            .map_err(|_| BenchError::Timeout(self.timeout))??;
        Ok(Conn {
            stream: BufReader::with_capacity(64 * 1024, Io::Tls(Box::new(stream))),
            timeout: self.timeout,
            bytes_in: self.bytes_in,
        })
    }

    /// Writes all of `bytes`.
    pub async fn send(&mut self, bytes: &[u8]) -> Result<()> {
        tokio::time::timeout(self.timeout, self.stream.write_all(bytes))
            .await
            .map_err(|_| BenchError::Timeout(self.timeout))??;
        Ok(())
    }

    /// Reads one line into `line` (cleared first), without its CRLF.
    pub async fn read_line(&mut self, line: &mut Vec<u8>) -> Result<()> {
        line.clear();
        let read = async {
            loop {
                let buf = self.stream.fill_buf().await?;
                if buf.is_empty() {
                    return Err(BenchError::Closed);
                }
                match buf.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        line.extend_from_slice(&buf[..i]);
                        self.stream.consume(i + 1);
                        self.bytes_in += i as u64 + 1;
                        break;
                    }
                    None => {
                        let n = buf.len();
                        line.extend_from_slice(buf);
                        self.stream.consume(n);
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
                tokio::io::copy(&mut (&mut self.stream).take(n), &mut tokio::io::sink()).await?;
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
        let _ = self.stream.shutdown().await;
    }
}
