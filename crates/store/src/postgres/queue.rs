//! (PostgreSQL) queue
#![allow(unused_variables, unused_imports)] // the stubs go as the methods are written

use super::PgStore;
use crate::directory::Directory;
use crate::error::Result;
use crate::index::IndexedHeaders;
use crate::model::*;

impl PgStore {
    pub(super) async fn queued(&self) -> Result<Vec<QueuedRecipient>> {
        unimplemented!("PostgreSQL: queued")
    }

    pub(super) async fn queue_summary(&self) -> Result<(u64, Option<i64>)> {
        unimplemented!("PostgreSQL: queue_summary")
    }

    pub(super) async fn claim_queue(
        &self,
        now: i64,
        lease_secs: i64,
        limit: usize,
    ) -> Result<Vec<QueuedRecipient>> {
        unimplemented!("PostgreSQL: claim_queue")
    }

    pub(super) async fn queue_message(
        &self,
        blob: BlobId,
        sender: &str,
        recipients: &[String],
    ) -> Result<()> {
        unimplemented!("PostgreSQL: queue_message")
    }

    pub(super) async fn mark_queue_warned(&self, ids: Vec<i64>) -> Result<()> {
        unimplemented!("PostgreSQL: mark_queue_warned")
    }

    pub(super) async fn release_queue_leases(&self) -> Result<usize> {
        unimplemented!("PostgreSQL: release_queue_leases")
    }

    pub(super) async fn record_queue_outcomes(
        &self,
        outcomes: Vec<(i64, QueueOutcome)>,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: record_queue_outcomes")
    }

    pub(super) async fn retry_queue(&self, id: Option<i64>, now: i64) -> Result<usize> {
        unimplemented!("PostgreSQL: retry_queue")
    }

    pub(super) async fn remove_queued(&self, id: i64) -> Result<()> {
        unimplemented!("PostgreSQL: remove_queued")
    }
}
