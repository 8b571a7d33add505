//! The loaded signature database: body signatures behind an index of their literal
//! anchors ([`crate::anchor`]), logical signatures ([`crate::logical`]) whose body
//! subsignatures share that index, whole-file and PE section hash tables, container
//! metadata signatures and file-type magic; loading from ClamAV database files
//! (`.ndb`, `.ldb`, `.hdb`, `.hsb`, `.mdb`, `.msb`, `.imp`, `.cdb`, `.ftm`, the phishing
//! lists `.pdb`, `.wdb` and `.gdb` (see [`crate::phish`]), the `.ign`/`.ign2`
//! ignore lists, the `.fp`/`.sfp` false-positive hashes, and `.cvd`/`.cld`/`.cud`
//! containers, a `.cvd` only when its digital signature checks out; the PUA twins
//! `.ndu`, `.ldu`, `.hdu`, `.hsu`, `.mdu`, `.msu` only when asked, as clamd loads
//! them only with `DetectPUA`), with a report of everything that was not loaded and
//! why.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::Path;

use crate::anchor::AnchorIndex;
use crate::cdb::{parse_cdb, CdbLine, ContainerSig};
use crate::error::ScanError;
use crate::filetype::FileType;
use crate::ftm::{parse_ftm, FtmLine, Magic};
use crate::logical::{parse_ldb, LdbRefusal, LogicalSig};
use crate::phish::{parse_line, ListKind, PhishDb, PhishLine};
use crate::signature::{
    decode_hex, fold_variants, parse_hash, parse_import_hash, parse_ndb, parse_section_hash,
    BodySig, HashKind, HashSig, Offset, Refusal,
};

/// Most parse errors the load report keeps word for word (all are counted).
const MAX_REPORTED_ERRORS: usize = 100;

/// Name of the built-in EICAR test signature.
///
/// A body signature on the 68-byte EICAR test string, anywhere in a file, so the test
/// file is found with trailing bytes too (which a whole-file hash would miss). ClamAV's
/// official database reports the same file as `Win.Test.EICAR_HDB-1`.
pub const EICAR_NAME: &str = "Eicar-Signature";

/// The EICAR anti-virus test string.
pub const EICAR: &[u8] = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";

/// What loading signature files did: counts of what was loaded and of everything
/// refused, by reason, so that nothing is silently ignored.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// Files read (database files and members of `.cvd`/`.cld` containers).
    pub files: usize,
    /// `.cvd` containers whose MD5 and digital signature were checked.
    pub verified_containers: usize,
    /// Body (`.ndb`) signatures loaded, the built-in EICAR one included.
    pub body_signatures: usize,
    /// Hash (`.hdb`/`.hsb`) signatures loaded.
    pub hash_signatures: usize,
    /// Logical (`.ldb`) signatures loaded.
    pub logical_signatures: usize,
    /// Container metadata (`.cdb`) signatures loaded.
    pub container_signatures: usize,
    /// PE section hash (`.mdb`/`.msb`) signatures loaded.
    pub section_hash_signatures: usize,
    /// PE import table hash (`.imp`) signatures loaded.
    pub import_hash_signatures: usize,
    /// PCRE subsignatures among them, and how many of those needed the backtracking
    /// engine (see [`crate::pcre`]).
    pub pcre_subsignatures: usize,
    /// PCRE subsignatures that need the backtracking engine.
    pub backtracking_pcre: usize,
    /// Signatures loaded, by the format (file extension) they came from.
    pub loaded_by_format: BTreeMap<String, usize>,
    /// PUA database files (`.ndu`, `.ldu`, `.hdu`, `.hsu`) not loaded because PUA
    /// detection is off (see [`DatabaseBuilder::pua`]), by extension.
    pub pua_files_skipped: BTreeMap<String, usize>,
    /// The first parse errors, each naming its file and line (`main.ldb:12: ...`);
    /// every one is also counted in `refused_lines`.
    pub errors: Vec<String>,
    /// Signatures dropped by name through `.ign2` files.
    pub ignored: usize,
    /// Signature lines refused, by reason.
    pub refused_lines: BTreeMap<String, usize>,
    /// Valid lines this engine reads but has no use for (an `.ftm` line for a file
    /// type it does not distinguish, say), by reason.
    pub unused_lines: BTreeMap<String, usize>,
    /// Files of formats this engine does not read (`.crb`, `.cbc`, ...), by extension.
    pub unsupported_files: BTreeMap<String, usize>,
    /// Signatures in those files, by extension (lines of the line-based formats;
    /// a bytecode `.cbc` file is one), so that what is not loaded is counted too.
    pub unsupported_signatures: BTreeMap<String, usize>,
}

impl LoadReport {
    fn refuse(&mut self, reason: Refusal) {
        *self.refused_lines.entry(reason.to_string()).or_default() += 1;
    }

    /// Total number of refused signature lines.
    pub fn refused(&self) -> usize {
        self.refused_lines.values().sum()
    }
}

impl LoadReport {
    /// A multi-line table for people (`sluice scan --stats`): signatures loaded per
    /// format, what was refused and why, what was read but not used, formats not
    /// read, and the first errors with their file and line.
    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut t = String::new();
        let _ = writeln!(t, "Files read: {}", self.files);
        if self.verified_containers > 0 {
            let _ = writeln!(
                t,
                ".cvd containers verified (MD5 and digital signature): {}",
                self.verified_containers
            );
        }
        let _ = writeln!(t, "Signatures loaded, by format:");
        for (ext, n) in &self.loaded_by_format {
            let _ = writeln!(t, "  .{ext:<6} {n:>10}");
        }
        let _ = writeln!(
            t,
            "  (built-in EICAR included: {} body, {} logical, {} hash, {} container, {} PE section hash, {} PE import hash)",
            self.body_signatures,
            self.logical_signatures,
            self.hash_signatures,
            self.container_signatures,
            self.section_hash_signatures,
            self.import_hash_signatures
        );
        let _ = writeln!(t, "Lines refused: {}", self.refused());
        for (reason, n) in &self.refused_lines {
            let _ = writeln!(t, "  {n:>10}  {reason}");
        }
        if !self.unused_lines.is_empty() {
            let _ = writeln!(t, "Lines read but not used:");
            for (reason, n) in &self.unused_lines {
                let _ = writeln!(t, "  {n:>10}  {reason}");
            }
        }
        if self.ignored > 0 {
            let _ = writeln!(t, "Signatures dropped by ignore lists: {}", self.ignored);
        }
        if !self.unsupported_files.is_empty() {
            let _ = writeln!(t, "Formats not supported (files, signatures):");
            for (ext, files) in &self.unsupported_files {
                match self.unsupported_signatures.get(ext) {
                    Some(sigs) => {
                        let _ =
                            writeln!(t, "  .{ext:<6} {files:>4} file(s) {sigs:>10} signature(s)");
                    }
                    None => {
                        let _ = writeln!(t, "  .{ext:<6} {files:>4} file(s)");
                    }
                }
            }
        }
        for (ext, n) in &self.pua_files_skipped {
            let _ = writeln!(t, "PUA .{ext} file(s) not loaded (PUA detection off): {n}");
        }
        if !self.errors.is_empty() {
            let _ = writeln!(t, "First errors:");
            for e in self.errors.iter().take(10) {
                let _ = writeln!(t, "  {e}");
            }
        }
        t
    }
}

impl std::fmt::Display for LoadReport {
    /// A summary for the log at start: what was loaded, then each refusal reason and
    /// each unsupported file type with its count.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} files: {} body, {} logical ({} PCRE subsignatures), {} container, {} PE section hash, {} PE import hash and {} hash signatures loaded, {} refused, {} ignored",
            self.files,
            self.body_signatures,
            self.logical_signatures,
            self.pcre_subsignatures,
            self.container_signatures,
            self.section_hash_signatures,
            self.import_hash_signatures,
            self.hash_signatures,
            self.refused(),
            self.ignored
        )?;
        for (ext, n) in &self.loaded_by_format {
            write!(f, "; {n} from .{ext}")?;
        }
        for (ext, n) in &self.pua_files_skipped {
            write!(f, "; {n} PUA .{ext} file(s) not loaded (PUA detection off)")?;
        }
        for (reason, n) in &self.refused_lines {
            write!(f, "; {n} refused ({reason})")?;
        }
        for (reason, n) in &self.unused_lines {
            write!(f, "; {n} not used ({reason})")?;
        }
        if !self.errors.is_empty() {
            let first: Vec<&str> = self.errors.iter().take(3).map(String::as_str).collect();
            write!(f, "; errors: {}", first.join(" | "))?;
            if self.errors.len() > 3 {
                write!(f, " | ...")?;
            }
        }
        for (ext, n) in &self.unsupported_files {
            write!(f, "; {n} unsupported .{ext} file(s)")?;
            if let Some(sigs) = self.unsupported_signatures.get(ext) {
                write!(f, " ({sigs} signatures)")?;
            }
        }
        Ok(())
    }
}

/// One pattern in the automaton: group `group` of body signature `sig`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PatternRef {
    pub sig: u32,
    pub group: u16,
}

/// Entries for one digest: (size, or `None` for any size; index of the name).
type HashEntries = Vec<(Option<u64>, u32)>;

/// Hash signatures of one digest kind.
#[derive(Debug, Default)]
pub(crate) struct HashTable {
    /// digest → (size or None for any, name index)
    pub map: HashMap<Box<[u8]>, HashEntries>,
    /// Largest size any sized entry has; with no any-size entry, bigger files skip this digest.
    pub max_size: u64,
    /// Smallest size any sized entry has.
    pub min_size: Option<u64>,
    pub any_size: bool,
    /// Every size a sized entry has, sorted once the table is built ([`Self::seal`]).
    sizes: Vec<u64>,
}

impl HashTable {
    /// Takes account of an entry's size (`None`: any size).
    fn note_size(&mut self, size: Option<u64>) {
        match size {
            Some(s) => {
                self.sizes.push(s);
                self.max_size = self.max_size.max(s);
                self.min_size = Some(self.min_size.map_or(s, |m| m.min(s)));
            }
            None => self.any_size = true,
        }
    }

    /// Adds a digest with its size (`None`: any size) and name index.
    fn add(&mut self, digest: Vec<u8>, size: Option<u64>, name: u32) {
        self.note_size(size);
        // Nearly every digest has one entry: room for one, not the four a first
        // push would make (72 bytes each, 20 MB over 300,000 hashes).
        self.map
            .entry(digest.into_boxed_slice())
            .or_insert_with(|| Vec::with_capacity(1))
            .push((size, name));
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Whether a file of `size` bytes could match any entry.
    pub fn wants(&self, size: u64) -> bool {
        !self.map.is_empty() && (self.any_size || size <= self.max_size)
    }

    /// Whether a file known to be exactly `size` bytes long could match any
    /// entry: a digest no entry of that size could match is not worth computing
    /// (ClamAV computes a file's hashes only for sizes its tables hold, too).
    pub fn wants_exactly(&self, size: u64) -> bool {
        !self.map.is_empty() && (self.any_size || self.sizes.binary_search(&size).is_ok())
    }

    /// Sorts the sizes for [`Self::wants_exactly`], once every entry is in.
    fn seal(&mut self) {
        self.sizes.sort_unstable();
        self.sizes.dedup();
        self.sizes.shrink_to_fit();
    }

    pub fn lookup(&self, digest: &[u8], size: u64) -> Option<u32> {
        self.map
            .get(digest)?
            .iter()
            .find(|(s, _)| s.is_none_or(|s| s == size))
            .map(|(_, n)| *n)
    }
}

/// The MD5, SHA-1 and SHA-256 tables of `sigs`, sealed, and how many
/// signatures went in; those `ignore` names are left out and counted in
/// `ignored`. `name` gives a signature name's index.
fn hash_tables(
    sigs: Vec<HashSig>,
    ignore: Option<&HashSet<String>>,
    ignored: &mut usize,
    mut name: impl FnMut(&str) -> u32,
) -> ([HashTable; 3], usize) {
    let mut tables: [HashTable; 3] = Default::default();
    let mut added = 0;
    for h in sigs {
        if ignore.is_some_and(|i| i.contains(&h.name)) {
            *ignored += 1;
            continue;
        }
        let table = &mut tables[match h.kind {
            HashKind::Md5 => 0,
            HashKind::Sha1 => 1,
            HashKind::Sha256 => 2,
        }];
        table.add(h.digest, h.size, name(&h.name));
        added += 1;
    }
    for table in &mut tables {
        table.seal();
    }
    (tables, added)
}

/// A loaded, immutable signature database, shared by all sessions (`Arc<Database>`).
#[derive(Debug)]
pub struct Database {
    pub(crate) sigs: Vec<BodySig>,
    /// Logical signatures, in load order (the first that holds is reported).
    pub(crate) lsigs: Vec<LogicalSig>,
    /// Logical signatures evaluated on every file: their expression, or the trigger of
    /// one of their PCRE subsignatures, holds with nothing matched.
    pub(crate) always_lsigs: Vec<u32>,
    /// Some logical signature has a PCRE or byte-compare subsignature: files keep a
    /// prefix window.
    pub(crate) has_pcre: bool,
    pub(crate) patterns: Vec<PatternRef>,
    pub(crate) anchors: AnchorIndex,
    /// Signatures with an `EOF-n` offset, checked against the tail of each file.
    pub(crate) eof_sigs: Vec<u32>,
    /// Some signature has target type 4 (mail): the raw message is matched too.
    pub(crate) has_mail_sigs: bool,
    /// Bytes of history the matcher keeps for EOF signatures.
    pub(crate) eof_window: usize,
    /// Most bytes any group needs before its anchor.
    pub(crate) max_before: usize,
    /// Longest anchor.
    pub(crate) max_anchor: usize,
    pub(crate) md5: HashTable,
    pub(crate) sha1: HashTable,
    pub(crate) sha256: HashTable,
    /// False-positive hashes (`.fp` MD5, `.sfp` SHA-1/SHA-256): a file with one of
    /// them is known good, and nothing found in it or inside it is reported.
    pub(crate) fp: [HashTable; 3],
    pub(crate) names: Vec<String>,
    /// File-type magic from `.ftm` files, in precedence order (last loaded first).
    pub(crate) magic: Vec<Magic>,
    /// Container metadata signatures (`.cdb`), checked on archive entries.
    pub(crate) cdb: Vec<ContainerSig>,
    /// PE section hashes (`.mdb` MD5, `.msb` SHA-1/SHA-256), by section size.
    pub(crate) sections: [HashTable; 3],
    /// PE import table hashes (`.imp`), by the length of the hashed string.
    pub(crate) imports: [HashTable; 3],
    /// Phishing lists (`.pdb`, `.wdb`, `.gdb`), for the links of mail text parts.
    pub(crate) phish: PhishDb,
}

impl Database {
    /// A database with only the built-in EICAR signature.
    pub fn builtin() -> Database {
        DatabaseBuilder::new()
            .build()
            .expect("the built-in database always builds")
            .0
    }

    /// Loads every signature file in `dir` (not recursing), plus the built-in EICAR
    /// signature. Unreadable files are errors; unsupported formats and refused lines
    /// are counted in the report.
    pub fn load_dir(dir: impl AsRef<Path>) -> Result<(Database, LoadReport), ScanError> {
        Self::load_dirs([dir])
    }

    /// Like [`Database::load_dir`], over several directories into one database.
    pub fn load_dirs<P: AsRef<Path>>(
        dirs: impl IntoIterator<Item = P>,
    ) -> Result<(Database, LoadReport), ScanError> {
        let mut builder = DatabaseBuilder::new();
        for dir in dirs {
            builder.add_dir(dir)?;
        }
        builder.build()
    }

    /// Number of body signatures (the built-in one included).
    pub fn body_signatures(&self) -> usize {
        self.sigs.len()
    }

    /// Number of logical signatures.
    pub fn logical_signatures(&self) -> usize {
        self.lsigs.len()
    }

    /// The detection hash tables: MD5, SHA-1, SHA-256.
    pub(crate) fn hash_tables(&self) -> [&HashTable; 3] {
        [&self.md5, &self.sha1, &self.sha256]
    }

    /// The false-positive hash tables: MD5, SHA-1, SHA-256.
    pub(crate) fn fp_tables(&self) -> [&HashTable; 3] {
        [&self.fp[0], &self.fp[1], &self.fp[2]]
    }

    /// The PE section hash tables: MD5, SHA-1, SHA-256.
    pub(crate) fn section_tables(&self) -> [&HashTable; 3] {
        [&self.sections[0], &self.sections[1], &self.sections[2]]
    }

    /// The PE import hash tables: MD5, SHA-1, SHA-256.
    pub(crate) fn import_tables(&self) -> [&HashTable; 3] {
        [&self.imports[0], &self.imports[1], &self.imports[2]]
    }

    /// Whether any false-positive hash is loaded.
    pub(crate) fn has_fp(&self) -> bool {
        self.fp.iter().any(|t| !t.is_empty())
    }

    /// The name a match reports.
    pub(crate) fn hit_name(&self, hit: Hit) -> &str {
        match hit {
            Hit::Body(i) => &self.sigs[i as usize].name,
            Hit::Logical(i) => &self.lsigs[i as usize].name,
        }
    }

    /// Number of hash signatures.
    pub fn hash_signatures(&self) -> usize {
        self.md5.map.values().map(Vec::len).sum::<usize>()
            + self.sha1.map.values().map(Vec::len).sum::<usize>()
            + self.sha256.map.values().map(Vec::len).sum::<usize>()
    }

    /// Heap bytes used by the anchor index.
    pub fn anchor_index_bytes(&self) -> usize {
        self.anchors.memory()
    }

    pub(crate) fn name(&self, idx: u32) -> &str {
        &self.names[idx as usize]
    }

    /// Recognises a file from its first bytes: loaded `.ftm` magic first, then the
    /// built-in rules.
    pub fn file_type(&self, head: &[u8]) -> FileType {
        crate::ftm::detect(&self.magic, head)
    }
}

/// A signature that matched: a body signature or a logical one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hit {
    Body(u32),
    Logical(u32),
}

/// Collects signatures from text or files, then builds a [`Database`].
#[derive(Debug, Default)]
pub struct DatabaseBuilder {
    sigs: Vec<BodySig>,
    lsigs: Vec<LogicalSig>,
    pua: bool,
    hashes: Vec<HashSig>,
    fp_hashes: Vec<HashSig>,
    /// Names dropped whatever their line says.
    ignore: HashSet<String>,
    /// Names dropped only where the MD5 of their whole line is one of these
    /// (`.ign2` lines `Name:md5`).
    ignore_line: HashMap<String, Vec<[u8; 16]>>,
    magic: Vec<Magic>,
    cdb: Vec<ContainerSig>,
    section_hashes: Vec<HashSig>,
    import_hashes: Vec<HashSig>,
    phish: PhishDb,
    report: LoadReport,
    automaton_only: bool,
}

impl DatabaseBuilder {
    /// A builder holding only the built-in EICAR signature.
    pub fn new() -> Self {
        let hex: String = EICAR.iter().map(|b| format!("{b:02x}")).collect();
        let mut b = DatabaseBuilder::default();
        let sig = parse_ndb(&format!("{EICAR_NAME}:0:*:{hex}")).expect("EICAR signature parses");
        b.sigs.push(sig);
        b
    }

    /// Puts every anchor in the Aho-Corasick automaton instead of indexing the long
    /// ones by 4-gram: slower with many signatures; for measurements and comparison.
    pub fn automaton_only(&mut self, yes: bool) -> &mut Self {
        self.automaton_only = yes;
        self
    }

    /// Loads the PUA databases (`.ndu`, `.ldu`, `.hdu`, `.hsu`) too; off by default,
    /// as clamd's `DetectPUA`.
    pub fn pua(&mut self, yes: bool) -> &mut Self {
        self.pua = yes;
        self
    }

    fn loaded(&mut self, format: &str, n: usize) {
        if n > 0 {
            *self
                .report
                .loaded_by_format
                .entry(format.to_string())
                .or_default() += n;
        }
    }

    /// Adds `.ndb` text (one signature a line; `#` comments and blank lines skipped).
    pub fn add_ndb(&mut self, text: &str) -> &mut Self {
        let before = self.sigs.len();
        for line in lines(text) {
            match parse_ndb(line) {
                Ok(sig) if self.ignored(&sig.name, line) => {}
                Ok(sig) => self.sigs.push(sig),
                Err(r) => self.report.refuse(r),
            }
        }
        self.loaded("ndb", self.sigs.len() - before);
        self
    }

    /// Adds `.ldb` text (logical signatures, one a line). Lines in error are counted
    /// by reason and the first ones kept in the report with their line number.
    pub fn add_ldb(&mut self, text: &str) -> &mut Self {
        self.add_ldb_from("ldb", text)
    }

    fn add_ldb_from(&mut self, file: &str, text: &str) -> &mut Self {
        let before = self.lsigs.len();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            match parse_ldb(line) {
                Ok(parsed) if self.ignored(&parsed.sig.name, line) => {}
                Ok(parsed) => {
                    let idx = self.lsigs.len() as u32;
                    for (id, mut body) in parsed.bodies {
                        body.owner = Some((idx, id));
                        self.sigs.push(body);
                    }
                    self.lsigs.push(parsed.sig);
                }
                Err(LdbRefusal::Skip(r)) => self.report.refuse(r),
                Err(LdbRefusal::Error(r)) => {
                    self.report.refuse(r);
                    if self.report.errors.len() < MAX_REPORTED_ERRORS {
                        self.report.errors.push(format!("{file}:{}: {r}", n + 1));
                    }
                }
            }
        }
        let ext = file.rsplit_once('.').map_or("ldb", |(_, e)| e).to_string();
        self.loaded(&ext, self.lsigs.len() - before);
        self
    }

    /// Records a refused line of `file`, keeping the first ones word for word.
    fn refuse_at(&mut self, file: &str, line: usize, reason: Refusal) {
        self.report.refuse(reason);
        if self.report.errors.len() < MAX_REPORTED_ERRORS {
            self.report.errors.push(format!("{file}:{line}: {reason}"));
        }
    }

    fn unused(&mut self, reason: &str) {
        *self
            .report
            .unused_lines
            .entry(reason.to_string())
            .or_default() += 1;
    }

    /// Adds `.ftm` text (file-type magic, see [`crate::ftm`]); `file` names it in
    /// error messages.
    pub fn add_ftm(&mut self, file: &str, text: &str) -> &mut Self {
        let mut loaded = 0;
        for (n, line) in numbered_lines(text) {
            match parse_ftm(line) {
                Ok(FtmLine::Magic(m)) => {
                    // A later line takes precedence, as in ClamAV.
                    self.magic.insert(0, m);
                    loaded += 1;
                }
                Ok(FtmLine::Unused(reason)) => self.unused(reason),
                Err(r) => self.refuse_at(file, n, r),
            }
        }
        self.loaded("ftm", loaded);
        self
    }

    /// Adds `.cdb` text (container metadata signatures, see [`crate::cdb`]); `file`
    /// names it in error messages.
    pub fn add_cdb(&mut self, file: &str, text: &str) -> &mut Self {
        let before = self.cdb.len();
        for (n, line) in numbered_lines(text) {
            match parse_cdb(line) {
                Ok(CdbLine::Sig(sig)) if self.ignored(&sig.name, line) => {}
                Ok(CdbLine::Sig(sig)) => self.cdb.push(*sig),
                Ok(CdbLine::Unused(reason)) => self.unused(reason),
                Err(r) => self.refuse_at(file, n, r),
            }
        }
        self.loaded("cdb", self.cdb.len() - before);
        self
    }

    /// Adds `.mdb` or `.msb` text (PE section hashes, `SectionSize:Hash:Name`);
    /// `file` names it in error messages.
    pub fn add_section_hashes(&mut self, file: &str, text: &str) -> &mut Self {
        let before = self.section_hashes.len();
        for (n, line) in numbered_lines(text) {
            match parse_section_hash(line) {
                Ok(h) if self.ignored(&h.name, line) => {}
                Ok(h) => self.section_hashes.push(h),
                Err(r) => self.refuse_at(file, n, r),
            }
        }
        let ext = file.rsplit_once('.').map_or("mdb", |(_, e)| e).to_string();
        self.loaded(&ext, self.section_hashes.len() - before);
        self
    }

    /// Adds `.imp` text (PE import table hashes, `Hash:Size:Name`, see
    /// [`crate::imports`]); `file` names it in error messages.
    pub fn add_import_hashes(&mut self, file: &str, text: &str) -> &mut Self {
        let before = self.import_hashes.len();
        for (n, line) in numbered_lines(text) {
            match parse_import_hash(line) {
                Ok(h) if self.ignored(&h.name, line) => {}
                Ok(h) => self.import_hashes.push(h),
                Err(r) => self.refuse_at(file, n, r),
            }
        }
        self.loaded("imp", self.import_hashes.len() - before);
        self
    }

    /// Adds phishing list text: `.pdb` and `.gdb` (`Protected`: protected domains,
    /// Safe Browsing hashes) or `.wdb` (`Allowed`: allowed pairs), see
    /// [`crate::phish`]; `file` names it in error messages. Host key prefix lines
    /// are checked and counted as not used.
    pub(crate) fn add_phish(&mut self, file: &str, text: &str, kind: ListKind) -> &mut Self {
        let ext = file
            .rsplit_once('.')
            .map_or("pdb", |(_, e)| e)
            .to_ascii_lowercase();
        let mut loaded = 0;
        for (n, line) in numbered_lines(text) {
            match parse_line(line, kind) {
                Ok(PhishLine::Protected(p)) => {
                    self.phish.protected.push(p);
                    loaded += 1;
                }
                Ok(PhishLine::Allowed(p)) => {
                    self.phish.allowed.push(p);
                    loaded += 1;
                }
                Ok(PhishLine::Hash(digest, kind)) => {
                    self.phish.add_hash(digest, kind);
                    loaded += 1;
                }
                Ok(PhishLine::Prefix) => {
                    self.unused("gdb: host key prefix (not used, as in ClamAV)");
                }
                Ok(PhishLine::OtherLevel) => {
                    self.unused("phishing: for another engine level");
                }
                Err(r) => self.refuse_at(file, n, r),
            }
        }
        self.loaded(&ext, loaded);
        self
    }

    /// Adds `.pdb` text (protected domains: `R` and `H` lines); `file` names it in
    /// error messages.
    pub fn add_pdb(&mut self, file: &str, text: &str) -> &mut Self {
        self.add_phish(file, text, ListKind::Protected)
    }

    /// Adds `.wdb` text (allowed links: `X`, `Y` and `M` lines); `file` names it in
    /// error messages.
    pub fn add_wdb(&mut self, file: &str, text: &str) -> &mut Self {
        self.add_phish(file, text, ListKind::Allowed)
    }

    /// Adds `.hdb` or `.hsb` text (the digest kind is told by the hash length).
    pub fn add_hashes(&mut self, text: &str) -> &mut Self {
        let before = self.hashes.len();
        for line in lines(text) {
            match parse_hash(line) {
                Ok(h) if self.ignored(&h.name, line) => {}
                Ok(h) => self.hashes.push(h),
                Err(r) => self.report.refuse(r),
            }
        }
        self.loaded("hdb", self.hashes.len() - before);
        self
    }

    /// Adds `.fp` or `.sfp` text: hashes of known-good files, in the `.hdb` format.
    pub fn add_false_positives(&mut self, text: &str) -> &mut Self {
        let before = self.fp_hashes.len();
        for line in lines(text) {
            match parse_hash(line) {
                Ok(h) => self.fp_hashes.push(h),
                Err(r) => self.report.refuse(r),
            }
        }
        self.loaded("fp", self.fp_hashes.len() - before);
        self
    }

    /// Adds `.ign2` or `.ign` text: signatures to drop, by name (`Name`), by name and
    /// the MD5 of their whole line (`Name:md5`), or in the old `.ign` form
    /// (`file:line:Name`). A name-and-MD5 entry applies to the lines added after it
    /// (directories are loaded ignore files first, as ClamAV loads them); a name
    /// alone applies to everything.
    pub fn add_ignore(&mut self, text: &str) -> &mut Self {
        for line in lines(text) {
            let fields: Vec<&str> = line.split(':').collect();
            match fields.as_slice() {
                [name] => {
                    self.ignore.insert(name.trim().to_string());
                }
                [name, md5] => {
                    match decode_hex(md5.trim()).and_then(|d| <[u8; 16]>::try_from(d).ok()) {
                        Some(d) => self
                            .ignore_line
                            .entry(name.to_string())
                            .or_default()
                            .push(d),
                        None => self.report.refuse("ign2: bad MD5"),
                    }
                }
                [_, _, name] => {
                    self.ignore.insert(name.trim().to_string());
                }
                _ => self.report.refuse("ign2: too many fields"),
            }
        }
        self
    }

    /// Whether the signature `name` on `line` is to be dropped now.
    fn ignored(&mut self, name: &str, line: &str) -> bool {
        let drop = self.ignore.contains(name)
            || self.ignore_line.get(name).is_some_and(|sums| {
                use md5::Digest;
                let d: [u8; 16] = md5::Md5::digest(line.as_bytes()).into();
                sums.contains(&d)
            });
        if drop {
            self.report.ignored += 1;
        }
        drop
    }

    /// Adds every signature file in `dir` (not recursing), ignore lists first, as
    /// ClamAV loads them, so that they apply to every signature file whatever its
    /// name. Unreadable files are errors.
    pub fn add_dir(&mut self, dir: impl AsRef<Path>) -> Result<&mut Self, ScanError> {
        let dir = dir.as_ref();
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| ScanError::Io(dir.display().to_string(), e))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_file())
            .collect();
        entries.sort_by_key(|p| {
            let ext = p
                .extension()
                .map(|e| e.to_string_lossy().to_ascii_lowercase());
            (!matches!(ext.as_deref(), Some("ign" | "ign2")), p.clone())
        });
        for path in entries {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let bytes =
                std::fs::read(&path).map_err(|e| ScanError::Io(path.display().to_string(), e))?;
            self.add_file(&name, &bytes)?;
        }
        Ok(self)
    }

    /// Adds one database file by its name's extension; `.cvd`/`.cld`/`.cud` containers
    /// are opened and their members added.
    pub fn add_file(&mut self, name: &str, bytes: &[u8]) -> Result<&mut Self, ScanError> {
        let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
        let ext = ext.as_deref().unwrap_or("");
        let text = || String::from_utf8_lossy(bytes);
        if matches!(ext, "ndu" | "ldu" | "hdu" | "hsu" | "mdu" | "msu") && !self.pua {
            *self
                .report
                .pua_files_skipped
                .entry(ext.to_string())
                .or_default() += 1;
            return Ok(self);
        }
        match ext {
            "ndb" | "ndu" => {
                self.report.files += 1;
                self.add_ndb(&text());
            }
            "ldb" | "ldu" => {
                self.report.files += 1;
                self.add_ldb_from(name, &text());
            }
            "hdb" | "hdu" | "hsb" | "hsu" => {
                self.report.files += 1;
                self.add_hashes(&text());
            }
            "fp" | "sfp" => {
                self.report.files += 1;
                self.add_false_positives(&text());
            }
            "ign2" | "ign" => {
                self.report.files += 1;
                self.add_ignore(&text());
            }
            "ftm" => {
                self.report.files += 1;
                self.add_ftm(name, &text());
            }
            "cdb" => {
                self.report.files += 1;
                self.add_cdb(name, &text());
            }
            "mdb" | "mdu" | "msb" | "msu" => {
                self.report.files += 1;
                self.add_section_hashes(name, &text());
            }
            "imp" => {
                self.report.files += 1;
                self.add_import_hashes(name, &text());
            }
            "pdb" | "gdb" => {
                self.report.files += 1;
                self.add_phish(name, &text(), ListKind::Protected);
            }
            "wdb" => {
                self.report.files += 1;
                self.add_phish(name, &text(), ListKind::Allowed);
            }
            "cvd" | "cld" | "cud" => {
                self.add_container(name, bytes)?;
            }
            _ => {
                let key = if ext.is_empty() {
                    name.to_string()
                } else {
                    ext.to_string()
                };
                // ClamAV's line-based formats this engine does not read yet.
                let sigs = match ext {
                    "cbc" => Some(1),
                    "crb" | "idb" | "ioc" | "yar" | "yara" | "db" | "zmd" | "rmd" | "sdb"
                    | "hwp" => Some(lines(&text()).count()),
                    _ => None,
                };
                if let Some(n) = sigs {
                    *self
                        .report
                        .unsupported_signatures
                        .entry(key.clone())
                        .or_default() += n;
                }
                *self.report.unsupported_files.entry(key).or_default() += 1;
            }
        }
        Ok(self)
    }

    /// Opens a `.cvd`/`.cld`/`.cud` container: a 512-byte `ClamAV-VDB:` header, then
    /// a tar archive, gzip-compressed in `.cvd` files and usually plain in `.cld`
    /// files. A `.cvd` is refused unless its body has the header's MD5 and that MD5
    /// carries ClamAV's digital signature (see [`crate::cvd`]); `.cld` and `.cud`
    /// files are not checked, as ClamAV does not check them.
    pub fn add_container(&mut self, name: &str, bytes: &[u8]) -> Result<&mut Self, ScanError> {
        if bytes.len() < 512 || !bytes.starts_with(b"ClamAV-VDB:") {
            return Err(ScanError::Container(
                name.to_string(),
                "no ClamAV-VDB header".into(),
            ));
        }
        if name.to_ascii_lowercase().ends_with(".cvd") {
            crate::cvd::verify(bytes)
                .map_err(|e| ScanError::Container(name.to_string(), format!("refused: {e}")))?;
            self.report.verified_containers += 1;
        }
        let body = &bytes[512..];
        let mut tar_bytes = Vec::new();
        if body.starts_with(&[0x1f, 0x8b]) {
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut tar_bytes)
                .map_err(|e| ScanError::Container(name.to_string(), e.to_string()))?;
        } else {
            tar_bytes.extend_from_slice(body);
        }
        let mut archive = tar::Archive::new(tar_bytes.as_slice());
        let entries = archive
            .entries()
            .map_err(|e| ScanError::Container(name.to_string(), e.to_string()))?;
        for entry in entries {
            let mut entry =
                entry.map_err(|e| ScanError::Container(name.to_string(), e.to_string()))?;
            let member = entry
                .path()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut data = Vec::new();
            entry
                .read_to_end(&mut data)
                .map_err(|e| ScanError::Container(name.to_string(), e.to_string()))?;
            if member.ends_with(".cvd") || member.ends_with(".cld") {
                continue; // no containers inside containers
            }
            self.add_file(&member, &data)?;
        }
        Ok(self)
    }

    /// Builds the database and returns it with the load report.
    pub fn build(&mut self) -> Result<(Database, LoadReport), ScanError> {
        let mut report = std::mem::take(&mut self.report);
        let mut names: Vec<String> = Vec::new();
        let mut name_idx: HashMap<String, u32> = HashMap::new();
        let mut intern = |n: &str, names: &mut Vec<String>| -> u32 {
            *name_idx.entry(n.to_string()).or_insert_with(|| {
                names.push(n.to_string());
                (names.len() - 1) as u32
            })
        };
        let ignore = &self.ignore;
        // Logical signatures dropped by name leave gaps: renumber the rest.
        let mut lsig_map: Vec<Option<u32>> = Vec::new();
        let mut lsigs = Vec::new();
        for l in std::mem::take(&mut self.lsigs) {
            if ignore.contains(&l.name) {
                report.ignored += 1;
                lsig_map.push(None);
                continue;
            }
            lsig_map.push(Some(lsigs.len() as u32));
            lsigs.push(l);
        }
        let mut sigs = Vec::new();
        for mut s in std::mem::take(&mut self.sigs) {
            if let Some((l, id)) = s.owner {
                match lsig_map[l as usize] {
                    Some(l) => s.owner = Some((l, id)),
                    None => continue,
                }
            } else if ignore.contains(&s.name) && s.name != EICAR_NAME {
                report.ignored += 1;
                continue;
            }
            if let Offset::Eof { back, extra } = s.offset {
                let g = &s.groups[0];
                let span = g.before_max + g.anchor.len() + g.after_max;
                if back as usize + span + extra as usize > crate::signature::MAX_GROUP_SPAN * 2 {
                    report.refuse("ndb: EOF offset farther from the end than the tail window");
                    continue;
                }
            }
            sigs.push(s);
        }
        let mut patterns = Vec::new();
        let mut anchors: Vec<Vec<u8>> = Vec::new();
        let mut eof_sigs = Vec::new();
        let mut eof_window = 0usize;
        let mut max_before = 0usize;
        let mut max_anchor = 0usize;
        for (i, s) in sigs.iter().enumerate() {
            if let Offset::Eof { back, extra } = s.offset {
                let g = &s.groups[0];
                let span = g.before_max + g.anchor.len() + g.after_max;
                eof_window = eof_window.max(back as usize + span + extra as usize);
                eof_sigs.push(i as u32);
                continue;
            }
            for (g, group) in s.groups.iter().enumerate() {
                max_before = max_before.max(group.before_max);
                max_anchor = max_anchor.max(group.anchor.len());
                let a = &group.anchor;
                let variants = if !group.anchor_fold {
                    vec![a.clone()]
                } else if !self.automaton_only && a.len() >= 4 {
                    // The 4-gram index looks at the first four bytes only: vary
                    // those, or one position would be a candidate once per variant
                    // of the rest (and counted twice for a logical signature).
                    fold_variants(&a[..4])
                        .into_iter()
                        .map(|mut v| {
                            v.extend_from_slice(&a[4..]);
                            v
                        })
                        .collect()
                } else {
                    fold_variants(a)
                };
                for v in variants {
                    patterns.push(PatternRef {
                        sig: i as u32,
                        group: g as u16,
                    });
                    anchors.push(v);
                }
            }
        }
        let anchor_refs: Vec<&[u8]> = anchors.iter().map(Vec::as_slice).collect();
        let anchors = AnchorIndex::build(&anchor_refs, !self.automaton_only)?;
        report.body_signatures = sigs.iter().filter(|s| s.owner.is_none()).count();
        report.logical_signatures = lsigs.len();
        report.pcre_subsignatures = lsigs.iter().map(|l| l.pcre.len()).sum();
        report.backtracking_pcre = lsigs
            .iter()
            .flat_map(|l| &l.pcre)
            .filter(|p| p.re.backtracking())
            .count();
        let zeros = [0u32; crate::logical::MAX_SUBSIGS];
        let always_lsigs = lsigs
            .iter()
            .enumerate()
            .filter(|(_, l)| l.always || l.pcre.iter().any(|p| p.trigger.eval(&zeros).is_some()))
            .map(|(i, _)| i as u32)
            .collect();
        let has_pcre = lsigs
            .iter()
            .any(|l| !l.pcre.is_empty() || !l.bytecmp.is_empty());

        let ([md5, sha1, sha256], n) = hash_tables(
            std::mem::take(&mut self.hashes),
            Some(ignore),
            &mut report.ignored,
            |n| intern(n, &mut names),
        );
        report.hash_signatures += n;
        // False-positive hashes are not subject to the ignore lists.
        let (fp, _) = hash_tables(
            std::mem::take(&mut self.fp_hashes),
            None,
            &mut report.ignored,
            |n| intern(n, &mut names),
        );
        let mut cdb_sigs = std::mem::take(&mut self.cdb);
        let before = cdb_sigs.len();
        cdb_sigs.retain(|s| !ignore.contains(&s.name));
        report.ignored += before - cdb_sigs.len();
        report.container_signatures = cdb_sigs.len();
        let (sections, n) = hash_tables(
            std::mem::take(&mut self.section_hashes),
            Some(ignore),
            &mut report.ignored,
            |n| intern(n, &mut names),
        );
        report.section_hash_signatures += n;
        let (imports, n) = hash_tables(
            std::mem::take(&mut self.import_hashes),
            Some(ignore),
            &mut report.ignored,
            |n| intern(n, &mut names),
        );
        report.import_hash_signatures += n;
        let has_mail_sigs =
            sigs.iter().any(|s| s.target == 4) || lsigs.iter().any(|l| l.target == 4);
        // The tables live as long as the database: no room left from growing them.
        sigs.shrink_to_fit();
        lsigs.shrink_to_fit();
        patterns.shrink_to_fit();
        names.shrink_to_fit();
        let db = Database {
            sigs,
            lsigs,
            always_lsigs,
            has_pcre,
            patterns,
            anchors,
            has_mail_sigs,
            eof_sigs,
            eof_window,
            max_before,
            max_anchor,
            md5,
            sha1,
            sha256,
            fp,
            names,
            magic: std::mem::take(&mut self.magic),
            cdb: cdb_sigs,
            sections,
            imports,
            phish: std::mem::take(&mut self.phish),
        };
        Ok((db, report))
    }
}

/// Signature lines with their 1-based line numbers, comments and blank lines skipped.
fn numbered_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(n, l)| (n + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
}

fn lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_wanted_for_the_sizes_entries_have() {
        let mut t = HashTable::default();
        assert!(!t.wants_exactly(10), "an empty table wants nothing");
        t.add(vec![1; 16], Some(300), 0);
        t.add(vec![2; 16], Some(10), 1);
        t.add(vec![3; 16], Some(300), 2);
        t.seal();
        assert!(t.wants_exactly(10) && t.wants_exactly(300));
        assert!(!t.wants_exactly(11) && !t.wants_exactly(0));
        t.add(vec![4; 16], None, 3);
        t.seal();
        assert!(t.wants_exactly(11), "an any-size entry wants every size");
    }

    #[test]
    fn report_counts_refusals_and_unsupported() {
        let mut b = DatabaseBuilder::new();
        b.add_ndb("Good:0:*:41424344\nBad:0:EP+0:41424344\n# comment\n");
        b.add_hashes("44d88612fea8a8f36de82e1278abb02f:68:Eicar-Hash\nzz:1:x\n");
        b.add_file("main.crb", b"x\n# c\ny\n").unwrap();
        b.add_file(
            "main.ldb",
            b"Good.L;Target:0;0&1;41424344;45464748\n# c\n\nBad.L;Target:0;0&1;41424344\n",
        )
        .unwrap();
        b.add_file("extra.ldu", b"Pua.L;Target:0;0;41424344\n")
            .unwrap();
        let (db, report) = b.build().unwrap();
        assert_eq!(report.body_signatures, 2);
        assert_eq!(report.hash_signatures, 1);
        assert_eq!(report.logical_signatures, 1);
        assert_eq!(report.refused(), 3);
        assert_eq!(
            report.errors,
            ["main.ldb:4: ldb: subsignature count does not match the logical expression"]
        );
        assert_eq!(report.unsupported_files.get("crb"), Some(&1));
        assert_eq!(report.pua_files_skipped.get("ldu"), Some(&1));
        assert_eq!(report.loaded_by_format.get("ldb"), Some(&1));
        assert_eq!(db.body_signatures(), 4);
        assert_eq!(db.logical_signatures(), 1);
        assert_eq!(db.hash_signatures(), 1);
        let text = report.to_string();
        assert!(
            text.contains("1 unsupported .crb file(s) (2 signatures)"),
            "{text}"
        );
        assert!(
            text.contains("errors: main.ldb:4: ldb: subsignature count"),
            "{text}"
        );
        let table = report.table();
        assert!(table.contains("  .ldb             1\n"), "{table}");
        assert!(
            table.contains("  .crb       1 file(s)          2 signature(s)"),
            "{table}"
        );
        assert!(table.contains("Lines refused: 3\n"), "{table}");
        assert!(
            table.contains("  main.ldb:4: ldb: subsignature count"),
            "{table}"
        );
        let mut b = DatabaseBuilder::new();
        b.pua(true);
        b.add_file("extra.ldu", b"Pua.L;Target:0;0;41424344\n")
            .unwrap();
        assert_eq!(b.build().unwrap().1.loaded_by_format.get("ldu"), Some(&1));
    }

    #[test]
    fn phishing_lists_load_with_errors_by_file_and_line() {
        let mut b = DatabaseBuilder::new();
        b.add_file(
            "local.pdb",
            b"H:paypal.com\n# c\nR:.+\\.evil\\.org:.+\\.bank\\.com:17-\nH:old.example:0-20\nQ:what\n",
        )
        .unwrap();
        b.add_file("local.wdb", b"M:a.example:b.example\nH:paypal.com\n")
            .unwrap();
        b.add_file(
            "local.gdb",
            format!("S:P:0badf00d\nS2:F:{}\nS:F:abc\n", "ab".repeat(32)).as_bytes(),
        )
        .unwrap();
        let (db, report) = b.build().unwrap();
        assert_eq!(report.loaded_by_format.get("pdb"), Some(&2));
        assert_eq!(report.loaded_by_format.get("wdb"), Some(&1));
        assert_eq!(report.loaded_by_format.get("gdb"), Some(&1));
        assert!(report.unsupported_files.is_empty(), "{report}");
        assert_eq!(
            report.errors,
            [
                "local.pdb:5: phishing list: unknown line type",
                "local.wdb:2: phishing list: unknown line type",
                "local.gdb:3: phishing list: bad hash",
            ]
        );
        assert_eq!(
            report
                .unused_lines
                .get("phishing: for another engine level"),
            Some(&1)
        );
        assert_eq!(
            report
                .unused_lines
                .get("gdb: host key prefix (not used, as in ClamAV)"),
            Some(&1)
        );
        assert_eq!(db.phish.protected.len(), 2);
        assert_eq!(db.phish.allowed.len(), 1);
        assert_eq!(db.phish.url_hashes.len(), 1);
        assert!(report.table().contains("  .pdb             2\n"));
    }

    #[test]
    fn ignore_lists() {
        use md5::Digest;
        let line = "Drop.ByLine;Target:0;0;41424344";
        let sum: String = md5::Md5::digest(line.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut b = DatabaseBuilder::new();
        b.add_file(
            "local.ign2",
            format!("Drop.ByName\nDrop.ByLine:{sum}\nKeep.OtherLine:{sum}\n").as_bytes(),
        )
        .unwrap();
        b.add_file("old.ign", b"main.ndb:12:Drop.Old\n").unwrap();
        b.add_ldb(&format!(
            "{line}\nDrop.ByName;Target:0;0;45464748\nKeep.OtherLine;Target:0;0;494a4b4c\n"
        ));
        b.add_ndb("Drop.Old:0:*:4d4e4f50\nKeep.Ndb:0:*:51525354");
        let (db, report) = b.build().unwrap();
        assert_eq!(report.ignored, 3);
        assert_eq!(db.logical_signatures(), 1);
        assert_eq!(db.lsigs[0].name, "Keep.OtherLine");
        assert_eq!(db.body_signatures(), 3); // EICAR, Keep.Ndb, the kept subsignature
    }

    #[test]
    fn cvd_container() {
        let mut tar_bytes = Vec::new();
        {
            let mut t = tar::Builder::new(&mut tar_bytes);
            let data = b"InCvd:0:*:5155555a5a5a\n";
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            t.append_data(&mut h, "test.ndb", &data[..]).unwrap();
            let data = b"InCvd.L;Target:0;0&1;5155555a;5a5a5a5a\nBroken.L;Target:0;0;\n";
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            t.append_data(&mut h, "test.ldb", &data[..]).unwrap();
            t.finish().unwrap();
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &tar_bytes).unwrap();
        let gz = gz.finish().unwrap();
        let mut cvd = b"ClamAV-VDB:test".to_vec();
        cvd.resize(512, b' ');
        cvd.extend_from_slice(&gz);
        // Built here, so unsigned: a `.cld` (not checked, as in ClamAV).
        let mut b = DatabaseBuilder::new();
        b.add_file("daily.cld", &cvd).unwrap();
        let (_, report) = b.build().unwrap();
        assert_eq!(report.body_signatures, 2);
        assert_eq!(report.logical_signatures, 1);
        assert_eq!(report.loaded_by_format.get("ldb"), Some(&1));
        assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
        assert!(
            report.errors[0].starts_with("test.ldb:2: "),
            "{:?}",
            report.errors
        );
        assert_eq!(report.files, 2);

        // The same bytes as a `.cvd`: the header has no MD5 of the body.
        let err = DatabaseBuilder::new()
            .add_file("daily.cvd", &cvd)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("signature container daily.cvd: refused: "),
            "{err}"
        );

        // With the right MD5 but no signature by ClamAV's key.
        use md5::Digest;
        let sum: String = md5::Md5::digest(&cvd[512..])
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut signed = format!("ClamAV-VDB:27 Nov 2026:1:2:90:{sum}:abcdef:test:1").into_bytes();
        signed.resize(512, b' ');
        signed.extend_from_slice(&cvd[512..]);
        let err = DatabaseBuilder::new()
            .add_file("main.cvd", &signed)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("main.cvd: refused: digital signature does not match"),
            "{err}"
        );
        let mut tampered = signed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        let err = DatabaseBuilder::new()
            .add_file("main.cvd", &tampered)
            .unwrap_err()
            .to_string();
        assert!(err.contains("main.cvd: refused: body MD5"), "{err}");
    }
}
