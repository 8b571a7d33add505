//! (PostgreSQL) mailboxes
#![allow(unused_variables, unused_imports)] // the stubs go as the methods are written

use super::PgStore;
use crate::directory::Directory;
use crate::error::Result;
use crate::index::IndexedHeaders;
use crate::model::*;

impl PgStore {
    pub(super) async fn mailbox(
        &self,
        account: AccountId,
        name: &str,
    ) -> Result<Option<MailboxInfo>> {
        unimplemented!("PostgreSQL: mailbox")
    }

    pub(super) async fn list_mailboxes(&self, account: AccountId) -> Result<Vec<MailboxInfo>> {
        unimplemented!("PostgreSQL: list_mailboxes")
    }

    pub(super) async fn create_mailbox(
        &self,
        account: AccountId,
        name: &str,
        special_use: Option<&str>,
    ) -> Result<MailboxInfo> {
        unimplemented!("PostgreSQL: create_mailbox")
    }

    pub(super) async fn delete_mailbox(&self, account: AccountId, name: &str) -> Result<()> {
        unimplemented!("PostgreSQL: delete_mailbox")
    }

    pub(super) async fn rename_mailbox(
        &self,
        account: AccountId,
        from: &str,
        to: &str,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: rename_mailbox")
    }

    pub(super) async fn set_subscribed(
        &self,
        account: AccountId,
        name: &str,
        subscribed: bool,
    ) -> Result<()> {
        unimplemented!("PostgreSQL: set_subscribed")
    }

    pub(super) async fn lost_subscriptions(&self, account: AccountId) -> Result<Vec<String>> {
        unimplemented!("PostgreSQL: lost_subscriptions")
    }

    pub(super) async fn special_use_of(
        &self,
        mailboxes: &[MailboxId],
        special_use: &str,
    ) -> Result<Vec<MailboxId>> {
        unimplemented!("PostgreSQL: special_use_of")
    }

    pub(super) async fn mailbox_status(&self, mailbox: MailboxId) -> Result<MailboxStatus> {
        unimplemented!("PostgreSQL: mailbox_status")
    }

    pub(super) async fn quota(&self, account: AccountId) -> Result<Quota> {
        unimplemented!("PostgreSQL: quota")
    }

    pub(super) async fn mailbox_keywords(&self, mailbox: MailboxId) -> Result<Vec<String>> {
        unimplemented!("PostgreSQL: mailbox_keywords")
    }

    pub(super) async fn uid_runs(&self, mailbox: MailboxId) -> Result<Vec<(Uid, u32)>> {
        unimplemented!("PostgreSQL: uid_runs")
    }

    pub(super) async fn first_unseen(&self, mailbox: MailboxId) -> Result<Option<Uid>> {
        unimplemented!("PostgreSQL: first_unseen")
    }

    pub(super) async fn claim_recent(&self, mailbox: MailboxId) -> Result<(Uid, Uid)> {
        unimplemented!("PostgreSQL: claim_recent")
    }
}
