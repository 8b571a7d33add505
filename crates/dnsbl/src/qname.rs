//! DNSBL query names: building them (client) and reading them (server). No I/O.
//!
//! RFC 5782 §2.1: an IPv4 address is looked up with its octets reversed
//! (`2.0.0.127.ZONE` for 127.0.0.2); §2.4: an IPv6 address with its 32
//! nibbles reversed. The /25 bitmap name is described in [`crate::bitmap`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_proto::rr::Name;

use crate::bitmap::Block25;
use crate::error::Error;

/// Parses a zone name into an absolute, lower-case DNS name.
pub fn zone_name(name: &str) -> Result<Name, Error> {
    let trimmed = name.trim().trim_end_matches('.');
    if trimmed.is_empty() {
        return Err(Error::ZoneName {
            name: name.to_string(),
            reason: "empty".into(),
        });
    }
    let mut parsed = Name::from_ascii(trimmed).map_err(|e| Error::ZoneName {
        name: name.to_string(),
        reason: e.to_string(),
    })?;
    parsed.set_fqdn(true);
    Ok(parsed.to_lowercase())
}

fn under(labels: Vec<String>, zone: &Name) -> Name {
    // Labels are digits or hex nibbles: always valid, and the zone was
    // validated when it was configured, so the only failure is an
    // over-long name (more than 255 octets), which a zone name of at most
    // 180 octets cannot produce.
    let rel = Name::from_labels(labels.iter().map(|l| l.as_bytes())).unwrap_or_default();
    rel.append_domain(zone).unwrap_or_else(|_| zone.clone())
}

/// The classic per-address name: reversed octets for IPv4, reversed nibbles for IPv6.
pub fn classic_name(ip: IpAddr, zone: &Name) -> Name {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            under(o.iter().rev().map(|b| b.to_string()).collect(), zone)
        }
        IpAddr::V6(v6) => {
            let mut labels = Vec::with_capacity(32);
            for byte in v6.octets().iter().rev() {
                labels.push(format!("{:x}", byte & 0xf));
                labels.push(format!("{:x}", byte >> 4));
            }
            under(labels, zone)
        }
    }
}

/// The name whose AAAA answer is the bitmap of `block`.
pub fn bitmap_name(block: Block25, zone: &Name) -> Name {
    under(block.labels().iter().map(|b| b.to_string()).collect(), zone)
}

/// What the labels in front of a zone's apex name, as the server sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relative {
    /// The apex itself.
    Apex,
    /// Four decimal labels: an IPv4 address (and, for AAAA, maybe a /25).
    Ipv4 {
        /// The address the labels name in classic form.
        ip: Ipv4Addr,
        /// The /25 the labels name in bitmap form, when the first label is 0 or 1.
        block: Option<Block25>,
    },
    /// One to three decimal labels: an empty non-terminal above addresses.
    PartialIpv4,
    /// 32 hex nibble labels: an IPv6 address.
    Ipv6(Ipv6Addr),
    /// Anything else inside the zone.
    Other,
}

fn octet(label: &[u8]) -> Option<u8> {
    if label.is_empty() || label.len() > 3 || !label.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = label.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
    u8::try_from(n).ok()
}

fn nibble(label: &[u8]) -> Option<u8> {
    match label {
        [c] => (*c as char).to_digit(16).map(|d| d as u8),
        _ => None,
    }
}

/// Reads the labels in front of the apex, leftmost first.
pub(crate) fn relative(labels: &[&[u8]]) -> Relative {
    match labels.len() {
        0 => Relative::Apex,
        1..=3 => {
            if labels.iter().all(|l| octet(l).is_some()) {
                Relative::PartialIpv4
            } else {
                Relative::Other
            }
        }
        4 => {
            let o: Option<Vec<u8>> = labels.iter().map(|l| octet(l)).collect();
            match o {
                Some(o) => Relative::Ipv4 {
                    ip: Ipv4Addr::new(o[3], o[2], o[1], o[0]),
                    block: Block25::from_labels(o[0], o[1], o[2], o[3]),
                },
                None => Relative::Other,
            }
        }
        32 => {
            let mut bytes = [0u8; 16];
            for (i, l) in labels.iter().enumerate() {
                let Some(n) = nibble(l) else {
                    return Relative::Other;
                };
                // labels[0] is the low nibble of the last byte
                let byte = 15 - i / 2;
                if i % 2 == 0 {
                    bytes[byte] |= n;
                } else {
                    bytes[byte] |= n << 4;
                }
            }
            Relative::Ipv6(Ipv6Addr::from(bytes))
        }
        _ => Relative::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(name: &Name, zone: &Name) -> Relative {
        let labels: Vec<&[u8]> = name.iter().collect();
        let n = labels.len() - zone.num_labels() as usize;
        relative(&labels[..n])
    }

    #[test]
    fn rfc5782_names() {
        let zone = zone_name("bl.example").unwrap();
        assert_eq!(
            classic_name("192.0.2.99".parse().unwrap(), &zone).to_ascii(),
            "99.2.0.192.bl.example."
        );
        // RFC 5782 §2.4 example
        let v6: IpAddr = "2001:db8:1:2:3:4:567:89ab".parse().unwrap();
        assert_eq!(
            classic_name(v6, &zone).to_ascii(),
            "b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.bl.example."
        );
        assert_eq!(
            bitmap_name(Block25::of("192.0.2.99".parse().unwrap()), &zone).to_ascii(),
            "0.2.0.192.bl.example."
        );
        assert_eq!(
            bitmap_name(Block25::of("192.0.2.200".parse().unwrap()), &zone).to_ascii(),
            "1.2.0.192.bl.example."
        );
    }

    #[test]
    fn names_read_back() {
        let zone = zone_name("BL.Example.").unwrap();
        assert_eq!(zone.to_ascii(), "bl.example.");
        let ip: Ipv4Addr = "192.0.2.1".parse().unwrap();
        match rel(&classic_name(IpAddr::V4(ip), &zone), &zone) {
            Relative::Ipv4 { ip: got, block } => {
                assert_eq!(got, ip);
                // "1.2.0.192" is also the upper /25 of 192.0.2
                assert_eq!(block.unwrap().base(), Ipv4Addr::new(192, 0, 2, 128));
            }
            other => panic!("{other:?}"),
        }
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert_eq!(
            rel(&classic_name(IpAddr::V6(v6), &zone), &zone),
            Relative::Ipv6(v6)
        );
        assert_eq!(relative(&[]), Relative::Apex);
        assert_eq!(relative(&[b"2", b"0"]), Relative::PartialIpv4);
        assert_eq!(relative(&[b"256", b"0", b"0", b"1"]), Relative::Other);
        assert_eq!(relative(&[b"www"]), Relative::Other);
        assert!(zone_name("").is_err());
        assert!(zone_name("bad..name").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_ip_round_trips(v4 in proptest::prelude::any::<u32>(), v6 in proptest::prelude::any::<u128>()) {
            let zone = zone_name("z.test").unwrap();
            let ip4 = Ipv4Addr::from(v4);
            match rel(&classic_name(IpAddr::V4(ip4), &zone), &zone) {
                Relative::Ipv4 { ip, .. } => proptest::prop_assert_eq!(ip, ip4),
                other => proptest::prop_assert!(false, "{:?}", other),
            }
            let ip6 = Ipv6Addr::from(v6);
            proptest::prop_assert_eq!(rel(&classic_name(IpAddr::V6(ip6), &zone), &zone), Relative::Ipv6(ip6));
        }
    }
}
