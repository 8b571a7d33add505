//! `sluice proxy`: runs the `[[proxy]]` entries of the configuration and
//! nothing else (no store, no data directory lock), so the scanner can sit
//! in front of an existing mail server. `sluice serve` starts the same
//! entries next to its own listeners.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use net::{Shutdown, TlsAcceptor};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use crate::config::Config;

/// How long proxied sessions get to finish after a stop signal.
const GRACE: Duration = Duration::from_secs(30);

/// The proxy listeners, bound (before privileges are dropped).
pub(crate) struct Bound(Vec<(proxy::ProxyConfig, TcpListener)>);

impl Bound {
    /// Their addresses.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.0
            .iter()
            .filter_map(|(_, l)| l.local_addr().ok())
            .collect()
    }

    /// Whether any entry needs the server's certificate.
    pub fn wants_tls(&self) -> bool {
        self.0.iter().any(|(c, _)| c.tls != proxy::ClientTls::None)
    }
}

/// Binds every `[[proxy]]` listener.
pub(crate) async fn bind(config: &Config) -> anyhow::Result<Bound> {
    let mut out = Vec::new();
    for entry in &config.proxy {
        let listener = TcpListener::bind(entry.listen)
            .await
            .with_context(|| format!("proxy.listen: cannot listen on {}", entry.listen))?;
        tracing::info!(listener = "proxy", protocol = ?entry.protocol, addr = %listener.local_addr()?, upstream = %entry.upstream, "listening");
        out.push((entry.clone(), listener));
    }
    Ok(Bound(out))
}

/// The proxy's scan, from `[scan]`: the serve command's engine when there
/// is one, else one made here. clamd answers for a whole MIME part only
/// once the part has ended, after a POP3 client would have had it whole,
/// so a POP3 entry needs the built-in scanner.
pub(crate) fn content_check(
    config: &Config,
    engine: Option<&scan::Engine>,
) -> anyhow::Result<Option<Arc<proxy::ContentCheck>>> {
    if !config.scan.enabled {
        tracing::warn!("[scan] enabled = false: the proxy passes mail through unscanned");
        return Ok(None);
    }
    let engine = match engine {
        Some(e) => e.clone(),
        None => crate::serve::scan_engine(config)?,
    };
    if let (scan::Engine::Clamd(_), Some(entry)) = (
        &engine,
        config
            .proxy
            .iter()
            .find(|p| p.protocol == proxy::Protocol::Pop3),
    ) {
        anyhow::bail!(
            "proxy {}: a pop3 entry needs [scan] engine = \"builtin\": clamd gives its verdict only at the end of a part, after the client has received it",
            entry.listen
        );
    }
    Ok(Some(Arc::new(proxy::ContentCheck {
        engine,
        reject_limit: config.scan.on_limit == smtp::Action::Reject,
        reject_encrypted: config.scan.on_encrypted == smtp::Action::Reject,
    })))
}

/// Starts an accept loop per bound listener.
pub(crate) fn start(
    config: &Config,
    bound: Bound,
    tls: Option<TlsAcceptor>,
    check: Option<Arc<proxy::ContentCheck>>,
    shutdown: &Shutdown,
    loops: &mut JoinSet<()>,
) -> anyhow::Result<()> {
    for (entry, listener) in bound.0 {
        let upstream_tls = proxy::connector(&entry).map_err(anyhow::Error::msg)?;
        let ctx = Arc::new(proxy::Context {
            limiter: proxy::Context::limiter_for(&entry),
            config: entry,
            hostname: config.hostname.clone(),
            tls: tls.clone(),
            upstream_tls,
            scan: check.clone(),
            shutdown: shutdown.clone(),
        });
        loops.spawn(proxy::serve(listener, ctx));
    }
    Ok(())
}

/// `sluice proxy`.
pub async fn run(config: Config) -> anyhow::Result<()> {
    crate::serve::init_logging(&config, None);
    if config.proxy.is_empty() {
        anyhow::bail!("no [[proxy]] entry in the configuration: nothing to run");
    }
    let bound = bind(&config).await?;
    crate::privileges::drop_root(&config.server, &bound.addrs(), &config.data_dir)?;
    let tls = if bound.wants_tls() {
        Some(crate::tls::acceptors(&config)?.main)
    } else {
        None
    };
    let check = content_check(&config, None)?;
    let shutdown = Shutdown::default();
    let mut loops = JoinSet::new();
    start(&config, bound, tls, check, &shutdown, &mut loops)?;
    let stop = crate::serve::stop_signal()?;
    tracing::info!(hostname = %config.hostname, entries = config.proxy.len(), "sluice proxy started");
    stop.await;
    tracing::info!("stopping: no new connections, waiting for sessions to finish");
    shutdown.token.cancel();
    while loops.join_next().await.is_some() {}
    shutdown.drain(GRACE).await;
    tracing::info!("stopped");
    Ok(())
}
