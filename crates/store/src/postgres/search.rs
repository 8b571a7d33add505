//! (PostgreSQL) search
#![allow(unused_variables, unused_imports)] // the stubs go as the methods are written

use super::PgStore;
use crate::directory::Directory;
use crate::error::Result;
use crate::index::IndexedHeaders;
use crate::model::*;

impl PgStore {
    pub(super) async fn search(&self, mailbox: MailboxId, key: &SearchKey) -> Result<Vec<Uid>> {
        unimplemented!("PostgreSQL: search")
    }
}
