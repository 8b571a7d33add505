//! One DNS question, one answer: UDP with retransmission, TCP when the
//! answer is truncated. Counts every message it sends.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, Query};
use hickory_proto::rr::{Name, RecordType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::time::{timeout, timeout_at, Instant};

use crate::cache::Failure;

/// Where and how queries go.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    pub(crate) resolver: SocketAddr,
    pub(crate) attempt_timeout: Duration,
    pub(crate) attempts: u32,
    pub(crate) recursion_desired: bool,
}

/// Asks `name`/`qtype` and returns the reply that matches the question.
pub(crate) async fn ask(
    ex: &Exchange,
    name: &Name,
    qtype: RecordType,
    sent: &AtomicU64,
) -> Result<Message, Failure> {
    let id: u16 = rand::random();
    let query = Query::query(name.clone(), qtype);
    let mut msg = Message::new();
    msg.set_id(id)
        .set_message_type(MessageType::Query)
        .set_recursion_desired(ex.recursion_desired)
        .add_query(query.clone());
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    msg.set_edns(edns);
    let bytes = msg.to_vec().map_err(|_| Failure::Error)?;

    let local: SocketAddr = match ex.resolver.ip() {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    // A fresh socket per question: a random source port on top of the
    // random id (RFC 5452 §9.2), and `connect` filters other senders.
    let socket = UdpSocket::bind(local).await.map_err(|_| Failure::Error)?;
    socket
        .connect(ex.resolver)
        .await
        .map_err(|_| Failure::Error)?;
    let mut buf = vec![0u8; 4096];
    for _ in 0..ex.attempts.max(1) {
        sent.fetch_add(1, Relaxed);
        if socket.send(&bytes).await.is_err() {
            return Err(Failure::Error);
        }
        let deadline = Instant::now() + ex.attempt_timeout;
        loop {
            let n = match timeout_at(deadline, socket.recv(&mut buf)).await {
                Err(_) => break,
                Ok(Err(_)) => return Err(Failure::Error),
                Ok(Ok(n)) => n,
            };
            let Ok(reply) = Message::from_vec(&buf[..n]) else {
                continue;
            };
            if !matches_question(&reply, id, &query) {
                continue;
            }
            if reply.truncated() {
                return ask_tcp(ex, &bytes, id, &query, sent).await;
            }
            return Ok(reply);
        }
    }
    Err(Failure::Timeout)
}

fn matches_question(reply: &Message, id: u16, query: &Query) -> bool {
    if reply.id() != id || reply.message_type() != MessageType::Response {
        return false;
    }
    match reply.queries() {
        // names compare case-insensitively (RFC 4343)
        [q] => q.query_type() == query.query_type() && q.name() == query.name(),
        // some servers leave the question out of an error reply (FORMERR, REFUSED)
        [] => reply.response_code() != hickory_proto::op::ResponseCode::NoError,
        _ => false,
    }
}

async fn ask_tcp(
    ex: &Exchange,
    bytes: &[u8],
    id: u16,
    query: &Query,
    sent: &AtomicU64,
) -> Result<Message, Failure> {
    let run = async {
        let mut stream = TcpStream::connect(ex.resolver)
            .await
            .map_err(|_| Failure::Error)?;
        let mut out = Vec::with_capacity(bytes.len() + 2);
        out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
        out.extend_from_slice(bytes);
        sent.fetch_add(1, Relaxed);
        stream.write_all(&out).await.map_err(|_| Failure::Error)?;
        let mut len = [0u8; 2];
        stream
            .read_exact(&mut len)
            .await
            .map_err(|_| Failure::Error)?;
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream
            .read_exact(&mut buf)
            .await
            .map_err(|_| Failure::Error)?;
        let reply = Message::from_vec(&buf).map_err(|_| Failure::Error)?;
        if matches_question(&reply, id, query) {
            Ok(reply)
        } else {
            Err(Failure::Error)
        }
    };
    match timeout(ex.attempt_timeout, run).await {
        Ok(r) => r,
        Err(_) => Err(Failure::Timeout),
    }
}
