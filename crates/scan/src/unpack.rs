//! Streaming, recursive decompressors: gzip, bzip2, xz, zip (read from its local file
//! headers as the bytes arrive, never from the central directory at the end) and tar;
//! the OLE2 and PDF readers ([`crate::ole2`], [`crate::pdf`]) are reached from here too.
//!
//! Zip entries may be stored, deflated or bzip2-compressed (methods 0, 8, 12); other
//! methods are skipped when their size is known and counted.
//!
//! Each takes compressed bytes as they come and feeds what it produces to a child
//! [`FileNode`], which may itself be an archive. Output goes through a fixed 32 KiB
//! buffer, so a bomb is stopped by the limits as soon as it crosses one, never after
//! it has been expanded in memory.

use crate::cdb::{EntryMeta, Range};
use crate::filetype::FileType;
use crate::pipeline::{Ctx, FileNode};
use crate::verdict::LimitKind;

const OUT_BUF: usize = 8 * 1024;

/// Most bytes of a gzip header (name and comment included) buffered.
const MAX_GZIP_HEADER: usize = 64 * 1024;

/// Memory the xz decoder may use (dictionary): files made with `xz -9` need 64 MiB
/// and are refused as malformed; the default `xz -6` needs 8 MiB.
const XZ_MEMLIMIT: u64 = 16 << 20;

/// A push decompressor with one interface over the three back ends.
enum Codec {
    Deflate(flate2::Decompress),
    Bzip2(bzip2::Decompress),
    Xz(xz2::stream::Stream),
}

impl Codec {
    /// Runs the codec: (input consumed, output produced, end of stream).
    fn run(&mut self, input: &[u8], out: &mut [u8]) -> Result<(usize, usize, bool), ()> {
        match self {
            Codec::Deflate(d) => {
                let (i0, o0) = (d.total_in(), d.total_out());
                let st = d
                    .decompress(input, out, flate2::FlushDecompress::None)
                    .map_err(|_| ())?;
                Ok((
                    (d.total_in() - i0) as usize,
                    (d.total_out() - o0) as usize,
                    st == flate2::Status::StreamEnd,
                ))
            }
            Codec::Bzip2(d) => {
                let (i0, o0) = (d.total_in(), d.total_out());
                let st = d.decompress(input, out).map_err(|_| ())?;
                Ok((
                    (d.total_in() - i0) as usize,
                    (d.total_out() - o0) as usize,
                    st == bzip2::Status::StreamEnd,
                ))
            }
            Codec::Xz(s) => {
                let (i0, o0) = (s.total_in(), s.total_out());
                let st = s
                    .process(input, out, xz2::stream::Action::Run)
                    .map_err(|_| ())?;
                Ok((
                    (s.total_in() - i0) as usize,
                    (s.total_out() - o0) as usize,
                    st == xz2::stream::Status::StreamEnd,
                ))
            }
        }
    }
}

/// Why a decompressor stopped early.
enum Stop {
    /// A limit was hit or a signature matched: stop this subtree.
    Halt,
    /// The compressed data is corrupt.
    Corrupt,
}

/// Compressed bytes in and bytes out of one stream or entry, for the ratio limit.
#[derive(Default)]
pub(crate) struct Acct {
    pub input: u64,
    pub output: u64,
}

/// Counts `produced` decompressed bytes against the unpacked-bytes limit and the
/// ratio limit of the stream `acct`; false (the limit recorded) when one is hit.
pub(crate) fn charge(produced: u64, acct: &mut Acct, ctx: &mut Ctx<'_>) -> bool {
    acct.output += produced;
    ctx.found.stats.unpacked_bytes += produced;
    if ctx.found.stats.unpacked_bytes > ctx.limits.max_unpacked_bytes {
        ctx.found.limit(LimitKind::UnpackedBytes);
        return false;
    }
    if acct.output > ctx.limits.ratio_floor
        && acct.output > acct.input.saturating_mul(ctx.limits.max_ratio)
    {
        ctx.found.limit(LimitKind::Ratio);
        return false;
    }
    true
}

/// Pushes `input` through `codec` into `child`, checking the limits on every block.
/// Returns the input consumed and whether the stream ended.
fn pump(
    codec: &mut Codec,
    input: &[u8],
    buf: &mut [u8],
    child: &mut FileNode,
    acct: &mut Acct,
    ctx: &mut Ctx<'_>,
) -> Result<(usize, bool), Stop> {
    let mut off = 0;
    loop {
        let (c, p, end) = codec.run(&input[off..], buf).map_err(|()| Stop::Corrupt)?;
        off += c;
        acct.input += c as u64;
        if p > 0 {
            if !charge(p as u64, acct, ctx) {
                return Err(Stop::Halt);
            }
            child.feed(&buf[..p], ctx);
            if ctx.found.infected.is_some() {
                return Err(Stop::Halt);
            }
        }
        if end {
            return Ok((off, true));
        }
        if c == 0 && p == 0 {
            return Ok((off, false));
        }
    }
}

/// Inflates a zlib stream (RFC 1950) held in memory into `child`, under the
/// unpacked-bytes and ratio limits. `None` when the scan must stop (a limit, a
/// detection: `child` is to be dropped); otherwise whether the stream ended
/// cleanly (if not, what came out is in `child` all the same).
pub(crate) fn inflate_zlib(input: &[u8], child: &mut FileNode, ctx: &mut Ctx<'_>) -> Option<bool> {
    let mut codec = Codec::Deflate(flate2::Decompress::new(true));
    let mut buf = vec![0u8; OUT_BUF];
    let mut acct = Acct::default();
    match pump(&mut codec, input, &mut buf, child, &mut acct, ctx) {
        Ok((_, ended)) => Some(ended),
        Err(Stop::Corrupt) => Some(false),
        Err(Stop::Halt) => None,
    }
}

/// Decoder state of one container being unpacked.
pub(crate) enum Unpacker {
    Stream(Box<StreamUnpacker>),
    Zip(Box<ZipReader>),
    Tar(Box<TarReader>),
    Ole2(Box<crate::ole2::Ole2Reader>),
    Pdf(Box<crate::pdf::PdfReader>),
    SevenZip(Box<crate::sevenz::SevenZipReader>),
    Cab(Box<crate::cab::CabReader>),
}

impl Unpacker {
    pub fn gzip(depth: usize) -> Self {
        Unpacker::Stream(Box::new(StreamUnpacker::new(StreamKind::Gzip, depth)))
    }
    pub fn bzip2(depth: usize) -> Self {
        Unpacker::Stream(Box::new(StreamUnpacker::new(StreamKind::Bzip2, depth)))
    }
    pub fn xz(depth: usize) -> Self {
        Unpacker::Stream(Box::new(StreamUnpacker::new(StreamKind::Xz, depth)))
    }
    pub fn zip(depth: usize) -> Self {
        Unpacker::Zip(Box::new(ZipReader::new(depth)))
    }
    pub fn tar(depth: usize) -> Self {
        Unpacker::Tar(Box::new(TarReader::new(depth)))
    }
    pub fn ole2(depth: usize) -> Self {
        Unpacker::Ole2(Box::new(crate::ole2::Ole2Reader::new(depth)))
    }
    pub fn pdf(depth: usize) -> Self {
        Unpacker::Pdf(Box::new(crate::pdf::PdfReader::new(depth)))
    }
    pub fn sevenz(depth: usize) -> Self {
        Unpacker::SevenZip(Box::new(crate::sevenz::SevenZipReader::new(depth)))
    }
    pub fn cab(depth: usize) -> Self {
        Unpacker::Cab(Box::new(crate::cab::CabReader::new(depth)))
    }

    pub fn feed(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        match self {
            Unpacker::Stream(s) => s.feed(data, ctx),
            Unpacker::Zip(z) => z.feed(data, ctx),
            Unpacker::Tar(t) => t.feed(data, ctx),
            Unpacker::Ole2(o) => o.feed(data, ctx),
            Unpacker::Pdf(p) => p.feed(data, ctx),
            Unpacker::SevenZip(s) => s.feed(data, ctx),
            Unpacker::Cab(c) => c.feed(data, ctx),
        }
    }

    /// The file's bytes so far, when this reader holds all of them (an OLE2
    /// file, gathered whole for parsing at its end).
    pub fn held(&self) -> Option<&[u8]> {
        match self {
            Unpacker::Ole2(o) => o.held(),
            _ => None,
        }
    }

    /// Whether this reader still holds all of the file once it is `size`
    /// bytes long.
    pub fn holds(&self, size: u64, limits: &crate::Limits) -> bool {
        match self {
            Unpacker::Ole2(o) => o.holds(size, limits),
            _ => false,
        }
    }

    pub fn finish(self, ctx: &mut Ctx<'_>) {
        match self {
            Unpacker::Stream(s) => s.finish(ctx),
            Unpacker::Zip(z) => z.finish(ctx),
            Unpacker::Tar(t) => t.finish(ctx),
            Unpacker::Ole2(o) => o.finish(ctx),
            Unpacker::Pdf(p) => p.finish(ctx),
            Unpacker::SevenZip(s) => s.finish(ctx),
            Unpacker::Cab(c) => c.finish(ctx),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum StreamKind {
    Gzip,
    Bzip2,
    Xz,
}

enum StreamState {
    /// gzip member header being gathered.
    GzipHeader(Vec<u8>),
    Body,
    /// gzip trailer bytes still to skip.
    GzipTrailer(usize),
    Done,
}

/// A single-file compressed stream: gzip (all members), bzip2 or xz.
pub(crate) struct StreamUnpacker {
    kind: StreamKind,
    state: StreamState,
    codec: Option<Codec>,
    child: Option<Box<FileNode>>,
    acct: Acct,
    buf: Box<[u8]>,
    depth: usize,
}

impl StreamUnpacker {
    fn new(kind: StreamKind, depth: usize) -> Self {
        let state = match kind {
            StreamKind::Gzip => StreamState::GzipHeader(Vec::new()),
            _ => StreamState::Body,
        };
        let codec = match kind {
            StreamKind::Gzip => None,
            StreamKind::Bzip2 => Some(Codec::Bzip2(bzip2::Decompress::new(false))),
            StreamKind::Xz => xz2::stream::Stream::new_stream_decoder(XZ_MEMLIMIT, 0)
                .ok()
                .map(Codec::Xz),
        };
        Self {
            kind,
            state,
            codec,
            child: None,
            acct: Acct::default(),
            buf: vec![0; OUT_BUF].into_boxed_slice(),
            depth,
        }
    }

    fn feed(&mut self, mut data: &[u8], ctx: &mut Ctx<'_>) {
        while !data.is_empty() {
            match &mut self.state {
                StreamState::Done => return,
                StreamState::GzipHeader(h) => {
                    let before = h.len();
                    h.extend_from_slice(&data[..data.len().min(MAX_GZIP_HEADER - before)]);
                    match gzip_header_len(h) {
                        Ok(Some(len)) => {
                            data = &data[len - before..];
                            self.codec = Some(Codec::Deflate(flate2::Decompress::new(false)));
                            self.state = StreamState::Body;
                        }
                        Ok(None) if h.len() < MAX_GZIP_HEADER => return,
                        _ => {
                            // Not gzip after all, or a header too big to be honest.
                            ctx.found.stats.malformed_archives += 1;
                            self.state = StreamState::Done;
                            return;
                        }
                    }
                }
                StreamState::Body => {
                    let Some(codec) = self.codec.as_mut() else {
                        ctx.found.stats.malformed_archives += 1;
                        self.state = StreamState::Done;
                        return;
                    };
                    let child = self.child.get_or_insert_with(|| {
                        ctx.found.stats.files += 1;
                        Box::new(FileNode::new(self.depth + 1, ctx.db))
                    });
                    match pump(codec, data, &mut self.buf, child, &mut self.acct, ctx) {
                        Ok((used, ended)) => {
                            data = &data[used..];
                            if ended {
                                if let Some(child) = self.child.take() {
                                    child.finish(ctx);
                                }
                                self.acct = Acct::default();
                                self.state = if self.kind == StreamKind::Gzip {
                                    StreamState::GzipTrailer(8)
                                } else {
                                    StreamState::Done
                                };
                            } else if used == 0 {
                                return;
                            }
                        }
                        Err(stop) => {
                            if let Stop::Corrupt = stop {
                                ctx.found.stats.malformed_archives += 1;
                                if let Some(child) = self.child.take() {
                                    child.finish(ctx);
                                }
                            } else {
                                self.child = None;
                            }
                            self.state = StreamState::Done;
                            return;
                        }
                    }
                }
                StreamState::GzipTrailer(left) => {
                    let n = (*left).min(data.len());
                    data = &data[n..];
                    *left -= n;
                    if *left == 0 {
                        // RFC 1952 §2.2: a gzip file may hold several members.
                        self.state = StreamState::GzipHeader(Vec::new());
                    }
                }
            }
        }
    }

    fn finish(mut self, ctx: &mut Ctx<'_>) {
        if let Some(child) = self.child.take() {
            // Truncated stream: scan what came out of it.
            ctx.found.stats.malformed_archives += 1;
            child.finish(ctx);
        }
    }
}

/// Length of a complete gzip member header at the start of `h` (RFC 1952 §2.3),
/// `Ok(None)` if more bytes are needed, `Err` if it is not a gzip header.
fn gzip_header_len(h: &[u8]) -> Result<Option<usize>, ()> {
    if h.len() < 10 {
        if h.iter().zip([0x1f, 0x8b, 8]).any(|(a, b)| *a != b) {
            return Err(());
        }
        return Ok(None);
    }
    if h[0] != 0x1f || h[1] != 0x8b || h[2] != 8 {
        return Err(());
    }
    let flags = h[3];
    let mut pos = 10;
    if flags & 0x04 != 0 {
        if h.len() < pos + 2 {
            return Ok(None);
        }
        pos += 2 + usize::from(u16::from_le_bytes([h[pos], h[pos + 1]]));
    }
    for bit in [0x08, 0x10] {
        if flags & bit != 0 {
            match h.get(pos..).and_then(|r| memchr::memchr(0, r)) {
                Some(z) => pos += z + 1,
                None => return Ok(None),
            }
        }
    }
    if flags & 0x02 != 0 {
        pos += 2;
    }
    Ok((h.len() >= pos).then_some(pos))
}

enum ZipState {
    Header,
    Stored {
        left: u64,
        descriptor: bool,
    },
    Compressed {
        descriptor: bool,
        csize: Option<u64>,
    },
    Skip {
        left: u64,
    },
    Descriptor,
    Done,
}

const LOCAL_SIG: u32 = 0x0403_4b50;
const DESCRIPTOR_SIG: u32 = 0x0807_4b50;

/// A zip archive read front to back from its local file headers.
pub(crate) struct ZipReader {
    state: ZipState,
    hdr: Vec<u8>,
    /// Bytes of the archive seen (its size, once it ends: `.cdb` container size).
    size: u64,
    /// Entries seen, for the `.cdb` file position.
    position: u64,
    /// Name, encryption flag and position of the entry whose sizes come in the data
    /// descriptor after it, when `.cdb` signatures are loaded.
    meta_wait: Option<(Vec<u8>, bool, u64)>,
    /// `.cdb` signatures that matched an entry and wait for the container size.
    cdb_wait: Vec<u32>,
    codec: Option<Codec>,
    child: Option<Box<FileNode>>,
    acct: Acct,
    buf: Box<[u8]>,
    depth: usize,
}

fn le16(b: &[u8], at: usize) -> u64 {
    u64::from(u16::from_le_bytes([b[at], b[at + 1]]))
}
fn le32(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]))
}

impl ZipReader {
    fn new(depth: usize) -> Self {
        Self {
            state: ZipState::Header,
            hdr: Vec::new(),
            size: 0,
            position: 0,
            meta_wait: None,
            cdb_wait: Vec::new(),
            codec: None,
            child: None,
            acct: Acct::default(),
            buf: vec![0; OUT_BUF].into_boxed_slice(),
            depth,
        }
    }

    fn end_entry(&mut self, descriptor: bool, ctx: &mut Ctx<'_>) {
        if let Some(child) = self.child.take() {
            child.finish(ctx);
        }
        self.codec = None;
        self.acct = Acct::default();
        self.state = if descriptor {
            ZipState::Descriptor
        } else {
            ZipState::Header
        };
    }

    /// Checks an entry's metadata against the `.cdb` signatures: a match is a
    /// detection, or waits for the end of the archive when it depends on its size.
    fn check_meta(&mut self, meta: &EntryMeta<'_>, ctx: &mut Ctx<'_>) {
        for (i, sig) in ctx.db.cdb.iter().enumerate() {
            if !sig.matches_entry(meta) {
                continue;
            }
            if sig.container_size == Range::Any {
                let serial = ctx.found.chain.last().copied().unwrap_or(0);
                ctx.found.detect(ctx.db, &sig.name, serial);
                return;
            }
            if !self.cdb_wait.contains(&(i as u32)) {
                self.cdb_wait.push(i as u32);
            }
        }
    }

    fn feed(&mut self, mut data: &[u8], ctx: &mut Ctx<'_>) {
        self.size += data.len() as u64;
        while !data.is_empty() {
            if ctx.found.infected.is_some() {
                self.state = ZipState::Done;
            }
            match &mut self.state {
                ZipState::Done => return,
                ZipState::Header => {
                    let need = if self.hdr.len() < 30 {
                        30
                    } else {
                        30 + le16(&self.hdr, 26) as usize + le16(&self.hdr, 28) as usize
                    };
                    let take = (need - self.hdr.len()).min(data.len());
                    self.hdr.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if self.hdr.len() >= 4 && le32(&self.hdr, 0) as u32 != LOCAL_SIG {
                        // Central directory, end record or junk: no more entries.
                        self.state = ZipState::Done;
                        return;
                    }
                    if self.hdr.len() < 30 {
                        continue;
                    }
                    let full = 30 + le16(&self.hdr, 26) as usize + le16(&self.hdr, 28) as usize;
                    if self.hdr.len() < full {
                        continue;
                    }
                    let hdr = std::mem::take(&mut self.hdr);
                    self.start_entry(&hdr, ctx);
                }
                ZipState::Stored { left, descriptor } => {
                    let n = (*left).min(data.len() as u64) as usize;
                    *left -= n as u64;
                    let (done, desc) = (*left == 0, *descriptor);
                    if let Some(child) = self.child.as_mut() {
                        child.feed(&data[..n], ctx);
                    }
                    data = &data[n..];
                    if done {
                        self.end_entry(desc, ctx);
                    }
                }
                ZipState::Compressed { descriptor, csize } => {
                    let (desc, csize) = (*descriptor, *csize);
                    // With a known size, never read past the entry.
                    let avail = match csize {
                        Some(c) => {
                            (c.saturating_sub(self.acct.input)).min(data.len() as u64) as usize
                        }
                        None => data.len(),
                    };
                    let (Some(codec), Some(child)) = (self.codec.as_mut(), self.child.as_mut())
                    else {
                        self.state = ZipState::Done;
                        return;
                    };
                    match pump(
                        codec,
                        &data[..avail],
                        &mut self.buf,
                        child,
                        &mut self.acct,
                        ctx,
                    ) {
                        Ok((used, ended)) => {
                            data = &data[used..];
                            if ended {
                                let rest = csize.map_or(0, |c| c.saturating_sub(self.acct.input));
                                self.end_entry(desc, ctx);
                                if rest > 0 {
                                    self.state = ZipState::Skip { left: rest };
                                }
                            } else if used == 0 {
                                if csize.is_some_and(|c| self.acct.input >= c) {
                                    // The entry's bytes are all in and the stream did not end.
                                    ctx.found.stats.malformed_archives += 1;
                                    self.end_entry(desc, ctx);
                                } else {
                                    return;
                                }
                            }
                        }
                        Err(Stop::Corrupt) => {
                            ctx.found.stats.malformed_archives += 1;
                            if let Some(child) = self.child.take() {
                                child.finish(ctx);
                            }
                            self.state = ZipState::Done;
                            return;
                        }
                        Err(Stop::Halt) => {
                            self.child = None;
                            self.state = ZipState::Done;
                            return;
                        }
                    }
                }
                ZipState::Skip { left } => {
                    let n = (*left).min(data.len() as u64) as usize;
                    *left -= n as u64;
                    data = &data[n..];
                    if *left == 0 {
                        self.state = ZipState::Header;
                    }
                }
                ZipState::Descriptor => {
                    // APPNOTE §4.3.9: crc, sizes, optionally preceded by a signature.
                    let take = (16 - self.hdr.len()).min(data.len());
                    self.hdr.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if self.hdr.len() < 16 {
                        continue;
                    }
                    let at = if le32(&self.hdr, 0) as u32 == DESCRIPTOR_SIG {
                        4
                    } else {
                        0
                    };
                    let (csize, usize) = (le32(&self.hdr, at + 4), le32(&self.hdr, at + 8));
                    if at == 4 {
                        self.hdr.clear();
                    } else {
                        self.hdr.drain(..12);
                    }
                    self.state = ZipState::Header;
                    if let Some((name, encrypted, position)) = self.meta_wait.take() {
                        let meta = EntryMeta {
                            container: FileType::Zip,
                            name: &name,
                            compressed_size: Some(csize),
                            real_size: Some(usize),
                            encrypted,
                            position,
                        };
                        self.check_meta(&meta, ctx);
                    }
                }
            }
        }
    }

    fn start_entry(&mut self, h: &[u8], ctx: &mut Ctx<'_>) {
        let flags = le16(h, 6);
        let method = le16(h, 8);
        let mut csize = le32(h, 18);
        let name_len = le16(h, 26) as usize;
        let extra = &h[30 + name_len..];
        if csize == 0xffff_ffff {
            csize = zip64_sizes(extra).map_or(csize, |(_, c)| c);
        }
        let name = &h[30..30 + name_len];
        let descriptor = flags & 0x08 != 0;
        let known = !descriptor || csize != 0;
        ctx.found.stats.entries += 1;
        if ctx.found.stats.entries > ctx.limits.max_entries {
            ctx.found.limit(LimitKind::Entries);
            self.state = ZipState::Done;
            return;
        }
        self.position += 1;
        if !ctx.db.cdb.is_empty() {
            let encrypted = flags & 0x01 != 0;
            let sizes_later = descriptor && csize == 0;
            // The real size: the local header's, or the Zip64 field's when that is
            // where the compressed size came from.
            let usize = match le32(h, 22) {
                0xffff_ffff => zip64_sizes(extra).map_or(0, |(u, _)| u),
                u => u,
            };
            let meta = EntryMeta {
                container: FileType::Zip,
                name,
                compressed_size: (!sizes_later).then_some(csize),
                real_size: (!sizes_later).then_some(usize),
                encrypted,
                position: self.position,
            };
            self.check_meta(&meta, ctx);
            if ctx.found.infected.is_some() {
                return;
            }
            if sizes_later {
                self.meta_wait = Some((name.to_vec(), encrypted, self.position));
            }
        }
        let skip_or_stop = |ctx: &mut Ctx<'_>| {
            if known {
                ZipState::Skip { left: csize }
            } else {
                // The end of the entry cannot be found without understanding it.
                ctx.found.stats.malformed_archives += 1;
                ZipState::Done
            }
        };
        if flags & 0x01 != 0 {
            ctx.found.stats.encrypted_entries += 1;
            self.state = skip_or_stop(ctx);
            if csize == 0 && !descriptor {
                self.state = ZipState::Header;
            }
            return;
        }
        if name.ends_with(b"/") && csize == 0 {
            self.state = if descriptor {
                ZipState::Descriptor
            } else {
                ZipState::Header
            };
            return;
        }
        if self.depth + 1 > ctx.limits.max_depth {
            ctx.found.limit(LimitKind::Depth);
            self.state = ZipState::Done;
            return;
        }
        match method {
            0 if known => {
                ctx.found.stats.files += 1;
                self.child = Some(Box::new(FileNode::new(self.depth + 1, ctx.db)));
                self.state = ZipState::Stored {
                    left: csize,
                    descriptor,
                };
                if csize == 0 {
                    self.end_entry(descriptor, ctx);
                }
            }
            8 | 12 => {
                ctx.found.stats.files += 1;
                self.child = Some(Box::new(FileNode::new(self.depth + 1, ctx.db)));
                self.codec = Some(if method == 8 {
                    Codec::Deflate(flate2::Decompress::new(false))
                } else {
                    Codec::Bzip2(bzip2::Decompress::new(false))
                });
                self.acct = Acct::default();
                self.state = ZipState::Compressed {
                    descriptor,
                    csize: (!descriptor || csize != 0).then_some(csize),
                };
            }
            _ => {
                ctx.found.stats.unsupported_entries += 1;
                self.state = skip_or_stop(ctx);
            }
        }
    }

    fn finish(mut self, ctx: &mut Ctx<'_>) {
        if let Some(child) = self.child.take() {
            ctx.found.stats.malformed_archives += 1;
            child.finish(ctx);
        }
        if ctx.found.infected.is_some() {
            return;
        }
        let size = self.size;
        if let Some(sig) = self
            .cdb_wait
            .iter()
            .map(|&i| &ctx.db.cdb[i as usize])
            .find(|s| s.container_size.allows(Some(size)))
        {
            let serial = ctx.found.chain.last().copied().unwrap_or(0);
            ctx.found.detect(ctx.db, &sig.name, serial);
        }
    }
}

/// The Zip64 extended information extra field (APPNOTE §4.5.3): (real size,
/// compressed size), when both are there.
fn zip64_sizes(extra: &[u8]) -> Option<(u64, u64)> {
    let mut p = 0;
    while p + 4 <= extra.len() {
        let (id, len) = (le16(extra, p), le16(extra, p + 2) as usize);
        if id == 1 && p + 4 + 16 <= extra.len() && len >= 16 {
            let u = u64::from_le_bytes(extra[p + 4..p + 12].try_into().ok()?);
            let c = u64::from_le_bytes(extra[p + 12..p + 20].try_into().ok()?);
            return Some((u, c));
        }
        p += 4 + len;
    }
    None
}

enum TarState {
    Header,
    Data { left: u64, pad: u64 },
    Done,
}

/// A tar archive (POSIX ustar and GNU).
pub(crate) struct TarReader {
    state: TarState,
    hdr: Vec<u8>,
    child: Option<Box<FileNode>>,
    zero_blocks: u8,
    depth: usize,
}

/// Parses a tar numeric field: octal text, or GNU base-256 when the top bit is set.
fn tar_number(field: &[u8]) -> Option<u64> {
    if field.first().is_some_and(|b| b & 0x80 != 0) {
        let mut v: u64 = u64::from(field[0] & 0x7f);
        for &b in &field[1..] {
            v = v.checked_mul(256)? | u64::from(b);
        }
        return Some(v);
    }
    let s = field
        .iter()
        .copied()
        .skip_while(|b| *b == b' ')
        .take_while(|b| (b'0'..=b'7').contains(b));
    let mut v: u64 = 0;
    for b in s {
        v = v.checked_mul(8)? + u64::from(b - b'0');
    }
    Some(v)
}

impl TarReader {
    fn new(depth: usize) -> Self {
        Self {
            state: TarState::Header,
            hdr: Vec::with_capacity(512),
            child: None,
            zero_blocks: 0,
            depth,
        }
    }

    fn feed(&mut self, mut data: &[u8], ctx: &mut Ctx<'_>) {
        while !data.is_empty() {
            match &mut self.state {
                TarState::Done => return,
                TarState::Header => {
                    let take = (512 - self.hdr.len()).min(data.len());
                    self.hdr.extend_from_slice(&data[..take]);
                    data = &data[take..];
                    if self.hdr.len() == 512 {
                        let h = std::mem::take(&mut self.hdr);
                        self.header(&h, ctx);
                        self.hdr = h;
                        self.hdr.clear();
                    }
                }
                TarState::Data { left, pad } => {
                    let n = (*left + *pad).min(data.len() as u64) as usize;
                    let file_part = (*left).min(n as u64) as usize;
                    if let Some(child) = self.child.as_mut() {
                        child.feed(&data[..file_part], ctx);
                    }
                    *left -= file_part as u64;
                    *pad -= (n - file_part) as u64;
                    if *left == 0 {
                        if let Some(child) = self.child.take() {
                            child.finish(ctx);
                        }
                    }
                    if *left == 0 && *pad == 0 {
                        self.state = TarState::Header;
                    }
                    data = &data[n..];
                }
            }
            if ctx.found.infected.is_some() {
                self.state = TarState::Done;
            }
        }
    }

    fn header(&mut self, h: &[u8], ctx: &mut Ctx<'_>) {
        if h.iter().all(|&b| b == 0) {
            self.zero_blocks += 1;
            if self.zero_blocks >= 2 {
                self.state = TarState::Done;
            }
            return;
        }
        self.zero_blocks = 0;
        let sum: u64 = h
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    u64::from(b)
                }
            })
            .sum();
        let (Some(stored), Some(size)) = (tar_number(&h[148..156]), tar_number(&h[124..136]))
        else {
            ctx.found.stats.malformed_archives += 1;
            self.state = TarState::Done;
            return;
        };
        if stored != sum {
            ctx.found.stats.malformed_archives += 1;
            self.state = TarState::Done;
            return;
        }
        let pad = (512 - size % 512) % 512;
        let regular = matches!(h[156], b'0' | 0 | b'7');
        if regular {
            ctx.found.stats.entries += 1;
            if ctx.found.stats.entries > ctx.limits.max_entries {
                ctx.found.limit(LimitKind::Entries);
                self.state = TarState::Done;
                return;
            }
            if self.depth + 1 > ctx.limits.max_depth {
                ctx.found.limit(LimitKind::Depth);
                self.state = TarState::Done;
                return;
            }
            ctx.found.stats.files += 1;
            let child = Box::new(FileNode::new(self.depth + 1, ctx.db));
            if size == 0 {
                child.finish(ctx);
            } else {
                self.child = Some(child);
            }
        }
        if size + pad > 0 {
            self.state = TarState::Data { left: size, pad };
        }
    }

    fn finish(mut self, ctx: &mut Ctx<'_>) {
        if let Some(child) = self.child.take() {
            ctx.found.stats.malformed_archives += 1;
            child.finish(ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_header_parsing() {
        assert_eq!(gzip_header_len(&[0x1f, 0x8b, 8]), Ok(None));
        assert_eq!(
            gzip_header_len(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]),
            Ok(Some(10))
        );
        let mut named = vec![0x1f, 0x8b, 8, 0x08, 0, 0, 0, 0, 0, 3];
        assert_eq!(gzip_header_len(&named), Ok(None));
        named.extend_from_slice(b"a.txt\0");
        assert_eq!(gzip_header_len(&named), Ok(Some(16)));
        assert!(gzip_header_len(b"PK\x03").is_err());
    }

    #[test]
    fn tar_numbers() {
        assert_eq!(tar_number(b"0000644\0"), Some(0o644));
        assert_eq!(tar_number(b"   12 \0"), Some(0o12));
        assert_eq!(tar_number(&[0x80, 0, 0, 1, 0]), Some(256));
    }
}
