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
