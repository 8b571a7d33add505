//! A client connection that may be plain TCP or TLS, and may become TLS in
//! the middle of a session (STARTTLS, STLS).

use tokio::io::{AsyncRead, AsyncWrite};

/// Anything a session can talk over.
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> Io for T {}

/// A session's connection. Boxed so a TLS upgrade replaces it in place:
/// `stream = Box::new(acceptor.accept(stream).await?)`.
pub type Stream = Box<dyn Io>;
