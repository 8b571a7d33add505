//! Archives that cannot be unpacked as they stream (7z keeps its directory at
//! its end, a cabinet's files point into folders anywhere after it): such an
//! archive is gathered in memory up to
//! [`Limits::max_held_archive_size`](crate::Limits::max_held_archive_size) and
//! taken apart when it ends. Past the limit it gives
//! [`LimitKind::HeldArchiveSize`]; its bytes still stream through the signature
//! matcher as they come, as every file's do.
//!
//! What comes out of its entries goes to their files in pieces, under the same
//! limits as the streaming archives: entries, depth, unpacked bytes, and the
//! ratio of everything unpacked from the archive to the archive's size.

use crate::cdb::EntryMeta;
use crate::pipeline::{Ctx, FileNode};
use crate::verdict::LimitKind;

/// Bytes read from an entry's decoder at a time.
pub(crate) const PIECE: usize = 8 * 1024;

/// An archive's bytes, gathered until it ends.
pub(crate) struct Held {
    buf: Vec<u8>,
    over: bool,
}

impl Held {
    pub fn new() -> Self {
        Self {
            buf: Vec::new(),
            over: false,
        }
    }

    /// Takes the archive's next bytes; past the limit, drops them all.
    pub fn feed(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        if self.over {
            return;
        }
        if self.buf.len() + data.len() > ctx.limits.max_held_archive_size {
            ctx.found.limit(LimitKind::HeldArchiveSize);
            self.over = true;
            self.buf = Vec::new();
            return;
        }
        self.buf.extend_from_slice(data);
    }

    /// The whole archive, or `None` when it was over the limit.
    pub fn take(self) -> Option<Vec<u8>> {
        (!self.over).then_some(self.buf)
    }
}

/// The entries of one held archive on their way to their files.
pub(crate) struct Entries {
    depth: usize,
    /// The archive's size, for the ratio.
    archive: u64,
    /// Bytes unpacked from it so far.
    output: u64,
}

/// A limit was hit or a signature matched: the scan of the archive ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Halt;

impl Entries {
    pub fn new(depth: usize, archive: u64) -> Self {
        Self {
            depth,
            archive,
            output: 0,
        }
    }

    /// Counts one entry of the archive, against [`Limits::max_entries`](crate::Limits::max_entries).
    pub fn count(&self, ctx: &mut Ctx<'_>) -> Result<(), Halt> {
        ctx.found.stats.entries += 1;
        if ctx.found.stats.entries > ctx.limits.max_entries {
            ctx.found.limit(LimitKind::Entries);
            return Err(Halt);
        }
        Ok(())
    }

    /// A file for an entry's bytes, one level down.
    pub fn open(&self, ctx: &mut Ctx<'_>) -> Result<FileNode, Halt> {
        if self.depth + 1 > ctx.limits.max_depth {
            ctx.found.limit(LimitKind::Depth);
            return Err(Halt);
        }
        ctx.found.stats.files += 1;
        Ok(FileNode::new(self.depth + 1, ctx.db))
    }

    /// Feeds an entry's next unpacked bytes to its file, checking the
    /// unpacked-bytes and ratio limits first.
    pub fn pour(
        &mut self,
        node: &mut FileNode,
        bytes: &[u8],
        ctx: &mut Ctx<'_>,
    ) -> Result<(), Halt> {
        let n = bytes.len() as u64;
        self.output += n;
        ctx.found.stats.unpacked_bytes += n;
        if ctx.found.stats.unpacked_bytes > ctx.limits.max_unpacked_bytes {
            ctx.found.limit(LimitKind::UnpackedBytes);
            return Err(Halt);
        }
        if self.output > ctx.limits.ratio_floor
            && self.output > self.archive.saturating_mul(ctx.limits.max_ratio)
        {
            ctx.found.limit(LimitKind::Ratio);
            return Err(Halt);
        }
        node.feed(bytes, ctx);
        if ctx.found.infected.is_some() {
            return Err(Halt);
        }
        Ok(())
    }

    /// Checks an entry's metadata against the `.cdb` signatures; the archive's
    /// size is known, so a match is a detection at once.
    pub fn check_meta(&self, meta: &EntryMeta<'_>, ctx: &mut Ctx<'_>) -> Result<(), Halt> {
        let size = Some(self.archive);
        if let Some(sig) = ctx
            .db
            .cdb
            .iter()
            .find(|s| s.matches_entry(meta) && s.container_size.allows(size))
        {
            let serial = ctx.found.chain.last().copied().unwrap_or(0);
            ctx.found.detect(ctx.db, &sig.name, serial);
            if ctx.found.infected.is_some() {
                return Err(Halt);
            }
        }
        Ok(())
    }
}
