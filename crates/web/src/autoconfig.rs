//! Account set-up for mail clients: Thunderbird's autoconfig
//! (`/.well-known/autoconfig/mail/config-v1.1.xml`, and
//! `/mail/config-v1.1.xml` for the `autoconfig.DOMAIN` host) and
//! Microsoft's autodiscover (`POST /autodiscover/autodiscover.xml`, the
//! POX protocol Outlook, Evolution and Thunderbird speak). Both say where
//! the configured IMAP, POP3 and submission listeners are, and with which
//! TLS, for a local domain; anything else is `404`.
//!
//! The answers are public (a client asks before it has a password): they
//! name only the host and its ports, and whether a domain is ours.

use std::fmt::Write as _;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

use crate::routes::App;

/// Where clients reach each mail service: the host name and the ports
/// of the listeners the configuration opens (`None`: not listening).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MailServices {
    /// The server's host name, which its certificate names.
    pub hostname: String,
    /// IMAP with STARTTLS.
    pub imap: Option<u16>,
    /// IMAP over implicit TLS.
    pub imaps: Option<u16>,
    /// POP3 with STLS.
    pub pop3: Option<u16>,
    /// POP3 over implicit TLS.
    pub pop3s: Option<u16>,
    /// Submission with STARTTLS.
    pub submission: Option<u16>,
    /// Submission over implicit TLS.
    pub submissions: Option<u16>,
}

/// How a client reaches one service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Security {
    /// TLS from the first byte (RFC 8314).
    Implicit,
    /// STARTTLS (or STLS) after the greeting.
    StartTls,
}

/// One way to reach one protocol.
#[derive(Debug, Clone, Copy)]
struct Endpoint {
    /// `imap`, `pop3` or `smtp`.
    protocol: &'static str,
    port: u16,
    security: Security,
}

impl MailServices {
    /// Each open listener, implicit TLS first (RFC 8314 §3 prefers it),
    /// IMAP before POP3, then submission.
    fn endpoints(&self) -> Vec<Endpoint> {
        let all = [
            ("imap", self.imaps, Security::Implicit),
            ("imap", self.imap, Security::StartTls),
            ("pop3", self.pop3s, Security::Implicit),
            ("pop3", self.pop3, Security::StartTls),
            ("smtp", self.submissions, Security::Implicit),
            ("smtp", self.submission, Security::StartTls),
        ];
        all.into_iter()
            .filter_map(|(protocol, port, security)| {
                port.map(|port| Endpoint {
                    protocol,
                    port,
                    security,
                })
            })
            .collect()
    }

    /// Thunderbird's autoconfig document for `domain` (the format of
    /// <https://wiki.mozilla.org/Thunderbird:Autoconfiguration:ConfigFileFormat>).
    pub fn autoconfig_xml(&self, domain: &str) -> String {
        let host = xml_escape(&self.hostname);
        let domain = xml_escape(domain);
        let mut out = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<clientConfig version=\"1.1\">\n  <emailProvider id=\"{domain}\">\n    <domain>{domain}</domain>\n    <displayName>{domain}</displayName>\n    <displayShortName>{domain}</displayShortName>\n"
        );
        for e in self.endpoints() {
            let (open, close) = if e.protocol == "smtp" {
                ("<outgoingServer type=\"smtp\">", "</outgoingServer>")
            } else {
                (
                    if e.protocol == "imap" {
                        "<incomingServer type=\"imap\">"
                    } else {
                        "<incomingServer type=\"pop3\">"
                    },
                    "</incomingServer>",
                )
            };
            let socket = match e.security {
                Security::Implicit => "SSL",
                Security::StartTls => "STARTTLS",
            };
            let _ = write!(
                out,
                "    {open}\n      <hostname>{host}</hostname>\n      <port>{}</port>\n      <socketType>{socket}</socketType>\n      <authentication>password-cleartext</authentication>\n      <username>%EMAILADDRESS%</username>\n    {close}\n",
                e.port
            );
        }
        out.push_str("  </emailProvider>\n</clientConfig>\n");
        out
    }

    /// The autodiscover (POX, MS-OXDISCO) answer for `address`.
    pub fn autodiscover_xml(&self, address: &str) -> String {
        let host = xml_escape(&self.hostname);
        let login = xml_escape(address);
        let mut out = String::from(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<Autodiscover xmlns=\"http://schemas.microsoft.com/exchange/autodiscover/responseschema/2006\">\n  <Response xmlns=\"http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a\">\n    <Account>\n      <AccountType>email</AccountType>\n      <Action>settings</Action>\n",
        );
        for e in self.endpoints() {
            let kind = match e.protocol {
                "imap" => "IMAP",
                "pop3" => "POP3",
                _ => "SMTP",
            };
            // MS-OXDSCLI: Encryption SSL is TLS from the start, TLS is
            // STARTTLS.
            let encryption = match e.security {
                Security::Implicit => "SSL",
                Security::StartTls => "TLS",
            };
            let _ = write!(
                out,
                "      <Protocol>\n        <Type>{kind}</Type>\n        <Server>{host}</Server>\n        <Port>{}</Port>\n        <LoginName>{login}</LoginName>\n        <DomainRequired>off</DomainRequired>\n        <SPA>off</SPA>\n        <Encryption>{encryption}</Encryption>\n        <AuthRequired>on</AuthRequired>\n      </Protocol>\n",
                e.port
            );
        }
        out.push_str("    </Account>\n  </Response>\n</Autodiscover>\n");
        out
    }
}

fn xml_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// The routes, merged into the webmail's.
pub(crate) fn routes() -> Router<Arc<App>> {
    Router::new()
        .route(
            "/.well-known/autoconfig/mail/config-v1.1.xml",
            get(autoconfig),
        )
        .route("/mail/config-v1.1.xml", get(autoconfig))
        .route(
            "/autodiscover/autodiscover.xml",
            post(autodiscover).layer(DefaultBodyLimit::max(MAX_AUTODISCOVER_REQUEST)),
        )
        .route(
            "/Autodiscover/Autodiscover.xml",
            post(autodiscover).layer(DefaultBodyLimit::max(MAX_AUTODISCOVER_REQUEST)),
        )
}

#[derive(Deserialize)]
struct AutoconfigQuery {
    emailaddress: Option<String>,
}

/// The domain asked about: the address's, else the host's (without the
/// `autoconfig.` Thunderbird puts in front), if it is a local domain.
fn local_domain(app: &App, address: Option<&str>, headers: &HeaderMap) -> Option<String> {
    let domain = match address {
        Some(a) => a.rsplit_once('@')?.1.to_string(),
        None => {
            let host = headers.get(header::HOST)?.to_str().ok()?;
            let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
            host.strip_prefix("autoconfig.").unwrap_or(host).to_string()
        }
    };
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    app.ctx
        .directory
        .get()
        .is_local_domain(&domain)
        .then_some(domain)
}

fn xml(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "application/xml; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        body,
    )
        .into_response()
}

async fn autoconfig(
    State(app): State<Arc<App>>,
    Query(q): Query<AutoconfigQuery>,
    headers: HeaderMap,
) -> Response {
    match local_domain(&app, q.emailaddress.as_deref(), &headers) {
        Some(domain) => xml(app.ctx.services.autoconfig_xml(&domain)),
        None => (StatusCode::NOT_FOUND, "no such mail domain here\n").into_response(),
    }
}

/// The `<EMailAddress>` of an autodiscover request.
fn requested_address(body: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    let start = text.find("<EMailAddress>")? + "<EMailAddress>".len();
    let end = start + text[start..].find("</EMailAddress>")?;
    let address = text[start..end].trim();
    (address.contains('@') && !address.contains(['<', '>', '&'])).then(|| address.to_string())
}

/// Largest autodiscover request read; real ones are a few hundred bytes.
const MAX_AUTODISCOVER_REQUEST: usize = 8 * 1024;

async fn autodiscover(State(app): State<Arc<App>>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(address) = requested_address(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            "an autodiscover request names an <EMailAddress>\n",
        )
            .into_response();
    };
    match local_domain(&app, Some(&address), &headers) {
        Some(_) => xml(app.ctx.services.autodiscover_xml(&address)),
        None => (StatusCode::NOT_FOUND, "no such mail domain here\n").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial() -> MailServices {
        MailServices {
            hostname: "mx.example.org".into(),
            imap: Some(1143),
            imaps: None,
            pop3: Some(1110),
            pop3s: Some(1995),
            submission: Some(2587),
            submissions: None,
        }
    }

    #[test]
    fn autoconfig_lists_each_open_listener_with_its_tls() {
        let x = trial().autoconfig_xml("example.org");
        assert!(x.contains("<emailProvider id=\"example.org\">"), "{x}");
        assert!(x.contains("<incomingServer type=\"imap\">\n      <hostname>mx.example.org</hostname>\n      <port>1143</port>\n      <socketType>STARTTLS</socketType>"), "{x}");
        assert!(
            x.contains("<port>1995</port>\n      <socketType>SSL</socketType>"),
            "{x}"
        );
        assert!(x.contains("<outgoingServer type=\"smtp\">\n      <hostname>mx.example.org</hostname>\n      <port>2587</port>\n      <socketType>STARTTLS</socketType>"), "{x}");
        // Implicit TLS is offered first (RFC 8314).
        assert!(x.find("1995").unwrap() < x.find("1110").unwrap());
        assert_eq!(x.matches("<incomingServer").count(), 3);
        assert_eq!(x.matches("<outgoingServer").count(), 1);
    }

    #[test]
    fn autodiscover_names_the_login_and_encryption() {
        let x = trial().autodiscover_xml("alice@example.org");
        assert!(
            x.contains("<LoginName>alice@example.org</LoginName>"),
            "{x}"
        );
        assert!(x.contains("<Type>SMTP</Type>\n        <Server>mx.example.org</Server>\n        <Port>2587</Port>"), "{x}");
        assert!(x.contains("<Port>1995</Port>\n        <LoginName>alice@example.org</LoginName>\n        <DomainRequired>off</DomainRequired>\n        <SPA>off</SPA>\n        <Encryption>SSL</Encryption>"), "{x}");
        assert_eq!(x.matches("<Encryption>TLS</Encryption>").count(), 3);
    }

    #[test]
    fn names_are_escaped_and_requests_read() {
        assert_eq!(xml_escape("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
        let body = b"<?xml version=\"1.0\"?><Autodiscover xmlns=\"http://schemas.microsoft.com/exchange/autodiscover/outlook/requestschema/2006\"><Request><EMailAddress> bob@example.org </EMailAddress><AcceptableResponseSchema>http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a</AcceptableResponseSchema></Request></Autodiscover>";
        assert_eq!(requested_address(body).as_deref(), Some("bob@example.org"));
        assert_eq!(
            requested_address(b"<EMailAddress>nobody</EMailAddress>"),
            None
        );
        assert_eq!(requested_address(b"<EMailAddress>a@b"), None);
        assert_eq!(requested_address(&[0xff, 0xfe]), None);
    }
}
