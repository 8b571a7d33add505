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

    pub(super) async fn set_spam_threshold(
        &self,
        address: &str,
        threshold: Option<f32>,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: set_spam_threshold")
    }

    pub(super) async fn spam_training_batch(&self, limit: usize) -> Result<Vec<SpamTraining>> {
        unimplemented!("PostgreSQL: spam_training_batch")
    }

    pub(super) async fn train_spam(
        &self,
        account: Option<AccountId>,
        blob: Option<BlobId>,
        tokens: Vec<String>,
        spam: bool,
        done: Option<i64>,
    ) -> Result<bool> {
        unimplemented!("PostgreSQL: train_spam")
    }

    pub(super) async fn drop_spam_training(&self, id: i64) -> Result<()> {
        unimplemented!("PostgreSQL: drop_spam_training")
    }

    pub(super) async fn spam_model(
        &self,
        account: Option<AccountId>,
        tokens: Vec<String>,
    ) -> Result<SpamModel> {
        unimplemented!("PostgreSQL: spam_model")
    }

    pub(super) async fn spam_token_count(&self, account: Option<AccountId>) -> Result<u64> {
        unimplemented!("PostgreSQL: spam_token_count")
    }

    pub(super) async fn spam_token_rows(
        &self,
        account: Option<AccountId>,
    ) -> Result<Vec<(String, u32, u32, i64)>> {
        unimplemented!("PostgreSQL: spam_token_rows")
    }

    pub(super) async fn forget_spam_tokens(
        &self,
        account: Option<AccountId>,
        tokens: Vec<String>,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: forget_spam_tokens")
    }

    pub(super) async fn set_quota(&self, address: &str, limit_bytes: Option<u64>) -> Result<()> {
        unimplemented!("PostgreSQL: set_quota")
    }

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
