//! Config for a test server that sends mail out: only to the stand-ins
//! the test started, never to the internet.

use std::net::SocketAddr;

/// `[dns]` and `[outbound]` sections for [`crate::Server::start_with`]:
/// DNS from the test's resolver at `dns`, mail for each `(domain, addr)`
/// of `routes` to `addr`, retries after one second, and no MTA-STS or
/// DANE lookups. Other sections may follow it, not more `[outbound]` keys.
pub fn outbound_config(dns: SocketAddr, routes: &[(&str, SocketAddr)]) -> String {
    let routes: String = routes
        .iter()
        .map(|(domain, addr)| format!("\"{domain}\" = \"{addr}\"\n"))
        .collect();
    format!(
        "[dns]\nresolver = \"{dns}\"\n\
         [outbound]\nretry_schedule = [1]\n\
         [outbound.routes]\n{routes}\
         [outbound.tls]\nmta_sts = false\ndane = \"off\"\n"
    )
}
