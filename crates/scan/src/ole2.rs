//! OLE2 compound files ([MS-CFB]: Office 97-2003 documents, OOXML's
//! `vbaProject.bin`): every stream is scanned as a file of its own, and the
//! source code of the VBA macro modules, decompressed, as well; so are, as
//! ClamAV takes them out, the file inside an embedded object's
//! `\x01Ole10Native` stream and PowerPoint's zlib-compressed embedded objects.
//!
//! As ClamAV presents it, a module's source is matched normalised (letters
//! lower-cased outside string literals, blanks squeezed, continued lines
//! joined: [`vba::normalize`]) and in UTF-8 (from Windows-1252 or ISO-8859-1;
//! other code pages are left as they are, where ClamAV converts them too), so a
//! signature for macro code is written in that form. Unlike ClamAV, which
//! writes one text of all modules after a header of `REM` lines, each module is
//! a file of its own: a signature within one module's text matches the same,
//! one spanning modules or anchored at an offset does not.
//!
//! The FAT, directory and stream sectors may lie anywhere in the file, in any
//! order, so an OLE2 file cannot be taken apart as it streams: it is gathered in
//! memory up to [`Limits::max_ole2_size`](crate::Limits::max_ole2_size) (past
//! that, [`LimitKind::Ole2Size`]; the bytes still stream through the signature
//! matcher as they come) and parsed at its end. Every sector chain is followed
//! with a visited set, so a FAT loop or a sector outside the file ends that chain
//! as malformed; nothing read from the file sizes an allocation beyond the file's
//! own size.
//!
//! Memory while one is taken apart: the file itself (at most `max_ole2_size`),
//! its FAT, mini FAT, directory and mini stream (each no bigger than the file),
//! and for one VBA module at a time its stream and its decompressed source
//! (at most `max_ole2_size`, up to three times that once in UTF-8); an `\x01Ole10Native` or PowerPoint document
//! stream is read whole (no bigger than the file). Other streams go to their
//! files a sector at a time and are never copied whole. An OLE2 file inside a
//! stream is gathered by its own file, so nesting multiplies this by at most
//! `max_depth`.

use crate::pipeline::{Ctx, FileNode};
use crate::vba::{self, Inflate};
use crate::verdict::LimitKind;

/// Name of the detection [`Limits::alert_macros`](crate::Limits::alert_macros)
/// gives a document with VBA macros, as ClamAV 1.4's `--alert-macros` names it.
pub(crate) const MACROS_NAME: &str = "Heuristics.OLE2.ContainsMacros.VBA";

const MAGIC: [u8; 8] = [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1];
/// §2.1 special sector numbers.
const ENDOFCHAIN: u32 = 0xffff_fffe;
/// The streams of `tree` called `name` (case-insensitively, as Office
/// and ClamAV compare stream names).
fn streams_named<'c>(
    cfb: &'c Cfb<'_>,
    tree: &'c [(usize, usize)],
    name: &'c str,
) -> impl Iterator<Item = &'c Entry> + 'c {
    tree.iter()
        .map(|&(i, _)| &cfb.entries[i])
        .filter(move |e| e.kind == Kind::Stream && e.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
const NOSTREAM: u32 = 0xffff_ffff;
/// Entries the header itself holds of the DIFAT (§2.2).
const HEADER_DIFAT: usize = 109;

/// Why a compound file could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Malformed(pub &'static str);

/// Directory entry object types (§2.6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Storage,
    Stream,
    Root,
    Other,
}

/// One directory entry (§2.6.1).
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub name: String,
    pub kind: Kind,
    left: u32,
    right: u32,
    child: u32,
    start: u32,
    pub size: u64,
}

/// A parsed compound file: the tables, the directory and the mini stream.
pub(crate) struct Cfb<'a> {
    data: &'a [u8],
    shift: u32,
    mini_shift: u32,
    cutoff: u64,
    fat: Vec<u32>,
    minifat: Vec<u32>,
    mini_stream: Vec<u8>,
    pub entries: Vec<Entry>,
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A chain read: its bytes and whether it ended as the file says it should.
pub(crate) struct Read {
    pub bytes: Vec<u8>,
    pub complete: bool,
}

impl<'a> Cfb<'a> {
    /// Parses the header (§2.2), the DIFAT and FAT (§2.4, §2.3), the directory
    /// (§2.6) and the mini FAT and mini stream (§2.5).
    pub fn parse(data: &'a [u8]) -> Result<Self, Malformed> {
        if data.len() < 512 || data[..8] != MAGIC {
            return Err(Malformed("no OLE2 header"));
        }
        if le16(data, 28) != 0xfffe {
            return Err(Malformed("byte order"));
        }
        let shift = u32::from(le16(data, 30));
        let mini_shift = u32::from(le16(data, 32));
        if !(shift == 9 || shift == 12) || mini_shift != 6 {
            return Err(Malformed("sector size"));
        }
        let mut cfb = Cfb {
            data,
            shift,
            mini_shift,
            cutoff: u64::from(le32(data, 56)),
            fat: Vec::new(),
            minifat: Vec::new(),
            mini_stream: Vec::new(),
            entries: Vec::new(),
        };
        let per_sector = (1usize << shift) / 4;
        // The DIFAT: 109 entries in the header, then a chain of DIFAT sectors
        // whose last entry points to the next.
        let fat_sectors = le32(data, 44) as usize;
        let mut difat: Vec<u32> = (0..HEADER_DIFAT).map(|i| le32(data, 76 + 4 * i)).collect();
        let mut next = le32(data, 68);
        let mut seen = vec![false; cfb.sectors()];
        while next < ENDOFCHAIN - 3 && difat.len() < fat_sectors {
            let s = cfb
                .sector(next)
                .ok_or(Malformed("DIFAT sector out of range"))?;
            if std::mem::replace(&mut seen[next as usize], true) {
                return Err(Malformed("DIFAT loop"));
            }
            difat.extend((0..per_sector - 1).map(|i| le32(s, 4 * i)));
            next = le32(s, 4 * (per_sector - 1));
        }
        let mut fat = Vec::new();
        for &f in difat.iter().take(fat_sectors) {
            if f >= ENDOFCHAIN - 3 {
                break;
            }
            let s = cfb.sector(f).ok_or(Malformed("FAT sector out of range"))?;
            fat.extend(s.chunks_exact(4).map(|c| le32(c, 0)));
        }
        cfb.fat = fat;
        // The directory.
        let dir = cfb.chain(le32(data, 48), u64::MAX);
        if dir.bytes.is_empty() {
            return Err(Malformed("no directory"));
        }
        let v3 = le16(data, 26) == 3;
        cfb.entries = dir
            .bytes
            .chunks_exact(128)
            .map(|e| {
                let name_len = (usize::from(le16(e, 64)) / 2).min(32);
                let units = (0..name_len)
                    .map(|i| le16(e, 2 * i))
                    .take_while(|&u| u != 0);
                let size = u64::from_le_bytes(e[120..128].try_into().unwrap_or([0; 8]));
                Entry {
                    name: char::decode_utf16(units)
                        .map(|c| c.unwrap_or('\u{fffd}'))
                        .collect(),
                    kind: match e[66] {
                        1 => Kind::Storage,
                        2 => Kind::Stream,
                        5 => Kind::Root,
                        _ => Kind::Other,
                    },
                    left: le32(e, 68),
                    right: le32(e, 72),
                    child: le32(e, 76),
                    start: le32(e, 116),
                    // §2.6.3: a version 3 file's high size bits may be junk.
                    size: if v3 { size & 0xffff_ffff } else { size },
                }
            })
            .collect();
        let root = cfb.entries.first().ok_or(Malformed("no root entry"))?;
        if root.kind != Kind::Root {
            return Err(Malformed("no root entry"));
        }
        let (root_start, root_size) = (root.start, root.size);
        // The mini FAT and the mini stream (the root entry's stream).
        let minifat = cfb.chain(le32(data, 60), u64::MAX);
        cfb.minifat = minifat.bytes.chunks_exact(4).map(|c| le32(c, 0)).collect();
        if !cfb.minifat.is_empty() {
            cfb.mini_stream = cfb.chain(root_start, root_size).bytes;
        }
        Ok(cfb)
    }

    /// Sectors in the file after the header (the last may be short).
    fn sectors(&self) -> usize {
        let size = 1usize << self.shift;
        self.data.len().saturating_sub(size).div_ceil(size)
    }

    /// Sector `n`, zero-padded to the sector size when the file ends inside it
    /// (such a sector is read as far as it goes).
    fn sector(&self, n: u32) -> Option<&'a [u8]> {
        let size = 1usize << self.shift;
        let at = (n as usize).checked_add(1)?.checked_mul(size)?;
        let s = self.data.get(at..(at + size).min(self.data.len()))?;
        (!s.is_empty() && s.len() == size).then_some(s)
    }

    /// Follows a FAT chain from `start`, reading at most `size` bytes.
    fn chain(&self, start: u32, size: u64) -> Read {
        let len = 1u64 << self.shift;
        follow(&self.fat, start, size, len, |n| {
            let size = 1usize << self.shift;
            let at = (n as usize + 1) * size;
            self.data.get(at..(at + size).min(self.data.len()))
        })
    }

    /// The bytes of a stream entry: from the mini stream when it is smaller than
    /// the cutoff, from the FAT sectors otherwise.
    pub fn stream(&self, e: &Entry) -> Read {
        let mut bytes = Vec::new();
        let complete = self.stream_each(e, |s| {
            bytes.extend_from_slice(s);
            true
        });
        Read { bytes, complete }
    }

    /// The bytes of a stream entry given to `sink` a sector at a time, never
    /// held whole, until it returns false; whether the chain was sound.
    pub fn stream_each(&self, e: &Entry, sink: impl FnMut(&[u8]) -> bool) -> bool {
        if e.size < self.cutoff {
            let len = 1u64 << self.mini_shift;
            follow_each(
                &self.minifat,
                e.start,
                e.size,
                len,
                |n| {
                    let size = 1usize << self.mini_shift;
                    let at = (n as usize).checked_mul(size)?;
                    self.mini_stream
                        .get(at..(at + size).min(self.mini_stream.len()))
                },
                sink,
            )
        } else {
            let len = 1u64 << self.shift;
            follow_each(
                &self.fat,
                e.start,
                e.size,
                len,
                |n| {
                    let size = 1usize << self.shift;
                    let at = (n as usize + 1) * size;
                    self.data.get(at..(at + size).min(self.data.len()))
                },
                sink,
            )
        }
    }

    /// The entries reachable from the root through the red-black trees of each
    /// storage (§2.6.4), each with the index of the storage it is in, every
    /// entry visited once.
    pub fn tree(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut seen = vec![false; self.entries.len()];
        seen[0] = true;
        let mut stack = vec![(self.entries[0].child, 0usize)];
        while let Some((i, parent)) = stack.pop() {
            let Some(e) = self.entries.get(i as usize) else {
                continue;
            };
            if std::mem::replace(&mut seen[i as usize], true) {
                continue;
            }
            out.push((i as usize, parent));
            stack.push((e.right, parent));
            stack.push((e.left, parent));
            if e.kind == Kind::Storage {
                stack.push((e.child, i as usize));
            }
        }
        out
    }
}

/// Follows the chain from `start` through `table`, reading each sector with
/// `read`, up to `size` bytes, collected.
fn follow<'s>(
    table: &[u32],
    start: u32,
    size: u64,
    sector_len: u64,
    read: impl Fn(u32) -> Option<&'s [u8]>,
) -> Read {
    let mut bytes = Vec::new();
    let complete = follow_each(table, start, size, sector_len, read, |s| {
        bytes.extend_from_slice(s);
        true
    });
    Read { bytes, complete }
}

/// Follows the chain from `start` through `table`, reading each sector with
/// `read` and giving `sink` up to `size` bytes of them, a sector at a time, until
/// it returns false. A free or special sector number, one past the table, one
/// read twice or one outside the file ends the chain incomplete (false; true
/// when it ends as the file says, or `sink` stopped it).
fn follow_each<'s>(
    table: &[u32],
    start: u32,
    size: u64,
    sector_len: u64,
    read: impl Fn(u32) -> Option<&'s [u8]>,
    mut sink: impl FnMut(&[u8]) -> bool,
) -> bool {
    // The sectors of this chain so far: it costs in proportion to the chain,
    // whatever the size of the table.
    let mut seen = std::collections::HashSet::new();
    let mut next = start;
    let mut done = 0u64;
    while done < size {
        if next == ENDOFCHAIN {
            // A stream of unknown size (the directory, the mini FAT) ends here.
            return size == u64::MAX;
        }
        let Some(s) = read(next).filter(|_| (next as usize) < table.len()) else {
            return false;
        };
        if !seen.insert(next) {
            return false;
        }
        let want = (size - done).min(sector_len) as usize;
        let got = &s[..want.min(s.len())];
        done += got.len() as u64;
        if !sink(got) {
            return true;
        }
        if s.len() < want {
            return false;
        }
        next = table[next as usize];
    }
    true
}

/// The storages holding a VBA project: `dir`, `_VBA_PROJECT` and the module
/// streams (`_VBA_PROJECT_CUR/VBA` in Word documents, `Macros/VBA` in Excel's;
/// found anywhere), with their streams by lower-cased name.
fn vba_storages(
    cfb: &Cfb<'_>,
    tree: &[(usize, usize)],
) -> Vec<std::collections::HashMap<String, usize>> {
    use std::collections::HashMap;
    let mut streams: HashMap<usize, HashMap<String, usize>> = HashMap::new();
    for &(i, p) in tree {
        if cfb.entries[i].kind == Kind::Stream {
            streams
                .entry(p)
                .or_default()
                .entry(cfb.entries[i].name.to_lowercase())
                .or_insert(i);
        }
    }
    let mut found: Vec<(usize, HashMap<String, usize>)> = streams
        .into_iter()
        .filter(|(_, s)| s.contains_key("dir") && s.contains_key("_vba_project"))
        .collect();
    found.sort_unstable_by_key(|(p, _)| *p);
    found.into_iter().map(|(_, s)| s).collect()
}

/// What reading the macros found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MacroRead {
    /// VBA projects whose `dir` stream decompressed: ClamAV counts a document
    /// with one as having macros, modules or not.
    pub projects: usize,
    /// Modules whose source was given to the callback.
    pub modules: usize,
    /// Something was malformed (a module without its stream, a bad container).
    pub malformed: bool,
    /// A source or a `dir` stream was cut at the cap.
    pub capped: bool,
}

/// Decompresses the source code of each module of the VBA projects in the file,
/// each into at most `cap` bytes, and gives them to `each` one at a time,
/// normalised as ClamAV matches them ([`vba::normalize`]), until it returns
/// false.
pub(crate) fn macros(
    cfb: &Cfb<'_>,
    tree: &[(usize, usize)],
    cap: usize,
    mut each: impl FnMut(&[u8]) -> bool,
) -> MacroRead {
    let mut r = MacroRead::default();
    for streams in vba_storages(cfb, tree) {
        let dir = cfb.stream(&cfb.entries[streams["dir"]]);
        r.malformed |= !dir.complete;
        let (dir, status) = vba::decompress(&dir.bytes, cap);
        r.malformed |= status == Inflate::Malformed;
        r.capped |= status == Inflate::Capped;
        if status == Inflate::Malformed && dir.is_empty() {
            continue;
        }
        r.projects += 1;
        let codepage = vba::codepage(&dir);
        for m in vba::modules(&dir) {
            let Some(&e) = streams.get(&m.stream.to_lowercase()) else {
                r.malformed = true;
                continue;
            };
            let s = cfb.stream(&cfb.entries[e]);
            r.malformed |= !s.complete;
            let Some(compressed) = s.bytes.get(m.offset as usize..) else {
                r.malformed = true;
                continue;
            };
            let (source, status) = vba::decompress(compressed, cap);
            r.malformed |= status == Inflate::Malformed;
            r.capped |= status == Inflate::Capped;
            r.modules += 1;
            if !each(&vba::normalize(&vba::to_utf8(source, codepage))) {
                return r;
            }
        }
    }
    r
}

/// An OLE2 file being gathered for parsing at its end.
pub(crate) struct Ole2Reader {
    buf: Vec<u8>,
    over: bool,
    depth: usize,
}

impl Ole2Reader {
    pub fn new(depth: usize) -> Self {
        Self {
            buf: Vec::new(),
            over: false,
            depth,
        }
    }

    /// The file so far, unless it went past the size limit.
    pub fn held(&self) -> Option<&[u8]> {
        (!self.over).then_some(&self.buf)
    }

    /// Whether the file is still held whole once it is `size` bytes long.
    pub fn holds(&self, size: u64, limits: &crate::Limits) -> bool {
        !self.over && size <= limits.max_ole2_size as u64
    }

    pub fn feed(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        if self.over {
            return;
        }
        if !self.holds((self.buf.len() + data.len()) as u64, ctx.limits) {
            ctx.found.limit(LimitKind::Ole2Size);
            self.over = true;
            self.buf = Vec::new();
            return;
        }
        self.buf.extend_from_slice(data);
    }

    /// Parses the file and scans its streams, the files embedded in them, then
    /// its macros' source code.
    pub fn finish(self, ctx: &mut Ctx<'_>) {
        if self.over {
            return;
        }
        let Ok(cfb) = Cfb::parse(&self.buf) else {
            ctx.found.stats.malformed_archives += 1;
            return;
        };
        let tree = cfb.tree();
        let mut malformed = false;
        let mut stopped = false;
        for step in [Self::streams, Self::ole10_objects, Self::powerpoint_objects] {
            match step(&self, &cfb, &tree, ctx) {
                Some(bad) => malformed |= bad,
                None => {
                    stopped = true;
                    break;
                }
            }
        }
        if !stopped {
            let read = macros(&cfb, &tree, ctx.limits.max_ole2_size, |source| {
                stopped = !self.child(source, ctx);
                !stopped
            });
            malformed |= read.malformed;
            if read.capped {
                ctx.found.limit(LimitKind::Ole2Size);
            }
            if !stopped
                && read.projects > 0
                && ctx.limits.alert_macros
                && ctx.found.heuristic.is_none()
            {
                ctx.found.heuristic = Some(MACROS_NAME);
            }
        }
        if malformed {
            ctx.found.stats.malformed_archives += 1;
        }
    }

    /// Scans every stream as a file, fed a sector at a time, never copied
    /// whole. `None` when the scan must stop, else whether a chain was broken.
    fn streams(&self, cfb: &Cfb<'_>, tree: &[(usize, usize)], ctx: &mut Ctx<'_>) -> Option<bool> {
        let mut malformed = false;
        for &(i, _) in tree {
            let e = &cfb.entries[i];
            if e.kind != Kind::Stream || e.size == 0 {
                continue;
            }
            // The bytes the chain gives (fewer than the entry's size when it
            // is broken), counted first so that the stream's file knows its
            // size and computes no digest no hash signature of that size
            // could want.
            let mut len = 0u64;
            cfb.stream_each(e, |s| {
                len += s.len() as u64;
                true
            });
            let mut node = self.open_child(ctx, Some(len))?;
            let mut fed = true;
            malformed |= !cfb.stream_each(e, |s| {
                fed = feed_child(&mut node, s, ctx);
                fed
            });
            if !fed {
                return None;
            }
            node.finish(ctx);
            if ctx.found.infected.is_some() {
                return None;
            }
        }
        Some(malformed)
    }

    /// Scans the file inside each embedded object (`\x01Ole10Native`), without
    /// its header, as a file of its own too.
    fn ole10_objects(
        &self,
        cfb: &Cfb<'_>,
        tree: &[(usize, usize)],
        ctx: &mut Ctx<'_>,
    ) -> Option<bool> {
        let mut malformed = false;
        for e in streams_named(cfb, tree, "\u{1}Ole10Native") {
            let read = cfb.stream(e);
            match ole10_native(&read.bytes) {
                Some(payload) if !self.child(payload, ctx) => return None,
                Some(_) => {}
                None => malformed = true,
            }
        }
        Some(malformed)
    }

    /// PowerPoint keeps embedded objects zlib-compressed in its document
    /// stream: each is scanned as a file (often an OLE2 file in turn).
    fn powerpoint_objects(
        &self,
        cfb: &Cfb<'_>,
        tree: &[(usize, usize)],
        ctx: &mut Ctx<'_>,
    ) -> Option<bool> {
        let mut malformed = false;
        for e in streams_named(cfb, tree, "PowerPoint Document") {
            let read = cfb.stream(e);
            for object in ppt_objects(&read.bytes) {
                let mut node = self.open_child(ctx, None)?;
                malformed |= !crate::unpack::inflate_zlib(object, &mut node, ctx)?;
                node.finish(ctx);
                if ctx.found.infected.is_some() {
                    return None;
                }
            }
        }
        Some(malformed)
    }

    /// A file for one stream or module source inside this one, counted as an
    /// archive entry, of exactly `size` bytes when that is known; `None` when
    /// a limit stops the scan.
    fn open_child(&self, ctx: &mut Ctx<'_>, size: Option<u64>) -> Option<FileNode> {
        let stats = &mut ctx.found.stats;
        stats.entries += 1;
        if stats.entries > ctx.limits.max_entries {
            ctx.found.limit(LimitKind::Entries);
            return None;
        }
        if self.depth + 1 > ctx.limits.max_depth {
            ctx.found.limit(LimitKind::Depth);
            return None;
        }
        stats.files += 1;
        Some(match size {
            Some(size) => FileNode::sized(self.depth + 1, ctx.db, size),
            None => FileNode::new(self.depth + 1, ctx.db),
        })
    }

    /// Scans `bytes` as a whole file inside this one. False when the scan must
    /// stop.
    fn child(&self, bytes: &[u8], ctx: &mut Ctx<'_>) -> bool {
        let Some(mut node) = self.open_child(ctx, Some(bytes.len() as u64)) else {
            return false;
        };
        if !feed_child(&mut node, bytes, ctx) {
            return false;
        }
        node.finish(ctx);
        ctx.found.infected.is_none()
    }
}

/// The file inside an `\x01Ole10Native` stream (an object embedded with OLE 1
/// packaging): after the total size, a type, the label, the source path, 8
/// bytes, the temporary path and the file's size, as ClamAV reads it. A stream
/// too short for that header is read as the size and the bytes after it.
fn ole10_native(stream: &[u8]) -> Option<&[u8]> {
    let total = le32(stream.get(..4)?, 0) as usize;
    if total > stream.len() {
        return None;
    }
    if stream.len() - total < 4 {
        return stream.get(4..4 + total);
    }
    let cstring_end =
        |from: usize| -> Option<usize> { Some(from + memchr::memchr(0, stream.get(from..)?)? + 1) };
    let p = cstring_end(6)?;
    let p = cstring_end(p)?;
    let p = cstring_end(p + 8)?;
    let size = le32(stream.get(p..p + 4)?, 0) as usize;
    stream.get(p + 4..(p + 4).checked_add(size)?)
}

/// The compressed embedded objects of a PowerPoint document stream: its
/// top-level records ([MS-PPT] §2.3.1: version and instance, type, length),
/// those of type 0x1011 (ExOleObjStg, compressed) without their 4-byte
/// decompressed size, as ClamAV reads them; the walk ends at a record of length
/// zero or past the end.
fn ppt_objects(stream: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut p = 0;
    while p + 8 <= stream.len() {
        let kind = le16(stream, p + 2);
        let len = le32(stream, p + 4) as usize;
        p += 8;
        if len == 0 || len > stream.len() - p {
            break;
        }
        if kind == 0x1011 && len >= 4 {
            out.push(&stream[p + 4..p + len]);
        }
        p += len;
    }
    out
}

/// Feeds a stream's or a module's next bytes to its file, counted as unpacked
/// bytes. False when the scan must stop (a limit, a detection).
fn feed_child(node: &mut FileNode, bytes: &[u8], ctx: &mut Ctx<'_>) -> bool {
    ctx.found.stats.unpacked_bytes += bytes.len() as u64;
    if ctx.found.stats.unpacked_bytes > ctx.limits.max_unpacked_bytes {
        ctx.found.limit(LimitKind::UnpackedBytes);
        return false;
    }
    node.feed(bytes, ctx);
    ctx.found.infected.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 3 file: header, one FAT sector (sector 0), a directory sector
    /// (1), then `extra` sectors, with the FAT given.
    fn file(fat: &[u32], dir: &[(&str, u8, u32, u32, u64)], extra: &[&[u8]]) -> Vec<u8> {
        let mut f = vec![0u8; 512];
        f[..8].copy_from_slice(&MAGIC);
        f[24..26].copy_from_slice(&0x3eu16.to_le_bytes());
        f[26..28].copy_from_slice(&3u16.to_le_bytes());
        f[28..30].copy_from_slice(&0xfffeu16.to_le_bytes());
        f[30..32].copy_from_slice(&9u16.to_le_bytes());
        f[32..34].copy_from_slice(&6u16.to_le_bytes());
        f[44..48].copy_from_slice(&1u32.to_le_bytes());
        f[48..52].copy_from_slice(&1u32.to_le_bytes());
        f[56..60].copy_from_slice(&4096u32.to_le_bytes());
        f[60..64].copy_from_slice(&ENDOFCHAIN.to_le_bytes());
        f[68..72].copy_from_slice(&ENDOFCHAIN.to_le_bytes());
        for i in 0..HEADER_DIFAT {
            f[76 + 4 * i..80 + 4 * i].copy_from_slice(&NOSTREAM.to_le_bytes());
        }
        f[76..80].copy_from_slice(&0u32.to_le_bytes());
        let mut fs = vec![0xffu8; 512];
        for (i, v) in fat.iter().enumerate() {
            fs[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        f.extend_from_slice(&fs);
        let mut d = vec![0u8; 512];
        for (k, (name, kind, child, start, size)) in dir.iter().enumerate() {
            let e = &mut d[128 * k..128 * (k + 1)];
            for (j, u) in name.encode_utf16().enumerate() {
                e[2 * j..2 * j + 2].copy_from_slice(&u.to_le_bytes());
            }
            e[64..66].copy_from_slice(&((name.len() as u16 + 1) * 2).to_le_bytes());
            e[66] = *kind;
            e[68..72].copy_from_slice(&NOSTREAM.to_le_bytes());
            e[72..76].copy_from_slice(&NOSTREAM.to_le_bytes());
            e[76..80].copy_from_slice(&child.to_le_bytes());
            e[116..120].copy_from_slice(&start.to_le_bytes());
            e[120..128].copy_from_slice(&size.to_le_bytes());
        }
        f.extend_from_slice(&d);
        for s in extra {
            let mut s = s.to_vec();
            s.resize(512, 0);
            f.extend_from_slice(&s);
        }
        f
    }

    const FATSECT: u32 = 0xffff_fffd;

    #[test]
    fn reads_a_stream_from_fat_sectors() {
        let big = vec![b'x'; 5000];
        let sectors: Vec<&[u8]> = big.chunks(512).collect();
        let mut fat = vec![FATSECT, ENDOFCHAIN];
        for i in 0..sectors.len() as u32 {
            fat.push(if i + 1 == sectors.len() as u32 {
                ENDOFCHAIN
            } else {
                3 + i
            });
        }
        let f = file(
            &fat,
            &[
                ("Root Entry", 5, 1, ENDOFCHAIN, 0),
                ("Big", 2, NOSTREAM, 2, 5000),
            ],
            &sectors,
        );
        let cfb = Cfb::parse(&f).unwrap();
        let tree = cfb.tree();
        assert_eq!(tree, vec![(1, 0)]);
        let r = cfb.stream(&cfb.entries[1]);
        assert!(r.complete);
        assert_eq!(r.bytes, big);
    }

    #[test]
    fn a_fat_loop_or_a_sector_out_of_range_is_malformed() {
        let data = vec![b'y'; 5000];
        // Sector 2 points to 3, which points back to 2.
        let looped = file(
            &[FATSECT, ENDOFCHAIN, 3, 2],
            &[
                ("Root Entry", 5, 1, ENDOFCHAIN, 0),
                ("Loop", 2, NOSTREAM, 2, 5000),
            ],
            &[&data[..512], &data[512..1024]],
        );
        let cfb = Cfb::parse(&looped).unwrap();
        let r = cfb.stream(&cfb.entries[1]);
        assert!(!r.complete);
        assert_eq!(r.bytes.len(), 1024);
        // Sector 2 points to sector 1000, far past the end of the file.
        let far = file(
            &[FATSECT, ENDOFCHAIN, 1000],
            &[
                ("Root Entry", 5, 1, ENDOFCHAIN, 0),
                ("Far", 2, NOSTREAM, 2, 5000),
            ],
            &[&data[..512]],
        );
        let cfb = Cfb::parse(&far).unwrap();
        assert!(!cfb.stream(&cfb.entries[1]).complete);
        // A directory whose chain loops on itself still parses, read once.
        let dir_loop = file(
            &[FATSECT, 1],
            &[("Root Entry", 5, NOSTREAM, ENDOFCHAIN, 0)],
            &[],
        );
        assert_eq!(Cfb::parse(&dir_loop).unwrap().entries.len(), 4);
        // A directory tree whose child points back at itself is walked once.
        let tree_loop = file(
            &[FATSECT, ENDOFCHAIN],
            &[("Root Entry", 5, 1, ENDOFCHAIN, 0), ("S", 1, 1, 0, 0)],
            &[],
        );
        assert_eq!(Cfb::parse(&tree_loop).unwrap().tree(), vec![(1, 0)]);
        // No header, a bad sector size.
        assert!(Cfb::parse(&looped[..100]).is_err());
        let mut bad = looped.clone();
        bad[30] = 20;
        assert!(Cfb::parse(&bad).is_err());
    }

    #[test]
    fn fat_sectors_past_the_header_come_from_difat_sectors() {
        // 110 FAT sectors (0..110): 109 in the header, one in a DIFAT sector
        // (110); the directory in sector 111, then a stream in 112..120.
        let mut f = vec![0u8; 512];
        f[..8].copy_from_slice(&MAGIC);
        f[26..28].copy_from_slice(&3u16.to_le_bytes());
        f[28..30].copy_from_slice(&0xfffeu16.to_le_bytes());
        f[30..32].copy_from_slice(&9u16.to_le_bytes());
        f[32..34].copy_from_slice(&6u16.to_le_bytes());
        f[44..48].copy_from_slice(&110u32.to_le_bytes());
        f[48..52].copy_from_slice(&111u32.to_le_bytes());
        f[56..60].copy_from_slice(&4096u32.to_le_bytes());
        f[60..64].copy_from_slice(&ENDOFCHAIN.to_le_bytes());
        f[68..72].copy_from_slice(&110u32.to_le_bytes());
        f[72..76].copy_from_slice(&1u32.to_le_bytes());
        for i in 0..HEADER_DIFAT {
            f[76 + 4 * i..80 + 4 * i].copy_from_slice(&(i as u32).to_le_bytes());
        }
        let mut fat = vec![NOSTREAM; 110 * 128];
        fat[..110].fill(FATSECT);
        fat[110] = 0xffff_fffc; // DIFSECT
        fat[111] = ENDOFCHAIN;
        for (s, next) in fat.iter_mut().zip(1u32..).take(120).skip(112) {
            *s = next;
        }
        fat[120] = ENDOFCHAIN;
        f.extend(fat.iter().flat_map(|v| v.to_le_bytes()));
        let mut difat = vec![0xffu8; 512];
        difat[..4].copy_from_slice(&109u32.to_le_bytes());
        difat[508..].copy_from_slice(&ENDOFCHAIN.to_le_bytes());
        f.extend_from_slice(&difat);
        let mut dir = vec![0u8; 512];
        for (k, (name, kind, child, start, size)) in [
            ("Root Entry", 5u8, 1u32, ENDOFCHAIN, 0u64),
            ("Data", 2, NOSTREAM, 112, 4500),
        ]
        .into_iter()
        .enumerate()
        {
            let e = &mut dir[128 * k..128 * (k + 1)];
            for (j, u) in name.encode_utf16().enumerate() {
                e[2 * j..2 * j + 2].copy_from_slice(&u.to_le_bytes());
            }
            e[64..66].copy_from_slice(&((name.len() as u16 + 1) * 2).to_le_bytes());
            e[66] = kind;
            e[68..72].copy_from_slice(&NOSTREAM.to_le_bytes());
            e[72..76].copy_from_slice(&NOSTREAM.to_le_bytes());
            e[76..80].copy_from_slice(&child.to_le_bytes());
            e[116..120].copy_from_slice(&start.to_le_bytes());
            e[120..128].copy_from_slice(&size.to_le_bytes());
        }
        f.extend_from_slice(&dir);
        let data: Vec<u8> = (0..9 * 512).map(|i| (i % 251) as u8).collect();
        f.extend_from_slice(&data);
        let cfb = Cfb::parse(&f).unwrap();
        assert_eq!(cfb.fat.len(), 110 * 128);
        let r = cfb.stream(&cfb.entries[1]);
        assert!(r.complete);
        assert_eq!(r.bytes, data[..4500]);
        // A DIFAT sector pointing at itself, with more FAT sectors to find,
        // is a loop: malformed, not a hang.
        let mut looped = f.clone();
        looped[44..48].copy_from_slice(&1000u32.to_le_bytes());
        let at = 512 * 111 + 508;
        looped[at..at + 4].copy_from_slice(&110u32.to_le_bytes());
        assert_eq!(Cfb::parse(&looped).err(), Some(Malformed("DIFAT loop")));
    }

    #[test]
    fn version_4_files_have_4096_byte_sectors() {
        // Header sector of 4096 bytes, FAT in sector 0, directory in 1, a
        // stream of 5000 bytes in 2..4.
        let mut f = vec![0u8; 4096];
        f[..8].copy_from_slice(&MAGIC);
        f[26..28].copy_from_slice(&4u16.to_le_bytes());
        f[28..30].copy_from_slice(&0xfffeu16.to_le_bytes());
        f[30..32].copy_from_slice(&12u16.to_le_bytes());
        f[32..34].copy_from_slice(&6u16.to_le_bytes());
        f[44..48].copy_from_slice(&1u32.to_le_bytes());
        f[48..52].copy_from_slice(&1u32.to_le_bytes());
        f[56..60].copy_from_slice(&4096u32.to_le_bytes());
        f[60..64].copy_from_slice(&ENDOFCHAIN.to_le_bytes());
        f[68..72].copy_from_slice(&ENDOFCHAIN.to_le_bytes());
        for i in 0..HEADER_DIFAT {
            f[76 + 4 * i..80 + 4 * i].copy_from_slice(&NOSTREAM.to_le_bytes());
        }
        f[76..80].copy_from_slice(&0u32.to_le_bytes());
        let mut fat = vec![NOSTREAM; 1024];
        fat[..4].copy_from_slice(&[FATSECT, ENDOFCHAIN, 3, ENDOFCHAIN]);
        f.extend(fat.iter().flat_map(|v| v.to_le_bytes()));
        let mut dir = vec![0u8; 4096];
        dir[..20].copy_from_slice(
            &"Root Entry"
                .encode_utf16()
                .flat_map(|u| u.to_le_bytes())
                .collect::<Vec<_>>(),
        );
        dir[64] = 22;
        dir[66] = 5;
        dir[68..80].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0]);
        dir[116..120].copy_from_slice(&ENDOFCHAIN.to_le_bytes());
        let e = &mut dir[128..256];
        e[..8].copy_from_slice(&[b'B', 0, b'i', 0, b'g', 0, 0, 0]);
        e[64] = 8;
        e[66] = 2;
        e[68..80].copy_from_slice(&[0xff; 12]);
        e[116..120].copy_from_slice(&2u32.to_le_bytes());
        e[120..128].copy_from_slice(&5000u64.to_le_bytes());
        f.extend_from_slice(&dir);
        let data: Vec<u8> = (0..8192).map(|i| (i % 13) as u8).collect();
        f.extend_from_slice(&data);
        let cfb = Cfb::parse(&f).unwrap();
        assert_eq!(cfb.tree(), vec![(1, 0)]);
        let r = cfb.stream(&cfb.entries[1]);
        assert!(r.complete);
        assert_eq!(r.bytes, data[..5000]);
    }

    #[test]
    fn ole10_native_payloads() {
        let mut s = Vec::new();
        s.extend_from_slice(&0u32.to_le_bytes());
        s.extend_from_slice(&[2, 0]);
        s.extend_from_slice(b"clam.exe\0C:\\clam.exe\0");
        s.extend_from_slice(&[0; 8]);
        s.extend_from_slice(b"C:\\tmp\\clam.exe\0");
        s.extend_from_slice(&5u32.to_le_bytes());
        s.extend_from_slice(b"MZ..!");
        s.extend_from_slice(b"trailer");
        let total = (s.len() - 4) as u32;
        s[..4].copy_from_slice(&total.to_le_bytes());
        assert_eq!(ole10_native(&s), Some(&b"MZ..!"[..]));
        // Cut anywhere: no payload or a shorter header read, never a panic.
        for cut in 0..s.len() {
            let _ = ole10_native(&s[..cut]);
        }
        // A payload size past the end.
        let mut big = s.clone();
        let at = s.len() - 7 - 5 - 4;
        big[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(ole10_native(&big), None);
    }

    #[test]
    fn powerpoint_compressed_objects() {
        let rec = |kind: u16, body: &[u8]| {
            let mut r = vec![0x0f, 0];
            r.extend_from_slice(&kind.to_le_bytes());
            r.extend_from_slice(&(body.len() as u32).to_le_bytes());
            r.extend_from_slice(body);
            r
        };
        let mut s = rec(0x03e8, b"document container");
        s.extend(rec(0x1011, b"\x05\0\0\0zlib"));
        s.extend(rec(0x1011, b"\0\0")); // too short for its size field
        s.extend(rec(0x1011, b"\x01\0\0\0more"));
        assert_eq!(ppt_objects(&s), vec![&b"zlib"[..], &b"more"[..]]);
        // A length past the end stops the walk; so does a zero length.
        let mut cut = s.clone();
        cut[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(ppt_objects(&cut).is_empty());
        for end in 0..s.len() {
            assert!(ppt_objects(&s[..end]).len() <= 2);
        }
    }
}
