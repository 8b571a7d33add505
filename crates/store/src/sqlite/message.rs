//! Writing one message: streamed in chunks, delivered in one durable
//! transaction that creates a single blob and one entry per recipient.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{params, Connection};

use super::fts_batch::FtsText;
use super::{now, Inner};
use crate::error::{Result, StoreError};
use crate::index::MessageIndex;
use crate::intake::{Intake, PIECE_SIZE};
use crate::keyword;
use crate::model::{BlobId, Delivery, DeliveryReceipt};
use crate::{chunk_codec, MessageWriter};

pub(crate) struct SqliteMessageWriter {
    inner: Arc<Inner>,
    /// Created with the first full piece; small messages never need one
    /// before delivery.
    blob: Option<BlobId>,
    /// Pieces, structure and index window (intake.rs).
    intake: Intake,
    finished: bool,
    /// This message's delivery, announced to the writer from the start
    /// (`Writer::expect_job`); taken when it is sent.
    expected: Option<super::writer::Expected>,
}

impl SqliteMessageWriter {
    pub(crate) fn new(inner: Arc<Inner>) -> Self {
        SqliteMessageWriter {
            expected: Some(inner.writer.expect_job()),
            inner,
            blob: None,
            intake: Intake::new(),
            finished: false,
        }
    }

    async fn flush_chunk(&mut self, seq: i64, data: Vec<u8>) -> Result<()> {
        // Compressed here, so the writer thread only stores it.
        let chunk = chunk_codec::pack(data, self.inner.dictionaries.current().as_deref());
        let blob = self.blob;
        // Not durable: the delivery that completes this blob fsyncs the log,
        // and a crash before it leaves an incomplete blob that recovery drops.
        let id = self
            .inner
            .writer
            .exec(false, move |c| {
                let id = match blob {
                    Some(id) => id,
                    None => new_blob(c)?,
                };
                insert_chunk(c, id, seq, &chunk)?;
                Ok(id)
            })
            .await?;
        self.blob = Some(id);
        Ok(())
    }
}

/// The highest blob id ever given: the larger of the highest id in the
/// table and `blob_id_last`, which the `blobs_id_kept` trigger raises when
/// a blob above it is deleted.
pub(crate) fn highest_blob_id(c: &Connection) -> Result<BlobId> {
    Ok(c.prepare_cached(
        "SELECT max(value, coalesce((SELECT max(id) FROM blobs), 0))
         FROM meta WHERE key = 'blob_id_last'",
    )?
    .query_row([], |r| r.get(0))?)
}

/// A new blob row. Its id is above every id ever given, not only above
/// the ids in the table now: the full-text index, in another file, keys
/// its rows by blob id (fts_file.rs).
fn new_blob(c: &Connection) -> Result<BlobId> {
    let id = highest_blob_id(c)? + 1;
    c.prepare_cached("INSERT INTO blobs (id, created, piece_size) VALUES (?1, ?2, ?3)")?
        .execute(params![id, now(), PIECE_SIZE as i64])?;
    Ok(id)
}

/// Stores chunk `seq` of `blob`, as [`chunk_codec::pack`] made it.
fn insert_chunk(
    c: &Connection,
    blob: BlobId,
    seq: i64,
    (codec, data): &(i64, Vec<u8>),
) -> Result<()> {
    c.prepare_cached(
        "INSERT INTO blob_chunks (blob_id, seq, codec, data) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![blob, seq, codec, data])?;
    Ok(())
}

#[async_trait]
impl MessageWriter for SqliteMessageWriter {
    async fn write(&mut self, mut data: &[u8]) -> Result<()> {
        self.intake.read(data).await?;
        while let Some((seq, piece)) = self.intake.next_piece(&mut data) {
            self.flush_chunk(seq, piece).await?;
        }
        Ok(())
    }

    fn size(&self) -> u64 {
        self.intake.size()
    }

    async fn deliver(mut self: Box<Self>, delivery: Delivery) -> Result<DeliveryReceipt> {
        if delivery.mailboxes.is_empty() && delivery.remote.is_empty() && delivery.upload.is_none()
        {
            return Err(StoreError::Invalid(
                "a delivery needs at least one recipient".into(),
            ));
        }
        let keywords = keyword::normalize(&delivery.keywords)?.join(" ");
        let mailbox_flags = delivery
            .mailbox_flags
            .iter()
            .map(|(flags, words)| Ok((*flags, keyword::normalize(words)?.join(" "))))
            .collect::<Result<Vec<_>>>()?;
        let expected = self.expected.take();
        let has_remote = !delivery.remote.is_empty();
        let delivery_is_upload = delivery.upload.is_some();
        let remote_count = delivery.remote.len() as u64;
        let taken = self.intake.take(&delivery.lead).await?;
        let blob = self.blob;
        let dictionary = self.inner.dictionaries.current();
        let dictionary = dictionary.as_deref();
        let chunks = taken
            .pieces
            .into_iter()
            .map(|(n, data)| (n, chunk_codec::pack(data, dictionary)))
            .collect();
        // The index row is written later, with others (fts_batch.rs).
        let mut index = taken.index;
        let text = FtsText::new(&mut index, &taken.header);
        self.finished = true;
        let thread = crate::thread::thread_root(&taken.header);
        let stored = Stored {
            thread,
            chunks,
            size: taken.size,
            index,
            structure: taken.structure,
            header: chunk_codec::pack(taken.header, dictionary),
            keywords,
            mailbox_flags,
        };
        let result = self
            .inner
            .writer
            .exec_expected(expected, true, move |c| {
                commit_delivery(c, blob, &stored, &delivery)
            })
            .await;
        match &result {
            // Durable now: IDLE sessions on the target mailboxes may look.
            Ok(receipt) => {
                // An upload is not mail: nothing searches it.
                if !(receipt.entries.is_empty() && delivery_is_upload) {
                    self.inner.fts.push(receipt.blob, text);
                }
                self.inner.dictionaries.delivered(receipt.blob, &self.inner);
                let m = metrics::get();
                m.deliveries
                    .get_or_create(&[("kind", "local")])
                    .inc_by(receipt.entries.len() as u64);
                m.deliveries
                    .get_or_create(&[("kind", "remote")])
                    .inc_by(remote_count);
                self.inner
                    .watchers
                    .notify(receipt.entries.iter().map(|&(mailbox, _)| mailbox));
                if has_remote {
                    self.inner.queue_signal.notify_one();
                }
                if delivery_is_upload {
                    // Expired uploads went in the same transaction.
                    self.inner.sweeper.wake();
                }
            }
            Err(_) => {
                if let Some(blob) = self.blob {
                    self.inner.writer.exec_detached(move |c| discard(c, blob));
                }
            }
        }
        result
    }

    async fn abort(mut self: Box<Self>) {
        self.finished = true;
        if let Some(blob) = self.blob {
            let _ = self
                .inner
                .writer
                .exec(false, move |c| discard(c, blob))
                .await;
        }
    }
}

impl Drop for SqliteMessageWriter {
    fn drop(&mut self) {
        // A connection that dies mid-DATA drops its writer: free the chunks
        // already written.
        if !self.finished {
            if let Some(blob) = self.blob {
                self.inner.writer.exec_detached(move |c| discard(c, blob));
            }
        }
    }
}

fn discard(c: &Connection, blob: BlobId) -> Result<()> {
    // A blob's parsed row is written only by the delivery that completes
    // it, so an incomplete blob has none; the delete is for safety.
    c.execute(
        "DELETE FROM blob_parsed WHERE blob_id IN (SELECT id FROM blobs WHERE id = ?1 AND complete = 0)",
        [blob],
    )?;
    c.execute("DELETE FROM blob_chunks WHERE blob_id = ?1", [blob])?;
    c.execute("DELETE FROM blobs WHERE id = ?1 AND complete = 0", [blob])?;
    Ok(())
}

/// What a delivery writes beside the mailbox entries.
struct Stored {
    /// Chunks still to store, numbered and packed: the last, partial one
    /// and the lead ([`Delivery::lead`]), or the whole message when it
    /// fitted in memory.
    chunks: Vec<(i64, (i64, Vec<u8>))>,
    size: u64,
    index: MessageIndex,
    /// `MessageStructure::to_bytes()`.
    structure: Vec<u8>,
    /// The top-level header block, packed ([`chunk_codec::pack`]).
    header: (i64, Vec<u8>),
    /// Keywords of the new entries, space-separated.
    keywords: String,
    /// Per-mailbox flags and normalised keywords (`Delivery::mailbox_flags`).
    mailbox_flags: Vec<(u32, String)>,
    /// The thread its header names (thread.rs); `None`: its own.
    thread: Option<i64>,
}

fn commit_delivery(
    c: &Connection,
    blob: Option<BlobId>,
    stored: &Stored,
    delivery: &Delivery,
) -> Result<DeliveryReceipt> {
    let Stored {
        chunks,
        size,
        index,
        structure,
        header,
        keywords,
        mailbox_flags,
        ..
    } = stored;
    let size = *size;
    let blob = match blob {
        Some(blob) => blob,
        None => new_blob(c)?,
    };
    for (seq, chunk) in chunks {
        insert_chunk(c, blob, *seq, chunk)?;
    }
    c.prepare_cached(
        "INSERT INTO blob_parsed (blob_id, structure, header_codec, header) VALUES (?1, ?2, ?3, ?4)",
    )?
    .execute(params![blob, structure, header.0, header.1])?;

    let date = delivery.internal_date.unwrap_or_else(now);
    let mut entries = Vec::with_capacity(delivery.mailboxes.len());
    for (n, &mailbox) in delivery.mailboxes.iter().enumerate() {
        let (flags, keywords) = match mailbox_flags.get(n) {
            Some((flags, words)) => (*flags, words.as_str()),
            None => (delivery.flags, keywords.as_str()),
        };
        let modseq = super::account_view::next_modseq(c, mailbox)?;
        let uid: u32 = c
            .prepare_cached(
                "UPDATE mailboxes SET uid_next = uid_next + 1 WHERE id = ?1 RETURNING uid_next - 1",
            )?
            .query_row([mailbox], |r| r.get(0))
            .map_err(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => {
                    StoreError::NotFound(format!("mailbox {mailbox}"))
                }
                e => e.into(),
            })?;
        c.prepare_cached(
            "INSERT INTO messages (mailbox_id, uid, blob_id, size, flags, keywords, internal_date, modseq)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            mailbox,
            uid,
            blob,
            size as i64,
            flags,
            keywords,
            date,
            modseq
        ])?;
        let thread = stored.thread.unwrap_or(blob);
        super::account_view::email_arrived(c, mailbox, blob, thread, modseq)?;
        entries.push((mailbox, uid));
    }
    for (n, recipient) in delivery.remote.iter().enumerate() {
        let dsn = delivery.remote_dsn.get(n).cloned().unwrap_or_default();
        c.prepare_cached(
            "INSERT INTO queue (blob_id, sender, recipient, next_attempt, created,
                                notify, orcpt, envid, ret_full, eight_bit)
             VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            blob,
            delivery.sender,
            recipient,
            now(),
            dsn.notify,
            dsn.orcpt,
            delivery.envid,
            delivery.ret_full,
            delivery.eight_bit
        ])?;
    }
    if let Some(upload) = &delivery.upload {
        let now = now();
        c.prepare_cached("DELETE FROM uploads WHERE expires <= ?1")?
            .execute([now])?;
        c.prepare_cached(
            "INSERT INTO uploads (blob_id, account_id, content_type, expires) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![blob, upload.account, upload.content_type, upload.expires])?;
    }
    // Complete only now, with its references counted: a complete blob
    // without any is in the `blobs_released` index for the sweeper, and
    // passing through it cost every delivery a page of log.
    let h = &index.headers;
    c.prepare_cached(
        "UPDATE blobs SET size = ?2, complete = 1, hdr_from = ?3, hdr_to = ?4, hdr_cc = ?5,
         hdr_subject = ?6, hdr_date = ?7, hdr_message_id = ?8, hdr_day = ?9
         WHERE id = ?1",
    )?
    .execute(params![
        blob,
        size as i64,
        h.from,
        h.to,
        h.cc,
        h.subject,
        h.date,
        h.message_id,
        index.sent_day
    ])?;
    Ok(DeliveryReceipt {
        blob,
        entries,
        size,
    })
}

#[cfg(test)]
mod tests {
    use crate::{Delivery, SqliteOptions, SqliteStore, Store};

    #[tokio::test]
    async fn a_message_is_announced_to_the_writer_until_it_is_sent_or_given_up() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
        store.add_domain("example.org").await.unwrap();
        let account = store.add_account("a@example.org", "pw").await.unwrap();
        let inbox = store.mailbox(account, "INBOX").await.unwrap().unwrap().id;
        let coming = || store.inner.writer.coming_now();
        assert_eq!(coming(), 0);

        let mut delivered = store.message_writer();
        let aborted = store.message_writer();
        let dropped = store.message_writer();
        assert_eq!(coming(), 3);
        delivered
            .write(b"Subject: x\r\n\r\nbody\r\n")
            .await
            .unwrap();
        let delivery = Delivery {
            mailboxes: vec![inbox],
            ..Default::default()
        };
        delivered.deliver(delivery).await.unwrap();
        assert_eq!(coming(), 2);
        aborted.abort().await;
        drop(dropped);
        assert_eq!(coming(), 0, "a writer given up no longer holds commits");
    }
}
