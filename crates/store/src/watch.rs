//! Keeps a running server's directory snapshot current.
//!
//! The command line edits the directory in the database, possibly from
//! another process; the server polls the directory serial and reloads the
//! snapshot when it moved, so a change is live within one poll interval.

use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwap;

use crate::directory::Directory;
use crate::error::Result;
use crate::Store;

/// The current directory snapshot, swapped atomically on change.
pub struct DirectoryWatch {
    current: ArcSwap<Directory>,
}

impl DirectoryWatch {
    /// Loads the directory and starts polling for changes every `interval`.
    /// Polling stops when the watch is dropped.
    pub async fn start(store: Arc<dyn Store>, interval: Duration) -> Result<Arc<DirectoryWatch>> {
        let watch = Arc::new(DirectoryWatch {
            current: ArcSwap::from_pointee(store.load_directory().await?),
        });
        let weak: Weak<DirectoryWatch> = Arc::downgrade(&watch);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(watch) = weak.upgrade() else { break };
                if let Err(e) = watch.refresh(store.as_ref()).await {
                    tracing::warn!(error = %e, "directory reload failed");
                }
            }
        });
        Ok(watch)
    }

    /// A watch over a fixed snapshot (tests, one-shot tools).
    pub fn fixed(directory: Directory) -> Arc<DirectoryWatch> {
        Arc::new(DirectoryWatch {
            current: ArcSwap::from_pointee(directory),
        })
    }

    /// Reloads now if the serial moved.
    pub async fn refresh(&self, store: &dyn Store) -> Result<()> {
        let serial = store.directory_serial().await?;
        if serial != self.current.load().serial() {
            let directory = store.load_directory().await?;
            tracing::info!(
                serial = directory.serial(),
                accounts = directory.account_count(),
                "directory reloaded"
            );
            self.current.store(Arc::new(directory));
        }
        Ok(())
    }

    /// The snapshot in force.
    pub fn get(&self) -> Arc<Directory> {
        self.current.load_full()
    }
}
