//! Replays a synthetic botnet workload shaped like the seed's spam trace
//! (section 7: 101,692 connections from 19,492 addresses in 8,832 /24
//! prefixes; about 40% of the prefixes hold more than 10 listed addresses,
//! about 3% more than 100; arrivals come in bursts per /24) against our
//! DNSBL server on loopback, once with a classic per-address client and once
//! with a /25 bitmap client, side by side, with a 24-hour TTL, and prints
//! cache hit ratios and DNS queries sent.
//!
//! ```text
//! cargo run --release --example replay -- [--seed N] [--days 61] [--out DIR]
//! ```
//!
//! Simulated time runs on a manual [`dnsbl::Clock`]; the queries themselves
//! are real UDP round trips to the server. With `--out DIR` the list and
//! query files for `dnsperf` (classic A and bitmap AAAA names) are written
//! to DIR as well.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use dnsbl::bitmap::Block25;
use dnsbl::{Client, ClientConfig, Clock, Server, ServerConfig, Zone};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PREFIXES: usize = 8_832;
const ADDRESSES: usize = 19_492;
const CONNECTIONS: usize = 101_692;
const DAY: f64 = 86_400.0;

struct Workload {
    /// listed addresses, per /24 prefix
    listed: Vec<(u32, Vec<u8>)>,
    /// (time in seconds, address), sorted by time
    arrivals: Vec<(f64, Ipv4Addr)>,
}

fn pick_weighted(rng: &mut StdRng, cumulative: &[f64]) -> usize {
    let total = *cumulative.last().unwrap_or(&1.0);
    let x = rng.gen::<f64>() * total;
    cumulative
        .partition_point(|c| *c <= x)
        .min(cumulative.len() - 1)
}

fn generate(seed: u64, days: f64) -> Workload {
    let mut rng = StdRng::seed_from_u64(seed);
    // distinct /24s in unicast space
    let mut seen = HashSet::new();
    let mut prefixes = Vec::with_capacity(PREFIXES);
    while prefixes.len() < PREFIXES {
        let first: u32 = rng.gen_range(1..224);
        if first == 10 || first == 127 {
            continue;
        }
        let p = (first << 24) | (rng.gen_range(0..65_536u32) << 8);
        if seen.insert(p) {
            prefixes.push(p);
        }
    }
    // listed addresses per prefix: 60% hold 1-10, 37% 11-100, 3% 101-254
    let mut listed = Vec::with_capacity(PREFIXES);
    for &p in &prefixes {
        let u: f64 = rng.gen();
        let n = if u < 0.03 {
            rng.gen_range(101..=254)
        } else if u < 0.40 {
            11 + (89.0 * rng.gen::<f64>().powi(2)) as usize
        } else {
            rng.gen_range(1..=10)
        };
        let mut all: Vec<u8> = (0..=255).collect();
        for i in 0..n {
            let j = rng.gen_range(i..256);
            all.swap(i, j);
        }
        let mut chosen = all[..n].to_vec();
        chosen.sort_unstable();
        listed.push((p, chosen));
    }
    // sending addresses: one per prefix, the rest spread in proportion to
    // how many listed addresses the prefix holds (big botnet blocks send
    // from more hosts); 85% of senders are listed
    let weights: Vec<f64> = listed
        .iter()
        .scan(0.0, |acc, (_, l)| {
            *acc += l.len() as f64;
            Some(*acc)
        })
        .collect();
    let mut senders_per_prefix = vec![1usize; PREFIXES];
    let mut extra = ADDRESSES - PREFIXES;
    while extra > 0 {
        let i = pick_weighted(&mut rng, &weights);
        if senders_per_prefix[i] < 200 {
            senders_per_prefix[i] += 1;
            extra -= 1;
        }
    }
    let mut senders: Vec<(usize, Ipv4Addr)> = Vec::with_capacity(ADDRESSES);
    for (i, (p, l)) in listed.iter().enumerate() {
        let mut used = HashSet::new();
        while used.len() < senders_per_prefix[i] {
            let last = if rng.gen::<f64>() < 0.85 && used.len() < l.len() {
                l[rng.gen_range(0..l.len())]
            } else {
                rng.gen::<u8>()
            };
            if used.insert(last) {
                senders.push((i, Ipv4Addr::from(p | u32::from(last))));
            }
        }
    }
    // connections: one per sender, the rest Zipf-like over senders
    let mut per_sender = vec![1usize; senders.len()];
    let zipf: Vec<f64> = (0..senders.len())
        .scan(0.0, |acc, r| {
            *acc += 1.0 / ((r + 1) as f64).powf(0.9);
            Some(*acc)
        })
        .collect();
    let mut order: Vec<usize> = (0..senders.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    for _ in 0..(CONNECTIONS - senders.len()) {
        per_sender[order[pick_weighted(&mut rng, &zipf)]] += 1;
    }
    // time: each prefix is active in a few bursts (1 + geometric), each
    // burst a few hours long; a sender's connections fall in its prefix's bursts
    let bursts: Vec<Vec<f64>> = (0..PREFIXES)
        .map(|_| {
            let mut n = 1;
            while n < 8 && rng.gen::<f64>() < 0.5 {
                n += 1;
            }
            (0..n).map(|_| rng.gen::<f64>() * days * DAY).collect()
        })
        .collect();
    let mut arrivals = Vec::with_capacity(CONNECTIONS);
    for ((prefix, ip), count) in senders.iter().zip(&per_sender) {
        for _ in 0..*count {
            let b = &bursts[*prefix];
            let start = b[rng.gen_range(0..b.len())];
            // exponential with a 3-hour mean
            let offset = -3.0 * 3600.0 * (1.0 - rng.gen::<f64>()).ln();
            arrivals.push(((start + offset).min(days * DAY), *ip));
        }
    }
    arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
    Workload { listed, arrivals }
}

fn list_text(w: &Workload) -> String {
    let mut s = String::from(
        "$TTL 86400\n$SOA 86400 ns.bl.test hostmaster.bl.test 1 1h 10m 1w 86400\n:127.0.0.2:Listed: $\n",
    );
    for (p, l) in &w.listed {
        for last in l {
            s.push_str(&format!("{}\n", Ipv4Addr::from(p | u32::from(*last))));
        }
    }
    s
}

fn write_query_files(w: &Workload, dir: &std::path::Path) -> std::io::Result<()> {
    let mut classic = std::io::BufWriter::new(std::fs::File::create(dir.join("queries-a.txt"))?);
    let mut bitmap = std::io::BufWriter::new(std::fs::File::create(dir.join("queries-aaaa.txt"))?);
    for (_, ip) in w.arrivals.iter().take(100_000) {
        let o = ip.octets();
        writeln!(classic, "{}.{}.{}.{}.bl.test A", o[3], o[2], o[1], o[0])?;
        let [h, z, y, x] = Block25::of(*ip).labels();
        writeln!(bitmap, "{h}.{z}.{y}.{x}.bl.test AAAA")?;
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let mut seed = 2007u64;
    let mut days = 61.0;
    let mut out: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seed" => seed = args.next().and_then(|v| v.parse().ok()).expect("--seed N"),
            "--days" => days = args.next().and_then(|v| v.parse().ok()).expect("--days N"),
            "--out" => out = Some(args.next().expect("--out DIR").into()),
            _ => panic!("usage: replay [--seed N] [--days D] [--out DIR]"),
        }
    }
    let t0 = Instant::now();
    let w = generate(seed, days);
    let dir = tempfile::tempdir().unwrap();
    let list_path = match &out {
        Some(d) => {
            std::fs::create_dir_all(d).unwrap();
            write_query_files(&w, d).unwrap();
            d.join("bl.list")
        }
        None => dir.path().join("bl.list"),
    };
    std::fs::write(&list_path, list_text(&w)).unwrap();

    let ips: HashSet<Ipv4Addr> = w.arrivals.iter().map(|a| a.1).collect();
    let p24: HashSet<u32> = ips.iter().map(|ip| u32::from(*ip) >> 8).collect();
    let p25: HashSet<u32> = ips.iter().map(|ip| u32::from(*ip) >> 7).collect();
    let listed_total: usize = w.listed.iter().map(|(_, l)| l.len()).sum();
    let over10 = w.listed.iter().filter(|(_, l)| l.len() > 10).count();
    let over100 = w.listed.iter().filter(|(_, l)| l.len() > 100).count();
    let mut per_ip: HashMap<Ipv4Addr, usize> = HashMap::new();
    for (_, ip) in &w.arrivals {
        *per_ip.entry(*ip).or_default() += 1;
    }

    let mut config = ServerConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![("bl.test".into(), list_path.clone())],
    );
    config.reload_interval = Duration::ZERO;
    let server = Server::start(config).await.unwrap();
    let clock = Clock::manual();
    let make = |zone: Zone| {
        let mut c = ClientConfig::new(server.local_addr(), vec![zone.with_reasons(false)]);
        c.clock = clock.clone();
        c.ttl_cap = Duration::from_secs(86_400);
        c.budget = Duration::from_secs(5);
        c.attempt_timeout = Duration::from_secs(1);
        Client::new(c).unwrap()
    };
    let classic = make(Zone::classic("bl.test", 1.0));
    let bitmap = make(Zone::bitmap("bl.test", 1.0));

    let mut disagree = 0usize;
    let mut listed_conns = 0usize;
    let start = Instant::now();
    for (t, ip) in &w.arrivals {
        clock.set_elapsed(Duration::from_secs_f64(*t));
        let (c, b) = tokio::join!(
            classic.check(IpAddr::V4(*ip)),
            bitmap.check(IpAddr::V4(*ip))
        );
        disagree += usize::from(c.listed != b.listed);
        listed_conns += usize::from(c.listed);
    }
    let elapsed = start.elapsed();
    let (cs, bs) = (classic.stats(), bitmap.stats());
    let server_stats = server.stats();

    println!("synthetic botnet replay (seed {seed}, {days} days, TTL 24 h)");
    println!(
        "  workload: {} connections, {} addresses, {} /24s, {} /25s, {} listed addresses on the list",
        w.arrivals.len(),
        ips.len(),
        p24.len(),
        p25.len(),
        listed_total
    );
    println!(
        "  prefixes with >10 listed: {:.1}%, >100 listed: {} ({:.1}%); connections from listed addresses: {:.1}%; max connections per address: {}",
        100.0 * over10 as f64 / PREFIXES as f64,
        over100,
        100.0 * over100 as f64 / PREFIXES as f64,
        100.0 * listed_conns as f64 / w.arrivals.len() as f64,
        per_ip.values().max().unwrap_or(&0)
    );
    println!();
    println!("  {:<22} {:>12} {:>12}", "", "classic", "bitmap /25");
    println!(
        "  {:<22} {:>11.1}% {:>11.1}%",
        "cache hit ratio",
        100.0 * cs.hit_ratio(),
        100.0 * bs.hit_ratio()
    );
    println!(
        "  {:<22} {:>12} {:>12}",
        "DNS queries sent", cs.queries_sent, bs.queries_sent
    );
    println!(
        "  {:<22} {:>11.2}% {:>11.2}%",
        "queries / connection",
        100.0 * cs.queries_sent as f64 / w.arrivals.len() as f64,
        100.0 * bs.queries_sent as f64 / w.arrivals.len() as f64
    );
    println!(
        "  {:<22} {:>12} {:>12}",
        "listed verdicts", cs.listed, bs.listed
    );
    println!(
        "  {:<22} {:>12} {:>12}",
        "timeouts", cs.timeouts, bs.timeouts
    );
    println!();
    println!(
        "  bitmap sends {:.1}% fewer queries; verdicts differ on {disagree} connections",
        100.0 * (1.0 - bs.queries_sent as f64 / cs.queries_sent.max(1) as f64)
    );
    println!("  seed (real trace): hit ratio 73.8% vs 83.9%, queries 26.22% vs 16.11% of connections (39% fewer)");
    println!(
        "  server answered {} queries ({} bitmap); replay took {:.1} s, {:.1} s in all",
        server_stats.udp_queries + server_stats.tcp_queries,
        server_stats.bitmap_queries,
        elapsed.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    if let Some(d) = out {
        println!("  list and dnsperf query files written to {}", d.display());
    }
    server.shutdown().await;
}
