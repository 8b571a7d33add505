//! TLS to the database, over the workspace's rustls (ring). The modes are
//! libpq's `sslmode` values that fit a server that must not fall back to
//! plain text unnoticed: `disable`, `require` (encrypted, the server's
//! certificate not checked, as libpq does without a root certificate)
//! and `verify-full` (the chain checked against the CA file or the
//! Mozilla roots, and the host name against the certificate). libpq's
//! `allow` and `prefer` may end up unencrypted without saying so, and
//! `verify-ca` checks a chain but not whose it is: they are refused.
//!
//! Every connection the store makes goes through one [`Connector`]: the
//! pool's, the change-notice listener's and the maildrop locks'.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig};
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{AsyncMessage, Client, Connection, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{Result, StoreError};

/// How connections to the database are secured (libpq's `sslmode`
/// names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PgTls {
    /// Plain TCP: for a database on the same host or a network that is
    /// private by other means.
    #[default]
    Disable,
    /// Encrypted; whoever answers is not checked (a passive listener
    /// learns nothing, an active one in the middle is not stopped).
    Require,
    /// Encrypted to the server the URL names: its certificate chains to a
    /// trusted root and names the URL's host.
    VerifyFull,
}

impl PgTls {
    /// The mode named `name` (libpq's spelling); `None` for the ones not
    /// supported.
    pub fn parse(name: &str) -> Option<PgTls> {
        match name {
            "disable" => Some(PgTls::Disable),
            "require" => Some(PgTls::Require),
            "verify-full" => Some(PgTls::VerifyFull),
            _ => None,
        }
    }

    /// libpq's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            PgTls::Disable => "disable",
            PgTls::Require => "require",
            PgTls::VerifyFull => "verify-full",
        }
    }

    /// Takes libpq's `sslmode` parameter out of a connection string (URL
    /// `?sslmode=` or key/value `sslmode=`): the string without it, and
    /// the mode it named. The rest is left for `tokio-postgres` to parse,
    /// which knows fewer modes than libpq.
    pub fn split_url(url: &str) -> Result<(String, Option<PgTls>)> {
        let mut found = None;
        let mut take = |value: &str| -> Result<()> {
            let mode = PgTls::parse(value).ok_or_else(|| {
                StoreError::Invalid(format!(
                    "sslmode={value} is not supported: use disable, require or verify-full"
                ))
            })?;
            if found.is_some_and(|f| f != mode) {
                return Err(StoreError::Invalid("sslmode is given twice".into()));
            }
            found = Some(mode);
            Ok(())
        };
        let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            match url.split_once('?') {
                None => url.to_string(),
                Some((base, query)) => {
                    let mut kept = Vec::new();
                    for pair in query.split('&') {
                        match pair.split_once('=') {
                            Some(("sslmode", value)) => take(value)?,
                            _ => kept.push(pair),
                        }
                    }
                    if kept.is_empty() {
                        base.to_string()
                    } else {
                        format!("{base}?{}", kept.join("&"))
                    }
                }
            }
        } else {
            let mut kept = Vec::new();
            for word in url.split_ascii_whitespace() {
                match word.split_once('=') {
                    Some(("sslmode", value)) => take(value)?,
                    _ => kept.push(word),
                }
            }
            // Rejoined only when changed: a quoted value keeps its spaces.
            if found.is_some() {
                kept.join(" ")
            } else {
                url.to_string()
            }
        };
        // A spelling not caught above (`sslmode = x`, quoted) would reach
        // tokio-postgres with a meaning of its own.
        if rest.contains("sslmode") {
            return Err(StoreError::Invalid(
                "write sslmode as sslmode=MODE, without spaces or quotes".into(),
            ));
        }
        Ok((rest, found))
    }
}

/// Makes this node's connections, plain or with TLS as configured.
#[derive(Clone)]
pub(super) enum Connector {
    Plain,
    Tls(MakeRustlsConnect),
}

/// A connection's driver: runs until the connection closes.
pub(super) type Driver = Pin<Box<dyn Future<Output = ()> + Send>>;

impl Connector {
    /// The connector for `tls`, trusting the certificates in `ca_file`
    /// (PEM) or, without one, the Mozilla roots; sets `config`'s
    /// `sslmode` to match, so `require` and `verify-full` never fall back
    /// to plain text.
    pub(super) fn new(
        tls: PgTls,
        ca_file: Option<&Path>,
        config: &mut tokio_postgres::Config,
    ) -> Result<Connector> {
        if tls == PgTls::Disable {
            config.ssl_mode(SslMode::Disable);
            return Ok(Connector::Plain);
        }
        // PostgreSQL speaks no TLS on its Unix sockets.
        if config
            .get_hosts()
            .iter()
            .any(|h| !matches!(h, Host::Tcp(_)))
        {
            return Err(StoreError::Invalid(format!(
                "sslmode {} needs a TCP host; a Unix socket has no TLS",
                tls.name()
            )));
        }
        config.ssl_mode(SslMode::Require);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| StoreError::Invalid(format!("TLS: {e}")))?;
        let client = match tls {
            PgTls::VerifyFull => builder
                .with_root_certificates(roots(ca_file)?)
                .with_no_client_auth(),
            _ => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(net::SignaturesOnly::new(provider)))
                .with_no_client_auth(),
        };
        Ok(Connector::Tls(MakeRustlsConnect::new(client)))
    }

    /// The pool's connection manager.
    pub(super) fn manager(
        &self,
        config: tokio_postgres::Config,
        manager: ManagerConfig,
    ) -> Manager {
        match self {
            Connector::Plain => Manager::from_config(config, NoTls, manager),
            Connector::Tls(tls) => Manager::from_config(config, tls.clone(), manager),
        }
    }

    /// A connection of its own (outside the pool), and its driver for the
    /// caller to spawn; notifications (`LISTEN`) go to `notices`.
    pub(super) async fn connect(
        &self,
        config: &tokio_postgres::Config,
        notices: Option<mpsc::UnboundedSender<String>>,
    ) -> std::result::Result<(Client, Driver), tokio_postgres::Error> {
        Ok(match self {
            Connector::Plain => {
                let (client, connection) = config.connect(NoTls).await?;
                (client, Box::pin(drive(connection, notices)))
            }
            Connector::Tls(tls) => {
                let (client, connection) = config.connect(tls.clone()).await?;
                (client, Box::pin(drive(connection, notices)))
            }
        })
    }
}

/// Polls `connection` until it closes, passing the payloads of its
/// notifications to `notices`; stops early once nobody hears them.
async fn drive<S, T>(
    mut connection: Connection<S, T>,
    notices: Option<mpsc::UnboundedSender<String>>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    while let Some(Ok(message)) = messages.next().await {
        if let (AsyncMessage::Notification(n), Some(tx)) = (message, &notices) {
            if tx.send(n.payload().to_string()).is_err() {
                break;
            }
        }
    }
}

/// The roots `verify-full` trusts.
fn roots(ca_file: Option<&Path>) -> Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    let Some(path) = ca_file else {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(roots);
    };
    let bad =
        |e: &dyn std::fmt::Display| StoreError::Invalid(format!("CA file {}: {e}", path.display()));
    let pem = std::fs::read(path).map_err(|e| bad(&e))?;
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        roots.add(cert.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
    }
    if roots.is_empty() {
        return Err(bad(&"no PEM certificate in it"));
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sslmode_is_taken_out_of_urls_and_key_value_strings() {
        let split = |u: &str| PgTls::split_url(u).unwrap();
        assert_eq!(
            split("postgres://u@db:5432/mail"),
            ("postgres://u@db:5432/mail".into(), None)
        );
        assert_eq!(
            split("postgres://u@db/mail?sslmode=verify-full"),
            ("postgres://u@db/mail".into(), Some(PgTls::VerifyFull))
        );
        assert_eq!(
            split("postgresql://u@db/mail?connect_timeout=3&sslmode=require&application_name=x"),
            (
                "postgresql://u@db/mail?connect_timeout=3&application_name=x".into(),
                Some(PgTls::Require)
            )
        );
        assert_eq!(
            split("host=db user=u sslmode=disable dbname=mail"),
            ("host=db user=u dbname=mail".into(), Some(PgTls::Disable))
        );
    }

    #[test]
    fn modes_that_may_fall_back_or_skip_the_name_are_refused() {
        for mode in ["prefer", "allow", "verify-ca", "bogus"] {
            let e = PgTls::split_url(&format!("postgres://db/m?sslmode={mode}")).unwrap_err();
            assert!(e.to_string().contains(mode), "{e}");
        }
        assert!(PgTls::split_url("host=db sslmode = require").is_err());
        assert!(PgTls::split_url("postgres://db/m?sslmode=require&sslmode=disable").is_err());
    }
}
