//! `sluice import ADDRESS imap URL`: an account's mail fetched from a
//! live IMAP server (Dovecot, Courier, another Sluice...), every mailbox,
//! with flags and internal dates, so a site moves in one command.
//!
//! One message at a time: `UID FETCH uid (UID FLAGS INTERNALDATE
//! BODY.PEEK[])`, the literal streamed into the store in pieces, so memory
//! stays flat whatever the mailbox holds. A journal in the data directory
//! names each message delivered (mailbox, UIDVALIDITY, UID): a run that
//! stops resumes where it was. `imap://` (clear text) is taken only from
//! a loopback address; elsewhere `imaps://` (TLS, certificate checked).

use std::net::IpAddr;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use store::{Delivery, Store, FLAG_ANSWERED, FLAG_DELETED, FLAG_DRAFT, FLAG_FLAGGED, FLAG_SEEN};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// The server, the login, and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub tls: bool,
    pub user: String,
    pub host: String,
    pub port: u16,
}

impl Source {
    /// Reads `imap://user@host[:port]` or `imaps://user@host[:port]`.
    pub fn parse(url: &str) -> anyhow::Result<Source> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("imaps://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("imap://") {
            (false, r)
        } else {
            bail!("{url}: an IMAP source is imap://user@host[:port] or imaps://user@host[:port]");
        };
        let rest = rest.trim_end_matches('/');
        let (user, hostport) = rest
            .rsplit_once('@')
            .ok_or_else(|| anyhow!("{url}: no user (imap://user@host)"))?;
        let user = percent_decode(user);
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (
                h.trim_matches(['[', ']']).to_string(),
                p.parse::<u16>()
                    .map_err(|_| anyhow!("{url}: bad port {p:?}"))?,
            ),
            _ => (
                hostport.trim_matches(['[', ']']).to_string(),
                if tls { 993 } else { 143 },
            ),
        };
        if user.is_empty() || host.is_empty() {
            bail!("{url}: user and host are both needed");
        }
        Ok(Source {
            tls,
            user,
            host,
            port,
        })
    }
}

/// `%40` and the like in a user name (`user%40example.org@host`).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// An IMAP client session, just what the import needs.
struct Client {
    io: BufReader<Box<dyn Io>>,
    tag: u32,
}

impl Client {
    async fn connect(source: &Source, ca_file: Option<&std::path::Path>) -> anyhow::Result<Client> {
        let tcp = tokio::net::TcpStream::connect((source.host.as_str(), source.port))
            .await
            .with_context(|| format!("cannot connect to {}:{}", source.host, source.port))?;
        let io: Box<dyn Io> = if source.tls {
            Box::new(tls(tcp, &source.host, ca_file).await?)
        } else {
            let peer = tcp.peer_addr()?.ip();
            if !is_loopback(peer) {
                bail!(
                    "imap:// sends the password in clear text: use imaps:// for {}",
                    source.host
                );
            }
            Box::new(tcp)
        };
        let mut client = Client {
            io: BufReader::with_capacity(64 * 1024, io),
            tag: 0,
        };
        let greeting = client.line().await?;
        if !greeting.starts_with("* OK") && !greeting.starts_with("* PREAUTH") {
            bail!("the server's greeting: {greeting}");
        }
        Ok(client)
    }

    async fn line(&mut self) -> anyhow::Result<String> {
        let mut line = Vec::new();
        let n = self.io.read_until(b'\n', &mut line).await?;
        if n == 0 {
            bail!("the server closed the connection");
        }
        Ok(String::from_utf8_lossy(&line)
            .trim_end_matches(['\r', '\n'])
            .to_string())
    }

    /// Sends a command; returns its tag.
    async fn send(&mut self, command: &str) -> anyhow::Result<String> {
        self.tag += 1;
        let tag = format!("i{}", self.tag);
        let io = self.io.get_mut();
        io.write_all(format!("{tag} {command}\r\n").as_bytes())
            .await?;
        io.flush().await?;
        Ok(tag)
    }

    /// Runs a command without literals in its answers; returns the
    /// untagged lines, or the server's refusal.
    async fn simple(&mut self, command: &str) -> anyhow::Result<Vec<String>> {
        let tag = self.send(command).await?;
        let mut untagged = Vec::new();
        loop {
            let line = self.line().await?;
            if let Some(status) = line.strip_prefix(&format!("{tag} ")) {
                if status.starts_with("OK") {
                    return Ok(untagged);
                }
                let shown = if command.starts_with("LOGIN") {
                    "LOGIN"
                } else {
                    command
                };
                bail!("{shown}: {status}");
            }
            untagged.push(line);
        }
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v| v.is_loopback()),
    }
}

async fn tls(
    tcp: tokio::net::TcpStream,
    host: &str,
    ca_file: Option<&std::path::Path>,
) -> anyhow::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
            roots
                .add(cert.with_context(|| format!("bad certificate in {}", path.display()))?)
                .with_context(|| format!("bad certificate in {}", path.display()))?;
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| anyhow!("server name {host:?}: {e}"))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .with_context(|| format!("TLS with {host}"))
}

/// An IMAP quoted string.
fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The mailboxes a LIST answer names, with their hierarchy delimiter;
/// `\Noselect` and `\NonExistent` ones left out.
fn mailboxes(lines: &[String]) -> Vec<(String, Option<char>)> {
    let mut out = Vec::new();
    for line in lines {
        let Some(rest) = line.strip_prefix("* LIST (") else {
            continue;
        };
        let Some((attrs, rest)) = rest.split_once(')') else {
            continue;
        };
        let attrs = attrs.to_ascii_lowercase();
        if attrs.contains("\\noselect") || attrs.contains("\\nonexistent") {
            continue;
        }
        let rest = rest.trim_start();
        let (delimiter, name) = if let Some(r) = rest.strip_prefix("NIL ") {
            (None, r)
        } else if let Some(r) = rest.strip_prefix('"') {
            let d = r.chars().next();
            let d = if d == Some('\\') { r.chars().nth(1) } else { d };
            let after = r.find("\" ").map_or("", |i| &r[i + 2..]);
            (d, after)
        } else {
            continue;
        };
        let name = name.trim();
        let name = match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
            Some(inner) => inner.replace("\\\"", "\"").replace("\\\\", "\\"),
            None => name.to_string(),
        };
        out.push((name, delimiter));
    }
    out
}

/// The flag bits and keywords of a FETCH answer's `FLAGS (...)`.
fn flags_of(text: &str) -> (u32, Vec<String>) {
    let Some(start) = text.find("FLAGS (") else {
        return (0, Vec::new());
    };
    let inner = &text[start + 7..];
    let inner = &inner[..inner.find(')').unwrap_or(inner.len())];
    let mut bits = 0;
    let mut keywords = Vec::new();
    for flag in inner.split_whitespace() {
        match flag.to_ascii_lowercase().as_str() {
            "\\seen" => bits |= FLAG_SEEN,
            "\\answered" => bits |= FLAG_ANSWERED,
            "\\flagged" => bits |= FLAG_FLAGGED,
            "\\deleted" => bits |= FLAG_DELETED,
            "\\draft" => bits |= FLAG_DRAFT,
            f if f.starts_with('\\') => {}
            _ => keywords.push(flag.to_string()),
        }
    }
    (bits, keywords)
}

/// The INTERNALDATE of a FETCH answer, as seconds since the Unix epoch.
fn internal_date_of(text: &str) -> Option<i64> {
    let start = text.find("INTERNALDATE \"")? + 14;
    let end = start + text[start..].find('"')?;
    let value = text[start..end].trim();
    // 25-Nov-2026 14:01:25 +0000
    let format = time::macros::format_description!(
        "[day padding:space]-[month repr:short]-[year] [hour]:[minute]:[second] [offset_hour sign:mandatory][offset_minute]"
    );
    time::OffsetDateTime::parse(value, &format)
        .ok()
        .map(|t| t.unix_timestamp())
}

/// The number in a `{n}` literal announcement at the end of `line`.
fn literal_len(line: &str) -> Option<u64> {
    let open = line.rfind('{')?;
    line[open + 1..]
        .strip_suffix('}')
        .and_then(|n| n.trim_end_matches('+').parse().ok())
}

/// Fetches every message of the account at `source` into `address`'s
/// mailboxes of the same names.
pub async fn import(
    store: &dyn Store,
    account: store::AccountId,
    source: &Source,
    password: &str,
    ca_file: Option<&std::path::Path>,
    journal: &crate::import::Journal,
    progress: &mut crate::import::Progress,
) -> anyhow::Result<()> {
    let done = journal.done_names();
    let mut client = Client::connect(source, ca_file).await?;
    client
        .simple(&format!(
            "LOGIN {} {}",
            quoted(&source.user),
            quoted(password)
        ))
        .await
        .context("the server refused the login")?;
    let listed = client.simple("LIST \"\" \"*\"").await?;
    for (name, delimiter) in mailboxes(&listed) {
        // The server's hierarchy becomes ours: its delimiter becomes '/'.
        let ours = match delimiter {
            Some(d) if d != '/' => name.replace(d, "/"),
            _ => name.clone(),
        };
        let ours = if ours.eq_ignore_ascii_case("INBOX") {
            "INBOX".to_string()
        } else {
            ours
        };
        let examined = client.simple(&format!("EXAMINE {}", quoted(&name))).await?;
        let validity = examined
            .iter()
            .find_map(|l| {
                let i = l.find("UIDVALIDITY ")?;
                l[i + 12..].split(']').next()?.trim().parse::<u32>().ok()
            })
            .unwrap_or(0);
        let searched = client.simple("UID SEARCH ALL").await?;
        let uids: Vec<u32> = searched
            .iter()
            .filter_map(|l| l.strip_prefix("* SEARCH"))
            .flat_map(|l| l.split_whitespace().filter_map(|u| u.parse().ok()))
            .collect();
        if uids.is_empty() {
            crate::import::mailbox_named(store, account, &ours).await?;
            continue;
        }
        let mailbox = crate::import::mailbox_named(store, account, &ours).await?;
        for uid in uids {
            let key = format!("{name}\t{validity}\t{uid}");
            if done.contains(&key) {
                continue;
            }
            fetch_one(&mut client, store, mailbox.id, uid, progress).await?;
            journal.add_name(&key)?;
        }
    }
    let _ = client.simple("LOGOUT").await;
    Ok(())
}

/// Fetches message `uid` of the selected mailbox into `mailbox`, its body
/// streamed into the store.
async fn fetch_one(
    client: &mut Client,
    store: &dyn Store,
    mailbox: store::MailboxId,
    uid: u32,
    progress: &mut crate::import::Progress,
) -> anyhow::Result<()> {
    let tag = client
        .send(&format!(
            "UID FETCH {uid} (UID FLAGS INTERNALDATE BODY.PEEK[])"
        ))
        .await?;
    let mut writer = None;
    let mut described = String::new();
    loop {
        let line = client.line().await?;
        if let Some(status) = line.strip_prefix(&format!("{tag} ")) {
            if !status.starts_with("OK") {
                bail!("UID FETCH {uid}: {status}");
            }
            break;
        }
        let fetch_of_uid = line.starts_with("* ") && line.contains(" FETCH (");
        let Some(len) = literal_len(&line).filter(|_| fetch_of_uid && writer.is_none()) else {
            if fetch_of_uid {
                described.push_str(&line);
            }
            continue;
        };
        described.push_str(&line);
        let mut w = store.message_writer();
        let mut left = len;
        let mut buf = vec![0u8; 64 * 1024];
        while left > 0 {
            let want = (left as usize).min(buf.len());
            let n = client.io.read(&mut buf[..want]).await?;
            if n == 0 {
                bail!("the server closed the connection in message {uid}");
            }
            w.write(&buf[..n]).await?;
            left -= n as u64;
        }
        // The rest of the answer: `)` or more items (FLAGS may follow).
        described.push_str(&client.line().await?);
        writer = Some(w);
    }
    let Some(writer) = writer else {
        // Expunged meanwhile: nothing to bring.
        return Ok(());
    };
    let (flags, keywords) = flags_of(&described);
    let size = writer.size();
    writer
        .deliver(Delivery {
            mailboxes: vec![mailbox],
            internal_date: internal_date_of(&described),
            flags,
            keywords,
            ..Delivery::default()
        })
        .await?;
    progress.add(size);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_read_from_urls() {
        assert_eq!(
            Source::parse("imap://alice%40example.org@127.0.0.1:1143").unwrap(),
            Source {
                tls: false,
                user: "alice@example.org".into(),
                host: "127.0.0.1".into(),
                port: 1143
            }
        );
        let s = Source::parse("imaps://bob@mail.example.net").unwrap();
        assert_eq!(
            (s.tls, s.port, s.host.as_str()),
            (true, 993, "mail.example.net")
        );
        assert!(Source::parse("pop3://a@b").is_err());
        assert!(Source::parse("imap://host-only").is_err());
        assert!(Source::parse("imap://a@h:notaport").is_err());
    }

    #[test]
    fn list_answers_name_the_mailboxes() {
        let lines: Vec<String> = [
            "* LIST (\\HasNoChildren) \".\" INBOX",
            "* LIST (\\HasChildren \\Noselect) \".\" \"Archive\"",
            "* LIST (\\HasNoChildren) \".\" \"Archive.2025\"",
            "* LIST (\\HasNoChildren \\Sent) \"/\" \"Sent Items\"",
            "* LIST () NIL \"flat\"",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            mailboxes(&lines),
            [
                ("INBOX".to_string(), Some('.')),
                ("Archive.2025".to_string(), Some('.')),
                ("Sent Items".to_string(), Some('/')),
                ("flat".to_string(), None),
            ]
        );
    }

    #[test]
    fn fetch_items_are_read() {
        let text = "* 3 FETCH (UID 7 FLAGS (\\Seen \\Flagged $Label1) INTERNALDATE \"05-Mar-2024 10:20:30 +0100\" BODY[] {12})";
        let (bits, keywords) = flags_of(text);
        assert_eq!(bits, FLAG_SEEN | FLAG_FLAGGED);
        assert_eq!(keywords, ["$Label1"]);
        assert_eq!(internal_date_of(text), Some(1_709_630_430));
        assert_eq!(literal_len(text.trim_end_matches(')')), Some(12));
        assert_eq!(literal_len("* 1 FETCH (BODY[] {0}"), Some(0));
        assert_eq!(flags_of("* 1 FETCH (UID 1)"), (0, vec![]));
    }
}
