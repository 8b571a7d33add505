//! Watching the free space of the disk the store writes to, so a full
//! disk is refused early with a temporary error and said once in the log.
//!
//! Two things make the disk "full": the free space under the data
//! directory falls below a reserve (`store.min_free_mb`), checked with
//! `statvfs` when a client is about to send mail (cheap: one system call),
//! or a write failed for lack of space (`ENOSPC`, `SQLITE_FULL`,
//! PostgreSQL's `53100 disk_full`) since the last write that succeeded.
//! The state's changes are logged (a warning when the disk becomes full,
//! an information when space returns) and shown in the
//! `sluice_store_disk_full` gauge; single failures are not logged here.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;

use crate::error::{Result, StoreError};
use crate::model::{Delivery, DeliveryReceipt};
use crate::MessageWriter;

/// The reserve [`DiskSpace`] keeps free when none is set: 64 MiB.
pub const DEFAULT_MIN_FREE: u64 = 64 * 1024 * 1024;

/// The free-space state of the store's disk.
#[derive(Debug)]
pub struct DiskSpace {
    /// The directory whose file system is measured; none on PostgreSQL,
    /// whose files are on the database server.
    dir: Option<PathBuf>,
    /// Bytes that must stay free for new mail to be taken.
    reserve: AtomicU64,
    /// The last measure found less than the reserve free.
    low: AtomicBool,
    /// A write failed for lack of space, and none succeeded since.
    failed: AtomicBool,
    /// The state last reported (logged and in the gauge).
    reported: Mutex<bool>,
}

impl Default for DiskSpace {
    /// A watch of write failures only, with no directory to measure.
    fn default() -> DiskSpace {
        DiskSpace::new(None)
    }
}

impl DiskSpace {
    /// Watches the file system of `dir` (none: only write failures count).
    pub fn new(dir: Option<PathBuf>) -> DiskSpace {
        DiskSpace {
            dir,
            reserve: AtomicU64::new(DEFAULT_MIN_FREE),
            low: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            reported: Mutex::new(false),
        }
    }

    /// Sets the bytes that must stay free (`store.min_free_mb`); 0 turns
    /// the early check off, leaving only the write errors.
    pub fn set_reserve(&self, bytes: u64) {
        self.reserve.store(bytes, Ordering::Relaxed);
        self.low.store(false, Ordering::Relaxed);
    }

    /// Whether new mail may be taken now: measures the free space and
    /// fails with [`StoreError::Full`] when it is under the reserve.
    /// A file system that cannot be measured counts as having room (the
    /// writes themselves still say when it has not).
    pub fn check(&self) -> Result<()> {
        let reserve = self.reserve.load(Ordering::Relaxed);
        if let (Some(dir), true) = (&self.dir, reserve > 0) {
            match nix::sys::statvfs::statvfs(dir.as_path()) {
                Ok(s) => {
                    // f_bavail: the blocks an unprivileged writer may use.
                    // The field types differ between platforms.
                    #[allow(clippy::unnecessary_cast)]
                    let free =
                        (s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64);
                    let low = free < reserve;
                    self.low.store(low, Ordering::Relaxed);
                    self.report(None);
                    if low {
                        return Err(StoreError::Full(format!(
                            "{} has {free} bytes free, under the reserve of {reserve}",
                            dir.display()
                        )));
                    }
                }
                Err(e) => {
                    tracing::debug!(dir = %dir.display(), error = %e, "cannot measure free space")
                }
            }
        }
        Ok(())
    }

    /// Whether the disk counts as full now (as last measured or written).
    pub fn is_full(&self) -> bool {
        self.low.load(Ordering::Relaxed) || self.failed.load(Ordering::Relaxed)
    }

    /// Notes how a write went: one that failed for lack of space makes the
    /// disk full; one that succeeded ends a state a failed write began.
    pub fn note<T>(&self, outcome: &Result<T>) {
        match outcome {
            Ok(_) => {
                if self.failed.swap(false, Ordering::Relaxed) {
                    self.report(None);
                }
            }
            Err(e) => {
                self.note_failure(e, "a message write");
            }
        }
    }

    /// Notes that `what` (a message write, a WAL checkpoint...) failed
    /// with `e`; true when it was for lack of space, which makes the disk
    /// full until a message write succeeds. Only failures for lack of
    /// space count.
    pub fn note_failure(&self, e: &StoreError, what: &str) -> bool {
        if !e.is_full() {
            return false;
        }
        if !self.failed.swap(true, Ordering::Relaxed) {
            self.report(Some((what, e)));
        }
        true
    }

    /// Logs and shows a change of state, once per change; `cause` is
    /// what found the disk full, and how.
    fn report(&self, cause: Option<(&str, &StoreError)>) {
        let full = self.is_full();
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        if *reported == full {
            return;
        }
        *reported = full;
        metrics::get().store_disk_full.set(i64::from(full));
        let dir = self
            .dir
            .as_ref()
            .map_or_else(|| "the database".to_string(), |d| d.display().to_string());
        if full {
            let (found_by, error) = match cause {
                Some((what, e)) => (what.to_string(), e.to_string()),
                None => (
                    "the free-space check".to_string(),
                    "under the reserve".to_string(),
                ),
            };
            tracing::warn!(
                dir = %dir,
                reserve = self.reserve.load(Ordering::Relaxed),
                found_by = %found_by,
                error = %error,
                "disk full: new mail is refused with temporary errors until space returns; \
                 reading goes on"
            );
        } else {
            tracing::info!(dir = %dir, "disk space is back: new mail is taken again");
        }
    }
}

/// A message writer that tells [`DiskSpace`] how its writes went.
pub(crate) struct Watched {
    pub(crate) inner: Box<dyn MessageWriter>,
    pub(crate) space: std::sync::Arc<DiskSpace>,
}

#[async_trait]
impl MessageWriter for Watched {
    async fn write(&mut self, data: &[u8]) -> Result<()> {
        let outcome = self.inner.write(data).await;
        if outcome.is_err() {
            self.space.note(&outcome);
        }
        outcome
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    async fn deliver(self: Box<Self>, delivery: Delivery) -> Result<DeliveryReceipt> {
        let outcome = self.inner.deliver(delivery).await;
        self.space.note(&outcome);
        outcome
    }

    async fn abort(self: Box<Self>) {
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_larger_than_the_disk_is_full_and_zero_never_is() {
        let dir = tempfile::tempdir().unwrap();
        let space = DiskSpace::new(Some(dir.path().to_path_buf()));
        space.set_reserve(u64::MAX);
        assert!(matches!(space.check(), Err(StoreError::Full(_))));
        assert!(space.is_full());
        space.set_reserve(0);
        space.check().unwrap();
        assert!(!space.is_full());
        space.set_reserve(1);
        space.check().unwrap();
        assert!(!space.is_full());
    }

    #[test]
    fn a_write_that_found_no_space_lasts_until_one_succeeds() {
        let space = DiskSpace::new(None);
        space.note::<()>(&Err(StoreError::Full("test".into())));
        assert!(space.is_full());
        space.note::<()>(&Err(StoreError::NotFound("x".into())));
        assert!(space.is_full());
        space.note(&Ok(()));
        assert!(!space.is_full());
    }
}
