//! (PostgreSQL) entries
#![allow(unused_variables, unused_imports)] // the stubs go as the methods are written

use super::PgStore;
use crate::directory::Directory;
use crate::error::Result;
use crate::index::IndexedHeaders;
use crate::model::*;

impl PgStore {
    pub(super) async fn list_messages(&self, mailbox: MailboxId) -> Result<Vec<MessageEntry>> {
        unimplemented!("PostgreSQL: list_messages")
    }

    pub(super) async fn list_newest(
        &self,
        mailbox: MailboxId,
        skip: usize,
        take: usize,
    ) -> Result<Vec<MessageData>> {
        unimplemented!("PostgreSQL: list_newest")
    }

    pub(super) async fn expunge(&self, mailbox: MailboxId, uids: &[Uid]) -> Result<()> {
        unimplemented!("PostgreSQL: expunge")
    }

    pub(super) async fn update_flags(
        &self,
        mailbox: MailboxId,
        uids: &[Uid],
        change: FlagChange,
        flags: u32,
        keywords: &[String],
        unchanged_since: Option<u64>,
    ) -> Result<Vec<MessageEntry>> {
        unimplemented!("PostgreSQL: update_flags")
    }

    pub(super) async fn copy_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>> {
        unimplemented!("PostgreSQL: copy_messages")
    }

    pub(super) async fn expunge_deleted(
        &self,
        mailbox: MailboxId,
        uids: Option<&[Uid]>,
    ) -> Result<Vec<Uid>> {
        unimplemented!("PostgreSQL: expunge_deleted")
    }

    pub(super) async fn move_messages(
        &self,
        from: MailboxId,
        uids: &[Uid],
        to: MailboxId,
    ) -> Result<Vec<(Uid, Uid)>> {
        unimplemented!("PostgreSQL: move_messages")
    }

    pub(super) async fn changes_since(&self, mailbox: MailboxId, modseq: u64) -> Result<Changes> {
        unimplemented!("PostgreSQL: changes_since")
    }

    pub(super) async fn message_data(
        &self,
        mailbox: MailboxId,
        uids: &[Uid],
    ) -> Result<Vec<MessageData>> {
        unimplemented!("PostgreSQL: message_data")
    }
}
