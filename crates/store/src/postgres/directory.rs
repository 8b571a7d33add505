//! (PostgreSQL) directory
#![allow(unused_variables, unused_imports)] // the stubs go as the methods are written

use super::PgStore;
use crate::directory::Directory;
use crate::error::Result;
use crate::index::IndexedHeaders;
use crate::model::*;

impl PgStore {
    pub(super) async fn load_directory(&self) -> Result<Directory> {
        unimplemented!("PostgreSQL: load_directory")
    }

    pub(super) async fn directory_serial(&self) -> Result<i64> {
        unimplemented!("PostgreSQL: directory_serial")
    }

    pub(super) async fn add_domain(&self, name: &str) -> Result<()> {
        unimplemented!("PostgreSQL: add_domain")
    }

    pub(super) async fn remove_domain(&self, name: &str) -> Result<()> {
        unimplemented!("PostgreSQL: remove_domain")
    }

    pub(super) async fn list_domains(&self) -> Result<Vec<String>> {
        unimplemented!("PostgreSQL: list_domains")
    }

    pub(super) async fn set_password(&self, address: &str, password: &str) -> Result<()> {
        unimplemented!("PostgreSQL: set_password")
    }

    pub(super) async fn list_accounts(&self) -> Result<Vec<String>> {
        unimplemented!("PostgreSQL: list_accounts")
    }

    pub(super) async fn add_alias(&self, address: &str, targets: &[String]) -> Result<()> {
        unimplemented!("PostgreSQL: add_alias")
    }

    pub(super) async fn remove_alias(&self, address: &str, target: Option<&str>) -> Result<()> {
        unimplemented!("PostgreSQL: remove_alias")
    }

    pub(super) async fn list_aliases(&self) -> Result<Vec<AliasEntry>> {
        unimplemented!("PostgreSQL: list_aliases")
    }

    pub(super) async fn set_quota(&self, address: &str, limit_bytes: Option<u64>) -> Result<()> {
        unimplemented!("PostgreSQL: set_quota")
    }

    pub(super) async fn add_account(&self, address: &str, password: &str) -> Result<AccountId> {
        unimplemented!("PostgreSQL: add_account")
    }

    pub(super) async fn remove_account(&self, address: &str) -> Result<()> {
        unimplemented!("PostgreSQL: remove_account")
    }
}
