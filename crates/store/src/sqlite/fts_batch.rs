//! Full-text index rows written in batches, not in each delivery's commit,
//! into the index file (fts_file.rs) by its own writer thread.
//!
//! FTS5 writes a new segment (its leaf pages, and the index's structure
//! record) for every transaction that inserts into it, however few rows
//! it holds. In the delivery's own commit, a handful of messages at a time
//! under group commit, that cost about 7.5 bytes of write-ahead log per
//! byte of mail: half of all the log a delivery wrote. So a delivery
//! leaves its row here, in memory, and the rows go into the index
//! together, in jobs of the index's writer of [`SLICE_ROWS`] each:
//! once [`BATCH_ROWS`] rows or [`BATCH_BYTES`] of text wait, or [`DELAY`]
//! after the first,
//! and always before a search reads the index ([`FtsBatch::flush`]).
//!
//! A long message's whole text goes in with its row, as rows of its own
//! (text_sections.rs), in the same job: read from the stored chunks a
//! piece at a time, so it never sits whole in memory.
//!
//! Nothing is lost in a crash or a kill: a row is derived from the stored
//! message. When the store opens, complete blobs without an index row
//! (`fts_docsize` holds one per indexed row) are read again from their
//! chunks and indexed, and rows of blobs gone are deleted, in the
//! background ([`FtsBatch::start`]).

use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection, OpenFlags};

use super::entries::each_chunk;
use super::fts_file;
use super::terms::{self, SeenWords};
use super::writer::Writer;
use crate::error::Result;
use crate::index::{header_block, index_long_message, index_message, MessageIndex};
use crate::model::BlobId;
use crate::segment::spaced;
use crate::text_sections::Sections;
use crate::INDEX_WINDOW;

/// Rows that make a batch worth writing at once.
const BATCH_ROWS: usize = 2048;

/// Text (bytes) that makes a batch worth writing at once, so waiting rows
/// of large messages stay a bounded amount of memory.
const BATCH_BYTES: usize = 8 * 1024 * 1024;

/// Rows written per index job: one segment each. In the database's own
/// writer a whole batch in one job kept deliveries waiting, so it went in
/// slices of 512; the index has a writer of its own now, and fewer,
/// larger segments mean fewer merges, each rewriting the index's pages
/// through its log. A search that flushes waits for at most one job.
const SLICE_ROWS: usize = BATCH_ROWS;

/// Longest a row waits in memory when few arrive.
const DELAY: Duration = Duration::from_secs(5);

/// Most pages one merge job writes: an eighth of the log's limit, within
/// these bounds (about 8 MiB with the default 64 MiB limit).
const MERGE_PAGES: (u64, u64) = (64, 2048);

/// Longest a merge waits for the index's log to be cut.
const MERGE_WAIT: Duration = Duration::from_secs(5);

/// What one blob puts in the index: its columns' text, with the
/// characters of scripts written without spaces set apart
/// ([`crate::segment`]).
pub(crate) struct FtsText {
    pub(crate) subject: String,
    /// Decoded addresses, then the whole header block: TEXT searches every
    /// column, so a word only in an X- field is found too (RFC 3501
    /// §6.4.4: TEXT is header and body).
    pub(crate) addresses: String,
    pub(crate) body: String,
    /// The message's text goes on past the index window: `body` is empty,
    /// and its whole body text is in rows of its sections
    /// ([`crate::text_sections`]).
    pub(crate) long: bool,
}

impl FtsText {
    /// The index text of a message, from what delivery computed; takes
    /// the body text out of `index`.
    pub(crate) fn new(index: &mut MessageIndex, header: &[u8]) -> FtsText {
        let h = &index.headers;
        // A long message's body text is all in its sections: its row
        // keeps the header text alone, and waits in memory small.
        let body = if index.text_cut {
            String::new()
        } else {
            std::mem::take(&mut index.body_text)
        };
        FtsText {
            subject: spaced(&h.subject).into_owned(),
            addresses: spaced(&format!(
                "{} {} {}\n{}",
                h.from,
                h.to,
                h.cc,
                String::from_utf8_lossy(header)
            ))
            .into_owned(),
            body: match spaced(&body) {
                Cow::Borrowed(_) => body,
                Cow::Owned(cut) => cut,
            },
            long: index.text_cut,
        }
    }

    /// A section of a long message's text, as a row of its own.
    pub(crate) fn section(text: &str) -> FtsText {
        FtsText {
            subject: String::new(),
            addresses: String::new(),
            body: spaced(text).into_owned(),
            long: false,
        }
    }

    fn len(&self) -> usize {
        self.subject.len() + self.addresses.len() + self.body.len()
    }
}

#[derive(Default)]
struct Waiting {
    rows: Vec<(BlobId, FtsText)>,
    bytes: usize,
    /// When the oldest waiting row came.
    since: Option<Instant>,
    /// Write jobs queued and not yet answered ([`Writing`]): rows taken
    /// out of `rows` by one of them may not be committed yet.
    writing: usize,
    stop: bool,
}

/// A write job in the index writer's queue, counted in
/// [`Waiting::writing`] from before it is queued until its caller has
/// heard back (or gave up waiting).
struct Writing<'a>(&'a Shared);

impl<'a> Writing<'a> {
    fn new(shared: &'a Shared) -> Writing<'a> {
        shared.waiting.lock().expect("fts lock").writing += 1;
        Writing(shared)
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.waiting.lock().expect("fts lock").writing -= 1;
    }
}

struct Shared {
    waiting: Mutex<Waiting>,
    /// A read connection to the database, for index jobs to look up which
    /// of their blobs still exist (fts_file.rs says why not attached).
    lookup: Mutex<Connection>,
    cond: Condvar,
    /// True once the rows a crash left out are back in the index: a
    /// search waits for it, so it never misses mail delivered before.
    recovered: tokio::sync::watch::Sender<bool>,
    /// Raw words whose terms are in the index's `terms` (terms.rs).
    seen: Mutex<SeenWords>,
}

/// Rows waiting for the index, and the thread that writes them.
#[derive(Clone)]
pub(crate) struct FtsBatch {
    shared: Arc<Shared>,
    /// The index file's writer.
    writer: Writer,
    /// Most pages one merge job writes ([`MERGE_PAGES`]).
    merge_pages: i64,
}

impl FtsBatch {
    /// Starts the thread that writes waiting rows through `writer`, the
    /// writer of the index file of the database at `path`, whose log is
    /// bounded to `wal_limit` bytes; it first brings the index in line
    /// with the database (rows a crash left out or left behind).
    pub(crate) fn start(path: &Path, writer: Writer, wal_limit: u64) -> Result<FtsBatch> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(10))?;
        fts_file::attach(&conn, path)?;
        let lookup = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        lookup.busy_timeout(Duration::from_secs(10))?;
        let batch = FtsBatch {
            shared: Arc::new(Shared {
                waiting: Mutex::default(),
                lookup: Mutex::new(lookup),
                cond: Condvar::new(),
                recovered: tokio::sync::watch::Sender::new(false),
                seen: Mutex::default(),
            }),
            writer,
            merge_pages: (wal_limit / 8 / 4096).clamp(MERGE_PAGES.0, MERGE_PAGES.1) as i64,
        };
        let b = batch.clone();
        std::thread::Builder::new()
            .name("store-fts".into())
            .spawn(move || b.run(&conn))
            .expect("spawn store full-text thread");
        Ok(batch)
    }

    /// Leaves the index row of `blob`, delivered and committed.
    pub(crate) fn push(&self, blob: BlobId, text: FtsText) {
        let mut w = self.shared.waiting.lock().expect("fts lock");
        w.bytes += text.len();
        w.rows.push((blob, text));
        w.since.get_or_insert_with(Instant::now);
        if w.rows.len() >= BATCH_ROWS || w.bytes >= BATCH_BYTES || w.rows.len() == 1 {
            // The first row starts the thread's clock; a full batch goes now.
            self.shared.cond.notify_one();
        }
    }

    fn is_empty(&self) -> bool {
        self.shared
            .waiting
            .lock()
            .expect("fts lock")
            .rows
            .is_empty()
    }

    /// Writes every waiting row, for a search about to read the index.
    ///
    /// A job takes its rows out of the waiting ones when it runs, and
    /// commits them after: with no row waiting, rows another job took may
    /// still be uncommitted. While such a job may exist, this queues one
    /// more behind it (the writer runs its jobs in order) and waits for
    /// it, so the search sees every row pushed before it.
    ///
    /// Once its own job has committed, every job queued before it has too:
    /// only rows still waiting matter then, not jobs in flight. (Waiting
    /// for no job to be in flight at all livelocked concurrent searches:
    /// each one's job kept the others looping.)
    pub(crate) async fn flush(&self) -> Result<()> {
        let mut recovered = self.shared.recovered.subscribe();
        recovered
            .wait_for(|done| *done)
            .await
            .map_err(|_| crate::error::StoreError::Closed)?;
        {
            let w = self.shared.waiting.lock().expect("fts lock");
            if w.rows.is_empty() && w.writing == 0 {
                return Ok(());
            }
        }
        loop {
            let _writing = Writing::new(&self.shared);
            let b = self.clone();
            self.writer
                .housekeeping(move |c| b.write_some(c, SLICE_ROWS))
                .await?;
            if self.is_empty() {
                return Ok(());
            }
        }
    }

    /// Writes the waiting rows a slice at a time, each in its own writer
    /// job, from a plain thread.
    fn write_slices_blocking(&self) -> Result<()> {
        while !self.is_empty() {
            let _writing = Writing::new(&self.shared);
            let b = self.clone();
            self.writer
                .housekeeping_blocking(move |c| b.write_some(c, SLICE_ROWS))?;
        }
        Ok(())
    }

    /// Merges the index's segments, [`FtsBatch::merge_pages`] at most per
    /// writer job, until nothing is left to merge or rows wait to be
    /// written (they go first; the merge goes on after them). While the
    /// index's log waits to be cut, a merge waits for the writer to cut
    /// it (up to [`MERGE_WAIT`]): merging can wait, and this way it never
    /// pushes the log further past its bound.
    fn merge_blocking(&self) -> Result<()> {
        let pages = self.merge_pages;
        loop {
            {
                let w = self.shared.waiting.lock().expect("fts lock");
                if w.stop || ready(&w) {
                    return Ok(());
                }
            }
            let deadline = Instant::now() + MERGE_WAIT;
            while self.writer.log_over_limit() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if !self
                .writer
                .housekeeping_blocking(move |c| merge_step(c, pages))?
            {
                return Ok(());
            }
        }
    }

    /// Writes the waiting rows into the index in the index writer's
    /// current transaction, up to the first long one
    /// ([`FtsBatch::write_some`]); returns how many went in. Rows of
    /// blobs gone meanwhile (delivered, expunged and swept before the
    /// batch) are dropped.
    fn write(&self, c: &Connection) -> Result<usize> {
        self.write_some(c, usize::MAX)
    }

    /// Deletes the rows of `swept`, blobs whose deletion has committed.
    pub(crate) async fn forget(&self, swept: Vec<BlobId>) -> Result<()> {
        if swept.is_empty() {
            return Ok(());
        }
        self.writer
            .housekeeping(move |c| delete_rows(c, &swept))
            .await
    }

    /// Like [`FtsBatch::forget`], for a plain thread.
    pub(crate) fn forget_blocking(&self, swept: Vec<BlobId>) -> Result<()> {
        if swept.is_empty() {
            return Ok(());
        }
        self.writer
            .housekeeping_blocking(move |c| delete_rows(c, &swept))
    }

    /// Like [`FtsBatch::write`], for the `limit` oldest rows, and none
    /// past the first long one: its sections may be megabytes of text,
    /// and a job is one transaction, whose log the writer cuts only after
    /// it.
    fn write_some(&self, c: &Connection, limit: usize) -> Result<usize> {
        let rows: Vec<_> = {
            let mut w = self.shared.waiting.lock().expect("fts lock");
            let n = job_rows(&w.rows, limit);
            let rows: Vec<_> = w.rows.drain(..n).collect();
            w.bytes -= rows.iter().map(|(_, t)| t.len()).sum::<usize>();
            if w.rows.is_empty() {
                w.since = None;
            }
            rows
        };
        let stored = self.stored(rows.iter().map(|(blob, _)| *blob))?;
        let mut insert = c.prepare_cached(
            "INSERT INTO fts (rowid, subject, addresses, body)
             SELECT ?1, ?2, ?3, ?4 WHERE NOT EXISTS (SELECT 1 FROM fts_docsize WHERE id = ?1)",
        )?;
        let mut written = 0;
        let mut kept = Vec::with_capacity(rows.len());
        let mut long = Vec::new();
        for ((blob, t), stored) in rows.iter().zip(stored) {
            if stored {
                let new = insert.execute(params![blob, t.subject, t.addresses, t.body])?;
                if new > 0 && t.long {
                    long.push(*blob);
                }
                written += new;
                kept.push(t);
            }
        }
        self.add_terms(
            c,
            kept.iter()
                .flat_map(|t| [t.subject.as_str(), t.addresses.as_str(), t.body.as_str()]),
        )?;
        for blob in long {
            self.write_sections(c, blob)?;
        }
        Ok(written)
    }

    /// Puts the words of `texts` not seen before into the terms table.
    fn add_terms<'t>(&self, c: &Connection, texts: impl Iterator<Item = &'t str>) -> Result<()> {
        let mut seen = self.shared.seen.lock().expect("fts seen lock");
        let words = seen.unseen(texts);
        if let Err(e) = terms::add(c, &words) {
            // The job fails whole; its words must be tokenized again.
            seen.forget();
            return Err(e);
        }
        Ok(())
    }

    /// Writes the rows of the sections of `blob`'s whole text, read from
    /// its chunks (in a read transaction of the lookup connection, as
    /// short as the message allows).
    fn write_sections(&self, c: &Connection, blob: BlobId) -> Result<()> {
        let conn = self.shared.lookup.lock().expect("fts lookup lock");
        let tx = conn.unchecked_transaction()?;
        let mut insert = c.prepare_cached("INSERT INTO fts (rowid, body) VALUES (?1, ?2)")?;
        let mut n = 0;
        each_section(&tx, blob, |text| {
            n += 1;
            let row = FtsText::section(&text);
            insert.execute(params![fts_file::section_rowid(blob, n), row.body])?;
            self.add_terms(c, std::iter::once(row.body.as_str()))?;
            Ok(true)
        })?;
        drop(insert);
        tx.commit()?;
        Ok(())
    }

    /// Whether each of `blobs` is complete in the database now, looked up
    /// in one short read transaction.
    fn stored(&self, blobs: impl Iterator<Item = BlobId>) -> Result<Vec<bool>> {
        let conn = self.shared.lookup.lock().expect("fts lookup lock");
        let tx = conn.unchecked_transaction()?;
        let mut find = tx.prepare_cached("SELECT 1 FROM blobs WHERE id = ?1 AND complete = 1")?;
        let stored = blobs
            .map(|blob| find.exists([blob]))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        drop(find);
        tx.commit()?;
        Ok(stored)
    }

    fn run(&self, conn: &Connection) {
        if let Err(e) = self.recover(conn) {
            tracing::warn!(error = %e, "indexing messages left unindexed failed");
        }
        if let Err(e) = self.delete_orphans(conn) {
            tracing::warn!(error = %e, "deleting index rows of swept messages failed");
        }
        self.shared.recovered.send_replace(true);
        loop {
            let due = {
                let w = self.shared.waiting.lock().expect("fts lock");
                let (w, _) = self
                    .shared
                    .cond
                    .wait_timeout_while(w, DELAY, |w| !w.stop && !ready(w))
                    .expect("fts lock");
                if w.stop {
                    return;
                }
                ready(&w)
            };
            if due {
                // On a full disk the disk's state says it once (space.rs).
                match self.write_slices_blocking() {
                    Err(e) if e.is_full() => {
                        tracing::debug!(error = %e, "writing the full-text index failed")
                    }
                    Err(e) => tracing::warn!(error = %e, "writing the full-text index failed"),
                    Ok(()) => {}
                }
                match self.merge_blocking() {
                    Err(e) if e.is_full() => {
                        tracing::debug!(error = %e, "merging the full-text index failed")
                    }
                    Err(e) => tracing::warn!(error = %e, "merging the full-text index failed"),
                    Ok(()) => {}
                }
            }
        }
    }

    /// Indexes complete blobs that have no index row: the rows a crash
    /// took before their batch was written. Reads on the thread's own
    /// connection, a batch at a time, and writes each batch at once.
    fn recover(&self, conn: &Connection) -> Result<()> {
        let total = in_id_batches(
            conn,
            "SELECT id FROM blobs b WHERE id > ?1 AND complete = 1 AND refcount > 0
             AND NOT EXISTS (SELECT 1 FROM fts_index.fts_docsize d WHERE d.id = b.id)
             ORDER BY id LIMIT ?2",
            |ids| {
                for blob in ids {
                    let text = text_from_chunks(conn, blob)?;
                    self.push(blob, text);
                }
                self.write_slices_blocking()?;
                self.merge_blocking()
            },
        )?;
        if total > 0 {
            tracing::info!(
                messages = total,
                "indexed messages missing from the full-text index"
            );
        }
        Ok(())
    }

    /// Deletes the rows of blobs no longer in the database: the ones a
    /// crash left between a sweep's commit and its index job.
    fn delete_orphans(&self, conn: &Connection) -> Result<()> {
        let total = in_id_batches(
            conn,
            "SELECT id FROM fts_index.fts_docsize d WHERE id > ?1
             AND NOT EXISTS (SELECT 1 FROM blobs b WHERE b.id = d.id)
             ORDER BY id LIMIT ?2",
            |ids| self.forget_blocking(ids),
        )?;
        if total > 0 {
            tracing::info!(rows = total, "deleted index rows of swept messages");
        }
        Ok(())
    }
}

/// Deletes the index rows of `blobs` that it holds, their sections'
/// too (deleting a row it does not hold would leave a tombstone in a
/// contentless table).
fn delete_rows(c: &Connection, blobs: &[BlobId]) -> Result<()> {
    let mut held = c.prepare_cached("SELECT 1 FROM fts_docsize WHERE id = ?1")?;
    let mut sections = c.prepare_cached("SELECT id FROM fts_docsize WHERE id BETWEEN ?1 AND ?2")?;
    let mut delete = c.prepare_cached("DELETE FROM fts WHERE rowid = ?1")?;
    for &blob in blobs {
        if held.exists([blob])? {
            delete.execute([blob])?;
        }
        let (low, high) = fts_file::section_rowids(blob);
        let rows = sections
            .query_map([low, high], |r| r.get::<_, i64>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        for row in rows {
            delete.execute([row])?;
        }
    }
    Ok(())
}

/// One bounded step of merging: FTS5 merges segments until about
/// `pages` pages are written. True when it did any work.
fn merge_step(c: &Connection, pages: i64) -> Result<bool> {
    let before = c.total_changes();
    c.execute("INSERT INTO fts (fts, rank) VALUES ('merge', ?1)", [pages])?;
    // FTS5 counts a merge that did work as two changes or more.
    Ok(c.total_changes() - before >= 2)
}

/// How many of the waiting `rows` one job writes: `limit`, and none past
/// the first long one ([`FtsBatch::write_some`]).
fn job_rows(rows: &[(BlobId, FtsText)], limit: usize) -> usize {
    let n = rows.len().min(limit);
    rows[..n]
        .iter()
        .position(|(_, t)| t.long)
        .map_or(n, |first| first + 1)
}

/// Whether the waiting rows should be written now.
fn ready(w: &Waiting) -> bool {
    w.rows.len() >= BATCH_ROWS
        || w.bytes >= BATCH_BYTES
        || w.since.is_some_and(|t| t.elapsed() >= DELAY)
}

/// Reads a stored message's chunks, in order, into its index text as
/// delivery makes it: header fields and text parts, attachments left out,
/// up to [`INDEX_WINDOW`]. The same for both back ends.
pub(crate) struct TextReader {
    head: Vec<u8>,
    tap: mime_tree::PartRewriter,
}

impl TextReader {
    pub(crate) fn new() -> TextReader {
        TextReader {
            head: Vec::new(),
            tap: mime_tree::PartRewriter::text_only(),
        }
    }

    /// Whether the text still wants chunks (the window is not full).
    pub(crate) fn wants_more(&self) -> bool {
        self.head.len() < INDEX_WINDOW
    }

    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.tap.push(chunk, &mut self.head);
    }

    /// The text, once the chunks ran out (`ended`) or the window filled.
    pub(crate) fn finish(mut self, ended: bool) -> FtsText {
        if ended {
            self.tap.finish(&mut self.head);
        }
        let mut index = if self.head.len() >= INDEX_WINDOW {
            self.head.truncate(INDEX_WINDOW);
            index_long_message(&self.head)
        } else {
            index_message(&self.head)
        };
        FtsText::new(&mut index, header_block(&self.head))
    }
}

/// Hands the sections of `blob`'s whole text ([`crate::text_sections`]),
/// read from its chunks one at a time, to `each` in order, until it
/// answers false.
pub(crate) fn each_section(
    c: &Connection,
    blob: BlobId,
    mut each: impl FnMut(String) -> Result<bool>,
) -> Result<()> {
    let mut sections = Sections::new();
    let mut ready = Vec::new();
    let mut stopped = false;
    each_chunk(c, blob, |data| {
        sections.push(data, &mut ready);
        for text in ready.drain(..) {
            if !each(text)? {
                stopped = true;
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    if stopped {
        return Ok(());
    }
    sections.finish(&mut ready);
    for text in ready {
        if !each(text)? {
            return Ok(());
        }
    }
    Ok(())
}

/// The index text of a stored blob, read from its chunks (the lead,
/// numbered before the others, comes first) as delivery reads the
/// message ([`TextReader`]).
pub(crate) fn text_from_chunks(c: &Connection, blob: BlobId) -> Result<FtsText> {
    let mut reader = TextReader::new();
    each_chunk(c, blob, |data| {
        reader.push(data);
        Ok(reader.wants_more())
    })?;
    // The chunks ran out unless the window filled.
    let ended = reader.wants_more();
    Ok(reader.finish(ended))
}

pub(crate) struct FtsBatchGuard(pub(crate) FtsBatch);

impl std::ops::Deref for FtsBatchGuard {
    type Target = FtsBatch;

    fn deref(&self) -> &FtsBatch {
        &self.0
    }
}

impl Drop for FtsBatchGuard {
    fn drop(&mut self) {
        let batch = &self.0;
        batch.shared.waiting.lock().expect("fts lock").stop = true;
        batch.shared.cond.notify_one();
        if batch.is_empty() {
            return;
        }
        // The last rows go in before the store closes (up to a long
        // message's: the rest is for the next open); a process that
        // exits before they do loses nothing (see the module comment),
        // but a server beside it would not find them until it restarts.
        let (done, wait) = std::sync::mpsc::channel();
        let b = batch.clone();
        batch.writer.housekeeping_then(
            move |c| b.write(c),
            move || {
                let _ = done.send(());
            },
        );
        if !batch.writer.is_current_thread() {
            let _ = wait.recv_timeout(Duration::from_secs(5));
        }
    }
}

/// Hands the blob ids `sql` selects to `each`, `BATCH_ROWS` at a time
/// (`?1`: the last id of the batch before, `?2`: the batch size; the query
/// orders by id). Returns how many there were.
fn in_id_batches(
    conn: &Connection,
    sql: &str,
    mut each: impl FnMut(Vec<BlobId>) -> Result<()>,
) -> Result<usize> {
    let mut after = 0;
    let mut total = 0;
    loop {
        let ids = conn
            .prepare_cached(sql)?
            .query_map(params![after, BATCH_ROWS as i64], |r| r.get::<_, BlobId>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let Some(&last) = ids.last() else {
            return Ok(total);
        };
        after = last;
        total += ids.len();
        each(ids)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_ends_with_its_first_long_row() {
        let row = |long| {
            let mut t = FtsText::section("text");
            t.long = long;
            (1, t)
        };
        let rows: Vec<_> = [false, false, true, false, true]
            .into_iter()
            .map(row)
            .collect();
        assert_eq!(job_rows(&rows, 100), 3);
        assert_eq!(job_rows(&rows, 2), 2);
        assert_eq!(job_rows(&rows[3..], 100), 2);
        assert_eq!(job_rows(&rows[..2], 100), 2);
    }

    /// A pseudo-word for `n`: many distinct words, as in mail.
    fn word(n: u64) -> String {
        const SYLLABLES: [&str; 16] = [
            "ka", "lo", "mi", "ren", "sta", "vo", "que", "tri", "bel", "dor", "fen", "gal", "hus",
            "ist", "jor", "kel",
        ];
        let mut n = n + 1;
        let mut w = String::new();
        while n > 0 {
            w.push_str(SYLLABLES[(n % 16) as usize]);
            n /= 16;
        }
        w
    }

    /// Frames in the log now.
    fn log_frames(c: &Connection) -> i64 {
        c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
            .unwrap()
    }

    fn find(c: &Connection, w: &str) -> Vec<i64> {
        c.prepare("SELECT rowid FROM fts WHERE fts MATCH ?1 ORDER BY rowid")
            .unwrap()
            .query_map([format!("\"{w}\"")], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn merges_write_a_bounded_amount_per_transaction_and_change_no_answer() {
        let dir = tempfile::tempdir().unwrap();
        let c = Connection::open(dir.path().join(fts_file::INDEX_FILE)).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        fts_file::create_tables(&c).unwrap();
        fts_file::configure(&c).unwrap();
        let automerge: i64 = c
            .query_row("SELECT v FROM fts_config WHERE k = 'automerge'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(automerge, 0, "FTS5 merges nothing inside an insert");

        // Fifteen segments (one per transaction, below `crisismerge`),
        // as fifteen index jobs leave them.
        let mut n = 0u64;
        for _ in 0..15 {
            let tx = c.unchecked_transaction().unwrap();
            for _ in 0..60 {
                n += 1;
                let body: Vec<String> = (0..300)
                    .map(|i| word((n * 7919 + i * 104_729) % 5000))
                    .collect();
                tx.execute(
                    "INSERT INTO fts (rowid, body) VALUES (?1, ?2)",
                    params![n as i64, body.join(" ")],
                )
                .unwrap();
            }
            tx.commit().unwrap();
        }
        let probes: Vec<String> = (0..40).map(|i| word(i * 97)).collect();
        let before: Vec<Vec<i64>> = probes.iter().map(|w| find(&c, w)).collect();
        assert!(before.iter().any(|rows| rows.len() > 1));

        // Merged a little at a time, each step in a transaction of its
        // own: none writes much more than the pages asked for.
        let pages = 64;
        let mut steps = 0;
        loop {
            checkpoint_truncate(&c);
            let tx = c.unchecked_transaction().unwrap();
            let worked = merge_step(&tx, pages).unwrap();
            tx.commit().unwrap();
            let frames = log_frames(&c);
            assert!(
                frames <= 2 * pages + 16,
                "step {steps} wrote {frames} pages"
            );
            if !worked {
                break;
            }
            steps += 1;
            assert!(steps < 1000, "merging never ends");
        }
        assert!(
            steps >= 3,
            "the merge took {steps} steps: too small to test"
        );
        let after: Vec<Vec<i64>> = probes.iter().map(|w| find(&c, w)).collect();
        assert_eq!(before, after);
    }

    fn checkpoint_truncate(c: &Connection) {
        let busy: i64 = c
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .unwrap();
        assert_eq!(busy, 0);
    }
}
