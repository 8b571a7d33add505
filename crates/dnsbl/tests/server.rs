//! The DNSBL server on loopback: what it answers, over UDP and TCP, under
//! garbage, and across a list reload.

mod kit;

use std::net::Ipv6Addr;
use std::time::Duration;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::{RData, RecordType};
use tokio::io::AsyncWriteExt;

const LIST: &str = "\
$TTL 600
$SOA 3600 ns1.bl.test hostmaster.bl.test 0 2h 30m 1w 300
$NS 3600 ns1.bl.test ns2.bl.test
:127.0.0.2:Listed: see https://bl.test/?$
192.0.2.1
192.0.2.200 :127.0.0.4:bot $ on port 25
198.51.100.0/24
!198.51.100.77
203.0.113.10-203.0.113.20
";

#[tokio::test]
async fn answers_classic_bitmap_apex_and_refuses_the_rest() {
    let run = kit::start(&[("bl.test", LIST)], Duration::ZERO).await;
    let addr = run.addr();

    let m = kit::udp(addr, "1.2.0.192.bl.test.", RecordType::A)
        .await
        .unwrap();
    assert_eq!(m.response_code(), ResponseCode::NoError);
    assert!(m.authoritative() && !m.recursion_available());
    assert_eq!(m.answers()[0].ttl(), 600);
    let m = kit::udp(addr, "200.2.0.192.bl.test.", RecordType::TXT)
        .await
        .unwrap();
    match m.answers()[0].data() {
        RData::TXT(t) => assert_eq!(&*t.txt_data()[0], b"bot 192.0.2.200 on port 25"),
        other => panic!("{other:?}"),
    }
    let m = kit::udp(addr, "77.100.51.198.bl.test.", RecordType::A)
        .await
        .unwrap();
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    // negative TTL: min(SOA TTL 3600, MINIMUM 300)
    assert_eq!(m.name_servers()[0].ttl(), 300);

    // bitmap of 198.51.100.0/25: all but .77
    let m = kit::udp(addr, "0.100.51.198.bl.test.", RecordType::AAAA)
        .await
        .unwrap();
    let RData::AAAA(a) = m.answers()[0].data() else {
        panic!()
    };
    let bits = dnsbl::bitmap::Bitmap::from_ipv6(a.0);
    assert_eq!(bits.count(), 127);
    assert!(!bits.is_listed(77));
    // 192.0.2.128/25 holds only .200 = offset 72
    let m = kit::udp(addr, "1.2.0.192.bl.test.", RecordType::AAAA)
        .await
        .unwrap();
    let RData::AAAA(a) = m.answers()[0].data() else {
        panic!()
    };
    let mut want = dnsbl::bitmap::Bitmap::EMPTY;
    want.set(72);
    assert_eq!(a.0, want.to_ipv6());
    assert_ne!(a.0, Ipv6Addr::UNSPECIFIED);

    let m = kit::udp(addr, "bl.test.", RecordType::SOA).await.unwrap();
    let RData::SOA(soa) = m.answers()[0].data() else {
        panic!()
    };
    assert_eq!(soa.mname().to_ascii(), "ns1.bl.test.");
    assert!(soa.serial() > 1_000_000, "serial 0 means the file's mtime");
    let m = kit::udp(addr, "BL.TEST.", RecordType::NS).await.unwrap();
    assert_eq!(m.answers().len(), 2);

    for outside in ["example.com.", "test.", "bl.test.example."] {
        let m = kit::udp(addr, outside, RecordType::A).await.unwrap();
        assert_eq!(m.response_code(), ResponseCode::Refused, "{outside}");
        assert!(m.answers().is_empty());
    }

    // the same over TCP
    let m = kit::tcp(addr, "15.113.0.203.bl.test.", RecordType::A).await;
    assert_eq!(m.answers().len(), 1);
    let m = kit::tcp(addr, "21.113.0.203.bl.test.", RecordType::A).await;
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    let stats = run.server.stats();
    assert_eq!(stats.tcp_queries, 2);
    assert_eq!(stats.refused, 3);
    assert_eq!(stats.bitmap_queries, 2);
}

#[tokio::test]
async fn stays_up_under_malformed_packets() {
    let run = kit::start(&[("bl.test", LIST)], Duration::ZERO).await;
    let addr = run.addr();
    let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut packets: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0xff; 11],
        vec![0xff; 12],
        vec![0; 512],
        // header claiming 65535 questions
        vec![0, 1, 1, 0, 0xff, 0xff, 0, 0, 0, 0, 0, 0],
        // a compression pointer that points at itself
        vec![0, 2, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1],
        // a label longer than the packet
        vec![0, 3, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 63, b'a'],
    ];
    // a valid query cut at every length
    let good = kit::query_bytes("1.2.0.192.bl.test.", RecordType::A, 5);
    for cut in 0..good.len() {
        packets.push(good[..cut].to_vec());
    }
    // and random bytes, with a fixed seed
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..500 {
        let len = (x % 300) as usize;
        let mut p = Vec::with_capacity(len);
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            p.push(x as u8);
        }
        if p.len() > 2 {
            p[2] &= 0x7f; // a query, so the server has to read it
        }
        packets.push(p);
    }
    // in batches, each followed by a real query that must be answered
    // (UDP may drop a burst in the kernel, so the test does not count packets)
    for (i, batch) in packets.chunks(40).enumerate() {
        for p in batch {
            sock.send_to(p, addr).await.unwrap();
        }
        // A resolver asks again when a datagram goes unanswered; so does
        // this check, since the query itself may be lost behind the burst
        // on a loaded machine.
        let mut answered = false;
        for _ in 0..3 {
            let m = kit::udp(addr, "1.2.0.192.bl.test.", RecordType::A).await;
            if m.is_some_and(|m| m.answers().len() == 1) {
                answered = true;
                break;
            }
        }
        assert!(answered, "no answer after batch {i}");
    }
    // garbage over TCP too: a length prefix with junk, and a truncated frame
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(&[
        0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
    ])
    .await
    .unwrap();
    s.write_all(&[0, 200, 1]).await.unwrap();
    drop(s);

    let m = kit::udp(addr, "1.2.0.192.bl.test.", RecordType::A)
        .await
        .expect("still answering");
    assert_eq!(m.answers().len(), 1);
    let m = kit::tcp(addr, "1.2.0.192.bl.test.", RecordType::A).await;
    assert_eq!(m.answers().len(), 1);
    let stats = run.server.stats();
    assert!(stats.malformed > 0 && stats.dropped > 0, "{stats:?}");
}

#[tokio::test]
async fn reloads_a_changed_list_without_dropping_queries() {
    let run = kit::start(&[("bl.test", "192.0.2.1\n")], Duration::from_millis(50)).await;
    let addr = run.addr();
    let m = kit::udp(addr, "2.2.0.192.bl.test.", RecordType::A)
        .await
        .unwrap();
    assert_eq!(m.response_code(), ResponseCode::NXDomain);

    // a steady stream of queries while the list changes under it
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let asker = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut asked, mut answered) = (0u32, 0u32);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                asked += 1;
                if kit::tcp(addr, "1.2.0.192.bl.test.", RecordType::A)
                    .await
                    .answers()
                    .len()
                    == 1
                {
                    answered += 1;
                }
            }
            (asked, answered)
        })
    };

    // write the new list beside the old one and rename it over
    let path = run.list_path("bl.test");
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, "192.0.2.1\n192.0.2.2 :3:reloaded\n").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let reloaded = kit::wait_until(Duration::from_secs(10), || async {
        kit::udp(addr, "2.2.0.192.bl.test.", RecordType::A)
            .await
            .is_some_and(|m| m.answers().len() == 1)
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (asked, answered) = asker.await.unwrap();
    assert!(reloaded, "the new entry never showed up");
    assert!(run.server.stats().reloads >= 1);
    assert_eq!(asked, answered, "a query lost its answer during the reload");

    // a broken or vanished file keeps the old list
    std::fs::remove_file(&path).unwrap();
    let m = kit::udp(addr, "2.2.0.192.bl.test.", RecordType::A)
        .await
        .unwrap();
    assert_eq!(m.answers().len(), 1);
}

#[tokio::test]
async fn two_zones_one_server() {
    let run = kit::start(
        &[("a.bl.test", "192.0.2.1\n"), ("bl.test", "192.0.2.2\n")],
        Duration::ZERO,
    )
    .await;
    let addr = run.addr();
    // the longest zone wins: 1.2.0.192.a.bl.test is in a.bl.test, not in bl.test
    let m = kit::udp(addr, "1.2.0.192.a.bl.test.", RecordType::A)
        .await
        .unwrap();
    assert_eq!(m.answers().len(), 1);
    let m = kit::udp(addr, "2.2.0.192.bl.test.", RecordType::A)
        .await
        .unwrap();
    assert_eq!(m.answers().len(), 1);
    let m = kit::udp(addr, "2.2.0.192.a.bl.test.", RecordType::A)
        .await
        .unwrap();
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
}

#[tokio::test]
async fn a_missing_list_is_an_error_at_start() {
    let config = dnsbl::ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![("bl.test".into(), "/nonexistent/list".into())],
    );
    assert!(matches!(
        dnsbl::Server::start(config).await,
        Err(dnsbl::Error::ListFile { .. })
    ));
}

#[tokio::test]
async fn shutdown_releases_the_port() {
    let run = kit::start(&[("bl.test", LIST)], Duration::ZERO).await;
    let addr = run.addr();
    assert!(kit::udp(addr, "bl.test.", RecordType::SOA).await.is_some());
    run.server.shutdown().await;
    std::net::UdpSocket::bind(addr).expect("UDP port free after shutdown");
    std::net::TcpListener::bind(addr).expect("TCP port free after shutdown");
}

#[tokio::test]
async fn reload_on_request() {
    // no periodic check: only Server::reload looks at the file
    let run = kit::start(&[("bl.test", "192.0.2.1\n")], Duration::ZERO).await;
    let addr = run.addr();
    let path = run.list_path("bl.test");
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, "192.0.2.3\n").unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    run.server.reload();
    assert!(
        kit::wait_until(Duration::from_secs(10), || async {
            run.server.stats().reloads == 1
        })
        .await,
        "no reload"
    );
    let m = kit::udp(addr, "3.2.0.192.bl.test.", RecordType::A)
        .await
        .unwrap();
    assert_eq!(m.answers().len(), 1);
    let m = kit::udp(addr, "1.2.0.192.bl.test.", RecordType::A)
        .await
        .unwrap();
    assert_eq!(m.response_code(), ResponseCode::NXDomain);
    // nothing changed: asking again reloads nothing
    run.server.reload();
    let m = kit::udp(addr, "3.2.0.192.bl.test.", RecordType::A)
        .await
        .unwrap();
    assert_eq!(m.answers().len(), 1);
}
