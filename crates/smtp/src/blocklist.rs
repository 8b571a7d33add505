//! The DNSBL check of the gate: started when a connection is accepted, it
//! runs while the greeting goes out and is decided before the first RCPT
//! is accepted (or before the greeting, when configured to reject there).

use std::net::IpAddr;
use std::str::FromStr;

/// An address range (`192.0.2.0/24`, `2001:db8::/32`, or one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl IpNet {
    /// Whether `ip` is inside the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for IpNet {
    type Err = String;

    fn from_str(s: &str) -> Result<IpNet, String> {
        let (addr, prefix) = s.split_once('/').unwrap_or((s, ""));
        let addr: IpAddr = addr.parse().map_err(|_| format!("not an address: {s:?}"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = if prefix.is_empty() {
            max
        } else {
            prefix
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("bad prefix length in {s:?}"))?
        };
        Ok(IpNet { addr, prefix })
    }
}

/// The DNSBL client and how the gate uses it.
pub struct BlocklistPolicy {
    /// Lookups, cache and counters.
    pub client: dnsbl::Client,
    /// Clients never checked.
    pub allow: Vec<IpNet>,
    /// Refuse a listed client at connect (`554` greeting) instead of at
    /// its first recipient.
    pub reject_at_connect: bool,
}

impl BlocklistPolicy {
    /// Whether `ip` is checked at all.
    pub(crate) fn applies_to(&self, ip: IpAddr) -> bool {
        !self.allow.iter().any(|net| net.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_contain_their_addresses() {
        let net: IpNet = "192.0.2.0/25".parse().unwrap();
        assert!(net.contains("192.0.2.127".parse().unwrap()));
        assert!(!net.contains("192.0.2.128".parse().unwrap()));
        assert!(net.contains("::ffff:192.0.2.1".parse().unwrap()));
        let one: IpNet = "127.0.0.1".parse().unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()));
        assert!(!one.contains("127.0.0.2".parse().unwrap()));
        let all: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("203.0.113.9".parse().unwrap()));
        let v6: IpNet = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains("2001:db8::1".parse().unwrap()));
        assert!(!v6.contains("2001:db9::1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<IpNet>().is_err());
        assert!("nonsense".parse::<IpNet>().is_err());
    }
}
