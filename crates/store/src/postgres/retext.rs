//! Full-text rows made again when what they hold changes
//! ([`TEXT_VERSION`]). After an upgrade, the background task of each
//! node takes the blobs in id order, a batch per transaction, under a
//! transaction-level advisory lock, so one node works at a time and a
//! node that stops leaves the rest to the others or to its next start:
//! the progress is kept in `meta` (`text_rebuilt_to`).
//!
//! Until it is done, a search reads the older rows of the blobs not yet
//! reached and gives the older version's answers for them (never an
//! error); deliveries write the new text from the start. A database
//! created by this version, or filled by `sluice migrate`, starts at
//! [`TEXT_VERSION`] (schema step 3) and has nothing to do.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::GenericClient;

use super::entries::Chunks;
use super::message::FoldedText;
use super::PgStore;
use crate::error::Result;
use crate::index::TEXT_VERSION;
use crate::sqlite::fts_batch::{FtsText, TextReader};

/// Any constant of our own: the nodes' turn at the work.
const LOCK: i64 = 0x736c_7569_7478;

/// Blobs per transaction.
const BATCH: i64 = 64;

/// How long a node waits while another has the turn, or after a failure.
const PAUSE: Duration = Duration::from_secs(5);

/// What one call of [`PgStore::retext_batch`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// The rows are all of [`TEXT_VERSION`].
    Done,
    /// A batch was made again; more may follow.
    More,
    /// Another node has the turn.
    Busy,
}

/// Starts this node's task; it ends when the work is done or the store
/// is dropped.
pub(super) fn start(store: &PgStore) {
    let inner = Arc::downgrade(&store.inner);
    tokio::spawn(async move {
        loop {
            let step = {
                let Some(inner) = inner.upgrade() else { return };
                PgStore { inner }.retext_batch().await
            };
            match step {
                Ok(Step::Done) => return,
                Ok(Step::More) => {}
                Ok(Step::Busy) => tokio::time::sleep(PAUSE).await,
                Err(e) => {
                    tracing::warn!(error = %e, "making the full-text rows again failed; trying later");
                    tokio::time::sleep(PAUSE).await;
                }
            }
        }
    });
}

impl PgStore {
    /// Makes every full-text row of an older [`TEXT_VERSION`] again, now,
    /// taking turns with the other nodes; the background task does the
    /// same, this is for callers that need it done.
    pub async fn retext_now(&self) -> Result<()> {
        loop {
            match self.retext_batch().await? {
                Step::Done => return Ok(()),
                Step::More => {}
                Step::Busy => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    /// Makes the full-text rows of the next batch of blobs again, when
    /// the database's rows are of an older [`TEXT_VERSION`].
    pub(crate) async fn retext_batch(&self) -> Result<Step> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let version: i64 = tx
            .query_one("SELECT value FROM meta WHERE key = 'text_version'", &[])
            .await?
            .get(0);
        if version >= TEXT_VERSION {
            return Ok(Step::Done);
        }
        let turn: bool = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&LOCK])
            .await?
            .get(0);
        if !turn {
            return Ok(Step::Busy);
        }
        let after: i64 = tx
            .query_opt("SELECT value FROM meta WHERE key = 'text_rebuilt_to'", &[])
            .await?
            .map_or(0, |r| r.get(0));
        // Shared locks: the sweeper, which locks FOR UPDATE SKIP LOCKED,
        // leaves these blobs to its next round.
        let blobs: Vec<i64> = tx
            .query(
                "SELECT id FROM blobs WHERE id > $1 AND complete ORDER BY id LIMIT $2 FOR SHARE",
                &[&after, &BATCH],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let Some(&last) = blobs.last() else {
            tx.execute(
                "UPDATE meta SET value = $1 WHERE key = 'text_version'",
                &[&TEXT_VERSION],
            )
            .await?;
            tx.execute("DELETE FROM meta WHERE key = 'text_rebuilt_to'", &[])
                .await?;
            tx.commit().await?;
            tracing::info!(version = TEXT_VERSION, "the full-text rows are made again");
            return Ok(Step::Done);
        };
        let upsert = tx
            .prepare(
                "INSERT INTO blob_text (blob_id, part, subject, addresses, body)
                 VALUES ($1, 0, $2, $3, $4)
                 ON CONFLICT (blob_id, part) DO UPDATE
                 SET subject = excluded.subject, addresses = excluded.addresses,
                     body = excluded.body",
            )
            .await?;
        // Sections are made again after the commit (sections.rs).
        tx.execute(
            "DELETE FROM blob_text WHERE blob_id = ANY($1) AND part > 0",
            &[&blobs],
        )
        .await?;
        let mut long = false;
        for blob in blobs {
            let t = FoldedText::of(&text_from_chunks(&tx, blob).await?);
            tx.execute(&upsert, &[&blob, &t.subject, &t.addresses, &t.body])
                .await?;
            if t.long {
                tx.execute(
                    "INSERT INTO blob_text_pending (blob_id) VALUES ($1) ON CONFLICT DO NOTHING",
                    &[&blob],
                )
                .await?;
                long = true;
            }
        }
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('text_rebuilt_to', $1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&last],
        )
        .await?;
        tx.commit().await?;
        if long {
            self.inner.sections_wake.notify_one();
        }
        Ok(Step::More)
    }
}

/// The index text of a stored blob, its chunks read one at a time in
/// order (the lead's negative number first), as the SQLite back end and
/// delivery make it.
async fn text_from_chunks(c: &impl GenericClient, blob: i64) -> Result<FtsText> {
    let mut reader = TextReader::new();
    let mut chunks = Chunks::of(blob);
    let mut ended = false;
    while reader.wants_more() {
        let Some(data) = chunks.next(c).await? else {
            ended = true;
            break;
        };
        reader.push(&data);
    }
    Ok(reader.finish(ended))
}
