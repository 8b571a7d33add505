//! A PE file's import hash, for ClamAV's `.imp` signatures
//! (`Hash:Size:Name[:MinFLevel[:MaxFLevel]]`).
//!
//! The hash is ClamAV's: the digest of the imported functions as
//! `dll.function` strings joined by `,`, both lowercased, the DLL name without a
//! `.dll`, `.ocx` or `.sys` extension, a function imported by ordinal named as
//! [`crate::ordinals`] names it (`ord<N>` by default). The signature's size is
//! the length of that string, not the size of the import table.
//!
//! Why the file is held whole: the import directory, each DLL's thunk array and
//! the names they point at are found through one another by RVA, anywhere in the
//! file, before or after each other, so no single pass can pick them up without
//! keeping what may turn out to be needed. [`ImportHolder`] therefore keeps a PE
//! file's bytes, only while `.imp` signatures are loaded, only once its headers
//! show an import directory, and only up to
//! [`Limits::max_held_archive_size`](crate::Limits::max_held_archive_size)
//! (a bigger file is not import-hashed, and counted in
//! [`Stats::imports_not_hashed`](crate::Stats::imports_not_hashed)).
//!
//! The walk follows libclamav's `hash_imptbl` as `clamscan` 1.4 runs it, its
//! quirks included, since an `.imp` signature is written against what clamscan
//! computes:
//! - descriptors are read while more than one descriptor's worth of the
//!   directory's size is left (so a directory whose size does not count the null
//!   descriptor loses its last DLL), up to 1,024, stopping at a null name;
//! - a DLL name is not checked; a function name with anything but letters,
//!   digits, `_` and `.` makes the whole table unhashable;
//! - a function whose name lies less than 258 bytes before the end of the file
//!   is left out (ClamAV asks for the hint and 256 name bytes);
//! - a function whose name RVA maps to no section is read at file offset 2
//!   (ClamAV tests the wrong error variable);
//! - PE32+ (64-bit) files have no import hash: `cli_scanpe` stops on them before
//!   it gets to the import table (`clamscan` 1.4 matches no `.imp` signature in
//!   them, whatever its documentation says).
//!
//! One limit of our own: past [`MAX_FUNCTIONS`] thunks the table is not
//! hashed, because ClamAV sets none and a hostile file could otherwise make a
//! thousand DLLs share one thunk array as long as the file.

use crate::digests::{Digested, Digests};

use crate::pe::{parse, Layout, Parse, Section, MAX_SECTIONS};

/// Most import thunks read in one file, over all its DLLs (real programs import
/// a few thousand functions at most); past it the file gets no import hash.
pub const MAX_FUNCTIONS: usize = 1 << 16;

/// Most DLL descriptors read, as ClamAV's `PE_MAXIMPORTS`.
const MAX_DLLS: usize = 1024;

/// Most bytes of a name read, as ClamAV's `PE_MAXNAMESIZE`.
const MAX_NAME: u64 = 256;

/// A file's import hash: the length of the hashed string and the digests asked for.
pub(crate) type ImportHash = Digested;

/// Why a file has no import hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoHash {
    /// Not a PE ClamAV would parse, no import directory, or one ClamAV cannot read.
    NotHashed,
    /// More than [`MAX_FUNCTIONS`] imports, or a file over the size limit of
    /// [`ImportHolder`].
    Limit,
}

/// The sections as ClamAV maps RVAs through them.
struct Map<'a> {
    file: &'a [u8],
    sections: Vec<Section>,
    header_size: u64,
}

impl Map<'_> {
    fn size(&self) -> u64 {
        self.file.len() as u64
    }

    /// The file offset of `rva`, as libclamav's `cli_rawaddr`: in the headers the
    /// RVA itself, else in the last section that holds it.
    fn raw(&self, rva: u32) -> Option<u64> {
        if u64::from(rva) < self.header_size {
            return (u64::from(rva) < self.size()).then_some(u64::from(rva));
        }
        let s = self
            .sections
            .iter()
            .rev()
            .find(|s| s.rsz != 0 && s.rva <= rva && s.rsz > u64::from(rva - s.rva))?;
        // ClamAV adds in 32 bits.
        Some(u64::from((rva - s.rva).wrapping_add(s.raw as u32)))
    }

    fn u32_at(&self, at: u64) -> Option<u32> {
        let at = usize::try_from(at).ok()?;
        Some(u32::from_le_bytes(
            self.file.get(at..at + 4)?.try_into().ok()?,
        ))
    }

    /// The NUL-terminated string at `at`, at most `len` bytes.
    fn string(&self, at: u64, len: u64) -> &[u8] {
        let s = &self.file[at as usize..(at + len) as usize];
        s.iter().position(|&b| b == 0).map_or(s, |n| &s[..n])
    }
}

/// The import string being hashed, and the thunks read so far.
struct Hashing {
    digests: Digests,
    thunks: usize,
}

/// Whether ClamAV takes `name` for a function name: letters, digits, `_`, `.`
/// (an empty name passes).
fn valid_name(name: &[u8]) -> bool {
    name.iter()
        .all(|&c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

/// The length of a DLL name's part that goes into the hash: up to its first dot
/// when what follows starts with `.dll`, `.ocx` or `.sys`, else all of it.
fn dll_stem(dll: &[u8]) -> usize {
    match dll.iter().position(|&b| b == b'.') {
        Some(dot)
            if [&b".dll"[..], b".ocx", b".sys"].iter().any(|e| {
                dll[dot..]
                    .get(..4)
                    .is_some_and(|x| x.eq_ignore_ascii_case(e))
            }) =>
        {
            dot
        }
        _ => dll.len(),
    }
}

/// The name ClamAV gives ordinal `ord` of `dll`.
fn ordinal_name(dll: &[u8], ord: u16) -> String {
    let starts = |p: &[u8]| {
        dll.get(..p.len())
            .is_some_and(|d| d.eq_ignore_ascii_case(p))
    };
    let table = if starts(b"ws2_32.dll") || starts(b"wsock32.dll") {
        crate::ordinals::WINSOCK
    } else if starts(b"oleaut32.dll") {
        crate::ordinals::OLEAUT32
    } else {
        &[]
    };
    match table.binary_search_by_key(&ord, |(o, _)| *o) {
        Ok(i) => table[i].1.to_string(),
        Err(_) => format!("ord{ord}"),
    }
}

/// The import hash of a whole PE file, the digests asked for in `kinds` (MD5,
/// SHA-1, SHA-256).
pub(crate) fn import_hash(file: &[u8], kinds: [bool; 3]) -> Result<ImportHash, NoHash> {
    let Parse::Pe(layout) = parse(file) else {
        return Err(NoHash::NotHashed);
    };
    import_hash_of(file, &layout, kinds)
}

fn import_hash_of(file: &[u8], layout: &Layout, kinds: [bool; 3]) -> Result<ImportHash, NoHash> {
    use NoHash::NotHashed;
    if layout.plus || layout.sections.len() > MAX_SECTIONS {
        return Err(NotHashed);
    }
    let sections = layout.settle(file.len() as u64).ok_or(NotHashed)?;
    let map = Map {
        file,
        sections: sections.into_iter().map(|(_, s)| s).collect(),
        header_size: layout.header_size,
    };
    let (dir_rva, dir_size) = layout.imports;
    if dir_rva == 0 || dir_size == 0 {
        return Err(NotHashed);
    }
    let dir = map.raw(dir_rva).ok_or(NotHashed)?;
    if dir + u64::from(dir_size) > map.size() {
        return Err(NotHashed);
    }
    let mut d = Hashing {
        digests: Digests::new(kinds),
        thunks: 0,
    };
    let mut left = u64::from(dir_size);
    let mut at = dir;
    let mut dlls = 0;
    while left > 20 && dlls < MAX_DLLS {
        let field = |o: u64| map.u32_at(at + o).ok_or(NotHashed);
        let (first_thunk_orig, name, first_thunk) = (field(0)?, field(12)?, field(16)?);
        if name == 0 {
            break;
        }
        left -= 20;
        at += 20;
        dlls += 1;
        let name_at = map.raw(name).ok_or(NotHashed)?;
        let len = MAX_NAME.min(map.size().checked_sub(name_at).ok_or(NotHashed)?);
        if len == 0 {
            return Err(NotHashed);
        }
        let dll = map.string(name_at, len);
        // The lookup table, or the address table when there is none.
        let thunks = match first_thunk_orig {
            0 => None,
            rva => map.raw(rva).filter(|&o| o != 0),
        };
        let thunks = match thunks {
            Some(o) => o,
            None => map.raw(first_thunk).ok_or(NotHashed)?,
        };
        functions(&map, dll, thunks, &mut d)?;
    }
    let size = d.digests.hashed();
    Ok(d.digests.finish(size))
}

/// Hashes the functions of one DLL, from its thunk array at file offset `at`.
fn functions(map: &Map<'_>, dll: &[u8], mut at: u64, d: &mut Hashing) -> Result<(), NoHash> {
    let stem = dll[..dll_stem(dll)].to_ascii_lowercase();
    // A thunk cut by the end of the file ends the array, as a null one does.
    while let Some(thunk) = map.u32_at(at).filter(|&t| t != 0) {
        at += 4;
        // Counted before anything is read, so that thunks left out count too.
        d.thunks += 1;
        if d.thunks > MAX_FUNCTIONS {
            return Err(NoHash::Limit);
        }
        let name = if thunk >> 31 != 0 {
            ordinal_name(dll, thunk as u16).into_bytes()
        } else {
            // ClamAV reads at offset 0 when the RVA maps nowhere.
            let offset = map.raw(thunk).unwrap_or(0);
            // The hint (two bytes) and up to 256 name bytes must all be in the file.
            let len = MAX_NAME.min(map.size().saturating_sub(offset));
            if len == 0 || offset + 2 + len > map.size() {
                continue;
            }
            map.string(offset + 2, len).to_vec()
        };
        if !valid_name(&name) {
            return Err(NoHash::NotHashed);
        }
        // Every entry adds at least its dot: the first finds nothing hashed yet.
        let digests = &mut d.digests;
        if digests.hashed() > 0 {
            digests.update(b",");
        }
        digests.update(&stem);
        digests.update(b".");
        digests.update(&name.to_ascii_lowercase());
    }
    Ok(())
}

/// Keeps a PE file's bytes for its import hash, while its headers say it has
/// an import directory and up to a size limit.
pub(crate) struct ImportHolder {
    buf: Vec<u8>,
    state: Holding,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holding {
    /// Headers not yet parsed: parse again once this many bytes are in.
    Headers(usize),
    /// An import directory: the file is kept.
    Whole,
    /// Nothing to hash: no bytes kept.
    Nothing,
    /// Past the size limit: no bytes kept, and counted.
    Over,
}

impl ImportHolder {
    pub fn new() -> Self {
        Self {
            buf: Vec::new(),
            state: Holding::Headers(0),
        }
    }

    /// Takes the file's next bytes; `limit` is the most bytes kept.
    pub fn feed(&mut self, data: &[u8], limit: usize) {
        if matches!(self.state, Holding::Nothing | Holding::Over) {
            return;
        }
        if self.buf.len() + data.len() > limit {
            self.buf = Vec::new();
            self.state = Holding::Over;
            return;
        }
        self.buf.extend_from_slice(data);
        if let Holding::Headers(need) = self.state {
            if self.buf.len() >= need {
                self.state = match parse(&self.buf) {
                    Parse::Need(n) => Holding::Headers(n),
                    Parse::Pe(l) if !l.plus && l.imports.0 != 0 && l.imports.1 != 0 => {
                        Holding::Whole
                    }
                    _ => Holding::Nothing,
                };
                if self.state == Holding::Nothing {
                    self.buf = Vec::new();
                }
            }
        }
    }

    /// Ends the file: its import hash with the digests asked for in `kinds`,
    /// or why there is none.
    pub fn finish(self, kinds: [bool; 3]) -> Result<ImportHash, NoHash> {
        match self.state {
            Holding::Nothing => Err(NoHash::NotHashed),
            Holding::Over => Err(NoHash::Limit),
            Holding::Headers(_) | Holding::Whole => import_hash(&self.buf, kinds),
        }
    }
}

#[cfg(test)]
#[path = "../tests/support/pe.rs"]
mod pe_builder;

#[cfg(test)]
mod tests {
    use super::pe_builder::{import_string, pe_with_imports, Func, Options};
    use super::*;
    use md5::Digest;
    use proptest::prelude::*;

    const ALL: [bool; 3] = [true, true, true];

    fn streamed(file: &[u8], chunk: usize, limit: usize) -> Result<ImportHash, NoHash> {
        let mut h = ImportHolder::new();
        for c in file.chunks(chunk.max(1)) {
            h.feed(c, limit);
        }
        h.finish(ALL)
    }

    fn expect(imports: &[(&str, &[Func])]) -> ImportHash {
        let s = import_string(imports);
        ImportHash {
            size: s.len() as u64,
            md5: Some(md5::Md5::digest(&s).into()),
            sha1: Some(sha1::Sha1::digest(&s).into()),
            sha256: Some(sha2::Sha256::digest(&s).into()),
        }
    }

    const KERNEL: &[Func] = &[Func::Name("CreateFileA"), Func::Name("ExitProcess")];
    const SOCK: &[Func] = &[Func::Ordinal(1), Func::Ordinal(115), Func::Ordinal(999)];

    #[test]
    fn names_ordinals_and_extensions() {
        let imports: &[(&str, &[Func])] = &[
            ("KERNEL32.dll", KERNEL),
            ("WS2_32.DLL", SOCK),
            ("oleaut32.dll", &[Func::Ordinal(2)]),
            ("advapi32.dll", &[Func::Ordinal(7)]),
            ("my.ctl.ocx", &[Func::Name("Run")]),
            ("noext", &[Func::Name("X_y.z")]),
            ("two.dots.dll", &[Func::Name("F")]),
        ];
        let s = import_string(imports);
        assert!(
            s.starts_with("kernel32.createfilea,kernel32.exitprocess,ws2_32.accept,ws2_32.wsastartup,ws2_32.ord999,oleaut32.sysallocstring,advapi32.ord7,my.ctl.ocx.run,"),
            "{s}"
        );
        assert!(s.ends_with(",noext.x_y.z,two.dots.dll.f"), "{s}");
        for lookup_table in [true, false] {
            let o = Options {
                lookup_table,
                ..Options::default()
            };
            let file = pe_with_imports(imports, o);
            for chunk in [1, 100, 4096, file.len()] {
                assert_eq!(
                    streamed(&file, chunk, 1 << 20),
                    Ok(expect(imports)),
                    "{o:?} in chunks of {chunk}"
                );
            }
        }
        // As clamscan, no import hash for a PE32+ file.
        let o = Options {
            plus: true,
            ..Options::default()
        };
        assert_eq!(
            streamed(&pe_with_imports(imports, o), 100, 1 << 20),
            Err(NoHash::NotHashed)
        );
    }

    #[test]
    fn a_directory_without_its_null_descriptor_loses_its_last_dll() {
        let imports: &[(&str, &[Func])] = &[("kernel32.dll", KERNEL), ("ws2_32.dll", SOCK)];
        let o = Options {
            count_null: false,
            ..Options::default()
        };
        let file = pe_with_imports(imports, o);
        assert_eq!(import_hash(&file, ALL), Ok(expect(&imports[..1])));
    }

    #[test]
    fn a_bad_function_name_leaves_the_file_unhashed() {
        let file = pe_with_imports(
            &[("kernel32.dll", &[Func::Name("Create-File")])],
            Options::default(),
        );
        assert_eq!(import_hash(&file, ALL), Err(NoHash::NotHashed));
        // A DLL name is not checked.
        let imports: &[(&str, &[Func])] = &[("ker nel-32.dll", KERNEL)];
        let file = pe_with_imports(imports, Options::default());
        assert_eq!(import_hash(&file, ALL), Ok(expect(imports)));
    }

    #[test]
    fn only_asked_digests_and_limits() {
        let imports: &[(&str, &[Func])] = &[("kernel32.dll", KERNEL)];
        let file = pe_with_imports(imports, Options::default());
        let h = import_hash(&file, [true, false, false]).unwrap();
        assert!(h.md5.is_some() && h.sha1.is_none() && h.sha256.is_none());
        assert_eq!(streamed(&file, 512, file.len() - 1), Err(NoHash::Limit));
        // No import directory: nothing held, nothing hashed.
        let mut bare = file.clone();
        bare[0x98 + 96 + 8..0x98 + 96 + 16].fill(0);
        let mut h = ImportHolder::new();
        h.feed(&bare, 1 << 20);
        assert!(h.buf.is_empty());
        assert_eq!(h.finish(ALL), Err(NoHash::NotHashed));
        assert_eq!(import_hash(b"MZ not a PE", ALL), Err(NoHash::NotHashed));
    }

    #[test]
    fn too_many_functions() {
        // Descriptors sharing one thunk array of 2,000 functions, written in the
        // `.data` section and made the import directory.
        let funcs: Vec<Func> = (0..2000).map(|_| Func::Name("F")).collect();
        let funcs: &'static [Func] = Box::leak(funcs.into_boxed_slice());
        let mut file = pe_with_imports(&[("a.dll", funcs)], Options::default());
        let first: Vec<u8> = file[0x600..0x600 + 20].to_vec();
        let (rva, raw) = layout_data(&file);
        for i in 0..MAX_FUNCTIONS / 2000 + 2 {
            file[raw + i * 20..raw + i * 20 + 20].copy_from_slice(&first);
        }
        let dir = 0x98 + 96 + 8;
        file[dir..dir + 4].copy_from_slice(&rva.to_le_bytes());
        file[dir + 4..dir + 8].copy_from_slice(&0x400u32.to_le_bytes());
        assert_eq!(import_hash(&file, ALL), Err(NoHash::Limit));
        // One copy fewer than the limit needs is hashed.
        file[raw + (MAX_FUNCTIONS / 2000) * 20..raw + 0x400].fill(0);
        assert_eq!(
            import_hash(&file, ALL).map(|h| h.size),
            Ok((MAX_FUNCTIONS / 2000 * 2000 * "a.f,".len() - 1) as u64)
        );
    }

    /// The `.data` section's RVA and raw offset (the third section).
    fn layout_data(file: &[u8]) -> (u32, usize) {
        let Parse::Pe(l) = parse(file) else {
            panic!("not a PE")
        };
        (l.sections[2].rva, l.sections[2].raw as usize)
    }

    proptest! {
        #[test]
        fn never_panics_and_splits_agree(
            flips in proptest::collection::vec((0usize..0xa00, any::<u8>()), 0..12),
            plus in any::<bool>(),
            chunk in 1usize..900,
        ) {
            let imports: &[(&str, &[Func])] = &[("kernel32.dll", KERNEL), ("ws2_32.dll", SOCK)];
            let mut file = pe_with_imports(imports, Options { plus, ..Options::default() });
            for (at, b) in flips {
                if at < file.len() {
                    file[at] = b;
                }
            }
            prop_assert_eq!(streamed(&file, chunk, 1 << 20), import_hash(&file, ALL));
        }
    }
}
