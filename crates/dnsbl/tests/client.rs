//! The DNSBL client against our server on loopback: verdicts, weights,
//! reasons, the cache (TTL, cap, negative answers, merging) and the budget.

mod kit;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use dnsbl::{Client, ClientConfig, Clock, Zone};
use futures_util::future::join_all;

const LIST: &str = "\
$TTL 3600
$SOA 3600 ns1.bl.test hostmaster.bl.test 1 2h 30m 1w 600
:127.0.0.2:Listed: see https://bl.test/?$
192.0.2.1
192.0.2.5 :127.0.0.4:bot $
192.0.2.100-192.0.2.140
!192.0.2.120
198.51.100.0/24
!198.51.100.77
";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn client(addr: std::net::SocketAddr, zones: Vec<Zone>, clock: Clock) -> Client {
    let mut config = ClientConfig::new(addr, zones);
    config.clock = clock;
    config.ttl_cap = Duration::from_secs(86_400);
    Client::new(config).unwrap()
}

#[tokio::test]
async fn classic_verdicts_codes_and_reasons() {
    let run = kit::start(&[("bl.test", LIST)], Duration::ZERO).await;
    let c = client(
        run.addr(),
        vec![Zone::classic("bl.test", 1.0)],
        Clock::system(),
    );
    let o = c.check(ip("192.0.2.5")).await;
    assert!(o.listed);
    assert_eq!(o.score, 1.0);
    assert_eq!(o.hits[0].codes, vec![Ipv4Addr::new(127, 0, 0, 4)]);
    assert_eq!(o.reason(), Some("bot 192.0.2.5"));
    let o = c.check(ip("192.0.2.1")).await;
    assert_eq!(o.reason(), Some("Listed: see https://bl.test/?192.0.2.1"));
    assert!(!c.check(ip("192.0.2.120")).await.listed);
    assert!(!c.check(ip("192.0.2.2")).await.listed);
    // IPv4-mapped IPv6 is checked as IPv4
    let o = c.check(ip("::ffff:192.0.2.1")).await;
    assert!(o.listed);
    assert_eq!(o.ip, ip("192.0.2.1"));
    // real IPv6: a nibble-form query, not listed in an ip4set list
    let o = c.check(ip("2001:db8::1")).await;
    assert!(!o.listed && o.timed_out.is_empty() && o.failed.is_empty());
    let s = c.stats();
    assert_eq!(s.checks, 6);
    assert_eq!(s.timeouts, 0);
}

#[tokio::test]
async fn bitmap_mode_agrees_with_classic_mode_on_every_address() {
    let run = kit::start(&[("bl.test", LIST)], Duration::ZERO).await;
    let classic = client(
        run.addr(),
        vec![Zone::classic("bl.test", 1.0)],
        Clock::system(),
    );
    let bitmap = client(
        run.addr(),
        vec![Zone::bitmap("bl.test", 1.0)],
        Clock::system(),
    );
    for net in ["192.0.2", "198.51.100", "203.0.113"] {
        for last in 0..=255u8 {
            let a = ip(&format!("{net}.{last}"));
            let (c, b) = (classic.check(a).await, bitmap.check(a).await);
            assert_eq!(c.listed, b.listed, "{a}");
            assert_eq!(
                c.hits.first().map(|h| &h.reason),
                b.hits.first().map(|h| &h.reason),
                "{a}"
            );
        }
    }
    // one AAAA per /25 (6 of them), plus one TXT per listed address
    let listed = bitmap.stats().listed;
    assert_eq!(bitmap.stats().queries_sent, 6 + listed);
}

#[tokio::test]
async fn two_thousand_lookups_in_one_slash25_send_one_query() {
    let run = kit::start(&[("bl.test", LIST)], Duration::ZERO).await;
    let c = client(
        run.addr(),
        vec![Zone::bitmap("bl.test", 1.0).with_reasons(false)],
        Clock::system(),
    );
    let addr = |i: usize| IpAddr::V4(Ipv4Addr::new(198, 51, 100, (i % 128) as u8));
    // 1,000 at once (these merge into the one query in flight) ...
    let first = join_all((0..1000).map(|i| c.check(addr(i)))).await;
    // ... and 1,000 more after (these hit the cache)
    let mut rest = Vec::new();
    for i in 1000..2000 {
        rest.push(c.check(addr(i)).await);
    }
    for (i, o) in first.iter().chain(&rest).enumerate() {
        assert_eq!(o.listed, i % 128 != 77, "{}", addr(i));
    }
    let s = c.stats();
    assert_eq!(s.checks, 2000);
    assert_eq!(s.queries_sent, 1, "{s:?}");
    assert_eq!(s.cache_misses, 1);
    assert_eq!(s.cache_hits + s.merged, 1999);
    let server = run.server.stats();
    assert_eq!(server.udp_queries + server.tcp_queries, 1, "{server:?}");
    assert_eq!(server.bitmap_queries, 1);
}

#[tokio::test]
async fn concurrent_classic_lookups_of_one_address_merge() {
    let run = kit::start(&[("bl.test", LIST)], Duration::ZERO).await;
    let c = client(
        run.addr(),
        vec![Zone::classic("bl.test", 1.0)],
        Clock::system(),
    );
    let all = join_all((0..200).map(|_| c.check(ip("192.0.2.1")))).await;
    assert!(all.iter().all(|o| o.listed && o.reason().is_some()));
    // one A and one TXT
    assert_eq!(c.stats().queries_sent, 2);
    assert_eq!(run.server.stats().udp_queries, 2);
}

#[tokio::test]
async fn weights_and_threshold() {
    let run = kit::start(
        &[
            ("a.test", "192.0.2.1\n192.0.2.2\n"),
            ("b.test", "192.0.2.2\n192.0.2.3\n"),
        ],
        Duration::ZERO,
    )
    .await;
    let mut config = ClientConfig::new(
        run.addr(),
        vec![Zone::classic("a.test", 0.6), Zone::bitmap("b.test", 0.5)],
    );
    config.threshold = 1.0;
    let c = Client::new(config).unwrap();
    let one = c.check(ip("192.0.2.1")).await;
    assert!(!one.listed);
    assert_eq!(one.hits.len(), 1);
    assert_eq!(one.score, 0.6);
    let both = c.check(ip("192.0.2.2")).await;
    assert!(both.listed);
    assert!((both.score - 1.1).abs() < 1e-9);
    let other = c.check(ip("192.0.2.3")).await;
    assert_eq!(
        (other.listed, other.hits[0].zone.as_str()),
        (false, "b.test")
    );
}

#[tokio::test]
async fn ttl_cap_and_negative_ttl_follow_the_clock() {
    let run = kit::start(&[("bl.test", LIST)], Duration::ZERO).await;
    let clock = Clock::manual();
    let mut config = ClientConfig::new(
        run.addr(),
        vec![Zone::classic("bl.test", 1.0).with_reasons(false)],
    );
    config.clock = clock.clone();
    config.ttl_cap = Duration::from_secs(1800); // below the list's TTL of 3600
    let c = Client::new(config).unwrap();
    let (listed, clean) = (ip("192.0.2.1"), ip("192.0.2.2"));
    c.check(listed).await;
    c.check(clean).await;
    assert_eq!(c.stats().queries_sent, 2);
    clock.advance(Duration::from_secs(599));
    c.check(listed).await;
    c.check(clean).await;
    assert_eq!(c.stats().queries_sent, 2, "both cached");
    // the negative answer lives min(SOA TTL, MINIMUM) = 600 s
    clock.advance(Duration::from_secs(2));
    c.check(listed).await;
    c.check(clean).await;
    assert_eq!(
        c.stats().queries_sent,
        3,
        "only the negative answer expired"
    );
    // the positive one lives 1800 s (capped), not 3600
    clock.advance(Duration::from_secs(1800 - 601));
    c.check(listed).await;
    assert_eq!(c.stats().queries_sent, 4);
    let s = c.stats();
    assert_eq!(s.cache_hits, 3);
    assert_eq!(s.cache_misses, 4);
}

#[tokio::test]
async fn a_silent_resolver_costs_one_budget_and_is_counted() {
    // a socket that reads queries and never answers
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let mut config = ClientConfig::new(
        addr,
        vec![Zone::classic("a.test", 1.0), Zone::bitmap("b.test", 1.0)],
    );
    config.budget = Duration::from_millis(200);
    config.attempt_timeout = Duration::from_millis(100);
    let c = Client::new(config).unwrap();
    let o = c.check(ip("192.0.2.1")).await;
    assert!(!o.listed);
    assert!(o.any_timed_out());
    assert_eq!(
        o.timed_out,
        vec!["a.test".to_string(), "b.test".to_string()]
    );
    let s = c.stats();
    assert_eq!(s.timeouts, 2);
    assert!(s.queries_sent >= 2);
    drop(silent);
}

#[tokio::test]
async fn a_refused_zone_is_reported_as_failed_not_listed() {
    let run = kit::start(&[("bl.test", LIST)], Duration::ZERO).await;
    let c = client(
        run.addr(),
        vec![
            Zone::classic("other.test", 1.0),
            Zone::classic("bl.test", 1.0),
        ],
        Clock::system(),
    );
    let o = c.check(ip("192.0.2.1")).await;
    assert!(o.listed);
    assert_eq!(o.failed, vec!["other.test".to_string()]);
    assert_eq!(c.stats().errors, 1);
}

#[tokio::test]
async fn a_truncated_reason_is_fetched_over_tcp() {
    let long = "y".repeat(240);
    let mut list = String::new();
    for i in 0..6 {
        list.push_str(&format!("192.0.2.9 :2:{i}{long}\n"));
    }
    let run = kit::start(&[("bl.test", &list)], Duration::ZERO).await;
    let c = client(
        run.addr(),
        vec![Zone::classic("bl.test", 1.0)],
        Clock::system(),
    );
    let o = c.check(ip("192.0.2.9")).await;
    assert!(o.listed);
    // 6 TXT records of 241 bytes came over TCP; the reason is cut to 400
    assert_eq!(o.reason().unwrap().len(), 400);
    // A over UDP, TXT over UDP (truncated), TXT again over TCP
    assert_eq!(c.stats().queries_sent, 3);
    assert_eq!(run.server.stats().tcp_queries, 1);
}

#[test]
fn bad_configs_are_refused() {
    let addr = "127.0.0.1:53".parse().unwrap();
    assert!(Client::new(ClientConfig::new(
        addr,
        vec![Zone::classic("bad..zone", 1.0)]
    ))
    .is_err());
    assert!(Client::new(ClientConfig::new(
        addr,
        vec![Zone::classic("ok.test", f64::NAN)]
    ))
    .is_err());
    let mut c = ClientConfig::new(addr, vec![]);
    c.budget = Duration::ZERO;
    assert!(Client::new(c).is_err());
}

#[tokio::test]
async fn spawned_check_runs_while_the_caller_works() {
    let run = kit::start(&[("bl.test", LIST)], Duration::ZERO).await;
    let c = client(
        run.addr(),
        vec![Zone::classic("bl.test", 1.0)],
        Clock::system(),
    );
    let pending = c.spawn_check(ip("192.0.2.5"));
    let outcome = pending.outcome().await;
    assert!(outcome.listed);
    assert_eq!(outcome.reason(), Some("bot 192.0.2.5"));
    // dropping a pending check is harmless
    drop(c.spawn_check(ip("192.0.2.6")));
    assert!(!c.check(ip("192.0.2.6")).await.listed);
}

#[tokio::test]
async fn works_over_ipv6_loopback() {
    // A machine without ::1 cannot run this; under CI that is a failure.
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        assert!(!sluice_testkit::under_ci(), "no ::1 on this machine");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bl.list");
    std::fs::write(&path, LIST).unwrap();
    let config =
        dnsbl::ServerConfig::new("[::1]:0".parse().unwrap(), vec![("bl.test".into(), path)]);
    let server = dnsbl::Server::start(config).await.unwrap();
    assert!(server.local_addr().is_ipv6());
    let c = client(
        server.local_addr(),
        vec![Zone::bitmap("bl.test", 1.0)],
        Clock::system(),
    );
    assert!(c.check(ip("198.51.100.1")).await.listed);
    assert!(!c.check(ip("198.51.100.77")).await.listed);
    server.shutdown().await;
}

/// A UDP relay in front of `server` that drops every query for `silent`.
async fn relay_dropping(
    server: std::net::SocketAddr,
    silent: &'static str,
) -> std::net::SocketAddr {
    let front = std::sync::Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let addr = front.local_addr().unwrap();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, peer)) = front.recv_from(&mut buf).await else {
                return;
            };
            let packet = buf[..n].to_vec();
            let Ok(m) = hickory_proto::op::Message::from_vec(&packet) else {
                continue;
            };
            if m.queries()
                .iter()
                .any(|q| q.name().to_ascii().ends_with(silent))
            {
                continue;
            }
            let front = front.clone();
            tokio::spawn(async move {
                let back = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
                back.send_to(&packet, server).await.unwrap();
                let mut reply = vec![0u8; 4096];
                if let Ok(Ok(n)) =
                    tokio::time::timeout(Duration::from_secs(2), back.recv(&mut reply)).await
                {
                    let _ = front.send_to(&reply[..n], peer).await;
                }
            });
        }
    });
    addr
}

#[tokio::test]
async fn a_silent_zone_does_not_hold_up_the_others() {
    let run = kit::start(&[("bl.test", LIST), ("slow.test", LIST)], Duration::ZERO).await;
    let relay = relay_dropping(run.addr(), "slow.test.").await;
    let mut config = ClientConfig::new(
        relay,
        vec![
            Zone::bitmap("slow.test", 1.0),
            Zone::classic("bl.test", 1.0),
        ],
    );
    // generous, so a loaded machine still answers bl.test in time
    config.budget = Duration::from_secs(1);
    config.attempt_timeout = Duration::from_millis(300);
    let c = Client::new(config).unwrap();
    let o = c.check(ip("192.0.2.5")).await;
    assert!(o.listed, "the zone that answered still counts");
    assert_eq!(o.hits.len(), 1);
    assert_eq!(o.timed_out, vec!["slow.test".to_string()]);
    assert_eq!(o.reason(), Some("bot 192.0.2.5"));
    let s = c.stats();
    assert_eq!(s.timeouts, 1);
    assert_eq!(s.listed, 1);
    // bl.test's A and TXT, and at least one try at slow.test
    assert!(s.queries_sent >= 3, "{s:?}");
}
