//! The one-click unsubscribe POST (RFC 8058 §3.1): `List-Unsubscribe=One-
//! Click` sent to the list's https URL, as the user asked on the reading
//! page. Written on the TLS stream directly, since RFC 8058 wants so
//! little of HTTP: no cookies or other credentials are sent, a redirect is
//! not followed (it is reported), and the whole exchange has a short
//! deadline. Only the status line of the answer is read.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::http::Uri;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls::{self, pki_types::ServerName, RootCertStore};

/// The whole exchange, from connecting to the status line.
const DEADLINE: Duration = Duration::from_secs(10);
/// The most of the answer read while looking for its status line.
const MAX_ANSWER: usize = 8 * 1024;
/// The body RFC 8058 §3.1 prescribes.
const BODY: &str = "List-Unsubscribe=One-Click";

/// The TLS client of one-click POSTs: the web PKI roots, and the CAs of
/// `[web] unsubscribe_ca_file` (a site's own CA, or a test's).
#[derive(Clone)]
pub struct OneClick {
    tls: tokio_rustls::TlsConnector,
}

impl OneClick {
    /// Trusts the web PKI and the PEM certificates in `ca_file`, if given;
    /// the error says what is wrong with the file.
    pub fn new(ca_file: Option<&Path>) -> Result<OneClick, String> {
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(path) = ca_file {
            let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let mut n = 0;
            for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                let cert = cert.map_err(|e| format!("{}: {e}", path.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                n += 1;
            }
            if n == 0 {
                return Err(format!("{}: no certificate in it", path.display()));
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(OneClick {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    /// POSTs to `url` (https only); `Ok` once it answered 2xx, else why
    /// not, in words for the user.
    pub(crate) async fn post(&self, url: &str) -> Result<(), String> {
        match tokio::time::timeout(DEADLINE, self.exchange(url)).await {
            Ok(answer) => answer,
            Err(_) => Err(format!(
                "the list's server did not answer within {} seconds",
                DEADLINE.as_secs()
            )),
        }
    }

    async fn exchange(&self, url: &str) -> Result<(), String> {
        let uri: Uri = url
            .parse()
            .map_err(|_| "the address is not a URL".to_string())?;
        if uri.scheme_str() != Some("https") {
            return Err("only https addresses are posted to".into());
        }
        let host = uri.host().ok_or("the address has no host")?;
        let port = uri.port_u16().unwrap_or(443);
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(bare.to_string())
            .map_err(|_| format!("{host} is not a host name"))?;
        let tcp = tokio::net::TcpStream::connect((bare, port))
            .await
            .map_err(|e| format!("could not reach {host}: {e}"))?;
        let mut tls = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| format!("no secure connection to {host}: {e}"))?;
        let target = uri.path_and_query().map_or("/", |p| p.as_str());
        let authority = uri.authority().map_or(host, |a| a.as_str());
        let request = format!(
            "POST {target} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: Sluice\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{BODY}",
            BODY.len()
        );
        tls.write_all(request.as_bytes())
            .await
            .map_err(|e| format!("sending to {host} failed: {e}"))?;
        let mut answer = Vec::new();
        let mut buf = [0u8; 1024];
        while !answer.windows(2).any(|w| w == b"\r\n") && answer.len() < MAX_ANSWER {
            let n = tls
                .read(&mut buf)
                .await
                .map_err(|e| format!("reading {host}'s answer failed: {e}"))?;
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buf[..n]);
        }
        status(&answer)
    }
}

/// The verdict of an answer's status line.
fn status(answer: &[u8]) -> Result<(), String> {
    let line = String::from_utf8_lossy(answer);
    let line = line.lines().next().unwrap_or("");
    let mut words = line.splitn(3, ' ');
    let (Some(version), Some(code)) = (words.next(), words.next()) else {
        return Err("the list's server gave no answer".into());
    };
    let Ok(code) = code.parse::<u16>() else {
        return Err("the list's server gave no HTTP answer".into());
    };
    if !version.starts_with("HTTP/") {
        return Err("the list's server gave no HTTP answer".into());
    }
    let reason = words.next().unwrap_or("").trim();
    match code {
        200..=299 => Ok(()),
        // RFC 8058 §3.1: the POST's answer is final; a redirect is not
        // followed.
        300..=399 => Err(format!(
            "the list's server answered {code} {reason}, sending elsewhere; redirects are not followed"
        )),
        _ => Err(format!("the list's server answered {code} {reason}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read() {
        assert_eq!(status(b"HTTP/1.1 200 OK\r\nX: y\r\n"), Ok(()));
        assert_eq!(status(b"HTTP/1.0 204 No Content\r\n"), Ok(()));
        let redirect = status(b"HTTP/1.1 302 Found\r\nLocation: https://x/\r\n").unwrap_err();
        assert!(
            redirect.contains("302") && redirect.contains("not followed"),
            "{redirect}"
        );
        assert!(status(b"HTTP/1.1 500 Oops\r\n")
            .unwrap_err()
            .contains("500 Oops"));
        assert!(status(b"").is_err());
        assert!(status(b"SSH-2.0-x\r\n").is_err());
    }

    #[test]
    fn a_ca_file_must_hold_a_certificate() {
        let dir = std::env::temp_dir().join(format!("sluice-one-click-{}", std::process::id()));
        std::fs::write(&dir, "not a certificate\n").unwrap();
        let refused = OneClick::new(Some(&dir)).err().unwrap_or_default();
        assert!(refused.contains("no certificate"), "{refused}");
        std::fs::remove_file(&dir).unwrap();
        assert!(OneClick::new(Some(Path::new("/nonexistent/ca.pem"))).is_err());
        assert!(OneClick::new(None).is_ok());
    }
}
