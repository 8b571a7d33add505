//! The connection to the upstream server: TCP with a deadline, the PROXY
//! header when configured, TLS (implicit, or after STARTTLS/STLS), and
//! reading its lines with a timeout.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use net::{Input, LineError, Stream};
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use crate::config::{ClientAddress, ProxyConfig, UpstreamTls};
use crate::Context;

/// Longest line the proxy takes from the upstream as one unit (replies and
/// responses; message lines longer than this are passed on in pieces).
pub(crate) const LINE: usize = 16 * 1024;

/// Why the upstream cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("no answer in time")]
    Timeout,
    #[error("connection closed")]
    Closed,
    #[error("line too long")]
    TooLong,
    #[error("TLS: {0}")]
    Tls(String),
    #[error("unexpected answer: {0}")]
    Refused(String),
}

/// An open upstream connection and its input buffer.
pub(crate) struct Upstream {
    pub stream: Stream,
    pub input: Input,
    timeout: Duration,
    /// The redirected connection's destination (transparent entries).
    original: Option<SocketAddr>,
    /// SMTP: the upstream answered something on this connection with 400
    /// or more. Such a connection is not kept for another client
    /// (pool.rs): the upstream may count errors per connection.
    pub refused: bool,
}

/// Builds the TLS connector an entry asks for; `None` for `upstream_tls = "none"`.
pub fn connector(config: &ProxyConfig) -> Result<Option<tokio_rustls::TlsConnector>, String> {
    if config.upstream_tls == UpstreamTls::None {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let tls = if config.upstream_verify {
        let mut roots = rustls::RootCertStore::empty();
        match &config.upstream_ca_file {
            Some(path) => {
                let pem = std::fs::read(path).map_err(|e| {
                    format!("key `proxy.upstream_ca_file`: {}: {e}", path.display())
                })?;
                for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                    let cert = cert.map_err(|e| {
                        format!("key `proxy.upstream_ca_file`: {}: {e}", path.display())
                    })?;
                    roots.add(cert).map_err(|e| {
                        format!("key `proxy.upstream_ca_file`: {}: {e}", path.display())
                    })?;
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(net::SignaturesOnly::new(provider)))
            .with_no_client_auth()
    };
    Ok(Some(tokio_rustls::TlsConnector::from(Arc::new(tls))))
}

/// One client connection's way through the proxy: who the client is,
/// where it reached us, and, for a transparent entry, where it meant to go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Route {
    pub client: SocketAddr,
    /// Where the client reached the proxy; looked up only for the PROXY
    /// header and transparent entries (unspecified otherwise).
    pub local: SocketAddr,
    /// The destination before the firewall's REDIRECT (transparent
    /// entries only): the upstream for this connection.
    pub original: Option<SocketAddr>,
}

impl Route {
    /// The route of an accepted connection. A transparent entry takes
    /// only redirected connections: one made to the proxy's own address
    /// would have it connect to itself, over and over.
    pub fn of(
        ctx: &Context,
        socket: &TcpStream,
        client: SocketAddr,
    ) -> Result<Route, UpstreamError> {
        // One system call less per connection where nothing asks for it.
        let wanted =
            ctx.config.transparent() || ctx.config.client_address == ClientAddress::ProxyV2;
        let local = wanted
            .then(|| socket.local_addr().ok())
            .flatten()
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        let original = if ctx.config.transparent() {
            let dst = crate::transparent::original_destination(socket)
                .map_err(|e| UpstreamError::Connect(format!("no original destination: {e}")))?;
            if dst == local {
                return Err(UpstreamError::Connect(
                    "a transparent proxy takes only redirected connections, not ones made to it directly".into(),
                ));
            }
            Some(dst)
        } else {
            None
        };
        Ok(Route {
            client,
            local,
            original,
        })
    }
}

impl Upstream {
    /// Connects for the client of `route`: TCP, the PROXY header if
    /// configured, and the TLS handshake when TLS is implicit. The
    /// greeting is left for the caller.
    pub async fn connect(ctx: &Context, route: &Route) -> Result<Upstream, UpstreamError> {
        let c = &ctx.config;
        let deadline = Duration::from_secs(c.connect_timeout_secs);
        let connecting = async {
            match route.original {
                Some(addr) => TcpStream::connect(addr).await,
                None => TcpStream::connect(&c.upstream).await,
            }
        };
        let tcp = match tokio::time::timeout(deadline, connecting).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => return Err(UpstreamError::Connect(e.to_string())),
            Err(_) => return Err(UpstreamError::Timeout),
        };
        let mut up = Upstream::plain(tcp, ctx.timeout());
        up.original = route.original;
        if c.client_address == ClientAddress::ProxyV2 {
            up.send(&crate::proxy_v2::header(route.client, route.local))
                .await?;
        }
        if c.upstream_tls == UpstreamTls::Implicit {
            up.start_tls(ctx).await?;
        }
        Ok(up)
    }

    /// A plain TCP connection, nothing sent or read yet.
    pub fn plain(tcp: TcpStream, timeout: Duration) -> Upstream {
        let _ = tcp.set_nodelay(true);
        Upstream {
            stream: Box::new(tcp),
            input: Input::new(LINE),
            timeout,
            original: None,
            refused: false,
        }
    }

    /// Whether a connection that waited between sessions has been closed,
    /// or has said something unasked (a timeout notice before closing),
    /// either of which makes it useless. Looks without waiting.
    pub fn closed_while_idle(&mut self) -> bool {
        if !self.input.buffered().is_empty() {
            return true;
        }
        let mut fill = std::pin::pin!(self.input.fill(&mut self.stream));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        // Pending: nothing to read, the connection is open and quiet.
        fill.as_mut().poll(&mut cx).is_ready()
    }

    /// The TLS handshake with the upstream, on the current connection.
    pub async fn start_tls(&mut self, ctx: &Context) -> Result<(), UpstreamError> {
        let Some(connector) = &ctx.upstream_tls else {
            return Err(UpstreamError::Tls("no TLS configured".into()));
        };
        let host = ctx
            .config
            .upstream_name
            .clone()
            .or_else(|| ctx.config.upstream_host().map(str::to_string))
            .or_else(|| self.original.map(|a| a.ip().to_string()))
            .unwrap_or_default();
        let name = ServerName::try_from(host).map_err(|e| UpstreamError::Tls(e.to_string()))?;
        let plain = std::mem::replace(&mut self.stream, Box::new(tokio::io::empty()));
        let deadline = Duration::from_secs(ctx.config.connect_timeout_secs);
        match tokio::time::timeout(deadline, connector.connect(name, plain)).await {
            Ok(Ok(tls)) => {
                self.stream = Box::new(tls);
                self.input.clear();
                Ok(())
            }
            Ok(Err(e)) => Err(UpstreamError::Tls(e.to_string())),
            Err(_) => Err(UpstreamError::Timeout),
        }
    }

    /// Writes and flushes `data`, waiting at most the timeout.
    pub async fn send(&mut self, data: &[u8]) -> Result<(), UpstreamError> {
        if net::send(&mut self.stream, data, self.timeout).await {
            Ok(())
        } else {
            Err(UpstreamError::Closed)
        }
    }

    /// The next line from the upstream, with its line end.
    pub async fn line(&mut self) -> Result<&[u8], UpstreamError> {
        match tokio::time::timeout(self.timeout, self.input.read_line(&mut self.stream)).await {
            Err(_) => Err(UpstreamError::Timeout),
            Ok(Ok(line)) => Ok(line),
            Ok(Err(LineError::TooLong)) => Err(UpstreamError::TooLong),
            Ok(Err(_)) => Err(UpstreamError::Closed),
        }
    }

    /// Reads more bytes into the input buffer (for message text that is
    /// passed on in pieces); an error at end of stream.
    pub async fn fill(&mut self) -> Result<(), UpstreamError> {
        match tokio::time::timeout(self.timeout, self.input.fill(&mut self.stream)).await {
            Err(_) => Err(UpstreamError::Timeout),
            Ok(Ok(0)) | Ok(Err(_)) => Err(UpstreamError::Closed),
            Ok(Ok(_)) => Ok(()),
        }
    }
}
