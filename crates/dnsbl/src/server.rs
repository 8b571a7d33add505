//! The DNSBL server: UDP and TCP listeners over [`crate::answer`], and the
//! list reloader.
//!
//! UDP, where nearly all DNSBL traffic is, runs on plain OS threads, one per
//! socket (several sockets share the port through `SO_REUSEPORT`), each in a
//! blocking receive-answer-send loop like rbldnsd's: measured on loopback
//! this beat async receives, which pay a wake-up per packet. TCP and the
//! reloader are tokio tasks.
//!
//! Lists live behind an `ArcSwap`: a reload parses the changed file on a
//! blocking thread and swaps the whole zone set in one store, so queries in
//! flight finish on the old data and none is dropped. Files are polled for a
//! changed modification time, size or inode (rbldnsd's `-c` polls the
//! time), and [`Server::reload`] asks for a check at once. Write a new list
//! to a temporary name and rename it over the old one, so the server never
//! reads half a file.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use crate::answer::{respond, Disposition, Transport, ZoneData, Zones};
use crate::error::Error;
use crate::ip4set::Ip4SetBuilder;
use crate::qname::zone_name;

/// How a [`Server`] is set up.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address for both the UDP and the TCP listener; port 0 picks a free
    /// port (the same for both).
    pub listen: SocketAddr,
    /// Zones and their list files; a zone named more than once is served
    /// from all its files together, in the order given.
    pub zones: Vec<(String, PathBuf)>,
    /// How often list files are checked for changes (zero: only when
    /// [`Server::reload`] asks).
    pub reload_interval: Duration,
    /// TTL of answers when a list has no `$TTL` (rbldnsd's default, 35 minutes).
    pub default_ttl: u32,
    /// A TCP connection idle this long is closed.
    pub tcp_idle_timeout: Duration,
    /// At most this many TCP connections at once; more are closed at accept.
    pub max_tcp_connections: usize,
    /// UDP sockets, each with its own task, sharing the port through
    /// `SO_REUSEPORT` when more than one (0: one per CPU).
    pub udp_workers: usize,
}

impl ServerConfig {
    /// A configuration with defaults for everything but the address and zones.
    pub fn new(listen: SocketAddr, zones: Vec<(String, PathBuf)>) -> Self {
        ServerConfig {
            listen,
            zones,
            reload_interval: Duration::from_secs(1),
            default_ttl: 2100,
            tcp_idle_timeout: Duration::from_secs(10),
            max_tcp_connections: 256,
            udp_workers: 0,
        }
    }
}

/// Counters of a running server, as read by [`Server::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Packets received over UDP.
    pub udp_queries: u64,
    /// Messages received over TCP.
    pub tcp_queries: u64,
    /// Positive answers.
    pub answers: u64,
    /// NODATA answers (name exists, no record of the type).
    pub nodata: u64,
    /// NXDOMAIN answers.
    pub nxdomain: u64,
    /// REFUSED answers (outside our zones).
    pub refused: u64,
    /// FORMERR and NOTIMP answers (malformed or unsupported queries).
    pub malformed: u64,
    /// Packets not answered at all (too short, or responses).
    pub dropped: u64,
    /// AAAA queries for a /25 bitmap name.
    pub bitmap_queries: u64,
    /// List reloads done after the start.
    pub reloads: u64,
}

#[derive(Default)]
struct Counters {
    udp: AtomicU64,
    tcp: AtomicU64,
    answers: AtomicU64,
    nodata: AtomicU64,
    nxdomain: AtomicU64,
    refused: AtomicU64,
    malformed: AtomicU64,
    dropped: AtomicU64,
    bitmap: AtomicU64,
    reloads: AtomicU64,
}

impl Counters {
    fn count(&self, d: Disposition, bitmap: bool) {
        let c = match d {
            Disposition::Answer => &self.answers,
            Disposition::NoData => &self.nodata,
            Disposition::NxDomain => &self.nxdomain,
            Disposition::Refused => &self.refused,
            Disposition::FormErr | Disposition::NotImp => &self.malformed,
            Disposition::Dropped => &self.dropped,
        };
        c.fetch_add(1, Relaxed);
        if bitmap {
            self.bitmap.fetch_add(1, Relaxed);
        }
    }
}

/// The files behind one zone and the state they were read in.
#[derive(Debug, Clone)]
struct ZoneSource {
    name: String,
    files: Vec<PathBuf>,
    seen: Vec<Option<FileState>>,
}

/// A running DNSBL server. Dropping it stops it.
pub struct Server {
    addr: SocketAddr,
    counters: Arc<Counters>,
    tasks: JoinSet<()>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
    reload: Arc<Notify>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // UDP threads see this within their read timeout; tasks end with the JoinSet
        self.stop.store(true, Relaxed);
    }
}

impl Server {
    /// Reads the lists, binds UDP and TCP on `config.listen` and starts serving.
    pub async fn start(config: ServerConfig) -> Result<Server, Error> {
        if config.zones.is_empty() {
            return Err(Error::Config {
                key: "zones",
                reason: "at least one zone is needed".into(),
            });
        }
        let mut grouped: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        let mut order = Vec::new();
        for (name, path) in &config.zones {
            let key = zone_name(name)?.to_ascii();
            if !grouped.contains_key(&key) {
                order.push(key.clone());
            }
            grouped.entry(key).or_default().push(path.clone());
        }
        let mut sources: Vec<ZoneSource> = order
            .into_iter()
            .map(|name| {
                let files = grouped.remove(&name).unwrap_or_default();
                let seen = vec![None; files.len()];
                ZoneSource { name, files, seen }
            })
            .collect();
        let mut loaded = Vec::new();
        for source in &mut sources {
            loaded.push(Arc::new(load_zone(source, config.default_ttl).await?));
        }
        let zones = Arc::new(ArcSwap::from_pointee(Zones::new(loaded)));

        let workers = if config.udp_workers == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            config.udp_workers
        };
        let (udp, tcp) = bind_all(config.listen, workers).await?;
        let addr = tcp.local_addr()?;
        let counters = Arc::new(Counters::default());
        let mut tasks = JoinSet::new();
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for socket in udp {
            let (zones, counters, stop) = (zones.clone(), counters.clone(), stop.clone());
            threads.push(
                std::thread::Builder::new()
                    .name("dnsbl-udp".into())
                    .spawn(move || udp_loop(socket, &zones, &counters, &stop))?,
            );
        }
        tasks.spawn(tcp_loop(
            tcp,
            zones.clone(),
            counters.clone(),
            config.tcp_idle_timeout,
            Arc::new(Semaphore::new(config.max_tcp_connections.max(1))),
        ));
        let reload = Arc::new(Notify::new());
        tasks.spawn(reload_loop(
            sources,
            zones,
            counters.clone(),
            config.reload_interval,
            config.default_ttl,
            reload.clone(),
        ));
        info!(%addr, "dnsbl server listening");
        Ok(Server {
            addr,
            counters,
            tasks,
            stop,
            threads,
            reload,
        })
    }

    /// Checks the list files now and reloads those that changed, as the
    /// periodic check does (for SIGHUP, as rbldnsd does). Returns at once;
    /// [`ServerStats::reloads`] counts finished reloads.
    pub fn reload(&self) {
        self.reload.notify_one();
    }

    /// The address the server is bound to (UDP and TCP).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> ServerStats {
        let c = &self.counters;
        ServerStats {
            udp_queries: c.udp.load(Relaxed),
            tcp_queries: c.tcp.load(Relaxed),
            answers: c.answers.load(Relaxed),
            nodata: c.nodata.load(Relaxed),
            nxdomain: c.nxdomain.load(Relaxed),
            refused: c.refused.load(Relaxed),
            malformed: c.malformed.load(Relaxed),
            dropped: c.dropped.load(Relaxed),
            bitmap_queries: c.bitmap.load(Relaxed),
            reloads: c.reloads.load(Relaxed),
        }
    }

    /// Stops the server and waits until its sockets are closed.
    pub async fn shutdown(mut self) {
        self.stop.store(true, Relaxed);
        self.tasks.shutdown().await;
        let threads = std::mem::take(&mut self.threads);
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
    }

    /// Serves until a task of the server ends (which only a bug or a
    /// failing socket causes).
    pub async fn run(mut self) -> Result<(), Error> {
        match self.tasks.join_next().await {
            Some(Err(e)) if e.is_panic() => Err(Error::Io(std::io::Error::other(format!(
                "dnsbl server task panicked: {e}"
            )))),
            _ => Err(Error::Io(std::io::Error::other("dnsbl server task ended"))),
        }
    }
}

/// Serves `zones` on `listen` with default settings until the server fails.
pub async fn serve(listen: SocketAddr, zones: Vec<(String, PathBuf)>) -> Result<(), Error> {
    Server::start(ServerConfig::new(listen, zones))
        .await?
        .run()
        .await
}

/// Binds `workers` UDP sockets and one TCP listener on the same address.
///
/// With more than one worker, the UDP sockets share the port through
/// `SO_REUSEPORT` and the kernel spreads clients over them: one socket
/// shared by several tasks costs more in wake-ups than it gains.
async fn bind_all(
    listen: SocketAddr,
    workers: usize,
) -> Result<(Vec<std::net::UdpSocket>, TcpListener), Error> {
    let bind_err = |source| Error::Bind {
        addr: listen,
        source,
    };
    // TCP first: a TCP listener never shares its port, so with port 0 the
    // kernel's pick is ours alone, while two UDP sockets with SO_REUSEPORT
    // of one user could be handed the same port. If that port is taken for
    // UDP, try again with another.
    let mut last = None;
    for _ in 0..16 {
        let tcp = TcpListener::bind(listen).await.map_err(bind_err)?;
        let addr = tcp.local_addr().map_err(bind_err)?;
        let udp: std::io::Result<Vec<_>> = (0..workers.max(1))
            .map(|_| udp_socket(addr, workers > 1))
            .collect();
        match udp {
            Ok(udp) => return Ok((udp, tcp)),
            Err(e) if listen.port() == 0 => last = Some(e),
            Err(e) => return Err(bind_err(e)),
        }
    }
    Err(bind_err(
        last.unwrap_or_else(|| std::io::Error::other("no free port")),
    ))
}

fn udp_socket(addr: SocketAddr, reuse_port: bool) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.bind(&addr.into())?;
    // blocking, with a timeout so the thread notices a stop
    socket.set_read_timeout(Some(Duration::from_millis(250)))?;
    Ok(socket.into())
}

/// What tells a changed file: modification time, size, and inode. File
/// times tick in jiffies, so a same-size rewrite right after a load can
/// keep its mtime; a rename over the file (the way to replace a list)
/// always brings a new inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileState {
    modified: SystemTime,
    len: u64,
    inode: (u64, u64),
}

fn file_state(meta: &std::fs::Metadata) -> FileState {
    use std::os::unix::fs::MetadataExt;
    FileState {
        modified: meta.modified().unwrap_or(UNIX_EPOCH),
        len: meta.len(),
        inode: (meta.dev(), meta.ino()),
    }
}

async fn load_zone(source: &mut ZoneSource, default_ttl: u32) -> Result<ZoneData, Error> {
    let name = zone_name(&source.name)?;
    let files = source.files.clone();
    let (list, states, newest) = tokio::task::spawn_blocking(move || {
        let mut builder = Ip4SetBuilder::new();
        let mut states = Vec::new();
        let mut newest = UNIX_EPOCH;
        for path in &files {
            let err = |source| Error::ListFile {
                path: path.clone(),
                source,
            };
            let meta = std::fs::metadata(path).map_err(err)?;
            let text = std::fs::read(path).map_err(err)?;
            let state = file_state(&meta);
            newest = newest.max(state.modified);
            states.push(Some(state));
            builder.add_text(&String::from_utf8_lossy(&text), &path.display().to_string());
        }
        Ok::<_, Error>((builder.finish(), states, newest))
    })
    .await
    .map_err(|e| Error::Io(std::io::Error::other(e)))??;
    for w in list.warnings() {
        warn!(zone = %source.name, file = %w.origin, line = w.line, "{}", w.message);
    }
    info!(zone = %source.name, blocks = list.len(), "list loaded");
    source.seen = states;
    let serial = newest
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_secs() as u32);
    Ok(ZoneData::new(name, list, serial, default_ttl))
}

async fn reload_loop(
    mut sources: Vec<ZoneSource>,
    zones: Arc<ArcSwap<Zones>>,
    counters: Arc<Counters>,
    interval: Duration,
    default_ttl: u32,
    asked: Arc<Notify>,
) {
    // with a zero interval only Server::reload triggers a check
    let period = if interval.is_zero() {
        Duration::from_secs(365 * 86_400)
    } else {
        interval
    };
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = asked.notified() => {}
        }
        let mut changed = false;
        let mut next: Vec<Arc<ZoneData>> = zones.load().iter().cloned().collect();
        for source in sources.iter_mut() {
            let mut stale = false;
            for (path, seen) in source.files.iter().zip(&source.seen) {
                let now = tokio::fs::metadata(path).await.ok().map(|m| file_state(&m));
                // a file that vanished keeps the old data until it is back
                if now.is_some() && now != *seen {
                    stale = true;
                }
            }
            if !stale {
                continue;
            }
            match load_zone(source, default_ttl).await {
                Ok(zone) => {
                    let zone = Arc::new(zone);
                    match next.iter_mut().find(|z| z.name == zone.name) {
                        Some(slot) => *slot = zone,
                        None => next.push(zone),
                    }
                    changed = true;
                }
                Err(e) => {
                    warn!(zone = %source.name, error = %e, "reload failed, keeping the old list")
                }
            }
        }
        if changed {
            zones.store(Arc::new(Zones::new(next)));
            counters.reloads.fetch_add(1, Relaxed);
        }
    }
}

/// One UDP socket served by one OS thread with blocking calls: under load
/// this avoids the wake-ups an async receive costs per packet, and a query
/// never waits on anything but the CPU.
fn udp_loop(
    socket: std::net::UdpSocket,
    zones: &ArcSwap<Zones>,
    counters: &Counters,
    stop: &AtomicBool,
) {
    let mut buf = vec![0u8; 4096];
    while !stop.load(Relaxed) {
        let (n, peer) = match socket.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(e) => {
                // e.g. ICMP errors reported on the socket: keep serving
                debug!(error = %e, "udp receive error");
                continue;
            }
        };
        counters.udp.fetch_add(1, Relaxed);
        // a panic here would be a bug; it must not take the listener down
        let packet = &buf[..n];
        let reply =
            match std::panic::catch_unwind(|| respond(&zones.load(), packet, Transport::Udp)) {
                Ok(reply) => reply,
                Err(_) => {
                    tracing::error!(%peer, "bug: answering a packet panicked");
                    counters.count(Disposition::Dropped, false);
                    continue;
                }
            };
        counters.count(reply.disposition, reply.bitmap);
        if let Some(bytes) = reply.bytes {
            if let Err(e) = socket.send_to(&bytes, peer) {
                debug!(error = %e, %peer, "udp send error");
            }
        }
    }
}

async fn tcp_loop(
    listener: TcpListener,
    zones: Arc<ArcSwap<Zones>>,
    counters: Arc<Counters>,
    idle: Duration,
    slots: Arc<Semaphore>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        debug!(error = %e, "tcp accept error");
                        continue;
                    }
                };
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    debug!(%peer, "too many tcp connections, closing");
                    continue;
                };
                let zones = zones.clone();
                let counters = counters.clone();
                connections.spawn(async move {
                    if let Err(e) = tcp_connection(stream, &zones, &counters, idle).await {
                        debug!(error = %e, %peer, "tcp connection ended");
                    }
                    drop(permit);
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn tcp_connection(
    mut stream: TcpStream,
    zones: &ArcSwap<Zones>,
    counters: &Counters,
    idle: Duration,
) -> std::io::Result<()> {
    // grows to the largest message seen on this connection (at most 64 KiB)
    let mut buf = Vec::new();
    loop {
        // RFC 1035 §4.2.2: two-octet length, then the message
        let mut len = [0u8; 2];
        match tokio::time::timeout(idle, stream.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        }
        let len = usize::from(u16::from_be_bytes(len));
        if buf.len() < len {
            buf.resize(len, 0);
        }
        match tokio::time::timeout(idle, stream.read_exact(&mut buf[..len])).await {
            Ok(r) => r?,
            Err(_) => return Ok(()),
        };
        counters.tcp.fetch_add(1, Relaxed);
        let reply = respond(&zones.load(), &buf[..len], Transport::Tcp);
        counters.count(reply.disposition, reply.bitmap);
        if let Some(bytes) = reply.bytes {
            let mut out = Vec::with_capacity(bytes.len() + 2);
            out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
            out.extend_from_slice(&bytes);
            stream.write_all(&out).await?;
        }
    }
}
