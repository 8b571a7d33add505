//! One file on its way through the pipeline: recognised by its first bytes, hashed,
//! matched against body signatures, and unpacked into child files when it is an
//! archive. Files nest (a file in a tar in a gzip in a mail part), each level holding
//! a bounded amount of state, and the depth is bounded by [`Limits::max_depth`].

use crate::cdb::{EntryMeta, Range};
use crate::database::{Database, HashTable};
use crate::digests::Digests;
use crate::filetype::{Action, FileType, SNIFF_LEN};
use crate::html::{looks_like_text, HtmlScan};
use crate::imports::{ImportHolder, NoHash};
use crate::matcher::BodyMatcher;
use crate::pe::{PeHasher, Wanted};
use crate::unpack::Unpacker;
use crate::verdict::{LimitKind, Limits, Stats};

/// What a session has found so far.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    /// The detection that ends the scan.
    pub infected: Option<String>,
    /// With false-positive hashes loaded (`.fp`, `.sfp`), detections wait for the
    /// end of the file they were made in and of every file around it, any of
    /// which may turn out to be a known-good file: (name, serials of those files).
    pub pending: Vec<(String, Vec<u64>)>,
    /// Serials of the files around the one being scanned, outermost first.
    pub chain: Vec<u64>,
    /// Last serial given to a file.
    pub serial: u64,
    /// Types of the files that contain the one being scanned, outermost first (for
    /// the `Container` and `Intermediates` of logical signatures).
    pub ancestry: Vec<FileType>,
    pub limit: Option<LimitKind>,
    pub stats: Stats,
    /// `.cdb` signatures that matched a mail attachment and wait for the size of
    /// the whole message.
    pub mail_cdb_wait: Vec<u32>,
    /// The first phishing finding: reported only when no signature matched
    /// anything, as ClamAV reports its heuristic detections after the others.
    pub heuristic: Option<&'static str>,
}

impl Findings {
    /// Records a detection in the file `serial`: final, or pending when a
    /// false-positive hash may still clear it.
    pub fn detect(&mut self, db: &Database, name: &str, serial: u64) {
        if db.has_fp() {
            let mut chain = self.chain.clone();
            chain.push(serial);
            self.pending.push((name.to_string(), chain));
        } else {
            self.infected = Some(name.to_string());
        }
    }

    /// The detection to report: the final one, or the first still pending.
    pub fn detection(&self) -> Option<&str> {
        self.infected
            .as_deref()
            .or_else(|| self.pending.first().map(|(n, _)| n.as_str()))
    }

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

/// Streaming digests for a set of hash tables (the detection ones, or the
/// false-positive ones).
struct Hashes(Digests);

impl Hashes {
    fn new(tables: [&HashTable; 3]) -> Self {
        Self(Digests::new(tables.map(|t| !t.is_empty())))
    }

    /// For a file known to be exactly `size` bytes long: only the digests
    /// some entry of that size may want.
    fn sized(tables: [&HashTable; 3], size: u64) -> Self {
        Self(Digests::new(tables.map(|t| t.wants_exactly(size))))
    }

    /// Hashes the next bytes; digests no entry could match at this size are dropped.
    fn update(&mut self, [md5, sha1, sha256]: [&HashTable; 3], size_after: u64, data: &[u8]) {
        let d = &mut self.0;
        if d.md5.is_some() && !md5.wants(size_after) {
            d.md5 = None;
        }
        if d.sha1.is_some() && !sha1.wants(size_after) {
            d.sha1 = None;
        }
        if d.sha256.is_some() && !sha256.wants(size_after) {
            d.sha256 = None;
        }
        d.update(data);
    }

    fn lookup(self, tables: [&HashTable; 3], size: u64) -> Option<u32> {
        self.0.finish(size).lookup(tables)
    }
}

/// The first `.mdb`/`.msb` signature a section of this PE file matches.
fn section_hit(db: &Database, pe: PeHasher) -> Option<u32> {
    let tables = db.section_tables();
    pe.finish().into_iter().find_map(|s| s.lookup(tables))
}

/// The first `.imp` signature this PE file's import hash matches; a file not
/// hashed for a limit is counted.
fn import_hit(ctx: &mut Ctx<'_>, imports: ImportHolder) -> Option<u32> {
    let tables = ctx.db.import_tables();
    match imports.finish(tables.map(|t| !t.is_empty())) {
        Ok(h) => h.lookup(tables),
        Err(NoHash::Limit) => {
            ctx.found.stats.imports_not_hashed += 1;
            None
        }
        Err(NoHash::NotHashed) => None,
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
    /// The file is held whole by its reader (an OLE2 file), so its digests
    /// wait for its end, when its size tells whether any is wanted: until
    /// the reader lets go of it, when they catch up on what it held.
    hash_later: bool,
    /// Digests for the false-positive hashes (`.fp`, `.sfp`).
    fp: Hashes,
    /// Serial of this file among the session's files (0 until it gets bytes).
    serial: u64,
    /// A detection is pending in this file: nothing more in it can change the
    /// verdict, only its false-positive digests are still computed.
    done: bool,
    size: u64,
    unpack: Option<Unpacker>,
    /// Section hashes of a PE file, when `.mdb`/`.msb` signatures are loaded.
    pe: Option<PeHasher>,
    /// The bytes of a PE file, for its import hash, when `.imp` signatures are loaded.
    imports: Option<ImportHolder>,
    /// The normalised forms of a text file, which may turn out to be HTML.
    html: Option<Box<HtmlScan>>,
}

/// Checks a mail attachment's name and size against the `.cdb` signatures, as
/// ClamAV checks each attachment it saves: container type mail, both sizes the
/// decoded size, position 0. A signature that also needs the message's size
/// waits for the end of the message.
pub(crate) fn check_attachment(ctx: &mut Ctx<'_>, name: &str, size: u64, serial: u64) {
    let meta = EntryMeta {
        container: FileType::Mail,
        name: name.as_bytes(),
        compressed_size: Some(size),
        real_size: Some(size),
        encrypted: false,
        position: 0,
    };
    for (i, sig) in ctx.db.cdb.iter().enumerate() {
        if !sig.matches_entry(&meta) {
            continue;
        }
        if sig.container_size == Range::Any {
            ctx.found.detect(ctx.db, &sig.name, serial);
            return;
        }
        if !ctx.found.mail_cdb_wait.contains(&(i as u32)) {
            ctx.found.mail_cdb_wait.push(i as u32);
        }
    }
}

impl FileNode {
    /// Bytes of the file seen so far (those still held to recognise it too).
    pub fn size(&self) -> u64 {
        self.size + self.head.len() as u64
    }

    /// This file's serial among the session's files (0 before it got bytes).
    pub fn serial(&self) -> u64 {
        self.serial
    }

    pub fn new(depth: usize, db: &Database) -> Self {
        Self {
            depth,
            head: Vec::new(),
            ft: None,
            matcher: BodyMatcher::new(db),
            hashes: Hashes::new(db.hash_tables()),
            hash_later: false,
            fp: Hashes::new(db.fp_tables()),
            serial: 0,
            done: false,
            size: 0,
            unpack: None,
            pe: None,
            imports: None,
            html: None,
        }
    }

    /// A file of which exactly `size` bytes will be fed (a stream of a
    /// compound file): the digests no hash signature of that size could want
    /// are not computed.
    pub fn sized(depth: usize, db: &Database, size: u64) -> Self {
        Self {
            hashes: Hashes::sized(db.hash_tables(), size),
            ..Self::new(depth, db)
        }
    }

    /// Takes the next bytes of the file.
    pub fn feed(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        if ctx.found.infected.is_some() || data.is_empty() {
            return;
        }
        if self.serial == 0 {
            ctx.found.serial += 1;
            self.serial = ctx.found.serial;
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
        let ft = ctx.db.file_type(&self.head);
        self.ft = Some(ft);
        if ft == FileType::Rar {
            // What is inside cannot be seen: the policy for limits decides.
            ctx.found.limit(LimitKind::UnsupportedArchive);
        }
        if ft == FileType::Other
            && looks_like_text(&self.head)
            && (ctx.db.body_signatures() > 0 || ctx.db.logical_signatures() > 0)
        {
            self.html = Some(Box::new(HtmlScan::new()));
        }
        if ft == FileType::Pe {
            let kinds = ctx.db.section_tables().map(|t| {
                (!t.is_empty()).then_some(Wanted {
                    any_size: t.any_size,
                    min_size: t.min_size.unwrap_or(u64::MAX),
                })
            });
            if kinds.iter().any(Option::is_some) {
                self.pe = Some(PeHasher::new(kinds));
            }
            if ctx.db.import_tables().iter().any(|t| !t.is_empty()) {
                self.imports = Some(ImportHolder::new());
            }
        }
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
            FileType::Ole2 => Unpacker::ole2(self.depth),
            FileType::Pdf => Unpacker::pdf(self.depth),
            FileType::SevenZip => Unpacker::sevenz(self.depth),
            FileType::Cab => Unpacker::cab(self.depth),
            _ => Unpacker::tar(self.depth),
        });
        self.hash_later = ft == FileType::Ole2;
    }

    fn process(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        if data.is_empty() || ctx.found.infected.is_some() {
            return;
        }
        let ft = self.ft.unwrap_or(FileType::Other);
        self.size += data.len() as u64;
        self.fp.update(ctx.db.fp_tables(), self.size, data);
        if self.done {
            return;
        }
        self.hash(ctx, data);
        if let Some(pe) = self.pe.as_mut() {
            pe.feed(data);
        }
        if let Some(i) = self.imports.as_mut() {
            i.feed(data, ctx.limits.max_held_archive_size);
        }
        if let Some(hit) = self
            .matcher
            .feed(ctx.db, ft, data, ctx.limits.max_regex_window)
        {
            ctx.found.detect(ctx.db, ctx.db.hit_name(hit), self.serial);
            self.done = true;
            return;
        }
        if let Some(h) = self.html.as_mut() {
            h.feed(ctx.db, data, ctx.limits.max_regex_window);
            if h.declined() {
                self.html = None;
            }
        }
        if let Some(u) = self.unpack.as_mut() {
            ctx.found.ancestry.push(ft);
            ctx.found.chain.push(self.serial);
            u.feed(data, ctx);
            ctx.found.chain.pop();
            ctx.found.ancestry.pop();
        }
    }

    /// Hashes the next bytes (`self.size` counts them already), or leaves
    /// them to the end while the file's reader holds it.
    fn hash(&mut self, ctx: &Ctx<'_>, data: &[u8]) {
        let tables = ctx.db.hash_tables();
        if self.hash_later {
            let unpack = self.unpack.as_ref();
            if unpack.is_some_and(|u| u.holds(self.size, ctx.limits)) {
                return;
            }
            // The reader lets go of the file with these bytes: catch up.
            self.hash_later = false;
            if let Some(held) = unpack.and_then(Unpacker::held) {
                self.hashes.update(tables, held.len() as u64, held);
            }
        }
        self.hashes.update(tables, self.size, data);
    }

    /// The digests of the file, at its end.
    fn digests(&mut self, ctx: &Ctx<'_>) -> Hashes {
        let hashes = std::mem::replace(&mut self.hashes, Hashes(Digests::none()));
        if !self.hash_later {
            return hashes;
        }
        let tables = ctx.db.hash_tables();
        let mut hashes = Hashes::sized(tables, self.size);
        if let Some(held) = self.unpack.as_ref().and_then(Unpacker::held) {
            debug_assert_eq!(held.len() as u64, self.size);
            hashes.update(tables, self.size, held);
        }
        hashes
    }

    /// Ends the file: pending signature checks, hash lookups, and the end of any
    /// archive inside; then, with false-positive hashes loaded, the detections made
    /// in or under this file are dropped if it is a known-good file.
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
        if self.serial == 0 {
            ctx.found.serial += 1;
            self.serial = ctx.found.serial;
        }
        if !self.done {
            self.finish_scan(ctx);
        }
        if ctx.db.has_fp()
            && ctx
                .found
                .pending
                .iter()
                .any(|(_, c)| c.contains(&self.serial))
        {
            let serial = self.serial;
            if self.fp.lookup(ctx.db.fp_tables(), self.size).is_some() {
                ctx.found.stats.false_positives += ctx
                    .found
                    .pending
                    .iter()
                    .filter(|(_, c)| c.contains(&serial))
                    .count() as u64;
                ctx.found.pending.retain(|(_, c)| !c.contains(&serial));
            }
        }
    }

    fn finish_scan(&mut self, ctx: &mut Ctx<'_>) {
        let ft = self.ft.unwrap_or(FileType::Other);
        let hit = self.matcher.finish(ctx.db, ft, &ctx.found.ancestry);
        let stats = &mut ctx.found.stats;
        stats.regex_limit_hits += self.matcher.pcre_limit_hits;
        stats.regex_window_truncated += u64::from(self.matcher.window_truncated);
        if let Some(hit) = hit {
            ctx.found.detect(ctx.db, ctx.db.hit_name(hit), self.serial);
            return;
        }
        if let Some(n) = self.digests(ctx).lookup(ctx.db.hash_tables(), self.size) {
            ctx.found.detect(ctx.db, ctx.db.name(n), self.serial);
            return;
        }
        if let Some(n) = self.pe.take().and_then(|pe| section_hit(ctx.db, pe)) {
            ctx.found.detect(ctx.db, ctx.db.name(n), self.serial);
            return;
        }
        if let Some(n) = self.imports.take().and_then(|i| import_hit(ctx, i)) {
            ctx.found.detect(ctx.db, ctx.db.name(n), self.serial);
            return;
        }
        if let Some(h) = self.html.take() {
            let (hit, dropped) = h.finish(ctx.db, &ctx.found.ancestry);
            ctx.found.stats.dropped_candidates += dropped;
            if let Some(hit) = hit {
                ctx.found.detect(ctx.db, ctx.db.hit_name(hit), self.serial);
                return;
            }
        }
        if let Some(u) = self.unpack.take() {
            ctx.found.ancestry.push(ft);
            ctx.found.chain.push(self.serial);
            u.finish(ctx);
            ctx.found.chain.pop();
            ctx.found.ancestry.pop();
        }
    }
}
