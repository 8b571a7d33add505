//! The store's zstd dictionaries (crate::dictionary): kept in the
//! `zstd_dictionaries` table, loaded at open, and the first one trained in
//! the background once the store holds [`TRAIN_AFTER`] blobs.
//!
//! Training is one pass over the start of the newest [`SAMPLES`]
//! messages (2 MiB at most, about 10 MiB of memory while it runs), under
//! a second of one core, in a thread of its own; deliveries
//! go on packing without a dictionary meanwhile. The new dictionary's row
//! is committed before any chunk packed with it: chunks are packed only
//! after it is installed, and their deliveries commit after its row (a
//! later durable commit also makes the earlier row durable, the log being
//! written in order), so no stored chunk ever names a dictionary the
//! database lacks.
//!
//! A store keeps its first dictionary: mail's shared parts (header
//! fields, markup, a language's words) change slowly. The table and the
//! frames' ids allow training again later without touching stored chunks.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use rusqlite::{params, Connection};

use super::{open_connection, Inner};
use crate::chunk_codec;
use crate::clock::now;
use crate::dictionary::{self, Dictionary, Samples, SAMPLES, TRAIN_AFTER};
use crate::error::Result;
use crate::BlobId;

/// The dictionary chunks are packed with now, and the training state.
pub(crate) struct Dictionaries {
    current: RwLock<Option<Arc<Dictionary>>>,
    training: AtomicBool,
    /// The blob id from which a training is tried (again).
    next_try: AtomicI64,
}

impl Dictionaries {
    /// Registers every dictionary the database holds; the newest packs
    /// (only it is prepared for packing).
    /// Without `train`, the store never trains one itself.
    pub(crate) fn load(c: &Connection, train: bool) -> Result<Dictionaries> {
        Ok(Dictionaries {
            current: RwLock::new(
                (register_stored(c)?.as_deref())
                    .map(Dictionary::new)
                    .transpose()?
                    .map(Arc::new),
            ),
            training: AtomicBool::new(false),
            next_try: AtomicI64::new(if train { TRAIN_AFTER } else { i64::MAX }),
        })
    }

    /// The dictionary to pack new chunks with, if the store has one.
    pub(crate) fn current(&self) -> Option<Arc<Dictionary>> {
        self.current.read().expect("dictionary lock").clone()
    }

    /// Called after a delivery stored `blob`: starts the first training
    /// once the store is large enough to have a sample of its mail.
    pub(crate) fn delivered(&self, blob: BlobId, inner: &Arc<Inner>) {
        if blob < self.next_try.load(Ordering::Relaxed)
            || self.current.read().expect("dictionary lock").is_some()
            || self.training.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let store = Arc::downgrade(inner);
        let path = inner.path.clone();
        let started = std::thread::Builder::new()
            .name("store-dictionary".into())
            .spawn(move || train_in_background(store, path, blob));
        if started.is_err() {
            self.training.store(false, Ordering::Release);
        }
    }
}

/// Registers every dictionary of the store database `c` (for a tool or
/// test reading the file directly), so that `decode_chunk` decodes its
/// chunks.
pub fn load_dictionaries(c: &Connection) -> Result<()> {
    register_stored(c).map(drop)
}

/// Registers every dictionary of `c` for reading; the newest one's bytes
/// back.
fn register_stored(c: &Connection) -> Result<Option<Vec<u8>>> {
    let mut stmt = c.prepare("SELECT dict FROM zstd_dictionaries ORDER BY created, id")?;
    let mut rows = stmt.query([])?;
    let mut newest = None;
    while let Some(row) = rows.next()? {
        let bytes = row.get_ref(0)?.as_blob().unwrap_or_default();
        dictionary::register(bytes)?;
        newest = Some(bytes.to_vec());
    }
    Ok(newest)
}

fn train_in_background(store: Weak<Inner>, path: PathBuf, blob: BlobId) {
    let outcome = (|| -> Result<Option<Dictionary>> {
        let samples = samples(&open_connection(&path)?)?;
        let bytes = dictionary::train(&samples)?;
        let Some(inner) = store.upgrade() else {
            return Ok(None);
        };
        let row = bytes.clone();
        // Housekeeping, not durable by itself: see the module's comment.
        inner.writer.housekeeping_blocking(move |c| {
            c.execute(
                "INSERT INTO zstd_dictionaries (id, dict, created) VALUES (?1, ?2, ?3)",
                params![dictionary::id_of(&row)?, row, now()],
            )?;
            Ok(())
        })?;
        dictionary::register(&bytes)?;
        Dictionary::new(&bytes).map(Some)
    })();
    let Some(inner) = store.upgrade() else {
        return;
    };
    let dictionaries = &inner.dictionaries;
    match outcome {
        Ok(Some(d)) => {
            tracing::info!(
                id = d.id(),
                "store trained a zstd dictionary for small messages"
            );
            *dictionaries.current.write().expect("dictionary lock") = Some(Arc::new(d));
        }
        Ok(None) => {}
        Err(e) => {
            // Too few or too uniform samples: try again when the store has
            // grown by as much again.
            tracing::warn!(error = %e, "store could not train a zstd dictionary");
            dictionaries
                .next_try
                .store(blob + TRAIN_AFTER, Ordering::Relaxed);
        }
    }
    dictionaries.training.store(false, Ordering::Release);
}

/// The start of the newest messages' first pieces, decoded.
fn samples(c: &Connection) -> Result<Samples> {
    let mut stmt = c.prepare(
        "SELECT blob_id, codec, data FROM blob_chunks WHERE seq <= 0
         ORDER BY blob_id DESC LIMIT ?1",
    )?;
    let mut rows = stmt.query([SAMPLES])?;
    let mut samples = Samples::default();
    while let Some(row) = rows.next()? {
        let data = row.get_ref(2)?.as_blob().unwrap_or_default();
        if !samples.push(&chunk_codec::unpack(row.get(1)?, data, row.get(0)?)?) {
            break;
        }
    }
    Ok(samples)
}
