//! What loading the signature database cost: the time it took and the process's
//! resident memory after it (`VmRSS`, and the peak `VmHWM`, from
//! `/proc/self/status`), for `sluice scan --stats` and the log at start.

use std::time::{Duration, Instant};

/// Resident memory of this process, in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// Resident now (`VmRSS`).
    pub rss_kib: u64,
    /// Peak resident so far (`VmHWM`).
    pub peak_kib: u64,
}

/// Reads `VmRSS` and `VmHWM` from `/proc/self/status`; `None` where there is no
/// such file (not Linux).
pub fn memory() -> Option<Memory> {
    parse_status(&std::fs::read_to_string("/proc/self/status").ok()?)
}

fn parse_status(status: &str) -> Option<Memory> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()
    };
    Some(Memory {
        rss_kib: field("VmRSS:")?,
        peak_kib: field("VmHWM:")?,
    })
}

/// The database with its load report, and what loading it cost.
pub struct Loaded {
    pub db: scan::Database,
    pub report: scan::LoadReport,
    pub elapsed: Duration,
    pub memory: Option<Memory>,
}

impl Loaded {
    /// Times `load` and reads the memory after it.
    pub fn measure(
        load: impl FnOnce() -> Result<(scan::Database, scan::LoadReport), scan::ScanError>,
    ) -> Result<Loaded, scan::ScanError> {
        let start = Instant::now();
        let (db, report) = load()?;
        let elapsed = start.elapsed();
        Ok(Loaded {
            db,
            report,
            elapsed,
            memory: memory(),
        })
    }

    /// One line: load time and memory.
    pub fn cost(&self) -> String {
        let mut line = format!("load time {} ms", self.elapsed.as_millis());
        match self.memory {
            Some(m) => line.push_str(&format!(
                ", resident memory after load {:.1} MiB (peak {:.1} MiB)",
                m.rss_kib as f64 / 1024.0,
                m.peak_kib as f64 / 1024.0
            )),
            None => line.push_str(", resident memory not known on this system"),
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_fields() {
        let status = "Name:\tsluice\nVmHWM:\t  20480 kB\nVmRSS:\t   10240 kB\nThreads:\t1\n";
        assert_eq!(
            parse_status(status),
            Some(Memory {
                rss_kib: 10240,
                peak_kib: 20480
            })
        );
        assert_eq!(parse_status("Name: x\n"), None);
        if cfg!(target_os = "linux") {
            assert!(memory().is_some_and(|m| m.rss_kib > 0 && m.peak_kib >= m.rss_kib));
        }
    }
}
