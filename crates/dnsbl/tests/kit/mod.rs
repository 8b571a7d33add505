//! Shared helpers for the integration tests: a server on loopback with a
//! list in a temporary directory, and raw DNS queries.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use dnsbl::{Server, ServerConfig};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

/// A running server and the directory holding its lists.
pub struct Running {
    pub server: Server,
    pub dir: tempfile::TempDir,
}

impl Running {
    pub fn addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    pub fn list_path(&self, zone: &str) -> PathBuf {
        self.dir.path().join(format!("{zone}.list"))
    }
}

/// Starts a server on 127.0.0.1, port 0, with one list per zone.
pub async fn start(zones: &[(&str, &str)], reload: Duration) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let mut specs = Vec::new();
    for (zone, text) in zones {
        let path = dir.path().join(format!("{zone}.list"));
        std::fs::write(&path, text).unwrap();
        specs.push((zone.to_string(), path));
    }
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), specs);
    config.reload_interval = reload;
    let server = Server::start(config).await.unwrap();
    Running { server, dir }
}

pub fn query_bytes(name: &str, qtype: RecordType, id: u16) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(id)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

/// One UDP query; `None` if no reply came within a second.
pub async fn udp(addr: SocketAddr, name: &str, qtype: RecordType) -> Option<Message> {
    let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    sock.connect(addr).await.unwrap();
    let id = rand::random();
    sock.send(&query_bytes(name, qtype, id)).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(1), sock.recv(&mut buf))
        .await
        .ok()?
        .ok()?;
    let m = Message::from_vec(&buf[..n]).ok()?;
    (m.id() == id).then_some(m)
}

/// One TCP query.
pub async fn tcp(addr: SocketAddr, name: &str, qtype: RecordType) -> Message {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let q = query_bytes(name, qtype, 99);
    s.write_all(&(q.len() as u16).to_be_bytes()).await.unwrap();
    s.write_all(&q).await.unwrap();
    let mut len = [0u8; 2];
    s.read_exact(&mut len).await.unwrap();
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).await.unwrap();
    Message::from_vec(&buf).unwrap()
}

/// Polls `cond` every few milliseconds until it holds or `limit` passes.
pub async fn wait_until<F, Fut>(limit: Duration, mut cond: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if cond().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
