//! A real authoritative DNS server on loopback for tests: `nsd`, started
//! on a free port with zone files written from the test's records.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One zone: its origin and its records in zone-file syntax, one per
/// line, with names relative to the origin or absolute (`mx.example.net.`),
/// for example `@ MX 10 mx`, `mx A 127.0.0.2`, `@ TXT "v=spf1 -all"`.
/// An SOA and an NS record are added.
#[derive(Debug, Clone)]
pub struct Zone {
    /// The zone's name, without the trailing dot (`example.net`).
    pub origin: String,
    /// Resource records, zone-file syntax, one per line.
    pub records: Vec<String>,
    /// Left unsigned by [`Dns::start_signed`] (an insecure delegation
    /// under a signed parent).
    pub unsigned: bool,
    /// Text replaced in the signed zone file after signing (see
    /// [`Zone::forged`]).
    pub forgeries: Vec<(String, String)>,
}

impl Zone {
    /// A zone with these records.
    pub fn new(origin: &str, records: &[&str]) -> Zone {
        Zone {
            origin: origin.trim_end_matches('.').to_string(),
            records: records.iter().map(|r| r.to_string()).collect(),
            unsigned: false,
            forgeries: Vec::new(),
        }
    }

    /// The same zone with `original` replaced by `forged` in its file once
    /// [`Dns::start_signed`] has signed it, as an attacker on the path
    /// would rewrite an answer: the record's signature no longer matches,
    /// so a validating resolver finds it bogus while the rest of the zone
    /// (its SOA, its keys) still validates.
    pub fn forged(mut self, original: &str, forged: &str) -> Zone {
        self.forgeries
            .push((original.to_string(), forged.to_string()));
        self
    }

    /// The same zone, never signed, even by [`Dns::start_signed`].
    pub fn unsigned(mut self) -> Zone {
        self.unsigned = true;
        self
    }

    fn file_text(&self, serial: u32) -> String {
        let mut text = format!(
            "$ORIGIN {o}.\n$TTL 60\n@ IN SOA ns.{o}. hostmaster.{o}. {serial} 3600 600 86400 60\n@ IN NS ns.{o}.\nns IN A 127.0.0.1\n",
            o = self.origin
        );
        for r in &self.records {
            let _ = writeln!(text, "{r}");
        }
        text
    }
}

/// A running `nsd` serving the test's zones on 127.0.0.1 (UDP and TCP).
/// Stopped when dropped.
pub struct Dns {
    /// Where it answers: the value for `[dns] resolver` in a Sluice config.
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    child: Option<Child>,
    zones: Vec<Zone>,
    serial: u32,
    /// Whether zones are DNSSEC-signed, and the key of each zone once made
    /// (origin, key file base name in `dir`).
    signed: bool,
    keys: Vec<(String, String)>,
    /// A name only this instance serves (a TXT record in the first zone):
    /// it answering tells this nsd is up, not some other process that took
    /// the port between [`crate::free_port`] and nsd's start.
    token: String,
}

impl Dns {
    /// Starts nsd with these zones and waits until it answers.
    pub fn start(zones: Vec<Zone>) -> Dns {
        Dns::start_with(zones, false)
    }

    /// Starts nsd with these zones DNSSEC-signed (`ldns-keygen` and
    /// `ldns-signzone` from Debian's `ldnsutils`: one ECDSA P-256 key per
    /// zone, NSEC). A validating client trusts them through
    /// [`Dns::trust_anchor_file`], as an island of security: no DS in a
    /// parent zone is needed.
    pub fn start_signed(zones: Vec<Zone>) -> Dns {
        Dns::start_with(zones, true)
    }

    /// A file of the zones' DNSKEY records (zone-file lines), the trust
    /// anchors a validating resolver needs for [`Dns::start_signed`] zones.
    pub fn trust_anchor_file(&self) -> PathBuf {
        assert!(self.signed, "trust anchors exist only for signed zones");
        let mut text = String::new();
        for (_, key) in &self.keys {
            let line = std::fs::read_to_string(self.path(&format!("{key}.key"))).expect("key file");
            // Keep the record, drop ldns's `;{id = ...}` comment.
            let record = line.split(';').next().unwrap_or_default().trim_end();
            let _ = writeln!(text, "{record}");
        }
        let path = self.path("trust-anchors.key");
        std::fs::write(&path, text).expect("trust anchor file");
        path
    }

    fn start_with(zones: Vec<Zone>, signed: bool) -> Dns {
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut dns = Dns {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            dir: tempfile::tempdir().expect("temp dir"),
            child: None,
            zones,
            serial: 1,
            signed,
            keys: Vec::new(),
            token: format!("up-{}-{n}", std::process::id()),
        };
        // A port another process takes before nsd binds it makes nsd exit;
        // then start again on another.
        for _ in 0..5 {
            dns.addr = SocketAddr::from(([127, 0, 0, 1], crate::free_port()));
            dns.write_files();
            dns.spawn();
            if dns.wait_answering() {
                return dns;
            }
            if let Some(mut child) = dns.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        panic!("nsd did not start:\n{}", dns.log());
    }

    /// Starts nsd on the current files, its output appended to its log.
    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path("nsd.log"))
            .expect("nsd log");
        let child = Command::new(crate::require_program("nsd", "nsd"))
            .arg("-d")
            .arg("-c")
            .arg(self.path("nsd.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start nsd");
        self.child = Some(child);
    }

    /// Waits until this nsd answers over UDP for its own name; false if it
    /// exited or stayed silent.
    fn wait_answering(&mut self) -> bool {
        crate::wait_until(Duration::from_secs(10), || {
            let exited = self
                .child
                .as_mut()
                .is_none_or(|c| c.try_wait().ok().flatten().is_some());
            exited || self.answers()
        }) && self.answers()
    }

    /// Whether a UDP query for this instance's own TXT record gets a
    /// NOERROR answer with records (any other nsd says NXDOMAIN).
    fn answers(&self) -> bool {
        let Some(zone) = self.zones.first() else {
            return crate::accepts(self.addr);
        };
        let Ok(socket) = std::net::UdpSocket::bind("127.0.0.1:0") else {
            return false;
        };
        let _ = socket.set_read_timeout(Some(Duration::from_millis(200)));
        let mut query = vec![0x51, 0x7e, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in format!("_{}.{}", self.token, zone.origin).split('.') {
            query.push(label.len() as u8);
            query.extend_from_slice(label.as_bytes());
        }
        query.extend_from_slice(&[0, 0, 16, 0, 1]); // root, TXT, IN
        let mut reply = [0u8; 512];
        socket.send_to(&query, self.addr).is_ok()
            && matches!(socket.recv(&mut reply), Ok(n) if n >= 12
                && reply[..2] == query[..2]
                && reply[3] & 0x0f == 0
                && u16::from_be_bytes([reply[6], reply[7]]) > 0)
    }

    /// Replaces the records of the zone named `origin` (or adds the zone)
    /// and restarts nsd on the same port, so later lookups see them.
    pub fn set_zone(&mut self, zone: Zone) {
        self.zones.retain(|z| z.origin != zone.origin);
        self.zones.push(zone);
        self.serial += 1;
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let addr = self.addr;
        crate::wait_until(Duration::from_secs(5), || !crate::accepts(addr));
        self.write_files();
        self.spawn();
        if !self.wait_answering() {
            panic!("nsd did not restart:\n{}", self.log());
        }
    }

    /// What nsd logged (for a failing test's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("nsd.log")).unwrap_or_default()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write_files(&mut self) {
        let mut conf = format!(
            "server:\n  ip-address: 127.0.0.1@{port}\n  port: {port}\n  username: \"\"\n  zonesdir: \"{dir}\"\n  database: \"\"\n  zonelistfile: \"{dir}/zone.list\"\n  xfrdfile: \"{dir}/xfrd.state\"\n  xfrdir: \"{dir}\"\n  pidfile: \"{dir}/nsd.pid\"\n  logfile: \"{dir}/nsd.log\"\n  server-count: 1\n  verbosity: 1\n  hide-version: yes\nremote-control:\n  control-enable: no\n",
            port = self.addr.port(),
            dir = self.dir.path().display()
        );
        for (i, zone) in self.zones.clone().iter().enumerate() {
            let file = format!("zone{i}.zone");
            let mut text = zone.file_text(self.serial);
            if i == 0 {
                let _ = writeln!(text, "_{} TXT \"up\"", self.token);
            }
            std::fs::write(self.path(&file), text).expect("zone file");
            if self.signed && !zone.unsigned {
                let key = self.key_for(&zone.origin);
                self.sign(&file, &key);
                if !zone.forgeries.is_empty() {
                    let mut signed =
                        std::fs::read_to_string(self.path(&file)).expect("signed zone");
                    for (original, forged) in &zone.forgeries {
                        assert!(
                            signed.contains(original.as_str()),
                            "{original:?} is not in the signed zone:\n{signed}"
                        );
                        signed = signed.replace(original.as_str(), forged);
                    }
                    std::fs::write(self.path(&file), signed).expect("forged zone");
                }
            } else {
                assert!(
                    zone.forgeries.is_empty(),
                    "only a signed zone can be forged"
                );
            }
            let _ = write!(
                conf,
                "zone:\n  name: \"{}\"\n  zonefile: \"{}\"\n",
                zone.origin, file
            );
        }
        std::fs::write(self.path("nsd.conf"), conf).expect("nsd.conf");
    }
}

impl Dns {
    /// The key of zone `origin`, made on first use.
    fn key_for(&mut self, origin: &str) -> String {
        if let Some((_, key)) = self.keys.iter().find(|(o, _)| o == origin) {
            return key.clone();
        }
        let out = Command::new(crate::require_program("ldns-keygen", "ldnsutils"))
            .args(["-a", "ECDSAP256SHA256", "-k", origin])
            .current_dir(self.dir.path())
            .output()
            .expect("run ldns-keygen");
        assert!(
            out.status.success(),
            "ldns-keygen: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let key = String::from_utf8_lossy(&out.stdout).trim().to_string();
        self.keys.push((origin.to_string(), key.clone()));
        key
    }

    /// Signs `file` in place with `key` (RRSIGs valid for 30 days from now).
    fn sign(&self, file: &str, key: &str) {
        let unsigned = format!("{file}.unsigned");
        std::fs::rename(self.path(file), self.path(&unsigned)).expect("rename zone file");
        let out = Command::new(crate::require_program("ldns-signzone", "ldnsutils"))
            .args(["-f", file, &unsigned, key])
            .current_dir(self.dir.path())
            .output()
            .expect("run ldns-signzone");
        assert!(
            out.status.success(),
            "ldns-signzone: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asks `dig` (dnsutils) for a record; its short answer.
    fn dig(dns: &Dns, name: &str, kind: &str) -> String {
        let out = Command::new(crate::require_program("dig", "dnsutils"))
            .args([
                &format!("@{}", dns.addr.ip()),
                "-p",
                &dns.addr.port().to_string(),
                "+short",
                "+time=2",
                "+tries=1",
                name,
                kind,
            ])
            .output()
            .expect("dig runs");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn serves_the_records_it_was_given_and_changes_them() {
        let mut dns = Dns::start(vec![Zone::new(
            "example.net",
            &[
                "@ MX 10 mx",
                "mx A 127.0.0.2",
                "@ TXT \"v=spf1 ip4:127.0.0.0/8 -all\"",
            ],
        )]);
        assert_eq!(dig(&dns, "example.net", "MX"), "10 mx.example.net.");
        assert_eq!(
            dig(&dns, "mx.example.net", "A"),
            "127.0.0.2",
            "{}",
            dns.log()
        );
        assert_eq!(
            dig(&dns, "example.net", "TXT"),
            "\"v=spf1 ip4:127.0.0.0/8 -all\""
        );
        dns.set_zone(Zone::new("example.net", &["@ MX 0 ."]));
        assert_eq!(dig(&dns, "example.net", "MX"), "0 .");
        assert_eq!(dig(&dns, "mx.example.net", "A"), "");
    }

    #[test]
    fn signs_zones_and_gives_their_trust_anchors() {
        let mut dns = Dns::start_signed(vec![Zone::new(
            "example.net",
            &["@ MX 10 mx", "mx A 127.0.0.2"],
        )]);
        assert_eq!(dig(&dns, "example.net", "MX"), "10 mx.example.net.");
        let rrsig = dig(&dns, "example.net", "RRSIG");
        assert!(rrsig.contains("MX 13 2 60"), "{rrsig}");
        let anchors = std::fs::read_to_string(dns.trust_anchor_file()).unwrap();
        assert!(
            anchors.starts_with("example.net.") && anchors.contains("DNSKEY\t257 3 13 "),
            "{anchors}"
        );
        // Re-signed, same key, after a change.
        dns.set_zone(Zone::new("example.net", &["@ MX 20 mx2"]));
        assert_eq!(dig(&dns, "example.net", "MX"), "20 mx2.example.net.");
        assert_eq!(
            std::fs::read_to_string(dns.trust_anchor_file()).unwrap(),
            anchors
        );
    }
}
