//! The sections of a long message's whole text (text_sections.rs) as
//! `blob_text` rows numbered from 1, beside the message's main row (0).
//!
//! They are made after the delivery, never inside it: a delivery holds
//! one piece of a message in memory, and a long message's text can be
//! megabytes. The delivery's transaction leaves the blob in
//! `blob_text_pending` and wakes the node's writer, a task that makes the
//! rows in a transaction of their own, reading the chunks one at a time,
//! and deletes the pending row with them. Nodes share the work by locking
//! the pending rows (`FOR UPDATE SKIP LOCKED`); each writer also looks
//! at start and every [`ROUND`], so what a stopped node left is done.
//!
//! A search with TEXT or BODY first makes the rows still pending for its
//! mailbox's messages (waiting for a node already at one), so it answers
//! as the SQLite back end does, which writes the sections with the
//! message's row.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::GenericClient;

use super::entries::Chunks;
use super::message::FoldedText;
use super::PgStore;
use crate::error::Result;
use crate::model::{BlobId, MailboxId, SearchKey};
use crate::sqlite::fts_batch::FtsText;
use crate::sqlite::text_match::text_keys;
use crate::text_sections::Sections;

/// How often the writer looks for work when nobody wakes it.
const ROUND: Duration = Duration::from_secs(300);

/// Starts this node's writer; it ends when the store is dropped.
pub(super) fn start(store: &PgStore) {
    let inner = Arc::downgrade(&store.inner);
    tokio::spawn(async move {
        loop {
            let Some(inner) = inner.upgrade() else { return };
            let store = PgStore { inner };
            if let Err(e) = store.write_pending_sections(None).await {
                tracing::warn!(error = %e, "indexing the text of long messages failed; trying later");
            }
            // A wake while it worked left a permit: this returns at once.
            let wake = Arc::clone(&store.inner.sections_wake);
            drop(store);
            let _ = tokio::time::timeout(ROUND, wake.notified()).await;
        }
    });
}

/// Whether `key` holds a TEXT or BODY key.
pub(super) fn has_text_key(key: &SearchKey) -> bool {
    let mut keys = Vec::new();
    text_keys(key, &mut keys);
    !keys.is_empty()
}

impl PgStore {
    /// Makes the section rows of pending blobs: of all of them, leaving
    /// those another node is at (`mailbox` None), or of those `mailbox`'s
    /// messages hold, waiting for a node at one.
    pub(crate) async fn write_pending_sections(&self, mailbox: Option<MailboxId>) -> Result<()> {
        let mut c = self.conn().await?;
        loop {
            // Looked for outside a transaction: mostly there is none.
            let pending = match &mailbox {
                None => {
                    c.query_opt("SELECT blob_id FROM blob_text_pending LIMIT 1", &[])
                        .await?
                }
                Some(mailbox) => {
                    c.query_opt(
                        "SELECT p.blob_id FROM blob_text_pending p
                         JOIN messages m ON m.blob_id = p.blob_id
                         WHERE m.mailbox_id = $1 LIMIT 1",
                        &[mailbox],
                    )
                    .await?
                }
            };
            let Some(row) = pending else { return Ok(()) };
            let mut blob: BlobId = row.get(0);
            let tx = c.transaction().await?;
            // A node at it holds its row: the writer leaves it and takes
            // another, a search waits (and finds it gone: done).
            let held = if mailbox.is_none() {
                tx.query_opt(
                    "SELECT blob_id FROM blob_text_pending LIMIT 1 FOR UPDATE SKIP LOCKED",
                    &[],
                )
                .await?
            } else {
                tx.query_opt(
                    "SELECT blob_id FROM blob_text_pending WHERE blob_id = $1 FOR UPDATE",
                    &[&blob],
                )
                .await?
            };
            match held {
                Some(row) => blob = row.get(0),
                None if mailbox.is_some() => continue,
                // Every pending row is some other node's now.
                None => return Ok(()),
            }
            write_sections(&tx, blob).await?;
            tx.execute("DELETE FROM blob_text_pending WHERE blob_id = $1", &[&blob])
                .await?;
            tx.commit().await?;
        }
    }
}

/// Writes `blob`'s section rows in place of any it had, its chunks read
/// one at a time in order (the lead's negative number first).
async fn write_sections(c: &impl GenericClient, blob: BlobId) -> Result<()> {
    c.execute(
        "DELETE FROM blob_text WHERE blob_id = $1 AND part > 0",
        &[&blob],
    )
    .await?;
    let insert = c
        .prepare_cached(
            "INSERT INTO blob_text (blob_id, part, subject, addresses, body)
             VALUES ($1, $2, '', '', $3)",
        )
        .await?;
    let mut sections = Sections::new();
    let mut ready = Vec::new();
    let mut part = 0i32;
    let mut chunks = Chunks::of(blob);
    loop {
        let chunk = chunks.next(c).await?;
        match &chunk {
            Some(data) => sections.push(data, &mut ready),
            None => std::mem::replace(&mut sections, Sections::new()).finish(&mut ready),
        }
        for text in ready.drain(..) {
            part += 1;
            let body = FoldedText::of(&FtsText::section(&text)).body;
            c.execute(&insert, &[&blob, &part, &body]).await?;
        }
        if chunk.is_none() {
            return Ok(());
        }
    }
}
