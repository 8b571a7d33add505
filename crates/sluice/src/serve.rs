//! `sluice serve`: opens the store, binds every configured listener and
//! runs until SIGTERM or Ctrl-C, then stops accepting, lets sessions in the
//! middle of a transaction finish, and exits.

use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use net::{ConnLimiter, Shutdown};
use store::{Authenticator, DirectoryWatch, Store};

use crate::store_backend::{OpenStore, Role};
use tokio::net::TcpListener;

use crate::config::Config;

/// How often the directory is checked for edits made by the command line.
const DIRECTORY_POLL: Duration = Duration::from_millis(500);
/// How long sessions get to finish after a stop signal.
const GRACE: Duration = Duration::from_secs(30);

/// Logs to standard error and, when `ring` is given, into it too (the
/// admin page's recent lines, without colours).
pub(crate) fn init_logging(config: &Config, ring: Option<Arc<web::LogRing>>) {
    let mut filter = std::env::var("RUST_LOG").unwrap_or_else(|_| config.log.level.clone());
    // rustls warns at every handshake whose SNI is an IP address, which is
    // what clients connecting by address send: harmless, so kept out of
    // the log unless asked for by name (tls.rs logs it at debug).
    if !filter.contains("rustls") {
        filter.push_str(",rustls::msgs::handshake=error");
    }
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let recent = ring.map(|ring| {
        tracing_subscriber::fmt::layer()
            .with_writer(move || ring.writer())
            .with_ansi(false)
            .with_target(false)
    });
    let _ = tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new(filter))
        .with(stderr)
        .with(recent)
        .try_init();
}

/// Only one server may own a data directory; the lock dies with the
/// process, so a crash never leaves it stale.
pub(crate) fn lock_data_dir(config: &Config) -> anyhow::Result<std::fs::File> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("cannot create {}", config.data_dir.display()))?;
    let path = config.data_dir.join("sluice.lock");
    let file = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.try_lock().map_err(|_| {
        anyhow::anyhow!(
            "another sluice server is running on {}",
            config.data_dir.display()
        )
    })?;
    Ok(file)
}

/// Sender rewriting for forwarded mail, under a secret kept in
/// `<data>/srs.key` (made at first start; losing it only means bounces to
/// addresses rewritten before are refused).
fn srs(config: &Config) -> anyhow::Result<Option<Arc<smtp::Srs>>> {
    if !config.smtp.srs {
        return Ok(None);
    }
    let path = config.data_dir.join("srs.key");
    let secret = match std::fs::read_to_string(&path) {
        Ok(text) => hex::decode(text.trim())
            .with_context(|| format!("{} is not a hex key", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key: [u8; 32] = rand::random();
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            std::io::Write::write_all(&mut file, hex::encode(key).as_bytes())?;
            file.sync_all()?;
            key.to_vec()
        }
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let domain = config
        .smtp
        .srs_domain
        .clone()
        .unwrap_or_else(|| config.hostname.clone());
    Ok(Some(Arc::new(smtp::Srs::new(&secret, &domain))))
}

/// Starts the outbound queue manager, unless `[outbound] enabled = false`.
fn start_outbound(
    config: &Config,
    store: &Arc<dyn Store>,
    srs: Option<Arc<smtp::Srs>>,
    directory: &Arc<DirectoryWatch>,
    reporter: &Reporter,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    use sluice_outbound::tls_policy::{self, TlsPolicies};
    if !config.outbound.enabled {
        return Ok(None);
    }
    let nameservers = config.dns.resolver.list();
    let tls_config = config.outbound.tls.clone().with_data_dir(&config.data_dir);
    let relay = &config.outbound.relay;
    let mut policies = TlsPolicies::from_nameservers(&nameservers, tls_config)
        .context("outbound TLS policy ([outbound.tls], [dns])")?;
    if let Some(ca) = &relay.ca_file {
        policies = policies
            .with_relay_ca(ca)
            .context("[outbound.relay] ca_file")?;
    }
    let policies = Arc::new(policies);
    // Whether DANE can work through this resolver is said once, at start,
    // rather than found out by the first delivery.
    let check = Arc::clone(&policies);
    tokio::spawn(async move {
        check.dane_active().await;
    });
    let mut router = sluice_outbound::Router::new(
        tls_policy::resolver(&nameservers).context("[dns] resolver")?,
        config.outbound.routes.clone(),
        config.outbound.mx_port,
    );
    if relay.enabled() {
        router = router.with_relay(&relay.host, relay.port);
    }
    let manager = sluice_outbound::QueueManager::new(
        Arc::clone(store),
        router,
        policies,
        config.outbound.clone(),
        config.hostname.clone(),
    );
    // Reports about forwarded mail go to the real sender, not to the SRS
    // address it was sent from.
    let manager = match srs {
        Some(srs) => manager.with_sender_reverser(Arc::new(move |sender: &str| {
            srs.reverse(sender, smtp::srs_today()).ok()
        })),
        None => manager,
    };
    let signer = sluice_outbound::Signer::new(Arc::clone(store), config.dkim.clone());
    let mut manager = manager.with_signer(Arc::new(signer), Arc::clone(directory));
    if relay.enabled() {
        let password = relay.password().map_err(anyhow::Error::msg)?;
        let login = relay.username.clone().zip(password);
        tracing::info!(relay = %relay.host, port = relay.port, login = login.is_some(), "all outbound mail goes through the relay");
        manager = manager.with_relay(relay.tls, login);
    }
    let _ = reporter.set(Arc::clone(&manager));
    Ok(Some(tokio::spawn(manager.run())))
}

/// The queue manager, once started, for the SMTP sessions' reports of
/// local deliveries (it starts after the listeners are bound).
type Reporter = Arc<std::sync::OnceLock<Arc<sluice_outbound::QueueManager>>>;

/// The SMTP sessions' way to send NOTIFY=SUCCESS reports of local
/// deliveries: through the queue manager, in the background. Without an
/// outbound queue they are not sent (and logged).
fn delivered_report(reporter: &Reporter) -> smtp::DeliveredReport {
    let reporter = Arc::clone(reporter);
    Arc::new(move |notice: store::DeliveryNotice| {
        let Some(manager) = reporter.get().cloned() else {
            tracing::info!(sender = %notice.sender, "no outbound queue: success report not sent");
            return;
        };
        tokio::spawn(async move { manager.report_delivered(notice).await });
    })
}

/// The port of the first of `listeners`, if any.
fn first_port(listeners: &[tokio::net::TcpListener]) -> Option<u16> {
    listeners.first()?.local_addr().ok().map(|a| a.port())
}

async fn bind(
    name: &str,
    config_addrs: Vec<std::net::SocketAddr>,
) -> anyhow::Result<Vec<TcpListener>> {
    let mut out = Vec::new();
    for addr in config_addrs {
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("listen.{name}: cannot listen on {addr}"))?;
        tracing::info!(listener = %name, addr = %listener.local_addr()?, "listening");
        out.push(listener);
    }
    Ok(out)
}

pub async fn run(config: Config) -> anyhow::Result<()> {
    let logs =
        (config.web.admin_log_lines > 0).then(|| web::LogRing::new(config.web.admin_log_lines));
    init_logging(&config, logs.clone());
    // Every connection is a file descriptor: lift the soft limit to the
    // hard one, as a server holding thousands of connections must.
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => tracing::debug!(limit = n, "open file limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open file limit"),
    }
    // Bound first, as root if need be; everything after runs as the
    // configured user (privileges.rs).
    let smtp_listeners = bind("smtp", config.listen.smtp.list()).await?;
    let submission_listeners = bind("submission", config.listen.submission.list()).await?;
    let submissions_listeners = bind("submissions", config.listen.submissions.list()).await?;
    let pop3_listeners = bind("pop3", config.listen.pop3.list()).await?;
    let pop3s_listeners = bind("pop3s", config.listen.pop3s.list()).await?;
    let imap_listeners = bind("imap", config.listen.imap.list()).await?;
    let imaps_listeners = bind("imaps", config.listen.imaps.list()).await?;
    let managesieve_listeners = bind("managesieve", config.listen.managesieve.list()).await?;
    let http_listeners = bind("http", config.listen.http.list()).await?;
    let https_listeners = bind("https", config.listen.https.list()).await?;
    let metrics_listeners = bind("metrics", config.listen.metrics.list()).await?;
    let acme_http_listeners = bind("acme_http", config.listen.acme_http.list()).await?;
    let proxy_listeners = crate::proxy::bind(&config).await?;
    let mut bound: Vec<std::net::SocketAddr> = [
        &smtp_listeners,
        &submission_listeners,
        &submissions_listeners,
        &pop3_listeners,
        &pop3s_listeners,
        &imap_listeners,
        &imaps_listeners,
        &managesieve_listeners,
        &http_listeners,
        &https_listeners,
        &metrics_listeners,
        &acme_http_listeners,
    ]
    .iter()
    .flat_map(|ls| ls.iter().filter_map(|l| l.local_addr().ok()))
    .collect();
    bound.extend(proxy_listeners.addrs());
    crate::privileges::drop_root(&config.server, &bound, &config.data_dir)?;
    let _lock = lock_data_dir(&config)?;
    let opened = OpenStore::open(&config, Role::Server).await?;
    let dropped = opened.recover().await?;
    if dropped > 0 {
        tracing::warn!(
            dropped,
            "removed messages left incomplete by an interrupted run"
        );
    }
    let store = opened.shared();
    store
        .space()
        .set_reserve(config.store.min_free_mb.saturating_mul(1024 * 1024));
    let directory = DirectoryWatch::start(Arc::clone(&store), DIRECTORY_POLL).await?;
    let acceptors = crate::tls::acceptors(&config)?;
    let tls = acceptors.main.clone();
    reload_on_hangup(Arc::clone(&acceptors.identity))?;
    let shutdown = Shutdown::default();

    let content = content_policy(&config)?.map(Arc::new);
    let srs = srs(&config)?;
    let srs_for_reports = srs.clone();
    let blocklist = blocklist_policy(&config)?;
    // SPF, DKIM, ARC and DMARC share one resolver and its cache.
    let authenticator = Arc::new(mail_auth::MessageAuthenticator(
        sluice_outbound::tls_policy::resolver(&config.dns.resolver.list())
            .context("[dns] resolver")?,
    ));
    let spf = smtp::SpfCheck::new(Arc::clone(&authenticator), &config.auth_checks).map(Arc::new);
    let reporter = Reporter::default();
    let message_auth = smtp::MessageAuth::new(authenticator, &config.auth_checks, &config.hostname)
        .map(|checks| {
            if !config.auth_checks.arc_seal {
                return checks;
            }
            checks.with_sealing(Arc::new(crate::arc_keys::StoreSealingKeys {
                store: Arc::clone(&store),
            }))
        })
        .map(Arc::new);
    // Sieve at delivery, for mail from other servers and from accounts.
    let filters = smtp::Filters::new(config.sieve.clone(), config.spam.clone()).map(Arc::new);
    if config.spam.enabled {
        tokio::spawn(crate::spam_trainer::run(
            Arc::clone(&store),
            config.spam.max_tokens,
        ));
    }
    let smtp_ctx = Arc::new(smtp::Context {
        hostname: config.hostname.clone(),
        config: config.smtp.clone(),
        store: Arc::clone(&store),
        directory: Arc::clone(&directory),
        tls: Some(tls.clone()),
        limiter: ConnLimiter::with_total(
            config.smtp.max_connections_per_ip,
            config.smtp.max_connections,
        ),
        shutdown: shutdown.clone(),
        content: content.clone(),
        blocklist,
        submission: None,
        srs: srs.clone(),
        spf,
        message_auth,
        delivered: Some(delivered_report(&reporter)),
        filters: filters.clone(),
    });
    // Submission: the same SMTP session with AUTH and relaying for
    // accounts; no DNSBL (clients are people, often on dynamic addresses).
    // One throttling table for every protocol: failures over POP3 slow
    // guesses over IMAP, submission and webmail too (store::auth). On a
    // store several nodes share, the table is in it, so guesses spread
    // over the nodes count together.
    let imap_auth = Arc::new(Authenticator::with_book(
        Arc::clone(&directory),
        Duration::from_secs(config.imap.auth_failure_delay_secs),
        store.penalty_book(),
    ));
    let auth_with = |secs: u64| {
        Arc::new(Authenticator::sharing(
            &imap_auth,
            Duration::from_secs(secs),
        ))
    };
    // An address failing to log in keeps only a few connections on each
    // listener that takes logins: its guesses go one at a time anyway.
    let gate = imap_auth.gate();
    let login_limiter = |per_ip: usize, total: usize| {
        let gate = Arc::clone(&gate);
        ConnLimiter::holding(
            per_ip,
            total,
            Arc::new(move |ip| gate.limited(ip)),
            store::LIMITED_CONNECTIONS,
        )
    };
    // One submission state (hourly limits) for SMTP submission and the
    // webmail alike.
    let submission = Arc::new(smtp::Submission::new(
        auth_with(config.imap.auth_failure_delay_secs),
        config.submission.clone(),
    ));
    let send_limit: web::SendLimit = {
        let submission = Arc::clone(&submission);
        Arc::new(move |account, recipients| {
            submission.rates.take(
                account,
                recipients,
                submission.config.max_messages_per_hour,
                submission.config.max_recipients_per_hour,
                std::time::Instant::now(),
            )
        })
    };
    let submission_ctx = Arc::new(smtp::Context {
        hostname: config.hostname.clone(),
        config: config.smtp.clone(),
        store: Arc::clone(&store),
        directory: Arc::clone(&directory),
        tls: Some(tls.clone()),
        limiter: login_limiter(
            config.smtp.max_connections_per_ip,
            config.smtp.max_connections,
        ),
        shutdown: shutdown.clone(),
        content: content.clone(),
        blocklist: None,
        submission: Some(Arc::clone(&submission)),
        srs,
        spf: None,
        message_auth: None,
        delivered: Some(delivered_report(&reporter)),
        filters: filters.clone(),
    });
    let pop3_ctx = Arc::new(pop3::Context {
        hostname: config.hostname.clone(),
        config: config.pop3.clone(),
        store: Arc::clone(&store),
        auth: auth_with(config.pop3.auth_failure_delay_secs),
        tls: Some(tls.clone()),
        locks: Arc::default(),
        limiter: login_limiter(
            config.pop3.max_connections_per_ip,
            config.pop3.max_connections,
        ),
        shutdown: shutdown.clone(),
    });
    let imap_ctx = Arc::new(imap::Context {
        hostname: config.hostname.clone(),
        config: config.imap.clone(),
        store: Arc::clone(&store),
        auth: Arc::clone(&imap_auth),
        tls: Some(tls.clone()),
        limiter: login_limiter(
            config.imap.max_connections_per_ip,
            config.imap.max_connections,
        ),
        shutdown: shutdown.clone(),
    });
    let managesieve_ctx = Arc::new(managesieve::Context {
        hostname: config.hostname.clone(),
        config: config.managesieve.clone(),
        store: Arc::clone(&store),
        auth: auth_with(config.managesieve.auth_failure_delay_secs),
        tls: Some(tls.clone()),
        limiter: login_limiter(
            config.managesieve.max_connections_per_ip,
            config.managesieve.max_connections,
        ),
        shutdown: shutdown.clone(),
        language: crate::sieve_admin::language(),
    });
    let one_click = web::OneClick::new(config.web.unsubscribe_ca_file.as_deref())
        .map_err(|e| anyhow::anyhow!("key `web.unsubscribe_ca_file`: {e}"))?;
    let web_ctx = Arc::new(web::Context {
        authserv_id: config.auth_checks.checks_message().then(|| {
            config
                .auth_checks
                .authserv_id
                .clone()
                .unwrap_or_else(|| config.hostname.clone())
        }),
        one_click,
        store: Arc::clone(&store),
        directory: Arc::clone(&directory),
        auth: auth_with(config.web.auth_failure_delay_secs),
        config: config.web.clone(),
        shutdown: shutdown.clone(),
        send_limit: Some(send_limit.clone()),
        logs,
        services: web::MailServices {
            // The ports listened on (a configured port 0 is the one given).
            imap: first_port(&imap_listeners),
            imaps: first_port(&imaps_listeners),
            pop3: first_port(&pop3_listeners),
            pop3s: first_port(&pop3s_listeners),
            submission: first_port(&submission_listeners),
            submissions: first_port(&submissions_listeners),
            ..config.mail_services()
        },
        scan: content.clone().map(|policy| {
            let store = Arc::clone(&store);
            let scan: web::ScanStored = Arc::new(move |blob| {
                let policy = Arc::clone(&policy);
                let store = Arc::clone(&store);
                Box::pin(async move { policy.check_stored(store.as_ref(), blob).await })
            });
            scan
        }),
    });
    let mut accept_loops = tokio::task::JoinSet::new();
    for l in metrics_listeners {
        accept_loops.spawn(crate::metrics_http::serve(
            l,
            Arc::clone(&store),
            shutdown.clone(),
        ));
    }
    // JMAP shares the web listeners' HTTP stack, with the same login
    // throttle as every other protocol.
    let jmap_ctx = Arc::new(jmap::Context {
        store: Arc::clone(&store),
        auth: auth_with(config.web.auth_failure_delay_secs),
        config: config.jmap.clone(),
        hostname: config.hostname.clone(),
        shutdown: shutdown.token.clone(),
        directory: Arc::clone(&directory),
        scan: web_ctx.scan.clone(),
        send_limit: Some(send_limit),
        push: jmap::PushHub::default(),
    });
    let jmap_routes = |secure: bool| {
        if config.jmap.enabled {
            jmap::router(Arc::clone(&jmap_ctx), secure)
        } else {
            axum::Router::new()
        }
    };
    for l in http_listeners {
        accept_loops.spawn(web::serve_with(
            l,
            Arc::clone(&web_ctx),
            None,
            jmap_routes(false),
        ));
    }
    for l in https_listeners {
        accept_loops.spawn(web::serve_with(
            l,
            Arc::clone(&web_ctx),
            Some(acceptors.https.clone()),
            jmap_routes(true),
        ));
    }
    let acme_tokens = Arc::new(crate::acme::HttpTokens::default());
    for l in acme_http_listeners {
        accept_loops.spawn(crate::acme::serve_http(
            l,
            Arc::clone(&acme_tokens),
            shutdown.clone(),
        ));
    }
    for l in smtp_listeners {
        accept_loops.spawn(smtp::serve(l, Arc::clone(&smtp_ctx)));
    }
    for l in submission_listeners {
        accept_loops.spawn(smtp::serve_submission(
            l,
            Arc::clone(&submission_ctx),
            false,
        ));
    }
    for l in submissions_listeners {
        accept_loops.spawn(smtp::serve_submission(l, Arc::clone(&submission_ctx), true));
    }
    for l in pop3_listeners {
        accept_loops.spawn(pop3::serve(l, Arc::clone(&pop3_ctx), false));
    }
    for l in pop3s_listeners {
        accept_loops.spawn(pop3::serve(l, Arc::clone(&pop3_ctx), true));
    }
    for l in imap_listeners {
        accept_loops.spawn(imap::serve(l, Arc::clone(&imap_ctx), false));
    }
    for l in imaps_listeners {
        accept_loops.spawn(imap::serve(l, Arc::clone(&imap_ctx), true));
    }
    for l in managesieve_listeners {
        accept_loops.spawn(managesieve::serve(l, Arc::clone(&managesieve_ctx)));
    }
    let proxy_check = if config.proxy.is_empty() {
        None
    } else {
        crate::proxy::content_check(&config, content.as_ref().map(|c| &c.engine))?
    };
    crate::proxy::start(
        &config,
        proxy_listeners,
        Some(tls.clone()),
        proxy_check,
        &shutdown,
        &mut accept_loops,
    )?;
    let outbound = start_outbound(&config, &store, srs_for_reports, &directory, &reporter)?;
    // Certificates from the CA, once the listeners that answer its
    // challenges are up.
    let acme = config.acme.enabled.then(|| {
        let manager =
            crate::acme::Manager::new(&config, Arc::clone(&acceptors.identity), acme_tokens);
        tokio::spawn(manager.run())
    });
    // Handlers are in place before anyone is told the server is up.
    let stop = stop_signal()?;
    tracing::info!(hostname = %config.hostname, data = %config.data_dir.display(), "sluice started");

    stop.await;
    tracing::info!("stopping: no new connections, waiting for sessions to finish");
    shutdown.token.cancel();
    if let Some(task) = &outbound {
        // Deliveries in flight stop here; their recipients stay queued
        // and are tried again at the next start (leases run out).
        task.abort();
    }
    if let Some(task) = &acme {
        task.abort();
    }
    while accept_loops.join_next().await.is_some() {}
    shutdown.drain(GRACE).await;
    if let Some(b) = &smtp_ctx.blocklist {
        let d = b.client.stats();
        tracing::info!(
            checks = d.checks,
            listed = d.listed,
            queries_sent = d.queries_sent,
            cache_hits = d.cache_hits,
            cache_misses = d.cache_misses,
            timeouts = d.timeouts,
            "dnsbl totals"
        );
    }
    opened.stop().await;
    Ok(())
}

/// The engine `[scan]` asks for: clamd, or the built-in scanner with its
/// signatures loaded.
pub(crate) fn scan_engine(config: &Config) -> anyhow::Result<scan::Engine> {
    Ok(match config.scan.engine {
        crate::config::ScanEngine::Clamd => {
            tracing::info!(clamd = %config.scan.clamd, "scanning with clamd");
            scan::Engine::Clamd(scan::clamd::ClamdClient::new(
                config.scan.clamd_addr(),
                Duration::from_secs(config.scan.clamd_timeout_secs),
            ))
        }
        crate::config::ScanEngine::Builtin => {
            let db = config.scan.load_database()?;
            scan::Engine::Builtin(scan::Scanner::new(Arc::new(db), config.scan.limits()))
        }
    })
}

/// The scanner of the data stage, with its signatures loaded.
fn content_policy(config: &Config) -> anyhow::Result<Option<smtp::ContentPolicy>> {
    if !config.scan.enabled {
        return Ok(None);
    }
    let engine = scan_engine(config)?;
    Ok(Some(smtp::ContentPolicy {
        engine,
        on_infected: config.scan.on_infected,
        on_limit: config.scan.on_limit,
        on_encrypted: config.scan.on_encrypted,
    }))
}

/// The DNSBL client of the gate, if zones are configured.
fn blocklist_policy(config: &Config) -> anyhow::Result<Option<smtp::BlocklistPolicy>> {
    let c = &config.dnsbl;
    let Some(resolver) = c.resolver.filter(|_| !c.zones.is_empty()) else {
        return Ok(None);
    };
    let zones = c
        .zones
        .iter()
        .map(|z| match z.mode {
            crate::config::ZoneMode::Classic => dnsbl::Zone::classic(&z.name, z.weight),
            crate::config::ZoneMode::Bitmap => dnsbl::Zone::bitmap(&z.name, z.weight),
        })
        .collect();
    let mut client = dnsbl::ClientConfig::new(resolver, zones);
    client.threshold = c.threshold;
    client.budget = Duration::from_millis(c.budget_ms);
    client.ttl_cap = Duration::from_secs(c.ttl_cap_secs);
    Ok(Some(smtp::BlocklistPolicy {
        client: dnsbl::Client::new(client).context("key `dnsbl`")?,
        allow: c.allow_list()?,
        reject_at_connect: c.reject_at_connect,
    }))
}

/// Resolves at SIGTERM or SIGINT; the handlers are installed at the call.
/// `SIGHUP` reads the certificate and key files again (a renewed
/// certificate from certbot or the like), without a restart.
fn reload_on_hangup(identity: Arc<crate::tls::Identity>) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangup = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            match identity.reload() {
                Ok(info) => tracing::info!(
                    sha256 = %info.fingerprint,
                    expires = %info.expires(),
                    "certificate reloaded"
                ),
                Err(e) => {
                    tracing::error!(error = %e, "certificate not reloaded; the one in use stays")
                }
            }
        }
    });
    Ok(())
}

pub(crate) fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
