//! A small HTTP/1.1 client for the webmail benchmark: one keep-alive
//! connection per virtual user, cookies kept, bodies read whole (pages,
//! not downloads) up to a bound.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::error::BenchError;

/// Largest response body read.
const MAX_BODY: usize = 16 * 1024 * 1024;
/// Largest header block.
const MAX_HEADER: usize = 64 * 1024;

/// A response.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first header of that name (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One connection with its cookie jar.
pub(crate) struct Client {
    addr: String,
    conn: Option<BufReader<TcpStream>>,
    cookies: Vec<(String, String)>,
    timeout: Duration,
    /// Bytes received, headers and bodies (page weight).
    pub received: u64,
}

impl Client {
    pub(crate) fn new(addr: &str, timeout: Duration) -> Client {
        Client {
            addr: addr.to_string(),
            conn: None,
            cookies: Vec::new(),
            timeout,
            received: 0,
        }
    }

    /// Sends a request and reads the answer; reconnects once if the kept
    /// connection was closed by the server meanwhile.
    pub(crate) async fn request(
        &mut self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<Response, BenchError> {
        self.request_with(method, path, content_type, &[], body)
            .await
    }

    /// [`Client::request`] with extra request header fields.
    pub(crate) async fn request_with(
        &mut self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, BenchError> {
        let fresh = self.conn.is_none();
        match tokio::time::timeout(
            self.timeout,
            self.exchange(method, path, content_type, extra, body),
        )
        .await
        {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(_)) if !fresh => {
                self.conn = None;
                tokio::time::timeout(
                    self.timeout,
                    self.exchange(method, path, content_type, extra, body),
                )
                .await
                .map_err(|_| BenchError::Timeout(self.timeout))?
            }
            Ok(Err(e)) => {
                self.conn = None;
                Err(e)
            }
            Err(_) => {
                self.conn = None;
                Err(BenchError::Timeout(self.timeout))
            }
        }
    }

    async fn exchange(
        &mut self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        extra: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, BenchError> {
        if self.conn.is_none() {
            let s = TcpStream::connect(&self.addr).await?;
            s.set_nodelay(true)?;
            self.conn = Some(BufReader::new(s));
        }
        let cookie = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ");
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept-Encoding: identity\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if let Some(t) = content_type {
            head.push_str(&format!("Content-Type: {t}\r\n"));
        }
        if !cookie.is_empty() {
            head.push_str(&format!("Cookie: {cookie}\r\n"));
        }
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let conn = self.conn.as_mut().ok_or(BenchError::Closed)?;
        conn.get_mut().write_all(head.as_bytes()).await?;
        conn.get_mut().write_all(body).await?;
        let mut line = String::new();
        if conn.read_line(&mut line).await? == 0 {
            return Err(BenchError::Closed);
        }
        let mut received = line.len();
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| BenchError::Protocol(format!("status line {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            if conn.read_line(&mut line).await? == 0 {
                return Err(BenchError::Closed);
            }
            received += line.len();
            if received > MAX_HEADER {
                return Err(BenchError::Protocol("header too long".into()));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            loop {
                line.clear();
                conn.read_line(&mut line).await?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| BenchError::Protocol("chunk size".into()))?;
                if body.len() + size > MAX_BODY {
                    return Err(BenchError::Protocol("body too large".into()));
                }
                let start = body.len();
                body.resize(start + size, 0);
                conn.read_exact(&mut body[start..]).await?;
                line.clear();
                conn.read_line(&mut line).await?;
                if size == 0 {
                    break;
                }
            }
        } else if let Some(n) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
            if n > MAX_BODY {
                return Err(BenchError::Protocol("body too large".into()));
            }
            body.resize(n, 0);
            conn.read_exact(&mut body).await?;
        }
        received += body.len();
        self.received += received as u64;
        if get("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
            self.conn = None;
        }
        for (k, v) in &headers {
            if k.eq_ignore_ascii_case("set-cookie") {
                if let Some((name, value)) = v.split(';').next().and_then(|c| c.split_once('=')) {
                    self.cookies.retain(|(n, _)| n != name);
                    if !value.is_empty() {
                        self.cookies.push((name.to_string(), value.to_string()));
                    }
                }
            }
        }
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}
