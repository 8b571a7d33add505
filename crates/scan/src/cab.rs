//! Microsoft Cabinet files ([MS-CAB]): every file in a cabinet is scanned as a
//! file of its own, from folders stored, MSZIP- or LZX-compressed (Quantum
//! folders are counted as unsupported, their files are not unpacked). LZX
//! goes through the `lzxd` crate; no Debian tool writes LZX cabinets, so
//! only the fuzz target exercises that path here.
//!
//! A cabinet lists its files first, but each points into a folder (a
//! compressed stream of data blocks) at an offset, in any order, so the
//! cabinet is gathered in memory ([`held`](crate::held), at most
//! [`Limits::max_held_archive_size`](crate::Limits::max_held_archive_size))
//! and walked when it ends. Each folder is then decoded once, front to back,
//! a data block (at most 64 KiB) at a time, and the block's bytes go to the
//! files it holds, the limits checked before every block. A file that starts
//! before the end of the one before it (files overlapping in a folder, which no
//! cabinet writer makes) is not unpacked and the cabinet counts as malformed,
//! so no folder is ever decoded twice.
//!
//! Memory while one is walked: the cabinet itself, its file list (names are
//! borrowed from the cabinet), one data block in and out, the MSZIP history
//! (32 KiB) or the LZX window (at most 2 MiB, as the format allows), and one
//! file open at a time. The `cab` crate is not used to read: it decodes a
//! folder from its start again for each file it is asked for, quadratic work
//! in the files of a folder, beyond what the limits can see.
//!
//! Each file's name and real size are checked against the `.cdb` signatures
//! for container type `CL_TYPE_MSCAB` as ClamAV checks them: compressed size
//! 0, not encrypted, the 0-based position in the cabinet's file list. ClamAV
//! extracts each file to a temporary file before scanning it; here a file is
//! scanned as its bytes come out of the folder. A file continued from or to
//! another cabinet of a set is scanned as far as this cabinet holds it.

use crate::cdb::EntryMeta;
use crate::filetype::FileType;
use crate::held::{Entries, Halt, Held};
use crate::pipeline::{Ctx, FileNode};

/// CFHEADER flags.
const PREV_CABINET: u16 = 0x0001;
const NEXT_CABINET: u16 = 0x0002;
const RESERVE_PRESENT: u16 = 0x0004;

/// Deflate's window, the history MSZIP carries from one block to the next.
const MSZIP_HISTORY: usize = 32 * 1024;

/// A cabinet being gathered.
pub(crate) struct CabReader {
    held: Held,
    depth: usize,
}

impl CabReader {
    pub fn new(depth: usize) -> Self {
        Self {
            held: Held::new(),
            depth,
        }
    }

    pub fn feed(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        self.held.feed(data, ctx);
    }

    /// Parses the cabinet and scans its files.
    pub fn finish(self, ctx: &mut Ctx<'_>) {
        let Some(data) = self.held.take() else {
            return;
        };
        let Some(cab) = Cabinet::parse(&data) else {
            ctx.found.stats.malformed_archives += 1;
            return;
        };
        let mut entries = Entries::new(self.depth, data.len() as u64);
        if let Ok(true) = cab.walk(&mut entries, ctx) {
            ctx.found.stats.malformed_archives += 1;
        }
    }
}

fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The NUL-terminated string at `at`, and the offset after it.
fn cstring(b: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = b.get(at..)?;
    let end = memchr::memchr(0, rest)?;
    Some((&rest[..end], at + end + 1))
}

/// How a folder's data blocks are compressed (CFFOLDER typeCompress).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Stored,
    MsZip,
    /// LZX with a window of 2^n bytes.
    Lzx(u8),
    Unsupported,
}

/// One CFFOLDER.
#[derive(Debug)]
struct Folder {
    /// Offset of its first CFDATA block.
    start: usize,
    blocks: u16,
    method: Method,
}

/// One CFFILE.
#[derive(Debug)]
struct File<'a> {
    name: &'a [u8],
    size: u32,
    offset: u32,
    folder: u16,
}

/// A parsed cabinet: its header, folders and files, borrowed from its bytes.
#[derive(Debug)]
struct Cabinet<'a> {
    data: &'a [u8],
    /// Reserved bytes in each CFDATA.
    data_reserve: usize,
    folders: Vec<Folder>,
    files: Vec<File<'a>>,
}

impl<'a> Cabinet<'a> {
    /// Parses CFHEADER, the CFFOLDERs and the CFFILEs ([MS-CAB] §2.1-2.3).
    /// The counts are 16-bit and every entry is read from the cabinet before
    /// it is kept, so the lists are no bigger than the cabinet.
    fn parse(data: &'a [u8]) -> Option<Self> {
        if data.get(..4)? != b"MSCF" {
            return None;
        }
        let files_at = le32(data, 16)? as usize;
        let (folders, files, flags) = (le16(data, 26)?, le16(data, 28)?, le16(data, 30)?);
        let mut p = 36;
        let (mut folder_reserve, mut data_reserve) = (0, 0);
        if flags & RESERVE_PRESENT != 0 {
            let header_reserve = le16(data, 36)? as usize;
            folder_reserve = usize::from(*data.get(38)?);
            data_reserve = usize::from(*data.get(39)?);
            p = 40 + header_reserve;
        }
        for flag in [PREV_CABINET, NEXT_CABINET] {
            if flags & flag != 0 {
                // The cabinet's and the disk's names.
                p = cstring(data, p)?.1;
                p = cstring(data, p)?.1;
            }
        }
        let mut cab = Cabinet {
            data,
            data_reserve,
            folders: Vec::new(),
            files: Vec::new(),
        };
        for _ in 0..folders {
            let kind = le16(data, p + 6)?;
            cab.folders.push(Folder {
                start: le32(data, p)? as usize,
                blocks: le16(data, p + 4)?,
                method: match kind & 0x000f {
                    0 => Method::Stored,
                    1 => Method::MsZip,
                    3 => match (kind >> 8) & 0x1f {
                        n @ 15..=21 => Method::Lzx(n as u8),
                        _ => Method::Unsupported,
                    },
                    _ => Method::Unsupported,
                },
            });
            p += 8 + folder_reserve;
        }
        let mut p = files_at;
        for _ in 0..files {
            let (name, next) = cstring(data, p + 16)?;
            let folder = match le16(data, p + 8)? {
                // Continued from the previous cabinet (and to the next): the
                // first folder; continued to the next: the last one.
                0xfffd | 0xffff => 0,
                0xfffe => folders.saturating_sub(1),
                i => i,
            };
            cab.files.push(File {
                name,
                size: le32(data, p)?,
                offset: le32(data, p + 4)?,
                folder,
            });
            p = next;
        }
        Some(cab)
    }

    /// Scans every file, folder by folder. `Ok(malformed)`, or `Err` when the
    /// scan must stop.
    fn walk(&self, entries: &mut Entries, ctx: &mut Ctx<'_>) -> Result<bool, Halt> {
        let mut malformed = false;
        // Files outside any folder, and empty files, have no data to scan.
        for (i, f) in self.files.iter().enumerate() {
            if f.size == 0 || usize::from(f.folder) >= self.folders.len() {
                malformed |= f.size != 0;
                entries.count(ctx)?;
                check_meta(i, f, entries, ctx)?;
            }
        }
        // The others by folder, and by offset in their folder.
        let mut order: Vec<usize> = (0..self.files.len())
            .filter(|&i| {
                let f = &self.files[i];
                f.size != 0 && usize::from(f.folder) < self.folders.len()
            })
            .collect();
        order.sort_by_key(|&i| (self.files[i].folder, self.files[i].offset));
        for files in order.chunk_by(|&a, &b| self.files[a].folder == self.files[b].folder) {
            let folder = &self.folders[usize::from(self.files[files[0]].folder)];
            malformed |= self.folder(folder, files, entries, ctx)?;
        }
        Ok(malformed)
    }

    /// Decodes one folder front to back into its files (indexes into
    /// `self.files`, by offset). `Ok(malformed)`.
    fn folder(
        &self,
        folder: &Folder,
        files: &[usize],
        entries: &mut Entries,
        ctx: &mut Ctx<'_>,
    ) -> Result<bool, Halt> {
        let mut decoder = match folder.method {
            Method::Stored => Decoder::Stored,
            Method::MsZip => Decoder::MsZip(Box::new(MsZip::new())),
            Method::Lzx(n) => Decoder::Lzx(Box::new(lzxd::Lzxd::new(window(n)))),
            Method::Unsupported => {
                for &i in files {
                    entries.count(ctx)?;
                    ctx.found.stats.unsupported_entries += 1;
                    check_meta(i, &self.files[i], entries, ctx)?;
                }
                return Ok(false);
            }
        };
        let mut malformed = false;
        // The file being filled, and its end in the folder.
        let mut open: Option<(FileNode, u64)> = None;
        let mut next = 0;
        // Bytes of the folder's output passed so far.
        let mut pos: u64 = 0;
        let mut at = folder.start;
        let mut blocks = 0;
        'blocks: while next < files.len() || open.is_some() {
            if blocks == folder.blocks {
                malformed = true;
                break;
            }
            blocks += 1;
            // CFDATA (§2.4): checksum, compressed and uncompressed sizes,
            // reserved bytes, data.
            let block = le16(self.data, at + 4)
                .zip(le16(self.data, at + 6))
                .and_then(|(c, u)| {
                    let from = at + 8 + self.data_reserve;
                    Some((self.data.get(from..from + usize::from(c))?, usize::from(u)))
                });
            let Some((input, out_len)) = block else {
                malformed = true;
                break;
            };
            at += 8 + self.data_reserve + input.len();
            let Some(out) = decoder.block(input, out_len) else {
                malformed = true;
                break;
            };
            let end = pos + out.len() as u64;
            // Hand the block's bytes to the files that hold them.
            let mut p = pos;
            loop {
                if open.is_none() {
                    let Some(&i) = files.get(next) else {
                        break 'blocks;
                    };
                    let f = &self.files[i];
                    let start = u64::from(f.offset);
                    if start >= end {
                        break;
                    }
                    next += 1;
                    entries.count(ctx)?;
                    check_meta(i, f, entries, ctx)?;
                    if start < p {
                        // Overlaps the file before it.
                        malformed = true;
                        continue;
                    }
                    open = Some((entries.open(ctx)?, start + u64::from(f.size)));
                    p = start;
                }
                let Some((node, stop)) = open.as_mut() else {
                    break;
                };
                let to = (*stop).min(end);
                let piece = &out[(p - pos) as usize..(to - pos) as usize];
                if !piece.is_empty() {
                    entries.pour(node, piece, ctx)?;
                }
                p = to;
                if to < *stop {
                    break;
                }
                if let Some((node, _)) = open.take() {
                    node.finish(ctx);
                    if ctx.found.infected.is_some() {
                        return Err(Halt);
                    }
                }
            }
            pos = end;
        }
        if let Some((node, _)) = open.take() {
            // Truncated: scan what came out of it.
            malformed = true;
            node.finish(ctx);
            if ctx.found.infected.is_some() {
                return Err(Halt);
            }
        }
        for &i in &files[next..] {
            // Past the end of the folder's data.
            malformed = true;
            entries.count(ctx)?;
            check_meta(i, &self.files[i], entries, ctx)?;
        }
        Ok(malformed)
    }
}

/// Checks one file against the `.cdb` signatures for cabinets.
fn check_meta(
    index: usize,
    f: &File<'_>,
    entries: &Entries,
    ctx: &mut Ctx<'_>,
) -> Result<(), Halt> {
    if ctx.db.cdb.is_empty() {
        return Ok(());
    }
    let meta = EntryMeta {
        container: FileType::Cab,
        name: f.name,
        compressed_size: Some(0),
        real_size: Some(u64::from(f.size)),
        encrypted: false,
        position: index as u64,
    };
    entries.check_meta(&meta, ctx)
}

fn window(n: u8) -> lzxd::WindowSize {
    use lzxd::WindowSize::*;
    match n {
        15 => KB32,
        16 => KB64,
        17 => KB128,
        18 => KB256,
        19 => KB512,
        20 => MB1,
        _ => MB2,
    }
}

/// A folder's block decoder.
enum Decoder {
    Stored,
    MsZip(Box<MsZip>),
    Lzx(Box<lzxd::Lzxd>),
}

impl Decoder {
    /// Decodes one data block; `None` when it is corrupt.
    fn block<'s>(&'s mut self, input: &'s [u8], out_len: usize) -> Option<&'s [u8]> {
        match self {
            Decoder::Stored => Some(input),
            Decoder::MsZip(z) => z.block(input, out_len),
            Decoder::Lzx(l) => l.decompress_next(input, out_len).ok(),
        }
    }
}

/// MSZIP ([MS-MCI] §2): each block is `CK` and a deflate stream of its own,
/// whose matches may reach into the previous blocks' last 32 KiB.
struct MsZip {
    inflate: flate2::Decompress,
    history: Vec<u8>,
    out: Vec<u8>,
}

impl MsZip {
    fn new() -> Self {
        Self {
            inflate: flate2::Decompress::new(false),
            history: Vec::with_capacity(MSZIP_HISTORY),
            out: vec![0; 64 * 1024],
        }
    }

    fn block(&mut self, input: &[u8], out_len: usize) -> Option<&[u8]> {
        let data = input.strip_prefix(b"CK")?;
        self.inflate.reset(false);
        let primed = self.inflate.total_out();
        if !self.history.is_empty() {
            // The history as one stored deflate block (RFC 1951 §3.2.4), not
            // final, its output thrown away: later matches can reach it.
            let len = self.history.len() as u16;
            let mut primer = Vec::with_capacity(5 + self.history.len());
            primer.push(0);
            primer.extend_from_slice(&len.to_le_bytes());
            primer.extend_from_slice(&(!len).to_le_bytes());
            primer.extend_from_slice(&self.history);
            self.inflate
                .decompress(&primer, &mut self.out, flate2::FlushDecompress::Sync)
                .ok()?;
            if self.inflate.total_out() - primed != self.history.len() as u64 {
                return None;
            }
        }
        let before = self.inflate.total_out();
        let want = out_len.min(self.out.len());
        self.inflate
            .decompress(data, &mut self.out[..want], flate2::FlushDecompress::Finish)
            .ok()?;
        let n = (self.inflate.total_out() - before) as usize;
        let out = &self.out[..n];
        if out.len() >= MSZIP_HISTORY {
            self.history.clear();
            self.history
                .extend_from_slice(&out[out.len() - MSZIP_HISTORY..]);
        } else {
            let total = self.history.len() + out.len();
            if total > MSZIP_HISTORY {
                self.history.drain(..total - MSZIP_HISTORY);
            }
            self.history.extend_from_slice(out);
        }
        Some(&self.out[..n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Database, LimitKind, Limits, Scanner, Verdict};
    use std::io::Write;
    use std::sync::Arc;

    /// A cabinet of one folder compressed with `ctype` holding `files`.
    fn cabinet(ctype: ::cab::CompressionType, files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = ::cab::CabinetBuilder::new();
        let folder = b.add_folder(ctype);
        for (name, _) in files {
            folder.add_file(*name);
        }
        let mut w = b.build(std::io::Cursor::new(Vec::new())).unwrap();
        let mut i = 0;
        while let Some(mut f) = w.next_file().unwrap() {
            f.write_all(files[i].1).unwrap();
            i += 1;
        }
        w.finish().unwrap().into_inner()
    }

    fn scan(bytes: &[u8]) -> (Verdict, crate::Stats) {
        let scanner = Scanner::new(Arc::new(Database::builtin()), Limits::default());
        let mut s = scanner.file_session();
        s.feed(bytes);
        s.finish_with_stats()
    }

    fn eicar() -> Verdict {
        Verdict::Infected {
            name: crate::EICAR_NAME.into(),
        }
    }

    /// Bytes that compress, with matches reaching back across MSZIP blocks.
    fn repetitive(len: usize) -> Vec<u8> {
        let phrase = b"the quick brown fox jumps over the lazy dog ";
        (0..len)
            .map(|i| phrase[i % phrase.len()] ^ (i / 40_000) as u8)
            .collect()
    }

    #[test]
    fn files_across_mszip_blocks_are_scanned() {
        // The first file spans several 32 KiB blocks; EICAR comes after it,
        // in a block whose matches reach into the ones before.
        let mut second = repetitive(50_000);
        second.extend_from_slice(crate::EICAR);
        let files: &[(&str, &[u8])] = &[("a.txt", &repetitive(100_000)), ("b.com", &second)];
        let c = cabinet(::cab::CompressionType::MsZip, files);
        let (v, stats) = scan(&c);
        assert_eq!(v, eicar(), "{stats:?}");
        assert_eq!(stats.entries, 2);
        assert_eq!(stats.malformed_archives, 0);
        // Stored, where EICAR would show in the cabinet itself: every byte
        // comes out.
        let files: &[(&str, &[u8])] = &[("a.txt", &repetitive(100_000)), ("b", &second[..50_000])];
        let (v, stats) = scan(&cabinet(::cab::CompressionType::None, files));
        assert_eq!(v, Verdict::Clean);
        assert_eq!((stats.entries, stats.unpacked_bytes), (2, 150_000));
        assert_eq!(stats.malformed_archives, 0);
    }

    #[test]
    fn parses_the_file_list() {
        let c = cabinet(
            ::cab::CompressionType::MsZip,
            &[("one.txt", b"1"), ("", b""), ("three", b"333")],
        );
        let cab = Cabinet::parse(&c).unwrap();
        let names: Vec<&[u8]> = cab.files.iter().map(|f| f.name).collect();
        assert_eq!(names, [&b"one.txt"[..], b"", b"three"]);
        assert_eq!(cab.files[2].size, 3);
        assert_eq!(cab.files[2].offset, 1);
        assert_eq!(cab.folders[0].method, Method::MsZip);
        assert!(Cabinet::parse(b"MSCF").is_none());
        assert!(Cabinet::parse(b"PK\x03\x04").is_none());
    }

    #[test]
    fn truncated_and_hostile_cabinets_are_malformed() {
        let c = cabinet(
            ::cab::CompressionType::MsZip,
            &[("a.txt", &repetitive(70_000)), ("b.com", crate::EICAR)],
        );
        for cut in [40, 100, c.len() / 2, c.len() - 10] {
            let (v, stats) = scan(&c[..cut]);
            assert_ne!(v, eicar(), "{cut}");
            assert!(stats.malformed_archives > 0, "{cut} {stats:?}");
        }
        // The second file made to overlap the first: not unpacked.
        let mut overlap = cabinet(
            ::cab::CompressionType::None,
            &[("a", b"0123456789abcdef"), ("b", b"0123456789abcdef")],
        );
        let cab = Cabinet::parse(&overlap).unwrap();
        let files_at = le32(&overlap, 16).unwrap() as usize;
        let second = files_at + 16 + cab.files[0].name.len() + 1;
        overlap[second + 4..second + 8].copy_from_slice(&10u32.to_le_bytes());
        let (v, stats) = scan(&overlap);
        assert_eq!(v, Verdict::Clean);
        assert_eq!(stats.malformed_archives, 1, "{stats:?}");
        assert_eq!(stats.files, 2, "the cabinet and its first file: {stats:?}");
        assert_eq!(stats.unpacked_bytes, 16, "{stats:?}");
    }

    proptest::proptest! {
        #[test]
        fn hostile_cabinets_never_panic(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..3000),
            at in 0usize..3000,
        ) {
            // Random bytes after the magic, and a real MSZIP cabinet with its
            // bytes from `at` on replaced by them.
            let mut raw = b"MSCF".to_vec();
            raw.extend_from_slice(&body);
            scan(&raw);
            let mut c = cabinet(
                ::cab::CompressionType::MsZip,
                &[("a.txt", &repetitive(5_000)), ("b", b"bbb")],
            );
            let at = at.min(c.len());
            c.truncate(at);
            c.extend_from_slice(&body);
            scan(&c);
        }
    }

    #[test]
    fn a_cabinet_bomb_stops_at_the_ratio() {
        let zeros = vec![0u8; 64 << 20];
        let c = cabinet(::cab::CompressionType::MsZip, &[("zeros", &zeros)]);
        let (v, stats) = scan(&c);
        assert_eq!(v, Verdict::LimitExceeded(LimitKind::Ratio), "{stats:?}");
        assert!(stats.unpacked_bytes < 64 << 20, "{stats:?}");
    }
}
