//! One file on its way through the pipeline: recognised by its first bytes, hashed,
//! matched against body signatures, and unpacked into child files when it is an
//! archive. Files nest (a file in a tar in a gzip in a mail part), each level holding
//! a bounded amount of state, and the depth is bounded by [`Limits::max_depth`].

use md5::Digest;

use crate::database::Database;
use crate::filetype::{Action, FileType, SNIFF_LEN};
use crate::matcher::BodyMatcher;
use crate::unpack::Unpacker;
use crate::verdict::{LimitKind, Limits, Stats};

/// What a session has found so far.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    pub infected: Option<String>,
    /// Types of the files that contain the one being scanned, outermost first (for
    /// the `Container` and `Intermediates` of logical signatures).
    pub ancestry: Vec<FileType>,
    pub limit: Option<LimitKind>,
    pub stats: Stats,
}

impl Findings {
    /// Records a limit; the first one hit is the one reported.
    pub fn limit(&mut self, kind: LimitKind) {
        self.limit.get_or_insert(kind);
    }
}

/// What every file node needs from its session.
pub(crate) struct Ctx<'a> {
    pub db: &'a Database,
    pub limits: &'a Limits,
    pub found: &'a mut Findings,
}

/// Streaming digests for the hash signatures the database holds.
struct Hashes {
    md5: Option<md5::Md5>,
    sha1: Option<sha1::Sha1>,
    sha256: Option<sha2::Sha256>,
}

impl Hashes {
    fn new(db: &Database) -> Self {
        Self {
            md5: (!db.md5.is_empty()).then(md5::Md5::new),
            sha1: (!db.sha1.is_empty()).then(sha1::Sha1::new),
            sha256: (!db.sha256.is_empty()).then(sha2::Sha256::new),
        }
    }

    /// Hashes the next bytes; digests no entry could match at this size are dropped.
    fn update(&mut self, db: &Database, size_after: u64, data: &[u8]) {
        if self.md5.is_some() && !db.md5.wants(size_after) {
            self.md5 = None;
        }
        if self.sha1.is_some() && !db.sha1.wants(size_after) {
            self.sha1 = None;
        }
        if self.sha256.is_some() && !db.sha256.wants(size_after) {
            self.sha256 = None;
        }
        if let Some(h) = self.md5.as_mut() {
            h.update(data);
        }
        if let Some(h) = self.sha1.as_mut() {
            h.update(data);
        }
        if let Some(h) = self.sha256.as_mut() {
            h.update(data);
        }
    }

    fn lookup(self, db: &Database, size: u64) -> Option<u32> {
        if let Some(h) = self.md5 {
            if let Some(n) = db.md5.lookup(&h.finalize(), size) {
                return Some(n);
            }
        }
        if let Some(h) = self.sha1 {
            if let Some(n) = db.sha1.lookup(&h.finalize(), size) {
                return Some(n);
            }
        }
        if let Some(h) = self.sha256 {
            if let Some(n) = db.sha256.lookup(&h.finalize(), size) {
                return Some(n);
            }
        }
        None
    }
}

/// One file being scanned.
pub(crate) struct FileNode {
    depth: usize,
    /// First bytes, held until the type is known.
    head: Vec<u8>,
    ft: Option<FileType>,
    matcher: BodyMatcher,
    hashes: Hashes,
    size: u64,
    unpack: Option<Unpacker>,
}

impl FileNode {
    pub fn new(depth: usize, db: &Database) -> Self {
        Self {
            depth,
            head: Vec::new(),
            ft: None,
            matcher: BodyMatcher::new(db),
            hashes: Hashes::new(db),
            size: 0,
            unpack: None,
        }
    }

    /// Takes the next bytes of the file.
    pub fn feed(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        if ctx.found.infected.is_some() || data.is_empty() {
            return;
        }
        if self.ft.is_none() {
            let take = (SNIFF_LEN - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..take]);
            if self.head.len() < SNIFF_LEN {
                return;
            }
            self.recognise(ctx);
            let head = std::mem::take(&mut self.head);
            self.process(&head, ctx);
            self.process(&data[take..], ctx);
        } else {
            self.process(data, ctx);
        }
    }

    fn recognise(&mut self, ctx: &mut Ctx<'_>) {
        let ft = FileType::detect(&self.head);
        self.ft = Some(ft);
        if ft.action() != Action::Unpack {
            return;
        }
        if self.depth >= ctx.limits.max_depth {
            ctx.found.limit(LimitKind::Depth);
            return;
        }
        self.unpack = Some(match ft {
            FileType::Gzip => Unpacker::gzip(self.depth),
            FileType::Bzip2 => Unpacker::bzip2(self.depth),
            FileType::Xz => Unpacker::xz(self.depth),
            FileType::Zip => Unpacker::zip(self.depth),
            _ => Unpacker::tar(self.depth),
        });
    }

    fn process(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        if data.is_empty() || ctx.found.infected.is_some() {
            return;
        }
        let ft = self.ft.unwrap_or(FileType::Other);
        self.size += data.len() as u64;
        self.hashes.update(ctx.db, self.size, data);
        if let Some(hit) = self
            .matcher
            .feed(ctx.db, ft, data, ctx.limits.max_regex_window)
        {
            ctx.found.infected = Some(ctx.db.hit_name(hit).to_string());
            return;
        }
        if let Some(u) = self.unpack.as_mut() {
            ctx.found.ancestry.push(ft);
            u.feed(data, ctx);
            ctx.found.ancestry.pop();
        }
    }

    /// Ends the file: pending signature checks, hash lookups, and the end of any
    /// archive inside.
    pub fn finish(mut self, ctx: &mut Ctx<'_>) {
        if self.ft.is_none() {
            self.recognise(ctx);
            let head = std::mem::take(&mut self.head);
            self.process(&head, ctx);
        }
        ctx.found.stats.dropped_candidates += self.matcher.dropped;
        if ctx.found.infected.is_some() {
            return;
        }
        let ft = self.ft.unwrap_or(FileType::Other);
        let hit = self.matcher.finish(ctx.db, ft, &ctx.found.ancestry);
        let stats = &mut ctx.found.stats;
        stats.regex_limit_hits += self.matcher.pcre_limit_hits;
        stats.regex_window_truncated += u64::from(self.matcher.window_truncated);
        if let Some(hit) = hit {
            ctx.found.infected = Some(ctx.db.hit_name(hit).to_string());
            return;
        }
        if let Some(n) = self.hashes.lookup(ctx.db, self.size) {
            ctx.found.infected = Some(ctx.db.name(n).to_string());
            return;
        }
        if let Some(u) = self.unpack.take() {
            ctx.found.ancestry.push(ft);
            u.finish(ctx);
            ctx.found.ancestry.pop();
        }
    }
}
