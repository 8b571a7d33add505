//! (PostgreSQL) web
#![allow(unused_variables, unused_imports)] // the stubs go as the methods are written

use super::PgStore;
use crate::error::Result;
use crate::model::*;

impl PgStore {
    pub(super) async fn create_web_session(&self, session: &WebSession) -> Result<()> {
        unimplemented!("PostgreSQL: create_web_session")
    }

    pub(super) async fn web_session(&self, id_hash: &str, now: i64) -> Result<Option<WebSession>> {
        unimplemented!("PostgreSQL: web_session")
    }

    pub(super) async fn delete_web_session(&self, id_hash: &str) -> Result<()> {
        unimplemented!("PostgreSQL: delete_web_session")
    }

    pub(super) async fn web_settings(&self, account: AccountId) -> Result<WebSettings> {
        unimplemented!("PostgreSQL: web_settings")
    }

    pub(super) async fn set_web_settings(
        &self,
        account: AccountId,
        settings: &WebSettings,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: set_web_settings")
    }
}
