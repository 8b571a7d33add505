//! (PostgreSQL) dkim
#![allow(unused_variables, unused_imports)] // the stubs go as the methods are written

use super::PgStore;
use crate::error::Result;
use crate::model::*;

impl PgStore {
    pub(super) async fn dkim_keys(&self) -> Result<Vec<DkimKey>> {
        unimplemented!("PostgreSQL: dkim_keys")
    }

    pub(super) async fn add_dkim_key(&self, key: DkimKey) -> Result<()> {
        unimplemented!("PostgreSQL: add_dkim_key")
    }

    pub(super) async fn set_dkim_signing(
        &self,
        domain: &str,
        selector: &str,
        signing: bool,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: set_dkim_signing")
    }

    pub(super) async fn remove_dkim_key(&self, domain: &str, selector: &str) -> Result<()> {
        unimplemented!("PostgreSQL: remove_dkim_key")
    }
}
