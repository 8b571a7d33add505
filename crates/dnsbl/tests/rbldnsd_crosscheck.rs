//! Cross-check with Debian's rbldnsd: the same `ip4set` list served by
//! rbldnsd and by our server must give our client the same verdict, the
//! same A codes and the same reason for every address of a sample.
//!
//! Needs the `rbldnsd` package (`./test.sh` installs it); without it the
//! test fails, saying so.

mod kit;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use dnsbl::{Client, ClientConfig, Outcome, Zone};
use hickory_proto::rr::RecordType;

const RBLDNSD: &str = "/usr/sbin/rbldnsd";

/// A list that exercises every form both servers read.
fn list() -> String {
    let mut s = String::from(
        "$TTL 300\n\
         $SOA 300 ns1.bl.test hostmaster.bl.test 1 1h 10m 1w 120\n\
         $NS 300 ns1.bl.test\n\
         $1 https://bl.test/lookup?ip=\n\
         # singles with the default answer\n\
         192.0.2.1\n\
         192.0.2.127\n\
         192.0.2.128\n\
         192.0.2.255\n\
         :127.0.0.2:Listed, see $1$\n\
         192.0.2.3\n\
         192.0.2.4 :127.0.0.4:spam source $\n\
         192.0.2.5 :5\n\
         192.0.2.6 :6:\n\
         192.0.2.7 open relay $ costs $$5\n\
         192.0.2.8   ; comment after an entry\n\
         # CIDR ranges and exclusions\n\
         198.51.100.0/25 :127.0.0.3:botnet $\n\
         !198.51.100.64/28\n\
         198.51.100.66\n\
         198.51.100.192/26\n\
         !198.51.100.200-198.51.100.210\n\
         # dash ranges and prefixes\n\
         203.0.113.10-203.0.113.20\n\
         203.0.113.100-130\n\
         203.0.114\n\
         !203.0.114.0/30\n\
         # a wide range with holes at every level\n\
         10.0.0.0/8 :127.0.0.9:wide $\n\
         !10.1.0.0/16\n\
         10.1.2.0/23 :127.0.0.10:back in\n\
         !10.1.3.77\n\
         10.20.30.40-10.20.31.5\n\
         172.16.0.0/12\n\
         !172.20.0.0/14\n\
         172.21.5.0/24\n\
         # lines both servers skip\n\
         192.0.2.9/24\n\
         bogus\n",
    );
    // a /24 with a pseudo-random third of its addresses listed
    let mut x: u32 = 2463534242;
    for last in 0..=255u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if x.is_multiple_of(3) {
            s.push_str(&format!("100.64.7.{last}\n"));
        }
    }
    s
}

fn sample() -> Vec<IpAddr> {
    let mut ips = Vec::new();
    for net in [
        [192, 0, 2],
        [198, 51, 100],
        [203, 0, 113],
        [203, 0, 114],
        [100, 64, 7],
        [10, 1, 2],
        [10, 1, 3],
        [10, 20, 30],
        [10, 20, 31],
        [172, 21, 5],
    ] {
        for last in 0..=255 {
            ips.push(IpAddr::V4(Ipv4Addr::new(net[0], net[1], net[2], last)));
        }
    }
    let mut x: u32 = 88172645;
    for _ in 0..1000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        // spread over 10/8, 172.16/12 and anything else
        let ip = match x % 3 {
            0 => 0x0a00_0000 | (x >> 8),
            1 => 0xac10_0000 | (x >> 12),
            _ => x,
        };
        ips.push(IpAddr::V4(Ipv4Addr::from(ip)));
    }
    ips
}

/// Whether the effective user is root, from /proc (no libc needed).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// rbldnsd as a child process, killed when dropped.
struct Rbldnsd {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Rbldnsd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn start_rbldnsd(dir: &Path, file: &Path) -> Rbldnsd {
    for _ in 0..5 {
        let port = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let log = std::fs::File::create(dir.join("rbldnsd.log")).unwrap();
        // rbldnsd refuses to run as root: -u nobody (only root may switch);
        // -n keeps it in the foreground
        let mut args = vec!["-n".to_string()];
        if running_as_root() {
            args.extend(["-u".into(), "nobody".into()]);
        }
        args.extend([
            "-b".into(),
            format!("127.0.0.1/{port}"),
            "-t".into(),
            "300".into(),
        ]);
        let child = Command::new(RBLDNSD)
            .args(&args)
            .arg(format!("bl.test:ip4set:{}", file.display()))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start rbldnsd");
        let mut r = Rbldnsd { child, addr };
        let up = kit::wait_until(Duration::from_secs(10), || async {
            kit::udp(addr, "bl.test.", RecordType::SOA).await.is_some()
        })
        .await;
        if up {
            return r;
        }
        // port taken between our probe and its bind, or it died: try again
        let _ = r.child.kill();
    }
    panic!(
        "rbldnsd did not come up: {}",
        std::fs::read_to_string(dir.join("rbldnsd.log")).unwrap_or_default()
    );
}

fn verdict(o: &Outcome) -> (bool, Vec<Ipv4Addr>, Option<String>) {
    let hit = o.hits.first();
    let mut codes = hit.map(|h| h.codes.clone()).unwrap_or_default();
    codes.sort();
    (o.listed, codes, hit.and_then(|h| h.reason.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_verdicts_as_rbldnsd() {
    assert!(
        Path::new(RBLDNSD).exists(),
        "{RBLDNSD} is missing: apt-get install rbldnsd (./test.sh installs it)"
    );
    let run = kit::start(&[("bl.test", &list())], Duration::ZERO).await;
    // a directory and file that rbldnsd, running as nobody, can read
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = dir.path().join("bl.list");
    std::fs::write(&file, list()).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let peer = start_rbldnsd(dir.path(), &file).await;

    let make = |addr, zone: Zone| {
        let mut c = ClientConfig::new(addr, vec![zone]);
        c.budget = Duration::from_secs(5);
        c.attempt_timeout = Duration::from_secs(1);
        Client::new(c).unwrap()
    };
    let theirs = make(peer.addr, Zone::classic("bl.test", 1.0));
    let ours = make(run.addr(), Zone::classic("bl.test", 1.0));
    let ours_bitmap = make(run.addr(), Zone::bitmap("bl.test", 1.0));

    let ips = sample();
    let (mut listed, mut with_reason) = (0, 0);
    let mut mismatches = Vec::new();
    for chunk in ips.chunks(64) {
        let t = futures_util::future::join_all(chunk.iter().map(|ip| theirs.check(*ip))).await;
        let o = futures_util::future::join_all(chunk.iter().map(|ip| ours.check(*ip))).await;
        let b = futures_util::future::join_all(chunk.iter().map(|ip| ours_bitmap.check(*ip))).await;
        for ((ip, t), (o, b)) in chunk.iter().zip(&t).zip(o.iter().zip(&b)) {
            assert!(
                t.timed_out.is_empty() && t.failed.is_empty(),
                "rbldnsd did not answer for {ip}"
            );
            let (vt, vo) = (verdict(t), verdict(o));
            if vt != vo {
                mismatches.push(format!("{ip}: rbldnsd {vt:?}, ours {vo:?}"));
            }
            if b.listed != t.listed || verdict(b).2 != vt.2 {
                mismatches.push(format!(
                    "{ip}: rbldnsd {vt:?}, ours in bitmap mode {:?}",
                    verdict(b)
                ));
            }
            listed += usize::from(t.listed);
            with_reason += usize::from(vt.2.is_some());
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    // the sample must exercise both sides
    assert!(
        listed > 500 && ips.len() - listed > 500,
        "listed {listed} of {}",
        ips.len()
    );
    assert!(with_reason > 100);
    eprintln!("rbldnsd cross-check: {} addresses, {listed} listed, {with_reason} with a reason, no difference", ips.len());

    // both refuse names outside their zones
    for addr in [peer.addr, run.addr()] {
        let m = kit::udp(addr, "example.com.", RecordType::A).await.unwrap();
        assert_eq!(m.response_code(), hickory_proto::op::ResponseCode::Refused);
    }
}
