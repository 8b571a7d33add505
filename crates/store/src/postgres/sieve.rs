//! (PostgreSQL) sieve
#![allow(unused_variables, unused_imports)] // the stubs go as the methods are written

use super::PgStore;
use crate::error::Result;
use crate::model::*;

impl PgStore {
    pub(super) async fn sieve_scripts(&self, owner: ScriptOwner) -> Result<Vec<SieveScriptInfo>> {
        unimplemented!("PostgreSQL: sieve_scripts")
    }

    pub(super) async fn sieve_script(
        &self,
        owner: ScriptOwner,
        name: &str,
    ) -> Result<Option<String>> {
        unimplemented!("PostgreSQL: sieve_script")
    }

    pub(super) async fn put_sieve_script(
        &self,
        owner: ScriptOwner,
        name: &str,
        source: &str,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: put_sieve_script")
    }

    pub(super) async fn activate_sieve_script(
        &self,
        account: AccountId,
        name: Option<&str>,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: activate_sieve_script")
    }

    pub(super) async fn delete_sieve_script(&self, owner: ScriptOwner, name: &str) -> Result<()> {
        unimplemented!("PostgreSQL: delete_sieve_script")
    }

    pub(super) async fn rename_sieve_script(
        &self,
        owner: ScriptOwner,
        from: &str,
        to: &str,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: rename_sieve_script")
    }

    pub(super) async fn sieve_memory_holds(&self, account: AccountId, key: &str) -> Result<bool> {
        unimplemented!("PostgreSQL: sieve_memory_holds")
    }

    pub(super) async fn remember_in_sieve_memory(
        &self,
        account: AccountId,
        keys: Vec<(String, i64)>,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: remember_in_sieve_memory")
    }
}
