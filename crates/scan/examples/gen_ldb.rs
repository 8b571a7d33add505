//! Writes a logical-signature database and a sample file for load and scan
//! measurements against clamscan:
//!
//! ```text
//! cargo run --release --example gen_ldb -- OUTDIR [SIGS] [PCRE] [MB]
//! ```
//!
//! OUTDIR/db/bench.ldb gets SIGS (default 50,000) logical signatures, PCRE
//! (default 5,000) of them with a PCRE subsignature, shaped like the official
//! database's: two to six subsignatures of 6 to 40 bytes, some with wildcards or
//! bounded gaps, `::i`/`::w` on a fifth, expressions mixing `&`, `|` and counts, three
//! in five for any file (target 0) and the rest for PE files (target 1).
//! OUTDIR/sample.bin is MB (default 10) megabytes of random bytes holding the first
//! subsignatures of 50 PCRE signatures, so that their triggers fire and the regular
//! expressions run.

use std::fmt::Write as _;
use std::io::Write as _;

pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let out = std::path::PathBuf::from(
        args.next()
            .expect("usage: gen_ldb OUTDIR [SIGS] [PCRE] [MB]"),
    );
    let sigs: usize = args.next().map_or(50_000, |a| a.parse().unwrap());
    let pcre: usize = args.next().map_or(5_000, |a| a.parse().unwrap());
    let mb: usize = args.next().map_or(10, |a| a.parse().unwrap());
    std::fs::create_dir_all(out.join("db")).unwrap();
    let mut rng = Rng(15);
    let (ldb, triggers) = generate(&mut rng, sigs, pcre);
    std::fs::write(out.join("db/bench.ldb"), &ldb).unwrap();
    let mut sample = rng.bytes(mb << 20);
    for (k, t) in triggers.iter().enumerate() {
        let at = (k * 4099 + 1000) % (sample.len() - t.len());
        sample[at..at + t.len()].copy_from_slice(t);
    }
    std::fs::File::create(out.join("sample.bin"))
        .unwrap()
        .write_all(&sample)
        .unwrap();
    println!(
        "{} signatures ({pcre} with PCRE) in {}, {} MB sample in {}",
        sigs,
        out.join("db/bench.ldb").display(),
        mb,
        out.join("sample.bin").display()
    );
}

/// SIGS logical signatures, PCRE of them with a PCRE subsignature (the `.ldb`
/// text), and the first subsignatures of up to 50 PCRE ones (to plant in a
/// sample so that their triggers fire).
pub fn generate(rng: &mut Rng, sigs: usize, pcre: usize) -> (String, Vec<Vec<u8>>) {
    let mut ldb = String::new();
    let mut triggers: Vec<Vec<u8>> = Vec::new();
    for i in 0..sigs {
        let with_pcre =
            i % (sigs / pcre.max(1)).max(1) == 0 && i / (sigs / pcre.max(1)).max(1) < pcre;
        let target = if with_pcre || rng.below(5) < 3 { 0 } else { 1 };
        let n = 2 + rng.below(5);
        let mut subs = Vec::new();
        for k in 0..n {
            let len = 6 + rng.below(35);
            let bytes = rng.bytes(len);
            if with_pcre && k == 0 && triggers.len() < 50 {
                triggers.push(bytes.clone());
            }
            let mut h = hex(&bytes);
            match rng.below(10) {
                0 => h.replace_range(6..8, "??"),
                1 => h.insert_str(8, &format!("{{{}-{}}}", rng.below(4), 4 + rng.below(8))),
                2 if !with_pcre || k > 0 => {
                    h = hex(&bytes.iter().map(|b| b'a' + b % 26).collect::<Vec<_>>());
                    h.push_str(if rng.below(2) == 0 { "::i" } else { "::wi" });
                }
                _ => {}
            }
            subs.push(h);
        }
        let mut expr = String::new();
        match rng.below(4) {
            0 => expr = (0..n).map(|k| k.to_string()).collect::<Vec<_>>().join("&"),
            1 => {
                let _ = write!(
                    expr,
                    "0&({})",
                    (1..n).map(|k| k.to_string()).collect::<Vec<_>>().join("|")
                );
            }
            2 => {
                let _ = write!(
                    expr,
                    "({})>1,2",
                    (0..n).map(|k| k.to_string()).collect::<Vec<_>>().join("|")
                );
            }
            _ => {
                let _ = write!(
                    expr,
                    "0&1&({})",
                    (0..n)
                        .map(|k| format!("{k}>1"))
                        .collect::<Vec<_>>()
                        .join("|")
                );
            }
        }
        let mut tdb = format!("Engine:51-255,Target:{target}");
        if with_pcre {
            let word = hex(&rng.bytes(3));
            let re = match rng.below(4) {
                0 => format!(
                    "0/\\x{}\\x{}[\\x00-\\x7f]{{4,40}}\\x{}/s",
                    &word[..2],
                    &word[2..4],
                    &word[4..6]
                ),
                1 => r"0/(?:GET|POST)\s+\/[a-z0-9_]{6,}\.php\?id=\d+/i".to_string(),
                2 => r"0/eval\s*\(\s*(?:base64_decode|gzinflate)\s*\(/i".to_string(),
                _ => r#"0/(https?:\/\/[^\s"']{8,80})\1/"#.to_string(),
            };
            subs.push(re);
            expr = format!("({expr})&{n}");
            tdb = format!("Engine:81-255,Target:{target}");
        }
        let _ = writeln!(ldb, "Bench.Ldb.{i};{tdb};{expr};{}", subs.join(";"));
    }
    (ldb, triggers)
}
