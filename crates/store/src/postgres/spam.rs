//! (PostgreSQL) spam
#![allow(unused_variables, unused_imports)] // the stubs go as the methods are written

use super::PgStore;
use crate::error::Result;
use crate::model::*;

impl PgStore {
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
}
