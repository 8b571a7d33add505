//! The PROXY protocol version 2 header (HAProxy's `proxy-protocol.txt`
//! §2.2): sent first on the upstream connection, it tells the upstream the
//! real client's address and the address it connected to.

use std::net::{IpAddr, SocketAddr};

/// The twelve bytes every version 2 header starts with.
const SIGNATURE: [u8; 12] = [
    0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,
];

/// The header for a TCP connection from `client` to `local`. Mixed
/// families are sent as IPv6 (IPv4 addresses mapped).
pub(crate) fn header(client: SocketAddr, local: SocketAddr) -> Vec<u8> {
    let mut out = SIGNATURE.to_vec();
    // Version 2, command PROXY.
    out.push(0x21);
    match (client.ip(), local.ip()) {
        (IpAddr::V4(c), IpAddr::V4(l)) => {
            // AF_INET, STREAM; 12 bytes of addresses.
            out.push(0x11);
            out.extend_from_slice(&12u16.to_be_bytes());
            out.extend_from_slice(&c.octets());
            out.extend_from_slice(&l.octets());
        }
        (c, l) => {
            let v6 = |ip: IpAddr| match ip {
                IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                IpAddr::V6(v6) => v6,
            };
            // AF_INET6, STREAM; 36 bytes of addresses.
            out.push(0x21);
            out.extend_from_slice(&36u16.to_be_bytes());
            out.extend_from_slice(&v6(c).octets());
            out.extend_from_slice(&v6(l).octets());
        }
    }
    out.extend_from_slice(&client.port().to_be_bytes());
    out.extend_from_slice(&local.port().to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_header_is_laid_out_as_the_spec_says() {
        let h = header(
            "192.0.2.1:40000".parse().unwrap(),
            "127.0.0.1:25".parse().unwrap(),
        );
        assert_eq!(h.len(), 16 + 12);
        assert_eq!(&h[..12], &SIGNATURE);
        assert_eq!(&h[12..16], &[0x21, 0x11, 0, 12]);
        assert_eq!(&h[16..20], &[192, 0, 2, 1]);
        assert_eq!(&h[20..24], &[127, 0, 0, 1]);
        assert_eq!(&h[24..26], &40000u16.to_be_bytes());
        assert_eq!(&h[26..28], &25u16.to_be_bytes());
    }

    #[test]
    fn mixed_families_go_as_ipv6() {
        let h = header(
            "[2001:db8::1]:1".parse().unwrap(),
            "127.0.0.1:2".parse().unwrap(),
        );
        assert_eq!(h.len(), 16 + 36);
        assert_eq!(&h[12..16], &[0x21, 0x21, 0, 36]);
        assert_eq!(
            &h[32..48],
            &"::ffff:127.0.0.1"
                .parse::<std::net::Ipv6Addr>()
                .unwrap()
                .octets()
        );
    }
}
