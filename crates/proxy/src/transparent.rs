//! Transparent interception: an entry with `upstream =
//! "original-destination"` takes connections a Linux firewall redirected to
//! it (nftables `redirect`, iptables `REDIRECT`), and passes each on to
//! where it was going, read back from the socket with `SO_ORIGINAL_DST`.
//! Clients need no new settings: a gateway redirects port 25 (or 110) to
//! the proxy.

use std::io;
use std::net::SocketAddr;

use tokio::net::TcpStream;

/// Where the client connected before the redirect.
#[cfg(target_os = "linux")]
pub(crate) fn original_destination(socket: &TcpStream) -> io::Result<SocketAddr> {
    let sock = socket2::SockRef::from(socket);
    let addr = match socket.local_addr()? {
        SocketAddr::V4(_) => sock.original_dst_v4()?,
        SocketAddr::V6(_) => sock.original_dst_v6()?,
    };
    addr.as_socket()
        .ok_or_else(|| io::Error::other("not an internet address"))
}

/// Only Linux has `SO_ORIGINAL_DST`; the configuration check refuses
/// transparent entries elsewhere.
#[cfg(not(target_os = "linux"))]
pub(crate) fn original_destination(_: &TcpStream) -> io::Result<SocketAddr> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "transparent interception needs Linux",
    ))
}
