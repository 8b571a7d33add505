//! A client connection that may be plain TCP or TLS, and may become TLS in
//! the middle of a session (STARTTLS, STLS).

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

/// Anything a session can talk over.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Io for T {}

/// A session's connection. Boxed so a TLS upgrade replaces it in place:
/// `stream = Box::new(acceptor.accept(stream).await?)`.
pub type Stream = Box<dyn Io>;

/// Writes and flushes `data`; false if the connection failed or the client
/// did not take the data within `timeout` (a client that stops reading must
/// not hold a session forever).
pub async fn send(stream: &mut Stream, data: &[u8], timeout: Duration) -> bool {
    let write = async {
        stream.write_all(data).await?;
        stream.flush().await
    };
    matches!(tokio::time::timeout(timeout, write).await, Ok(Ok(())))
}

/// The stream of a new connection: as it is, or, on an implicit-TLS port
/// (RFC 8314: 465, 993, 995), after a TLS handshake that must finish within
/// `timeout`. `None` when the handshake fails or TLS is not configured.
pub async fn open_stream(
    socket: tokio::net::TcpStream,
    implicit_tls: Option<&tokio_rustls::TlsAcceptor>,
    timeout: Duration,
) -> Option<Stream> {
    let Some(acceptor) = implicit_tls else {
        return Some(Box::new(socket));
    };
    match tokio::time::timeout(timeout, acceptor.accept(socket)).await {
        Ok(Ok(tls)) => Some(Box::new(tls)),
        _ => None,
    }
}

/// Upgrades a session's stream to TLS in place (STARTTLS, STLS). The stream
/// is left empty, and false returned, when the handshake fails.
pub async fn start_tls(
    stream: &mut Stream,
    acceptor: &tokio_rustls::TlsAcceptor,
    timeout: Duration,
) -> bool {
    let plain = std::mem::replace(stream, Box::new(tokio::io::empty()));
    match tokio::time::timeout(timeout, acceptor.accept(plain)).await {
        Ok(Ok(tls)) => {
            *stream = Box::new(tls);
            true
        }
        _ => false,
    }
}

/// Sends what a session buffered (see [`send`]) and empties the buffer. A
/// buffer that grew past eight times `keep` bytes (a long listing) is cut
/// back to `keep`, so an idle session does not hold its largest reply.
pub async fn send_buffered(
    stream: &mut Stream,
    out: &mut Vec<u8>,
    timeout: Duration,
    keep: usize,
) -> bool {
    if out.is_empty() {
        return true;
    }
    let ok = send(stream, out, timeout).await;
    out.clear();
    if out.capacity() > keep * 8 {
        out.shrink_to(keep);
    }
    ok
}
