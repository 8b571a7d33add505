//! (PostgreSQL) message
#![allow(unused_variables, unused_imports)] // the stubs go as the methods are written

use super::PgStore;
use crate::directory::Directory;
use crate::error::Result;
use crate::index::IndexedHeaders;
use crate::model::*;

impl PgStore {
    pub(super) async fn read_chunk(&self, blob: BlobId, seq: u32) -> Result<Option<Vec<u8>>> {
        unimplemented!("PostgreSQL: read_chunk")
    }

    pub(super) async fn headers(&self, blob: BlobId) -> Result<Option<IndexedHeaders>> {
        unimplemented!("PostgreSQL: headers")
    }
}

/// Streams a message into the database (see the module comment).
pub(crate) struct PgMessageWriter {
    store: PgStore,
}

impl PgMessageWriter {
    pub(crate) fn new(store: PgStore) -> PgMessageWriter {
        PgMessageWriter { store }
    }
}

#[async_trait::async_trait]
impl crate::MessageWriter for PgMessageWriter {
    async fn write(&mut self, _data: &[u8]) -> Result<()> {
        let _ = &self.store;
        unimplemented!("PostgreSQL: MessageWriter::write")
    }
    fn size(&self) -> u64 {
        unimplemented!("PostgreSQL: MessageWriter::size")
    }
    async fn deliver(self: Box<Self>, _delivery: Delivery) -> Result<DeliveryReceipt> {
        unimplemented!("PostgreSQL: MessageWriter::deliver")
    }
    async fn abort(self: Box<Self>) {
        unimplemented!("PostgreSQL: MessageWriter::abort")
    }
}
