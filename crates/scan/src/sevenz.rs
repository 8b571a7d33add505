//! 7-Zip archives: every entry is scanned as a file of its own, decoded with
//! `sevenz-rust2` (LZMA, LZMA2, PPMd, bzip2, deflate, copy, and the BCJ, BCJ2
//! and delta filters).
//!
//! A 7z archive's directory (names, sizes, which compressed block holds which
//! file) is at its end, and a solid block cannot be decoded without it, so the
//! archive is gathered in memory ([`held`](crate::held), at most
//! [`Limits::max_held_archive_size`](crate::Limits::max_held_archive_size)) and
//! taken apart when it ends. Each entry is then read from its decoder a piece
//! at a time into its file, the limits checked before every piece: a bomb
//! stops at the limit, it is never decoded whole.
//!
//! Memory while one is taken apart: the archive itself; its header (the
//! directory, decoded when 7-Zip compressed it) of at most [`HEADER_LIMIT_KB`]
//! and what the crate parses from it: it caps every count by the header's
//! length but then makes that many entries (96 bytes each) or blocks (136)
//! before reading them, so a hostile header declaring 1.5 million of either
//! costs up to about 200 MiB for a moment (a real header, with names, costs a
//! few bytes per header byte); one
//! decoder at a time whose dictionary or PPMd model is at most
//! [`MEMLIMIT_KB`], and grows with the decoded output rather than being
//! allocated up front (except PPMd's model); and one piece of output. An
//! archive needing more than either bound is not unpacked and gives
//! [`LimitKind::HeldArchiveSize`] (not a clean verdict for a crafted header or
//! dictionary). The crate caps its preallocations by 4 MiB. An archive whose
//! start header is blank (one whose writer did not finish) is malformed: the
//! crate would otherwise look for a header at each of its last million bytes,
//! quadratic work. ClamAV's reader (the LZMA SDK's) does not look either.
//!
//! Entries encrypted with AES (7-Zip's `-p`) cannot be decoded: each is
//! counted as an encrypted entry, as a zip's are, so the verdict follows
//! [`Limits::encrypted`](crate::Limits::encrypted); with encrypted headers too
//! (`-mhe=on`) not even the names can be read, and the archive counts as one
//! encrypted entry. ClamAV reports these only with `--alert-encrypted`
//! (`Heuristics.Encrypted.7Zip`).
//!
//! Each entry's name, real size and encryption are checked against the `.cdb`
//! signatures for container type `CL_TYPE_7Z` as ClamAV checks them: the
//! compressed size is 0 (7z compresses blocks, not files) and the position is
//! the entry's 0-based index among the archive's names. ClamAV decodes with
//! the LZMA SDK into temporary files and scans entries one after the other;
//! here the files are scanned as their bytes come out of the decoder.

use std::io::{Cursor, ErrorKind, Read};

use sevenz_rust2::{Archive, ArchiveEntry, BlockDecoder, Password};

use crate::cdb::EntryMeta;
use crate::filetype::FileType;
use crate::held::{Entries, Halt, Held, PIECE};
use crate::pipeline::Ctx;
use crate::verdict::LimitKind;

/// Most memory, in KiB, one decoder's dictionary or model may take: 7-Zip's
/// `-mx9` uses a 64 MiB dictionary (and less for smaller inputs).
const MEMLIMIT_KB: usize = 64 * 1024;

/// Most memory, in KiB, the header and the decoder of a compressed header
/// may take: 7-Zip compresses headers with a 1 MiB LZMA dictionary, and 1.5
/// MiB of header lists some 15,000 entries (more than
/// [`Limits::max_entries`](crate::Limits::max_entries) allows by default).
const HEADER_LIMIT_KB: usize = 1536;

/// The coder id of 7-Zip's AES-256 + SHA-256 encryption.
const AES: &[u8] = &[0x06, 0xf1, 0x07, 0x01];

/// The 7z signature header: magic, version, start header CRC, then the next
/// header's offset (from the end of these 32 bytes), size and CRC.
const SIGNATURE_HEADER: usize = 32;

/// A 7z archive being gathered.
pub(crate) struct SevenZipReader {
    held: Held,
    depth: usize,
}

impl SevenZipReader {
    pub fn new(depth: usize) -> Self {
        Self {
            held: Held::new(),
            depth,
        }
    }

    pub fn feed(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        self.held.feed(data, ctx);
    }

    /// Parses the archive and scans its entries.
    pub fn finish(self, ctx: &mut Ctx<'_>) {
        let Some(data) = self.held.take() else {
            return;
        };
        let mut entries = Entries::new(self.depth, data.len() as u64);
        if data
            .get(8..SIGNATURE_HEADER)
            .is_none_or(|h| h.iter().all(|&b| b == 0))
        {
            // An unfinished archive (7-Zip writes the start header last). The
            // crate would look for a header at every 0x01 or 0x17 byte of the
            // last MiB and parse from there: work quadratic in the archive.
            ctx.found.stats.malformed_archives += 1;
            return;
        }
        let mut src = Cursor::new(data.as_slice());
        let archive =
            match Archive::read_with_memory_limit(&mut src, &Password::empty(), HEADER_LIMIT_KB) {
                Ok(a) => a,
                Err(_) if header_encrypted(&data) => {
                    if entries.count(ctx).is_ok() {
                        ctx.found.stats.encrypted_entries += 1;
                    }
                    return;
                }
                Err(sevenz_rust2::Error::MaxMemLimited { .. }) => {
                    ctx.found.limit(LimitKind::HeldArchiveSize);
                    return;
                }
                Err(_) => {
                    ctx.found.stats.malformed_archives += 1;
                    return;
                }
            };
        if let Ok(true) = walk(&archive, &mut src, &mut entries, ctx) {
            ctx.found.stats.malformed_archives += 1;
        }
    }
}

/// Whether the archive's header is itself encoded with AES (`-mhe=on`): the
/// next header is an encoded header (property id 0x17) whose coder is AES.
fn header_encrypted(data: &[u8]) -> bool {
    let le64 = |at: usize| {
        data.get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    let (Some(offset), Some(size)) = (le64(12), le64(20)) else {
        return false;
    };
    let header = usize::try_from(offset)
        .ok()
        .and_then(|o| o.checked_add(SIGNATURE_HEADER))
        .zip(usize::try_from(size).ok())
        .and_then(|(start, len)| data.get(start..start.checked_add(len)?));
    match header {
        Some(h) => h.first() == Some(&0x17) && memchr::memmem::find(h, AES).is_some(),
        None => false,
    }
}

/// Scans every entry: block by block (a solid block's files one after the
/// other), then the entries without data. `Ok(malformed)`, or `Err` when the
/// scan must stop.
fn walk(
    archive: &Archive,
    src: &mut Cursor<&[u8]>,
    entries: &mut Entries,
    ctx: &mut Ctx<'_>,
) -> Result<bool, Halt> {
    let password = Password::empty();
    let map = &archive.stream_map;
    let mut malformed = false;
    let mut buf = vec![0u8; PIECE];
    for (b, block) in archive.blocks.iter().enumerate() {
        let first = map.block_first_file_index.get(b).copied().unwrap_or(0);
        if block.coders.iter().any(|c| c.encoder_method_id() == AES) {
            // The block's files follow one another from its first, among
            // files without data.
            let in_block = (first..archive.files.len())
                .map(|i| (i, map.file_block_index[i]))
                .take_while(|&(_, k)| k.is_none_or(|k| k == b))
                .filter_map(|(i, k)| k.map(|_| i));
            for i in in_block {
                entries.count(ctx)?;
                ctx.found.stats.encrypted_entries += 1;
                check_meta(i, &archive.files[i], true, entries, ctx)?;
            }
            continue;
        }
        let decoder =
            BlockDecoder::new_with_memory_limit(1, MEMLIMIT_KB, b, archive, &password, src);
        let mut index = first;
        let mut halted = false;
        let mut broken = false;
        let read = decoder.for_each_entries(&mut |entry, reader| {
            let i = index;
            index += 1;
            if !entry.has_stream || entry.is_directory {
                // Scanned (for `.cdb`) with the entries without data.
                return Ok(true);
            }
            match scan_entry(i, entry, reader, &mut buf, entries, ctx) {
                Ok(true) => Ok(true),
                Ok(false) => {
                    broken = true;
                    Ok(false)
                }
                Err(Halt) => {
                    halted = true;
                    Ok(false)
                }
            }
        });
        if halted {
            return Err(Halt);
        }
        if let Err(sevenz_rust2::Error::MaxMemLimited { .. }) = read {
            ctx.found.limit(LimitKind::HeldArchiveSize);
            return Err(Halt);
        }
        malformed |= broken || read.is_err();
    }
    for (i, file) in archive.files.iter().enumerate() {
        if map.file_block_index[i].is_none() && !file.is_directory {
            entries.count(ctx)?;
            check_meta(i, file, false, entries, ctx)?;
        }
    }
    Ok(malformed)
}

/// Checks one entry against the `.cdb` signatures for 7z archives.
fn check_meta(
    index: usize,
    file: &ArchiveEntry,
    encrypted: bool,
    entries: &Entries,
    ctx: &mut Ctx<'_>,
) -> Result<(), Halt> {
    if ctx.db.cdb.is_empty() {
        return Ok(());
    }
    let meta = EntryMeta {
        container: FileType::SevenZip,
        name: file.name.as_bytes(),
        compressed_size: Some(0),
        real_size: Some(file.size),
        encrypted,
        position: index as u64,
    };
    entries.check_meta(&meta, ctx)
}

/// Scans one entry as a file, reading its decoder a piece at a time.
/// `Ok(false)` when its data turned out corrupt (what came out is scanned).
fn scan_entry(
    index: usize,
    file: &ArchiveEntry,
    reader: &mut dyn Read,
    buf: &mut [u8],
    entries: &mut Entries,
    ctx: &mut Ctx<'_>,
) -> Result<bool, Halt> {
    entries.count(ctx)?;
    check_meta(index, file, false, entries, ctx)?;
    let mut node = entries.open(ctx)?;
    let complete = loop {
        match reader.read(buf) {
            Ok(0) => break true,
            Ok(n) => entries.pour(&mut node, &buf[..n], ctx)?,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break false,
        }
    };
    node.finish(ctx);
    if ctx.found.infected.is_some() {
        return Err(Halt);
    }
    Ok(complete)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `7zz a -m0=lzma2` of EICAR (`eicar.com`) and 50 lines of text.
    const EICAR_7Z: &[u8] =
        b"\x37\x7a\xbc\xaf\x27\x1c\x00\x04\x02\x66\x65\x23\xda\x00\x00\x00\x00\x00\x00\x00\
          \x20\x00\x00\x00\x00\x00\x00\x00\xaa\x35\x75\xdc\xe0\x04\x2b\x00\x62\x5d\x00\x2c\
          \x0d\x45\xe2\x23\x4b\x38\x09\xfe\x24\x2c\x5b\x4b\x36\x90\x31\xdc\x4b\x24\x35\xb6\
          \x32\xdf\xaf\x31\x4c\x3c\xdf\xcf\x3a\x4b\x75\x73\xe5\x8b\xc8\x7e\x89\xb3\x80\x5e\
          \xf7\x94\x1f\x8d\xa9\xc3\x1e\xfa\x49\x6c\x05\xfc\x84\x05\x5a\x71\xfc\x39\xba\x92\
          \x65\x8b\x97\x43\xa7\xdd\x2e\xbc\x46\x0d\x19\x11\x66\x7e\xc1\x78\x90\xb7\xd0\xce\
          \xe5\x96\x69\xe0\xaf\xcc\x8b\x3e\x0a\x4d\x6f\xee\xbe\x53\x39\x89\x00\x00\x00\x00\
          \x81\x33\x07\xae\x0f\xd4\x10\xec\x7d\x40\xc0\x90\xd2\xff\x7d\x69\x4d\x8f\x97\xa7\
          \x9c\x69\xc8\x72\x62\x9f\x6e\xb8\x0c\xa7\xb0\x4d\x7e\x2c\xb5\x96\x1b\x0c\x03\xdf\
          \x40\x7f\xee\xab\x4f\x12\x56\x8b\x34\x94\xdf\xc1\x03\xfa\xc3\x28\xe2\x39\x7f\x1a\
          \x79\x37\x56\xdd\x34\xc4\x5b\x03\x88\xdd\x20\x3f\x26\x58\xa9\xd8\xf3\xa1\x7e\x42\
          \x3b\xd0\x8b\x2f\x1b\xca\x3e\x33\xa3\x16\xe2\x42\xed\x79\x5f\x1f\x58\x2d\xc6\x65\
          \x11\xe1\xb4\x7e\x79\x08\x00\x00\x00\x00\x17\x06\x6a\x01\x09\x70\x00\x07\x0b\x01\
          \x00\x01\x23\x03\x01\x01\x05\x5d\x00\x10\x00\x00\x0c\x7e\x0a\x01\x79\x74\x48\x21\
          \x00\x00";

    fn scan(bytes: &[u8], limits: crate::Limits) -> (crate::Verdict, crate::Stats) {
        let db = std::sync::Arc::new(crate::Database::builtin());
        let mut s = crate::Scanner::new(db, limits).file_session();
        for piece in bytes.chunks(100) {
            s.feed(piece);
        }
        s.finish_with_stats()
    }

    #[test]
    fn entries_are_unpacked_and_scanned() {
        let (v, stats) = scan(EICAR_7Z, crate::Limits::default());
        let name = crate::EICAR_NAME.into();
        assert_eq!(v, crate::Verdict::Infected { name }, "{stats:?}");
        assert_eq!(stats.entries, 1, "EICAR is the first entry: {stats:?}");
    }

    #[test]
    fn limits_hold_in_7z() {
        let depth = crate::Limits {
            max_depth: 0,
            ..crate::Limits::default()
        };
        let (v, _) = scan(EICAR_7Z, depth);
        assert_eq!(v, crate::Verdict::LimitExceeded(crate::LimitKind::Depth));
        let held = crate::Limits {
            max_held_archive_size: 200,
            ..crate::Limits::default()
        };
        let (v, _) = scan(EICAR_7Z, held);
        let kind = crate::LimitKind::HeldArchiveSize;
        assert_eq!(v, crate::Verdict::LimitExceeded(kind));
    }

    proptest::proptest! {
        #[test]
        fn damaged_packed_data_never_panics(
            flips in proptest::collection::vec((32usize..200, 1u8..=255), 1..8),
        ) {
            // The packed streams have no CRC of their own: damage there
            // reaches the LZMA2 decoder.
            let mut a = EICAR_7Z.to_vec();
            for (at, x) in flips {
                a[at] ^= x;
            }
            scan(&a, crate::Limits::default());
        }
    }

    #[test]
    fn a_blank_start_header_is_not_searched() {
        let mut blank = EICAR_7Z.to_vec();
        blank[8..SIGNATURE_HEADER].fill(0);
        let (v, stats) = scan(&blank, crate::Limits::default());
        assert_eq!(v, crate::Verdict::Clean);
        assert_eq!(stats.malformed_archives, 1);
    }

    #[test]
    fn truncated_or_damaged_archives_are_malformed() {
        for cut in [10, 32, 100, EICAR_7Z.len() - 1] {
            let (v, stats) = scan(&EICAR_7Z[..cut], crate::Limits::default());
            assert_eq!(v, crate::Verdict::Clean, "{cut}");
            assert_eq!(stats.malformed_archives, 1, "{cut}");
        }
        // A damaged byte in the compressed data: CRC or decoding error.
        let mut bad = EICAR_7Z.to_vec();
        bad[40] ^= 0x55;
        let (_, stats) = scan(&bad, crate::Limits::default());
        assert_eq!(stats.malformed_archives, 1, "{stats:?}");
    }

    #[test]
    fn encrypted_header_is_recognised() {
        let mut a = vec![0u8; SIGNATURE_HEADER];
        a[..6].copy_from_slice(b"7z\xbc\xaf\x27\x1c");
        let header = [0x17, 0x06, 0x01, 0x24, 0x06, 0xf1, 0x07, 0x01, 0x0a];
        a[12..20].copy_from_slice(&4u64.to_le_bytes());
        a[20..28].copy_from_slice(&(header.len() as u64).to_le_bytes());
        a.extend_from_slice(&[0; 4]);
        a.extend_from_slice(&header);
        assert!(header_encrypted(&a));
        a[SIGNATURE_HEADER + 4] = 0x01;
        assert!(!header_encrypted(&a));
        // Offsets past the end, or that overflow, are not a header.
        a[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(!header_encrypted(&a));
        assert!(!header_encrypted(b"7z"));
    }
}
