//! Upstream SMTP connections kept open between client sessions.
//!
//! A client that sends one message per connection (most MTAs, and
//! Postfix's `smtp-source`) would otherwise cost the upstream a TCP
//! handshake, a greeting and a QUIT per message, each one more round trip
//! through the proxy. When a session ends cleanly, its upstream
//! connection waits here for the next client, as Postfix's own SMTP
//! client caches connections (`smtp_connection_cache_*`). The proxy
//! answers that client's QUIT itself, and the next client gets the
//! upstream's greeting again.
//!
//! Only a connection on which nothing went wrong is kept: no AUTH (which
//! cannot be undone), no reply of 400 or more (an upstream counts errors
//! per connection and may end it), no transaction left open. Entries that
//! tell the upstream who the client is never reuse: the PROXY header is
//! sent once per connection, and Postfix refuses a second XCLIENT once
//! the first has made the connection someone else's ("550 5.7.0 Error:
//! insufficient authorization"). Nor do entries that follow each client
//! to its original destination.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::upstream::Upstream;

/// How long a connection may wait for its next client. Well below the
/// idle limits of upstreams: Postfix's `smtpd_timeout` is 300 s, or 10 s
/// when it is under stress.
const IDLE: Duration = Duration::from_secs(5);

/// Client sessions one upstream connection serves at most, and for how
/// long, so that an upstream's per-connection state and process are
/// renewed now and then (Postfix's smtpd `max_use` counts connections).
const SESSIONS: u32 = 100;
const AGE: Duration = Duration::from_secs(300);

/// Connections kept waiting at most; more are closed. A burst of clients
/// leaves no more than this behind.
const MAX_IDLE: usize = 64;

/// How long a closing connection waits for the upstream's reply to QUIT.
const QUIT_WAIT: Duration = Duration::from_secs(2);

/// An open upstream connection between sessions.
pub(crate) struct Kept {
    pub up: Upstream,
    pub lease: Lease,
}

/// What the proxy knows of an upstream connection beyond its stream.
pub(crate) struct Lease {
    /// The upstream's greeting when it was opened, for the next client.
    pub greeting: Vec<u8>,
    opened: Instant,
    /// Client sessions served so far, this one included.
    sessions: u32,
    idle_since: Instant,
}

impl Lease {
    /// For a connection just opened for a session.
    pub fn new(greeting: Vec<u8>) -> Lease {
        let now = Instant::now();
        Lease {
            greeting,
            opened: now,
            sessions: 1,
            idle_since: now,
        }
    }

    /// Whether it may serve another session after this one.
    fn renewable(&self, now: Instant) -> bool {
        self.sessions < SESSIONS && now.duration_since(self.opened) < AGE
    }

    fn expired(&self, now: Instant) -> bool {
        now.duration_since(self.idle_since) >= IDLE || !self.renewable(now)
    }
}

/// The idle connections of one proxy entry.
#[derive(Default)]
pub(crate) struct Pool {
    idle: Mutex<Vec<Kept>>,
}

impl Pool {
    /// The most recently returned connection that is still open (the
    /// others age out), counted as serving one more session.
    pub fn take(&self) -> Option<Kept> {
        let now = Instant::now();
        loop {
            let mut kept = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()?;
            if kept.lease.expired(now) {
                close(kept);
                continue;
            }
            if kept.up.closed_while_idle() {
                continue;
            }
            kept.lease.sessions += 1;
            return Some(kept);
        }
    }

    /// Returns a connection whose session ended cleanly.
    pub fn put(&self, mut kept: Kept) {
        let now = Instant::now();
        if !kept.lease.renewable(now) {
            return close(kept);
        }
        kept.lease.idle_since = now;
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() >= MAX_IDLE {
            drop(idle);
            return close(kept);
        }
        idle.push(kept);
    }

    /// Closes the connections that waited too long; the proxy calls this
    /// every second, so none outstays [`IDLE`] by much.
    pub fn close_expired(&self) {
        let now = Instant::now();
        let expired: Vec<Kept> = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            let (old, fresh) = idle.drain(..).partition(|k| k.lease.expired(now));
            *idle = fresh;
            old
        };
        expired.into_iter().for_each(close);
    }

    /// Closes every idle connection (the proxy is stopping).
    pub fn close_all(&self) {
        let all: Vec<Kept> =
            std::mem::take(&mut *self.idle.lock().unwrap_or_else(|p| p.into_inner()));
        all.into_iter().for_each(close);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.idle.lock().unwrap().len()
    }
}

/// Ends a connection politely (QUIT), in the background, so the upstream
/// logs an ordinary disconnection rather than a lost connection.
fn close(mut kept: Kept) {
    tokio::spawn(async move {
        let quit = async {
            kept.up.send(b"QUIT\r\n").await.ok()?;
            kept.up.line().await.ok().map(|_| ())
        };
        let _ = tokio::time::timeout(QUIT_WAIT, quit).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A connected upstream whose far end the test holds.
    async fn pair() -> (Upstream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (near, far) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let up = Upstream::plain(near.unwrap(), Duration::from_secs(5));
        (up, far.unwrap().0)
    }

    fn fresh(up: Upstream, greeting: Vec<u8>) -> Kept {
        Kept {
            up,
            lease: Lease::new(greeting),
        }
    }

    #[tokio::test]
    async fn the_newest_open_connection_is_taken_and_closed_ones_are_skipped() {
        let pool = Pool::default();
        let (a, _far_a) = pair().await;
        let (b, far_b) = pair().await;
        pool.put(fresh(a, b"220 a\r\n".to_vec()));
        pool.put(fresh(b, b"220 b\r\n".to_vec()));
        drop(far_b);
        // The far end's close reaches this end's socket.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let kept = pool.take().expect("a is still open");
        assert_eq!(kept.lease.greeting, b"220 a\r\n");
        assert_eq!(kept.lease.sessions, 2);
        assert!(pool.take().is_none());
    }

    #[tokio::test]
    async fn a_connection_the_upstream_spoke_on_while_idle_is_not_taken() {
        let pool = Pool::default();
        let (a, mut far) = pair().await;
        pool.put(fresh(a, b"220 a\r\n".to_vec()));
        far.write_all(b"421 4.4.2 timeout\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(pool.take().is_none());
    }

    #[tokio::test]
    async fn worn_and_expired_connections_are_closed_with_quit() {
        let pool = Pool::default();
        let (a, mut far) = pair().await;
        let mut kept = fresh(a, Vec::new());
        kept.lease.sessions = SESSIONS;
        pool.put(kept);
        assert_eq!(
            pool.len(),
            0,
            "a connection at its session limit is not kept"
        );
        let mut got = [0u8; 6];
        far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"QUIT\r\n");

        let (b, mut far) = pair().await;
        let mut kept = fresh(b, Vec::new());
        kept.lease.idle_since = Instant::now() - IDLE;
        pool.idle.lock().unwrap().push(kept);
        pool.close_expired();
        assert_eq!(pool.len(), 0);
        far.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"QUIT\r\n");
    }

    #[tokio::test]
    async fn at_most_max_idle_are_kept() {
        let pool = Pool::default();
        let mut fars = Vec::new();
        for _ in 0..MAX_IDLE + 3 {
            let (up, far) = pair().await;
            fars.push(far);
            pool.put(fresh(up, Vec::new()));
        }
        assert_eq!(pool.len(), MAX_IDLE);
        pool.close_all();
        assert_eq!(pool.len(), 0);
    }
}
