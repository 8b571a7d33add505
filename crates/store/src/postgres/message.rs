//! Writing one message and reading it back, as the SQLite back end does
//! (sqlite/message.rs): the message streams into pieces of
//! [`PIECE_SIZE`], each stored by a short statement of its own as it
//! fills, under a blob row created incomplete with the first one; the
//! delivery is one transaction that stores the last piece, the indexes,
//! the full-text row and one entry per mailbox, and completes the blob.
//!
//! Pieces are packed by [`chunk_codec::pack`] without a zstd dictionary:
//! this back end trains none (the SQLite back end's dictionaries live in
//! its own file and would have to be shared by every node), so a piece is
//! raw or plain zstd. Readers decode either.

use deadpool_postgres::GenericClient;
use futures_util::future::try_join_all;
use futures_util::TryFutureExt;
use tokio_postgres::types::ToSql;

use super::PgStore;
use crate::error::{Result, StoreError};
use crate::index::{IndexedHeaders, MessageIndex};
use crate::intake::{Intake, LEAD_SEQ, PIECE_SIZE};
use crate::keyword;
use crate::model::{BlobId, Delivery, DeliveryReceipt, MailboxId, Uid};
use crate::sqlite::fts_batch::FtsText;
use crate::sqlite::text_match::match_fold;
use crate::{chunk_codec, CHUNK_SIZE};

/// A chunk as [`chunk_codec::pack`] makes it: codec and bytes.
type Packed = (i64, Vec<u8>);

impl PgStore {
    /// Chunk `seq` of a blob as readers see it: [`CHUNK_SIZE`] bytes each
    /// but the last, joined from the pieces it is stored in, with a lead
    /// (the piece numbered [`LEAD_SEQ`]) read as if written first. A
    /// released blob stays readable until it is swept, as in SQLite: a
    /// session may still show its message (pins.rs).
    pub(super) async fn read_chunk(&self, blob: BlobId, seq: u32) -> Result<Option<Vec<u8>>> {
        let c = self.conn().await?;
        let lead_query = c
            .prepare_cached(
                "SELECT b.piece_size, c.codec, c.data FROM blobs b
                 LEFT JOIN blob_chunks c ON c.blob_id = b.id AND c.seq = $2
                 WHERE b.id = $1",
            )
            .await?;
        let lead_seq = LEAD_SEQ as i32;
        let Some(row) = c.query_opt(&lead_query, &[&blob, &lead_seq]).await? else {
            // Pieces cannot outlive their blob row here (foreign key).
            return Ok(None);
        };
        let piece_size = (row.get::<_, i64>(0) as usize).clamp(1, CHUNK_SIZE);
        let lead = match row.get::<_, Option<i32>>(1) {
            Some(codec) => chunk_codec::unpack_owned(i64::from(codec), row.get(2), blob)?,
            None => Vec::new(),
        };
        // The chunk is bytes [start, start + CHUNK_SIZE) of the lead
        // followed by the pieces.
        let start = seq as usize * CHUNK_SIZE;
        let mut out = Vec::new();
        if start < lead.len() {
            out.extend_from_slice(&lead[start..lead.len().min(start + CHUNK_SIZE)]);
        }
        let from = start.max(lead.len()) - lead.len();
        let want = CHUNK_SIZE - out.len();
        if want == 0 {
            return Ok(Some(out));
        }
        let (first, skip) = (from / piece_size, from % piece_size);
        let last = (from + want - 1) / piece_size;
        let pieces = c
            .prepare_cached(
                "SELECT seq, codec, data FROM blob_chunks
                 WHERE blob_id = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq",
            )
            .await?;
        let Ok(first) = i32::try_from(first) else {
            // Past any piece a blob can have.
            return Ok((!out.is_empty()).then_some(out));
        };
        let last = i32::try_from(last).unwrap_or(i32::MAX);
        let rows = c.query(&pieces, &[&blob, &first, &last]).await?;
        let mut skip = skip;
        for (expected, row) in (first..).zip(rows) {
            if row.get::<_, i32>(0) != expected {
                break; // a piece is missing: the blob ends before it
            }
            let codec: i32 = row.get(1);
            let p = chunk_codec::unpack_owned(i64::from(codec), row.get(2), blob)?;
            let want = CHUNK_SIZE - out.len();
            out.extend_from_slice(
                p.get(skip..)
                    .map_or(&[][..], |rest| &rest[..want.min(rest.len())]),
            );
            if p.len() < piece_size || out.len() == CHUNK_SIZE {
                break; // the last piece, or the chunk is full
            }
            skip = 0;
        }
        Ok((!out.is_empty()).then_some(out))
    }

    /// The indexed header fields of a complete blob.
    pub(super) async fn headers(&self, blob: BlobId) -> Result<Option<IndexedHeaders>> {
        let c = self.conn().await?;
        let query = c
            .prepare_cached(
                "SELECT hdr_from, hdr_to, hdr_cc, hdr_subject, hdr_date, hdr_message_id
                 FROM blobs WHERE id = $1 AND complete",
            )
            .await?;
        Ok(c.query_opt(&query, &[&blob])
            .await?
            .map(|r| IndexedHeaders {
                from: r.get(0),
                to: r.get(1),
                cc: r.get(2),
                subject: r.get(3),
                date: r.get(4),
                message_id: r.get(5),
            }))
    }
}

/// Streams a message into the database (see the module comment).
pub(crate) struct PgMessageWriter {
    store: PgStore,
    /// Created with the first full piece; small messages never need one
    /// before delivery.
    blob: Option<BlobId>,
    /// Pieces, structure and index window (intake.rs).
    intake: Intake,
    /// Delivered or aborted: nothing for `Drop` to clean up.
    finished: bool,
}

impl PgMessageWriter {
    pub(crate) fn new(store: PgStore) -> PgMessageWriter {
        PgMessageWriter {
            store,
            blob: None,
            intake: Intake::new(),
            finished: false,
        }
    }

    /// Stores a full piece, creating the blob with the first. Not in a
    /// transaction: a crash leaves an incomplete blob, which the sweeper
    /// takes once it is old enough (sweep.rs).
    async fn flush_piece(&mut self, seq: i64, data: Vec<u8>) -> Result<()> {
        let piece = chunk_codec::pack(data, None);
        let c = self.store.conn().await?;
        let blob = match self.blob {
            Some(blob) => blob,
            None => {
                let blob = new_blob(&c).await?;
                self.blob = Some(blob);
                blob
            }
        };
        insert_piece(&c, blob, seq, &piece).await?;
        Ok(())
    }

    /// Everything the delivery stores beside the entries, computed before
    /// its transaction opens.
    async fn stored(&mut self, delivery: &Delivery) -> Result<Stored> {
        let keywords = keyword::normalize(&delivery.keywords)?.join(" ");
        let mailbox_flags = delivery
            .mailbox_flags
            .iter()
            .map(|(flags, words)| Ok((*flags, keyword::normalize(words)?.join(" "))))
            .collect::<Result<Vec<_>>>()?;
        let taken = self.intake.take(&delivery.lead).await?;
        let mut index = taken.index;
        let text = FtsText::new(&mut index, &taken.header);
        let thread = crate::thread::thread_root(&taken.header);
        Ok(Stored {
            thread,
            pieces: taken
                .pieces
                .into_iter()
                .map(|(n, data)| (n, chunk_codec::pack(data, None)))
                .collect(),
            size: taken.size,
            structure: taken.structure,
            header: chunk_codec::pack(taken.header, None),
            text: FoldedText::of(&text),
            index,
            keywords,
            mailbox_flags,
        })
    }

    /// Removes the incomplete blob this writer started, if any.
    async fn discard(&self) {
        if let Some(blob) = self.blob {
            if let Err(e) = discard(&self.store, blob).await {
                // The sweeper takes it once it is old enough.
                tracing::warn!(blob, error = %e, "removing a message given up failed");
            }
        }
    }
}

/// A new, incomplete blob row.
async fn new_blob(c: &impl GenericClient) -> Result<BlobId> {
    let insert = c
        .prepare_cached("INSERT INTO blobs (created, piece_size) VALUES ($1, $2) RETURNING id")
        .await?;
    let row = c
        .query_one(&insert, &[&crate::sqlite::now(), &(PIECE_SIZE as i64)])
        .await?;
    Ok(row.get(0))
}

/// Stores piece `seq` of `blob`, as [`chunk_codec::pack`] made it.
async fn insert_piece(
    c: &impl GenericClient,
    blob: BlobId,
    seq: i64,
    (codec, data): &Packed,
) -> Result<()> {
    let insert = c
        .prepare_cached(
            "INSERT INTO blob_chunks (blob_id, seq, codec, data) VALUES ($1, $2, $3, $4)",
        )
        .await?;
    let (seq, codec) = (seq as i32, *codec as i32);
    c.execute(&insert, &[&blob, &seq, &codec, data]).await?;
    Ok(())
}

/// Deletes an incomplete blob; its pieces go with it (`ON DELETE CASCADE`).
/// A complete one is left alone: it was delivered after all.
async fn discard(store: &PgStore, blob: BlobId) -> Result<()> {
    let c = store.conn().await?;
    c.execute("DELETE FROM blobs WHERE id = $1 AND NOT complete", &[&blob])
        .await?;
    Ok(())
}

/// `text` as a column of `blob_text` holds it: [`match_fold`]ed, with
/// each NUL as U+FFFD. PostgreSQL's `text` cannot hold NUL (SQLite's
/// can); no IMAP needle holds one either (`CHAR8` excludes NUL, RFC 3501
/// §9), so no match could span it there, and a needle holding U+FFFD
/// (what undecodable bytes already read as) is all that sees the change.
fn folded(text: &str) -> String {
    let folded = match_fold(text);
    if folded.contains('\0') {
        folded.replace('\0', "\u{FFFD}")
    } else {
        folded
    }
}

/// The full-text row of a message (`blob_text`, part 0): the fields of the
/// SQLite back end's [`FtsText`], each folded by [`match_fold`], so that a
/// search is `LIKE '%folded needle%'` on them.
pub(super) struct FoldedText {
    pub(super) subject: String,
    pub(super) addresses: String,
    pub(super) body: String,
    /// More rows are to be made (sections.rs).
    pub(super) long: bool,
}

impl FoldedText {
    pub(super) fn of(text: &FtsText) -> FoldedText {
        FoldedText {
            subject: folded(&text.subject),
            addresses: folded(&text.addresses),
            body: folded(&text.body),
            long: text.long,
        }
    }
}

/// What a delivery writes beside the mailbox entries.
struct Stored {
    /// Pieces still to store, numbered and packed.
    pieces: Vec<(i64, Packed)>,
    size: u64,
    index: MessageIndex,
    /// `MessageStructure::to_bytes()`.
    structure: Vec<u8>,
    /// The top-level header block, packed.
    header: Packed,
    text: FoldedText,
    /// Keywords of the new entries, space-separated.
    keywords: String,
    /// Per-mailbox flags and normalised keywords (`Delivery::mailbox_flags`).
    mailbox_flags: Vec<(u32, String)>,
    /// The thread its header names (thread.rs); `None`: its own.
    thread: Option<i64>,
}

/// The delivery's transaction; returns the receipt once committed.
async fn commit_delivery(
    store: &PgStore,
    blob: Option<BlobId>,
    stored: &Stored,
    delivery: &Delivery,
) -> Result<DeliveryReceipt> {
    let mut c = store.conn().await?;
    let tx = c.transaction().await?;
    let blob = match blob {
        Some(blob) => blob,
        None => new_blob(&tx).await?,
    };
    // The rest in as few round trips as the statements allow: futures
    // polled together have their statements pipelined on the connection
    // (tokio-postgres sends each as soon as it is polled, without waiting
    // for the answers before it), and the server runs them in the order
    // they came. Only the mailbox rows' lock order matters between
    // concurrent deliveries, and `insert_entries` keeps it inside; the
    // blob is this transaction's alone until the commit, so marking it
    // complete need not wait for its references. The first error fails
    // the whole transaction.
    let pieces = try_join_all(
        stored
            .pieces
            .iter()
            .map(|(seq, piece)| insert_piece(&tx, blob, *seq, piece)),
    );
    let ((), (), entries, (), (), ()) = tokio::try_join!(
        pieces.map_ok(|_| ()),
        insert_parsed(&tx, blob, stored),
        insert_entries(&tx, blob, stored, delivery),
        insert_queued(&tx, blob, delivery),
        insert_upload(&tx, blob, delivery),
        complete_blob(&tx, blob, stored),
    )?;
    tx.commit().await?;
    Ok(DeliveryReceipt {
        blob,
        entries,
        size: stored.size,
    })
}

/// The blob's MIME structure, header block and full-text row.
async fn insert_parsed(c: &impl GenericClient, blob: BlobId, stored: &Stored) -> Result<()> {
    let (codec, header) = &stored.header;
    let codec = *codec as i32;
    let parsed = c
        .prepare_cached(
            "INSERT INTO blob_parsed (blob_id, structure, header_codec, header)
             VALUES ($1, $2, $3, $4)",
        )
        .await?;
    let t = &stored.text;
    let text = c
        .prepare_cached(
            "INSERT INTO blob_text (blob_id, part, subject, addresses, body)
             VALUES ($1, 0, $2, $3, $4)",
        )
        .await?;
    let parsed_row: [&(dyn ToSql + Sync); 4] = [&blob, &stored.structure, &codec, header];
    let text_row: [&(dyn ToSql + Sync); 4] = [&blob, &t.subject, &t.addresses, &t.body];
    tokio::try_join!(c.execute(&parsed, &parsed_row), c.execute(&text, &text_row))?;
    if t.long {
        c.execute(
            "INSERT INTO blob_text_pending (blob_id) VALUES ($1)",
            &[&blob],
        )
        .await?;
    }
    Ok(())
}

/// One entry per target mailbox, each with the UID and modseq its
/// mailbox row gives (the row lock orders concurrent deliveries).
async fn insert_entries(
    c: &impl GenericClient,
    blob: BlobId,
    stored: &Stored,
    delivery: &Delivery,
) -> Result<Vec<(MailboxId, Uid)>> {
    let take_modseq = c
        .prepare_cached(
            "UPDATE accounts SET modseq = modseq + 1
             WHERE id = (SELECT account_id FROM mailboxes WHERE id = $1) RETURNING modseq",
        )
        .await?;
    let allocate = c
        .prepare_cached(
            "UPDATE mailboxes SET uid_next = uid_next + 1, highest_modseq = $2
             WHERE id = $1 RETURNING uid_next - 1",
        )
        .await?;
    let insert = c
        .prepare_cached(
            "INSERT INTO messages (mailbox_id, uid, blob_id, size, flags, keywords, internal_date, modseq)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .await?;
    // Mailbox rows are locked in id order, whatever the order given, so
    // two deliveries to the same mailboxes never wait on each other in a
    // cycle (PostgreSQL would abort one as a deadlock; SQLite has one
    // writer). Each mailbox's numbers are the same in either order.
    // The accounts' rows come first, in id order (account_view.rs), then
    // each mailbox takes its account's next modseq.
    if delivery.mailboxes.is_empty() {
        return Ok(Vec::new());
    }
    c.query(
        "SELECT id FROM accounts WHERE id IN (SELECT account_id FROM mailboxes WHERE id = ANY($1))
         ORDER BY id FOR NO KEY UPDATE",
        &[&delivery.mailboxes],
    )
    .await?;
    let mut order: Vec<usize> = (0..delivery.mailboxes.len()).collect();
    order.sort_by_key(|&n| delivery.mailboxes[n]);
    let mut numbers = vec![(0, 0); order.len()];
    for n in order {
        let mailbox = delivery.mailboxes[n];
        let not_found = || StoreError::NotFound(format!("mailbox {mailbox}"));
        let modseq: i64 = c
            .query_opt(&take_modseq, &[&mailbox])
            .await?
            .ok_or_else(not_found)?
            .get(0);
        let row = c
            .query_opt(&allocate, &[&mailbox, &modseq])
            .await?
            .ok_or_else(not_found)?;
        numbers[n] = (row.get::<_, i64>(0), modseq);
    }
    let date = delivery.internal_date.unwrap_or_else(crate::sqlite::now);
    let size = stored.size as i64;
    let mut entries = Vec::with_capacity(delivery.mailboxes.len());
    let mut rows = Vec::with_capacity(delivery.mailboxes.len());
    for (n, (&mailbox, &(uid, modseq))) in delivery.mailboxes.iter().zip(&numbers).enumerate() {
        let (flags, keywords) = match stored.mailbox_flags.get(n) {
            Some((flags, words)) => (*flags as i32, words.as_str()),
            None => (delivery.flags as i32, stored.keywords.as_str()),
        };
        let uid32 = Uid::try_from(uid)
            .map_err(|_| StoreError::Corrupt(format!("mailbox {mailbox} is out of UIDs")))?;
        entries.push((mailbox, uid32));
        rows.push((mailbox, uid, flags, keywords, modseq));
    }
    // The entries themselves depend on nothing but the numbers: pipelined.
    let insert = &insert;
    try_join_all(
        rows.iter()
            .map(|(mailbox, uid, flags, keywords, modseq)| async move {
                c.execute(
                    insert,
                    &[mailbox, uid, &blob, &size, flags, keywords, &date, modseq],
                )
                .await
            }),
    )
    .await?;
    let thread = stored.thread.unwrap_or(blob);
    for (mailbox, _, _, _, modseq) in &rows {
        super::account_view::email_arrived(c, *mailbox, blob, thread, *modseq).await?;
    }
    Ok(entries)
}

/// One queue row per remote recipient.
async fn insert_queued(c: &impl GenericClient, blob: BlobId, delivery: &Delivery) -> Result<()> {
    if delivery.remote.is_empty() {
        return Ok(());
    }
    let insert = c
        .prepare_cached(
            "INSERT INTO queue (blob_id, sender, recipient, next_attempt, created,
                                notify, orcpt, envid, ret_full, eight_bit)
             VALUES ($1, $2, $3, $4, $4, $5, $6, $7, $8, $9)",
        )
        .await?;
    let now = crate::sqlite::now();
    let rows: Vec<_> = delivery
        .remote
        .iter()
        .enumerate()
        .map(|(n, recipient)| {
            let dsn = delivery.remote_dsn.get(n).cloned().unwrap_or_default();
            (recipient, i32::from(dsn.notify), dsn.orcpt)
        })
        .collect();
    let (insert, now) = (&insert, &now);
    try_join_all(rows.iter().map(|(recipient, notify, orcpt)| async move {
        c.execute(
            insert,
            &[
                &blob,
                &delivery.sender,
                recipient,
                now,
                notify,
                orcpt,
                &delivery.envid,
                &delivery.ret_full,
                &delivery.eight_bit,
            ],
        )
        .await
    }))
    .await?;
    Ok(())
}

/// The upload row of a blob kept as an account's upload, after the
/// expired ones are deleted (their blobs then go to the sweeper).
async fn insert_upload(c: &impl GenericClient, blob: BlobId, delivery: &Delivery) -> Result<()> {
    let Some(upload) = &delivery.upload else {
        return Ok(());
    };
    c.execute(
        "DELETE FROM uploads WHERE expires <= $1",
        &[&crate::clock::now()],
    )
    .await?;
    c.execute(
        "INSERT INTO uploads (blob_id, account_id, content_type, expires) VALUES ($1, $2, $3, $4)",
        &[
            &blob,
            &upload.account,
            &upload.content_type,
            &upload.expires,
        ],
    )
    .await?;
    Ok(())
}

/// Marks the blob complete, with its size and indexed header fields.
async fn complete_blob(c: &impl GenericClient, blob: BlobId, stored: &Stored) -> Result<()> {
    let update = c
        .prepare_cached(
            "UPDATE blobs SET size = $2, complete = true, hdr_from = $3, hdr_to = $4, hdr_cc = $5,
             hdr_subject = $6, hdr_date = $7, hdr_message_id = $8, hdr_day = $9
             WHERE id = $1",
        )
        .await?;
    let h = &stored.index.headers;
    c.execute(
        &update,
        &[
            &blob,
            &(stored.size as i64),
            &h.from,
            &h.to,
            &h.cc,
            &h.subject,
            &h.date,
            &h.message_id,
            &stored.index.sent_day,
        ],
    )
    .await?;
    Ok(())
}

#[async_trait::async_trait]
impl crate::MessageWriter for PgMessageWriter {
    async fn write(&mut self, mut data: &[u8]) -> Result<()> {
        self.intake.read(data).await?;
        while let Some((seq, piece)) = self.intake.next_piece(&mut data) {
            self.flush_piece(seq, piece).await?;
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
        let stored = self.stored(&delivery).await?;
        self.finished = true;
        let result = commit_delivery(&self.store, self.blob, &stored, &delivery).await;
        match &result {
            Ok(receipt) => {
                let m = metrics::get();
                m.deliveries
                    .get_or_create(&[("kind", "local")])
                    .inc_by(receipt.entries.len() as u64);
                m.deliveries
                    .get_or_create(&[("kind", "remote")])
                    .inc_by(delivery.remote.len() as u64);
                self.store
                    .notify(receipt.entries.iter().map(|&(mailbox, _)| mailbox));
                if stored.text.long {
                    self.store.inner.sections_wake.notify_one();
                }
                if !delivery.remote.is_empty() {
                    self.store.inner.queue_signal.notify_one();
                }
            }
            Err(_) => self.discard().await,
        }
        result
    }

    async fn abort(mut self: Box<Self>) {
        self.finished = true;
        self.discard().await;
    }
}

impl Drop for PgMessageWriter {
    fn drop(&mut self) {
        // A connection that dies mid-DATA drops its writer (and a delivery
        // refused before its transaction, as `Invalid`): free the pieces
        // already written. Without a runtime the sweeper takes them later.
        if self.finished {
            return;
        }
        let (Some(blob), Ok(runtime)) = (self.blob, tokio::runtime::Handle::try_current()) else {
            return;
        };
        let store = self.store.clone();
        runtime.spawn(async move {
            if let Err(e) = discard(&store, blob).await {
                tracing::warn!(blob, error = %e, "removing a message given up failed");
            }
        });
    }
}
