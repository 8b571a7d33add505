//! The MTA-STS policy cache (RFC 8461 §5.1): in memory, bounded, and
//! written to a directory so that a restart keeps it (one small file per
//! domain). A policy stays usable until its `max_age` passes, even when
//! a refresh fails.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use super::sts::{parse_policy, StsPolicy};

/// A policy as cached: its TXT `id`, when it was fetched, the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedPolicy {
    /// The `id` of the TXT record it was fetched under.
    pub id: String,
    /// When it was fetched, seconds since the Unix epoch.
    pub fetched: u64,
    /// The policy.
    pub policy: StsPolicy,
}

impl CachedPolicy {
    /// Whether `max_age` has not passed yet at `now` (Unix seconds).
    pub fn fresh(&self, now: u64) -> bool {
        now < self.fetched.saturating_add(self.policy.max_age)
    }

    fn to_file(&self) -> String {
        format!(
            "id: {}\nfetched: {}\n\n{}",
            self.id,
            self.fetched,
            self.policy.to_text()
        )
    }

    fn from_file(text: &str) -> Option<CachedPolicy> {
        let (head, body) = text.split_once("\n\n")?;
        let mut id = None;
        let mut fetched = None;
        for line in head.lines() {
            match line.split_once(": ")? {
                ("id", v) => id = Some(v.to_string()),
                ("fetched", v) => fetched = v.parse().ok(),
                _ => {}
            }
        }
        Some(CachedPolicy {
            id: id?,
            fetched: fetched?,
            policy: parse_policy(body).ok()?,
        })
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The cache itself.
#[derive(Debug)]
pub struct PolicyCache {
    dir: Option<PathBuf>,
    limit: usize,
    mem: Mutex<HashMap<String, CachedPolicy>>,
}

impl PolicyCache {
    /// A cache kept in `dir` (created when first written), or in memory
    /// only; at most `limit` domains in memory.
    pub fn new(dir: Option<PathBuf>, limit: usize) -> PolicyCache {
        PolicyCache {
            dir,
            limit: limit.max(1),
            mem: Mutex::new(HashMap::new()),
        }
    }

    /// The file of a domain: only for names made of letters, digits, `-`
    /// and `.` (so a name can never leave the directory).
    fn file(&self, domain: &str) -> Option<PathBuf> {
        let ok = !domain.is_empty()
            && !domain.starts_with('.')
            && domain
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        Some(self.dir.as_ref()?.join(format!("{domain}.policy"))).filter(|_| ok)
    }

    /// The cached policy of `domain` (lower case), from memory or disk.
    pub async fn get(&self, domain: &str) -> Option<CachedPolicy> {
        if let Some(p) = self.lock().get(domain) {
            return Some(p.clone());
        }
        let text = tokio::fs::read_to_string(self.file(domain)?).await.ok()?;
        let cached = CachedPolicy::from_file(&text)?;
        self.remember(domain, cached.clone());
        Some(cached)
    }

    /// Stores a freshly fetched policy.
    pub async fn put(&self, domain: &str, cached: CachedPolicy) {
        self.remember(domain, cached.clone());
        let (Some(dir), Some(file)) = (self.dir.clone(), self.file(domain)) else {
            return;
        };
        let tmp = file.with_extension("tmp");
        let text = cached.to_file();
        let written = async {
            tokio::fs::create_dir_all(&dir).await?;
            tokio::fs::write(&tmp, text).await?;
            tokio::fs::rename(&tmp, &file).await
        }
        .await;
        if let Err(e) = written {
            tracing::warn!(domain, error = %e, "MTA-STS: cannot write the policy cache");
        }
    }

    fn remember(&self, domain: &str, cached: CachedPolicy) {
        let mut mem = self.lock();
        if mem.len() >= self.limit && !mem.contains_key(domain) {
            // Drop the oldest fetch; the disk copy stays.
            if let Some(oldest) = mem
                .iter()
                .min_by_key(|(_, p)| p.fetched)
                .map(|(d, _)| d.clone())
            {
                mem.remove(&oldest);
            }
        }
        mem.insert(domain.to_string(), cached);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CachedPolicy>> {
        self.mem.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tls_policy::sts::StsMode;

    fn cached(id: &str, fetched: u64) -> CachedPolicy {
        CachedPolicy {
            id: id.into(),
            fetched,
            policy: StsPolicy {
                mode: StsMode::Enforce,
                mx: vec!["mx.example.net".into()],
                max_age: 100,
            },
        }
    }

    #[tokio::test]
    async fn survives_a_restart_and_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PolicyCache::new(Some(dir.path().join("sts")), 2);
        cache.put("example.net", cached("a1", 1000)).await;
        cache.put("example.org", cached("b1", 1001)).await;
        cache.put("example.com", cached("c1", 1002)).await;
        assert_eq!(cache.lock().len(), 2);
        let again = PolicyCache::new(Some(dir.path().join("sts")), 10);
        assert_eq!(again.get("example.net").await, Some(cached("a1", 1000)));
        assert!(again.get("example.net").await.unwrap().fresh(1099));
        assert!(!again.get("example.net").await.unwrap().fresh(1100));
        assert_eq!(again.get("../etc/passwd").await, None);
        assert_eq!(again.get("example.invalid").await, None);
    }
}
