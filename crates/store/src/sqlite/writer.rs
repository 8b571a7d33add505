//! The single writer thread and its group commit.
//!
//! SQLite has one writer at a time. Every change goes through this thread
//! as a job; the thread takes all jobs waiting in its queue, runs each in a
//! savepoint of one transaction and commits once, so N concurrent
//! deliveries share one fsync (group commit). A job's caller hears back only
//! after that commit, so an acknowledged delivery is on disk.

use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use rusqlite::hooks::Wal;
use rusqlite::Connection;
use tokio::sync::oneshot;

use super::checkpoint::{Progress, Truncation};
use crate::error::{Result, StoreError};
use crate::model::BlobId;

/// Most jobs folded into one transaction.
const MAX_BATCH: usize = 512;

/// Longest a transaction waits for jobs announced as coming (messages
/// being received): see [`Writer::expect_job`].
const LINGER: Duration = Duration::from_micros(500);

type Run = Box<dyn FnOnce(&Connection) -> Box<dyn FnOnce(Option<&CommitFailure>) + Send> + Send>;

/// Why a transaction's commit failed, told to each of its jobs.
struct CommitFailure {
    text: String,
    /// The disk had no room for it (`SQLITE_FULL`).
    full: bool,
}

struct Job {
    /// Needs an fsync before its caller is answered.
    durable: bool,
    /// Housekeeping (releasing blobs) rather than a change someone asked
    /// for: left out of `jobs` and `transactions`, so those keep measuring
    /// group commit.
    housekeeping: bool,
    run: Run,
}

/// What the writer has done so far: with group commit, `jobs` grows
/// faster than `transactions`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    jobs: AtomicU64,
    transactions: AtomicU64,
    durable_commits: AtomicU64,
    blobs_swept: AtomicU64,
    wal_bytes: AtomicU64,
}

/// A snapshot of the writer's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriterStats {
    /// Changes run (deliveries, expunges, directory edits, message pieces).
    pub jobs: u64,
    /// Transactions committed that held at least one of those changes.
    pub transactions: u64,
    /// Of those, the ones synced to disk before their callers heard back.
    pub durable_commits: u64,
    /// Released blobs deleted by the sweeper (chunks, parsed row and blob
    /// row; the index writer deletes their full-text rows after), in
    /// housekeeping jobs not counted in `jobs`.
    pub blobs_swept: u64,
    /// Bytes the commits appended to the write-ahead log (frames of one
    /// page and its 24-byte header): what each byte of mail costs in log
    /// writes, before checkpoints copy the pages into the database.
    pub wal_bytes: u64,
}

/// Handle to the writer thread.
#[derive(Clone)]
pub(crate) struct Writer {
    tx: mpsc::Sender<Job>,
    counters: Arc<Counters>,
    /// The thread's name.
    name: &'static str,
    /// Whether the log has grown to where the writer cuts it and waits to
    /// be cut: work that can wait (the index's merges) waits for it.
    over_limit: Arc<AtomicBool>,
    /// Jobs announced and not sent yet ([`Writer::expect_job`]).
    coming: Arc<AtomicUsize>,
}

/// A job on its way to the writer; dropped once it is sent (or given up).
pub(crate) struct Expected(Arc<AtomicUsize>);

impl Drop for Expected {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Writer {
    /// Starts the writer thread `name` on `conn`. With `group_commit` off,
    /// every job gets its own transaction (and its own fsync when durable).
    /// The writer also keeps the log under `wal_limit` bytes
    /// ([`checkpoint::Truncation`]), and adds the bytes each commit
    /// appends to it to `wal_metric`.
    pub(crate) fn start(
        conn: Connection,
        name: &'static str,
        group_commit: bool,
        (wal_limit, progress, background): (u64, Arc<Progress>, bool),
        wal_metric: fn(u64),
    ) -> Writer {
        let (tx, rx) = mpsc::channel::<Job>();
        let counters = Arc::new(Counters::default());
        let c = Arc::clone(&counters);
        let over_limit = Arc::new(AtomicBool::new(false));
        let over = Arc::clone(&over_limit);
        let coming = Arc::new(AtomicUsize::new(0));
        let soon = Arc::clone(&coming);
        let batch = if group_commit { MAX_BATCH } else { 1 };
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                run(
                    conn,
                    (rx, &soon),
                    batch,
                    (wal_limit, progress, background, &over),
                    (&c, wal_metric),
                )
            })
            .expect("spawn store writer thread");
        Writer {
            tx,
            counters,
            name,
            over_limit,
            coming,
        }
    }

    /// Announces a job on its way: a message being received, whose
    /// delivery follows its text. A transaction about to commit waits for
    /// announced jobs, up to [`LINGER`], so that they share its commit
    /// instead of each paying one of their own. Every commit writes each
    /// page it touched whole to the log: the last leaf of about ten
    /// B-trees (tables and indexes a delivery appends to), the mailbox's
    /// row and the file's first page, 10 to 11 pages before any mail. A
    /// small message packs to a fraction of a page, so with 2 or 3
    /// deliveries per commit the log took over 5 bytes per byte of mail.
    /// Measured with `bench/probes/growth_rate.sh` (10 sessions of
    /// smtp-source's 4 KB mail): 5.2 bytes per byte without waiting;
    /// waiting 300 µs, 3.2; 500 µs, 2.75 at the same rate within the
    /// noise; 1 ms, 2.3 but 5–15% fewer messages a second, the waits
    /// adding up in each session's round trip. Send the job with
    /// [`Writer::exec_expected`].
    pub(crate) fn expect_job(&self) -> Expected {
        self.coming.fetch_add(1, Ordering::Relaxed);
        Expected(Arc::clone(&self.coming))
    }

    /// Jobs announced and not sent yet.
    #[cfg(test)]
    pub(crate) fn coming_now(&self) -> usize {
        self.coming.load(Ordering::Relaxed)
    }

    /// [`Writer::exec`] for a job announced with [`Writer::expect_job`]
    /// (its announcement, if it still has one).
    pub(crate) async fn exec_expected<R, F>(
        &self,
        expected: Option<Expected>,
        durable: bool,
        f: F,
    ) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let sent = self.submit(durable, false, f, |_| {}, reply);
        // Only once the job is queued: a writer that saw it announced
        // then finds it (at worst it waits out the linger for nothing).
        drop(expected);
        sent?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Whether the log has grown to where the writer cuts it and waits for
    /// that (checkpoint.rs): a caller with work that can wait holds it
    /// back until then, so the log is not pushed towards its bound.
    pub(crate) fn log_over_limit(&self) -> bool {
        self.over_limit.load(Ordering::Relaxed)
    }

    /// Whether the caller runs in this writer's thread (where waiting for
    /// one of its jobs would never end).
    pub(crate) fn is_current_thread(&self) -> bool {
        std::thread::current().name() == Some(self.name)
    }

    /// The counters so far.
    pub(crate) fn stats(&self) -> WriterStats {
        WriterStats {
            jobs: self.counters.jobs.load(Ordering::Relaxed),
            transactions: self.counters.transactions.load(Ordering::Relaxed),
            durable_commits: self.counters.durable_commits.load(Ordering::Relaxed),
            blobs_swept: self.counters.blobs_swept.load(Ordering::Relaxed),
            wal_bytes: self.counters.wal_bytes.load(Ordering::Relaxed),
        }
    }

    /// Runs `f` in the writer thread and returns its result once the
    /// transaction holding it has committed — durably if `durable`.
    pub(crate) async fn exec<R, F>(&self, durable: bool, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.submit(durable, false, f, |_| {}, reply)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Runs a sweep `f` (it returns the blobs it deleted) in the
    /// writer thread as housekeeping, not durably: after a crash the same
    /// blobs are swept again. The count is added to
    /// [`WriterStats::blobs_swept`] at commit, before anyone hears back.
    pub(crate) async fn sweep<F>(&self, f: F) -> Result<Vec<BlobId>>
    where
        F: FnOnce(&Connection) -> Result<Vec<BlobId>> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.submit(false, true, f, self.count_swept(), reply)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Like [`Writer::sweep`], for a plain thread that blocks until the
    /// commit. Never call it from a runtime thread.
    pub(crate) fn sweep_blocking<F>(&self, f: F) -> Result<Vec<BlobId>>
    where
        F: FnOnce(&Connection) -> Result<Vec<BlobId>> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.submit(false, true, f, self.count_swept(), reply)?;
        answer.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// Runs `f` in the writer thread as housekeeping (not durably, not
    /// counted as a change) and returns its result once committed.
    pub(crate) async fn housekeeping<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.submit(false, true, f, |_| {}, reply)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Like [`Writer::housekeeping`], for a plain thread that blocks until
    /// the commit. Never call it from a runtime thread.
    pub(crate) fn housekeeping_blocking<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.submit(false, true, f, |_| {}, reply)?;
        answer.blocking_recv().map_err(|_| StoreError::Closed)?
    }

    /// Queues `f` as housekeeping; `then` runs once it has committed (and
    /// is dropped unrun if it failed). For `Drop`, which can neither await
    /// nor block on a runtime's channel.
    pub(crate) fn housekeeping_then<R, F>(&self, f: F, then: impl FnOnce() + Send + 'static)
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
    {
        let (reply, _) = oneshot::channel();
        let _ = self.submit(false, true, f, move |_: &R| then(), reply);
    }

    /// Like [`Writer::exec`], but nobody waits for the answer (used from
    /// `Drop`, which cannot await).
    pub(crate) fn exec_detached<F>(&self, f: F)
    where
        F: FnOnce(&Connection) -> Result<()> + Send + 'static,
    {
        let (reply, _) = oneshot::channel();
        let _ = self.submit(false, false, f, |_| {}, reply);
    }

    /// Adds what a committed sweep deleted to the counters.
    fn count_swept(&self) -> impl FnOnce(&Vec<BlobId>) + Send + 'static {
        let counters = Arc::clone(&self.counters);
        move |swept| {
            counters
                .blobs_swept
                .fetch_add(swept.len() as u64, Ordering::Relaxed);
        }
    }

    /// Queues `f`; `committed` sees its result once its transaction has
    /// committed, before the caller does.
    fn submit<R, F, C>(
        &self,
        durable: bool,
        housekeeping: bool,
        f: F,
        committed: C,
        reply: oneshot::Sender<Result<R>>,
    ) -> Result<()>
    where
        R: Send + 'static,
        F: FnOnce(&Connection) -> Result<R> + Send + 'static,
        C: FnOnce(&R) + Send + 'static,
    {
        let run: Run = Box::new(move |conn: &Connection| {
            let outcome = in_savepoint(conn, f);
            Box::new(move |commit_error: Option<&CommitFailure>| {
                let answer = match (outcome, commit_error) {
                    (Ok(value), None) => {
                        committed(&value);
                        Ok(value)
                    }
                    (Err(e), _) => Err(e),
                    (Ok(_), Some(e)) if e.full => {
                        Err(StoreError::Full(format!("commit failed: {}", e.text)))
                    }
                    (Ok(_), Some(e)) => {
                        Err(StoreError::Invalid(format!("commit failed: {}", e.text)))
                    }
                };
                let _ = reply.send(answer);
            })
        });
        self.tx
            .send(Job {
                durable,
                housekeeping,
                run,
            })
            .map_err(|_| StoreError::Closed)
    }
}

/// Runs one job in a savepoint so a failing job leaves the others of its
/// batch untouched. A job that panics fails like one that returns an
/// error: the writer thread, which every write goes through, lives on.
fn in_savepoint<R>(conn: &Connection, f: impl FnOnce(&Connection) -> Result<R>) -> Result<R> {
    conn.execute_batch("SAVEPOINT job")?;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(conn)))
        .unwrap_or_else(|payload| Err(StoreError::from_panic("write", payload)));
    match outcome {
        Ok(value) => {
            conn.execute_batch("RELEASE job")?;
            Ok(value)
        }
        Err(e) => {
            // SQLite may have rolled the whole transaction back already
            // (it does on some SQLITE_FULL errors): then there is no
            // savepoint left, and the job's own error is the one to tell.
            if conn.is_autocommit() {
                ROLLED_BACK_FULL.with(|c| c.set(e.is_full()));
            } else {
                conn.execute_batch("ROLLBACK TO job; RELEASE job")?;
            }
            Err(e)
        }
    }
}

thread_local! {
    /// Whether the error under which SQLite rolled the writer's open
    /// transaction back was a full disk: the other jobs of that
    /// transaction are told the same.
    static ROLLED_BACK_FULL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };

    /// Frames in the log after the writer's last commit, and frames its
    /// commits have appended in all, kept by [`count_frames`]. Thread-local
    /// because SQLite's WAL hook is a plain function, and only the writer
    /// thread commits on its connection.
    static WAL_FRAMES: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// SQLite's WAL hook: called after each commit with the number of frames
/// now in the log. The log only grows between checkpoints; when it is
/// smaller than last time, a checkpoint rewound it and this commit's frames
/// are all of it.
fn count_frames(_: &Wal, frames: c_int) -> rusqlite::Result<()> {
    let frames = frames.max(0) as u64;
    WAL_FRAMES.with(|cell| {
        let (last, total) = cell.get();
        let added = if frames >= last {
            frames - last
        } else {
            frames
        };
        cell.set((frames, total + added));
    });
    Ok(())
}

/// Frames appended to the log so far by this thread's commits.
fn frames_written() -> u64 {
    WAL_FRAMES.with(|cell| cell.get().1)
}

/// Frames in the log after this thread's last commit.
fn frames_in_log() -> u64 {
    WAL_FRAMES.with(|cell| cell.get().0)
}

/// The log was cut to nothing: the next commit starts it again.
fn log_truncated() {
    WAL_FRAMES.with(|cell| cell.set((0, cell.get().1)));
}

/// The jobs of one transaction: `first`, every job waiting behind it, and
/// the jobs announced as coming that arrive within `linger`.
fn gather(
    first: Job,
    rx: &mpsc::Receiver<Job>,
    coming: &AtomicUsize,
    max_batch: usize,
    linger: Duration,
) -> Vec<Job> {
    let mut batch = vec![first];
    let until = Instant::now() + linger;
    while batch.len() < max_batch {
        match rx.try_recv() {
            Ok(job) => batch.push(job),
            Err(mpsc::TryRecvError::Disconnected) => break,
            Err(mpsc::TryRecvError::Empty) => {
                let now = Instant::now();
                if coming.load(Ordering::Relaxed) == 0 || now >= until {
                    break;
                }
                match rx.recv_timeout(until - now) {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
        }
    }
    batch
}

fn run(
    conn: Connection,
    (rx, coming): (mpsc::Receiver<Job>, &AtomicUsize),
    max_batch: usize,
    (wal_limit, progress, background, over_limit): (u64, Arc<Progress>, bool, &AtomicBool),
    (counters, wal_metric): (&Counters, fn(u64)),
) {
    // After `wal_autocheckpoint`, which would replace it.
    conn.wal_hook(Some(count_frames));
    let frame_bytes = conn
        .query_row("PRAGMA page_size", [], |r| r.get::<_, i64>(0))
        .map_or(4096, |size| size as u64)
        + 24;
    let mut truncation = Truncation::new(wal_limit / frame_bytes, progress, background);
    let mut synchronous_full = None;
    // Jobs of a transaction that SQLite rolled back before they ran: they
    // make the next transaction.
    let mut carried: Vec<Job> = Vec::new();
    loop {
        if !carried.is_empty() {
            let batch = std::mem::take(&mut carried);
            carried = commit_batch(
                &conn,
                batch,
                &mut synchronous_full,
                counters,
                wal_metric,
                frame_bytes,
            );
            continue;
        }
        // While the log is over its limit, an idle writer still tries to
        // cut it now and then: no commit may come to trigger it.
        let first = match truncation.retry_in() {
            None => match rx.recv() {
                Ok(job) => job,
                Err(_) => break,
            },
            Some(wait) => match rx.recv_timeout(wait) {
                Ok(job) => job,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if truncation.after_commit(&conn, frames_in_log()) {
                        log_truncated();
                    }
                    over_limit.store(truncation.retry_in().is_some(), Ordering::Relaxed);
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            },
        };
        let batch = gather(first, &rx, coming, max_batch, LINGER);
        carried = commit_batch(
            &conn,
            batch,
            &mut synchronous_full,
            counters,
            wal_metric,
            frame_bytes,
        );
        // Between transactions, with every caller answered.
        if truncation.after_commit(&conn, frames_in_log()) {
            log_truncated();
        }
        over_limit.store(truncation.retry_in().is_some(), Ordering::Relaxed);
    }
}

/// Runs `batch` in one transaction and answers its jobs; the jobs that
/// could not run (the transaction was rolled back under them) come back.
fn commit_batch(
    conn: &Connection,
    batch: Vec<Job>,
    synchronous_full: &mut Option<bool>,
    counters: &Counters,
    wal_metric: fn(u64),
    frame_bytes: u64,
) -> Vec<Job> {
    // WAL with synchronous=FULL fsyncs the log at commit; NORMAL does
    // not. Pieces of a large message being streamed in need no fsync of
    // their own: the delivery that completes them is durable, and its
    // fsync covers every earlier frame of the log.
    let durable = batch.iter().any(|j| j.durable);
    if *synchronous_full != Some(durable) {
        let mode = if durable { "FULL" } else { "NORMAL" };
        if let Err(e) = conn.pragma_update(None, "synchronous", mode) {
            tracing::error!(error = %e, "cannot set synchronous mode");
        } else {
            *synchronous_full = Some(durable);
        }
    }
    let counted = batch.iter().filter(|j| !j.housekeeping).count() as u64;
    let mut done = Vec::with_capacity(batch.len());
    let jobs = batch.len();
    let started = std::time::Instant::now();
    let begin = conn.execute_batch("BEGIN IMMEDIATE");
    if let Err(e) = begin {
        // Dropping the jobs tells their callers the store failed them.
        tracing::error!(error = %e, jobs = batch.len(), "store transaction could not start");
        return Vec::new();
    }
    let mut carried = Vec::new();
    for job in batch {
        if conn.is_autocommit() {
            // SQLite rolled the transaction back under an earlier
            // job's error (SQLITE_FULL can): this one never ran, and
            // must not run outside a transaction.
            carried.push(job);
        } else {
            done.push((job.run)(conn));
        }
    }
    let frames_before = frames_written();
    let commit = conn.execute_batch("COMMIT").map_err(|e| CommitFailure {
        full: matches!(&e, rusqlite::Error::SqliteFailure(f, _)
                if f.code == rusqlite::ErrorCode::DiskFull),
        text: e.to_string(),
    });
    let wal_bytes = (frames_written() - frames_before) * frame_bytes;
    counters.wal_bytes.fetch_add(wal_bytes, Ordering::Relaxed);
    wal_metric(wal_bytes);
    if commit.is_err() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    let err = commit.as_ref().err();
    if err.is_none() && counted > 0 {
        let m = metrics::get();
        m.store_commit_seconds
            .observe(started.elapsed().as_secs_f64());
        m.store_commit_batch.observe(jobs as f64);
        counters.jobs.fetch_add(counted, Ordering::Relaxed);
        counters.transactions.fetch_add(1, Ordering::Relaxed);
        if durable {
            counters.durable_commits.fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Some(e) = err {
        tracing::error!(error = %e.text, "store commit failed");
    }
    for finish in done {
        finish(err);
    }
    carried
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Job {
        Job {
            durable: true,
            housekeeping: false,
            run: Box::new(|_| Box::new(|_| {})),
        }
    }

    /// `n` announced jobs, each on its way to the writer for a moment.
    fn announce(coming: &Arc<AtomicUsize>, n: usize) -> Vec<Expected> {
        coming.fetch_add(n, Ordering::Relaxed);
        (0..n).map(|_| Expected(Arc::clone(coming))).collect()
    }

    #[test]
    fn a_batch_waits_for_announced_jobs_only() {
        let long = Duration::from_secs(30);
        let coming = Arc::new(AtomicUsize::new(0));

        // Nothing announced: what is queued, at once. A full batch does
        // not wait either.
        let (tx, rx) = mpsc::channel();
        for _ in 0..3 {
            tx.send(job()).unwrap();
        }
        let started = Instant::now();
        assert_eq!(gather(job(), &rx, &coming, 3, long).len(), 3);
        let _announced = announce(&coming, 1);
        assert_eq!(gather(job(), &rx, &coming, 2, long).len(), 2);
        // Sooner than the linger it would have waited out otherwise.
        assert!(started.elapsed() < long);

        // One announced that never comes: the batch goes after `linger`.
        let started = Instant::now();
        let short = Duration::from_millis(50);
        assert_eq!(gather(job(), &rx, &coming, 10, short).len(), 1);
        assert!(started.elapsed() >= short);
        drop(_announced);

        // Two announced: the batch waits for both, which come later (the
        // sender's channel closes after them, so no wait outlasts them).
        let (tx, rx) = mpsc::channel();
        let expected = announce(&coming, 2);
        let sender = std::thread::spawn(move || {
            for e in expected {
                std::thread::sleep(Duration::from_millis(20));
                tx.send(job()).unwrap();
                drop(e);
            }
        });
        let started = Instant::now();
        assert_eq!(gather(job(), &rx, &coming, 10, long).len(), 3);
        assert!(started.elapsed() >= Duration::from_millis(40));
        // Sooner than the linger it would have waited out otherwise.
        assert!(started.elapsed() < long);
        sender.join().unwrap();
    }

    /// A database that cannot grow (SQLite's page limit stands in for a
    /// full disk): the job that needs room fails as full, the writer and
    /// the rows before it stay, and it takes writes again once there is
    /// room.
    #[tokio::test]
    async fn a_job_that_finds_no_room_fails_as_full_and_the_writer_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("t.db")).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (x BLOB)").unwrap();
        let pages: i64 = conn
            .query_row("PRAGMA page_count", [], |r| r.get(0))
            .unwrap();
        conn.pragma_update(None, "max_page_count", pages + 4)
            .unwrap();
        let writer = Writer::start(
            conn,
            "test-writer",
            true,
            (u64::MAX, Arc::new(Progress::default()), false),
            |_| {},
        );
        let insert = |n: usize| {
            move |c: &Connection| Ok(c.execute("INSERT INTO t VALUES (?1)", [vec![7u8; n]])?)
        };
        writer.exec(true, insert(100)).await.unwrap();
        let failed = writer.exec(true, insert(1 << 20)).await;
        assert!(failed.as_ref().is_err_and(|e| e.is_full()), "{failed:?}");
        writer.exec(true, insert(100)).await.unwrap();
        writer
            .exec(true, |c: &Connection| {
                Ok(c.pragma_update(None, "max_page_count", 1_000_000)?)
            })
            .await
            .unwrap();
        writer.exec(true, insert(1 << 20)).await.unwrap();
        let rows: i64 = writer
            .exec(false, |c: &Connection| {
                Ok(c.query_row("SELECT count(*) FROM t", [], |r| r.get(0))?)
            })
            .await
            .unwrap();
        assert_eq!(rows, 3);
    }

    /// A job that panics fails alone: what it wrote is rolled back, and
    /// the writer goes on with the next jobs.
    #[tokio::test]
    async fn a_job_that_panics_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("t.db")).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        let writer = Writer::start(
            conn,
            "test-writer",
            true,
            (u64::MAX, Arc::new(Progress::default()), false),
            |_| {},
        );
        let insert =
            |x: i64| move |c: &Connection| Ok(c.execute("INSERT INTO t VALUES (?1)", [x])?);
        writer.exec(true, insert(1)).await.unwrap();
        let failed = writer
            .exec(true, |c: &Connection| -> Result<()> {
                c.execute("INSERT INTO t VALUES (2)", [])?;
                panic!("a bug in a job");
            })
            .await;
        assert!(
            matches!(&failed, Err(StoreError::Bug(m)) if m.contains("a bug in a job")),
            "{failed:?}"
        );
        writer.exec(true, insert(3)).await.unwrap();
        let rows: Vec<i64> = writer
            .exec(false, |c: &Connection| {
                Ok(c.prepare("SELECT x FROM t ORDER BY x")?
                    .query_map([], |r| r.get(0))?
                    .collect::<rusqlite::Result<Vec<i64>>>()?)
            })
            .await
            .unwrap();
        assert_eq!(rows, [1, 3]);
    }
}
