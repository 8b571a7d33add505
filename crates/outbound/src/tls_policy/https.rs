//! Fetching an MTA-STS policy file: HTTP/1.1 GET over rustls to
//! `https://mta-sts.DOMAIN/.well-known/mta-sts.txt` (RFC 8461 §3.3).
//! No redirects, a bounded body, one overall deadline.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest policy body accepted (RFC 8461 §3.3 suggests 64 KiB).
pub const BODY_LIMIT: usize = 64 * 1024;
/// The largest response header block accepted.
const HEADER_LIMIT: usize = 8 * 1024;
/// The deadline for the whole fetch (RFC 8461 §3.3: "reasonable
/// timeouts", suggesting at most a minute).
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a policy could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// DNS gave no address for the policy host.
    #[error("no address for {0}")]
    NoAddress(String),
    /// Connecting, TLS or reading failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The whole fetch took longer than [`FETCH_TIMEOUT`].
    #[error("timed out")]
    Timeout,
    /// The answer is not a 200 with a `text/plain` body within limits.
    #[error("bad HTTP answer: {0}")]
    Http(String),
}

/// Fetches the policy of `domain` from one of `addrs` (the addresses of
/// `mta-sts.DOMAIN`), port `port`, verifying the certificate with `tls`
/// for the name `mta-sts.DOMAIN`. Returns the body as text.
pub async fn fetch_policy(
    tls: Arc<rustls::ClientConfig>,
    domain: &str,
    addrs: &[SocketAddr],
) -> Result<String, FetchError> {
    tokio::time::timeout(FETCH_TIMEOUT, fetch_inner(tls, domain, addrs))
        .await
        .map_err(|_| FetchError::Timeout)?
}

async fn fetch_inner(
    tls: Arc<rustls::ClientConfig>,
    domain: &str,
    addrs: &[SocketAddr],
) -> Result<String, FetchError> {
    let host = format!("mta-sts.{domain}");
    let mut last = FetchError::NoAddress(host.clone());
    for addr in addrs {
        match fetch_from(tls.clone(), &host, *addr).await {
            Ok(body) => return Ok(body),
            // A bad answer from a reachable server is final.
            Err(e @ FetchError::Http(_)) => return Err(e),
            Err(e) => last = e,
        }
    }
    Err(last)
}

async fn fetch_from(
    tls: Arc<rustls::ClientConfig>,
    host: &str,
    addr: SocketAddr,
) -> Result<String, FetchError> {
    let name = ServerName::try_from(host.to_string())
        .map_err(|_| FetchError::Http(format!("bad host name {host:?}")))?;
    let tcp = TcpStream::connect(addr).await?;
    let mut stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await?;
    let request = format!(
        "GET /.well-known/mta-sts.txt HTTP/1.1\r\nHost: {host}\r\nUser-Agent: Sluice\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    // Read at most headers + body + chunk framing; anything longer is refused.
    let cap = HEADER_LIMIT + BODY_LIMIT + 4096;
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut chunk = [0u8; 8192];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(n) => n,
            // Servers often close without close_notify after Connection: close.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            break;
        }
        if buf.len() + n > cap {
            return Err(FetchError::Http("response too large".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    parse_response(&buf)
}

/// Parses a complete HTTP/1.x response: status 200 only (no redirects,
/// RFC 8461 §3.3), `Content-Type: text/plain`, body by Content-Length,
/// chunked encoding or connection close, at most [`BODY_LIMIT`] bytes.
pub fn parse_response(buf: &[u8]) -> Result<String, FetchError> {
    let bad = |s: &str| FetchError::Http(s.to_string());
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of header"))?;
    if end > HEADER_LIMIT {
        return Err(bad("header too large"));
    }
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| bad("header not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let mut parts = status.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(bad("not HTTP/1"));
    }
    if code != "200" {
        return Err(FetchError::Http(format!("status {code}")));
    }
    let mut length = None;
    let mut chunked = false;
    let mut plain = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad("malformed header line"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| bad("bad Content-Length"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
            if !chunked {
                return Err(bad("unknown Transfer-Encoding"));
            }
        } else if name.eq_ignore_ascii_case("content-type") {
            let media = value.split(';').next().unwrap_or_default().trim();
            plain = media.eq_ignore_ascii_case("text/plain");
        }
    }
    if !plain {
        return Err(bad("Content-Type is not text/plain"));
    }
    let rest = &buf[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(n) = length {
        if n > BODY_LIMIT || rest.len() < n {
            return Err(bad("body too large or cut short"));
        }
        rest[..n].to_vec()
    } else {
        rest.to_vec()
    };
    if body.len() > BODY_LIMIT {
        return Err(bad("body too large"));
    }
    String::from_utf8(body).map_err(|_| bad("body not UTF-8"))
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, FetchError> {
    let bad = |s: &str| FetchError::Http(s.to_string());
    let mut body = Vec::new();
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| bad("chunk size line"))?;
        let line = std::str::from_utf8(&rest[..eol]).map_err(|_| bad("chunk size"))?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or_default().trim(), 16)
            .map_err(|_| bad("chunk size"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(body);
        }
        if size > BODY_LIMIT || body.len() + size > BODY_LIMIT || rest.len() < size + 2 {
            return Err(bad("chunk too large or cut short"));
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_chunked_bodies() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(parse_response(r).unwrap(), "hello");
        let r = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n";
        assert_eq!(parse_response(r).unwrap(), "hello");
        let r = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello";
        assert_eq!(parse_response(r).unwrap(), "hello");
    }

    #[test]
    fn refusals() {
        let redirect = b"HTTP/1.1 301 Moved\r\nLocation: https://elsewhere/\r\nContent-Type: text/plain\r\n\r\n";
        assert!(matches!(parse_response(redirect), Err(FetchError::Http(s)) if s == "status 301"));
        let html = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<html>";
        assert!(parse_response(html).is_err());
        let big = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n{}",
            "a".repeat(BODY_LIMIT + 1)
        );
        assert!(parse_response(big.as_bytes()).is_err());
        let short = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nabc";
        assert!(parse_response(short).is_err());
        let chunk = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\nfffffff\r\nab";
        assert!(parse_response(chunk).is_err());
    }
}
