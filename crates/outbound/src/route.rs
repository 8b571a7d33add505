//! Where mail for a domain goes (RFC 5321 §5.1): a static route when the
//! configuration names one, else the domain's MX records by preference
//! (shuffled among equal preferences), else its own A/AAAA records as an
//! implicit MX. A null MX (RFC 7505: one MX `0 .`) means the domain takes
//! no mail: a permanent failure at once. With a relay (smarthost)
//! configured, every domain without a static route goes to the relay.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use hickory_resolver::proto::rr::RData;
use hickory_resolver::TokioResolver;

/// One host to try, with its addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// The MX host name (for TLS and logs); for a static route, its host.
    pub host: String,
    /// Addresses to connect to, in order.
    pub addrs: Vec<SocketAddr>,
    /// Whether this hop came from a static route or is the relay (no MX
    /// TLS policy).
    pub routed: bool,
    /// Whether this hop is the relay (its own TLS and login).
    pub relay: bool,
}

/// Why a domain's hops could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The domain says it takes no mail, or does not exist: permanent.
    #[error("{0}")]
    Permanent(String),
    /// DNS did not answer usefully now: try later.
    #[error("{0}")]
    Temporary(String),
}

/// Static routes and MX look-ups.
#[derive(Debug, Clone)]
pub struct Router {
    resolver: TokioResolver,
    routes: HashMap<String, SocketAddr>,
    port: u16,
    /// The relay's host name and port.
    relay: Option<(String, u16)>,
}

impl Router {
    /// `routes` maps a domain (lower case) to the address all its mail
    /// goes to; other domains go to their MX hosts on `port` (25).
    pub fn new(resolver: TokioResolver, routes: HashMap<String, SocketAddr>, port: u16) -> Router {
        let routes = routes
            .into_iter()
            .map(|(d, a)| (d.trim_end_matches('.').to_ascii_lowercase(), a))
            .collect();
        Router {
            resolver,
            routes,
            port,
            relay: None,
        }
    }

    /// Sends every domain without a static route to `host:port`.
    pub fn with_relay(mut self, host: &str, port: u16) -> Router {
        self.relay = Some((host.trim_end_matches('.').to_ascii_lowercase(), port));
        self
    }

    /// The hops for `domain`, in the order to try them.
    pub async fn hops(&self, domain: &str) -> Result<Vec<Hop>, RouteError> {
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        if let Some(addr) = self.routes.get(&domain) {
            return Ok(vec![Hop {
                host: addr.ip().to_string(),
                addrs: vec![*addr],
                routed: true,
                relay: false,
            }]);
        }
        if let Some((host, port)) = &self.relay {
            let addrs = match host.parse::<IpAddr>() {
                Ok(ip) => vec![SocketAddr::new(ip, *port)],
                Err(_) => self
                    .addresses(host)
                    .await
                    .map_err(RouteError::Temporary)?
                    .into_iter()
                    .map(|a| SocketAddr::new(a.ip(), *port))
                    .collect(),
            };
            if addrs.is_empty() {
                return Err(RouteError::Temporary(format!(
                    "the relay {host} has no address"
                )));
            }
            return Ok(vec![Hop {
                host: host.clone(),
                addrs,
                routed: true,
                relay: true,
            }]);
        }
        let fqdn = format!("{domain}.");
        let mut exchangers: Vec<(u16, String)> = match self.resolver.mx_lookup(fqdn.as_str()).await
        {
            Ok(answer) => answer
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::MX(mx) => Some((
                        mx.preference,
                        mx.exchange
                            .to_ascii()
                            .trim_end_matches('.')
                            .to_ascii_lowercase(),
                    )),
                    _ => None,
                })
                .collect(),
            Err(e) if e.is_nx_domain() => {
                return Err(RouteError::Permanent(format!(
                    "domain {domain} does not exist"
                )))
            }
            Err(e) if e.is_no_records_found() => Vec::new(),
            Err(e) => {
                return Err(RouteError::Temporary(format!(
                    "MX lookup for {domain}: {e}"
                )))
            }
        };
        // RFC 7505 §3: a single MX with an empty exchange is a null MX.
        if exchangers.iter().any(|(_, host)| host.is_empty()) {
            return Err(RouteError::Permanent(format!(
                "{domain} does not accept mail (null MX, RFC 7505)"
            )));
        }
        if exchangers.is_empty() {
            // RFC 5321 §5.1: the domain itself is the implicit MX.
            exchangers.push((0, domain.clone()));
        }
        sort_by_preference(&mut exchangers, rand_seed());
        let mut hops = Vec::new();
        let mut last_error = None;
        for (_, host) in exchangers {
            match self.addresses(&host).await {
                Ok(addrs) if !addrs.is_empty() => hops.push(Hop {
                    host,
                    addrs,
                    routed: false,
                    relay: false,
                }),
                Ok(_) => {}
                Err(e) => last_error = Some(e),
            }
        }
        if hops.is_empty() {
            return Err(RouteError::Temporary(last_error.unwrap_or_else(|| {
                format!("no address for any mail exchanger of {domain}")
            })));
        }
        Ok(hops)
    }

    async fn addresses(&self, host: &str) -> Result<Vec<SocketAddr>, String> {
        let name = format!("{host}.");
        match self.resolver.lookup_ip(name.as_str()).await {
            Ok(ips) => Ok(ips
                .iter()
                .map(|ip: IpAddr| SocketAddr::new(ip, self.port))
                .collect()),
            Err(e) if e.is_no_records_found() || e.is_nx_domain() => Ok(Vec::new()),
            Err(e) => Err(format!("address lookup for {host}: {e}")),
        }
    }
}

fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

/// Sorts by preference, lowest first; hosts of equal preference in an
/// order drawn from `seed` (RFC 5321 §5.1: spread the load).
fn sort_by_preference(exchangers: &mut [(u16, String)], seed: u64) {
    exchangers.sort_by_key(|(pref, host)| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        seed.hash(&mut h);
        host.hash(&mut h);
        (*pref, h.finish())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preference_orders_and_equal_preferences_are_shuffled() {
        let base = vec![
            (20, "c".to_string()),
            (10, "a".to_string()),
            (10, "b".to_string()),
        ];
        let mut orders = std::collections::HashSet::new();
        for seed in 0..64 {
            let mut v = base.clone();
            sort_by_preference(&mut v, seed);
            assert_eq!(v[2].1, "c");
            orders.insert(v[0].1.clone());
        }
        assert_eq!(orders.len(), 2, "both equal hosts come first sometimes");
    }
}
