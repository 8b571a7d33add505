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
}

impl Zone {
    /// A zone with these records.
    pub fn new(origin: &str, records: &[&str]) -> Zone {
        Zone {
            origin: origin.trim_end_matches('.').to_string(),
            records: records.iter().map(|r| r.to_string()).collect(),
            unsigned: false,
        }
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
        let nsd = crate::require_program("nsd", "nsd");
        let dir = tempfile::tempdir().expect("temp dir");
        let port = crate::free_port();
        let mut dns = Dns {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir,
            child: None,
            zones,
            serial: 1,
            signed,
            keys: Vec::new(),
        };
        dns.write_files();
        let log = std::fs::File::create(dns.path("nsd.log")).expect("nsd log");
        let child = Command::new(nsd)
            .arg("-d")
            .arg("-c")
            .arg(dns.path("nsd.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start nsd");
        dns.child = Some(child);
        let addr = dns.addr;
        if !crate::wait_until(Duration::from_secs(10), || crate::accepts(addr)) {
            panic!("nsd did not start:\n{}", dns.log());
        }
        dns
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
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.path("nsd.log"))
            .expect("nsd log");
        let nsd = crate::require_program("nsd", "nsd");
        let child = Command::new(nsd)
            .arg("-d")
            .arg("-c")
            .arg(self.path("nsd.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("restart nsd");
        self.child = Some(child);
        if !crate::wait_until(Duration::from_secs(10), || crate::accepts(addr)) {
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
            std::fs::write(self.path(&file), zone.file_text(self.serial)).expect("zone file");
            if self.signed && !zone.unsigned {
                let key = self.key_for(&zone.origin);
                self.sign(&file, &key);
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
