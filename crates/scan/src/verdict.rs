//! Verdicts, the limits that guard against decompression bombs and hostile mail, and
//! the counters a finished scan reports.

/// A limit the scan ran into. Each has its own verdict so that the mail server can
/// choose an action per kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitKind {
    /// Archives nested deeper than [`Limits::max_depth`].
    Depth,
    /// More than [`Limits::max_unpacked_bytes`] decompressed in one message.
    UnpackedBytes,
    /// A compressed stream expanded more than [`Limits::max_ratio`] times.
    Ratio,
    /// More than [`Limits::max_entries`] archive entries in one message.
    Entries,
    /// More than [`Limits::max_parts`] MIME parts in one message.
    Parts,
    /// MIME containers nested deeper than [`Limits::max_mime_depth`].
    MimeDepth,
    /// An OLE2 file bigger than [`Limits::max_ole2_size`] (its streams and macros
    /// were not looked at), or a VBA module's source longer than that.
    Ole2Size,
    /// A 7z or cab archive bigger than [`Limits::max_held_archive_size`], or a
    /// 7z archive whose header or a decoder needs more memory than the 7z
    /// reader allows: its entries were not looked at.
    HeldArchiveSize,
    /// An archive in a format the scanner does not unpack (RAR: no decoder
    /// under a licence that fits, and none in pure Rust that reads every
    /// version): its bytes were matched, its entries were not looked at.
    UnsupportedArchive,
}

impl LimitKind {
    /// A short stable name for logs and replies.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitKind::Depth => "archive-depth",
            LimitKind::UnpackedBytes => "unpacked-bytes",
            LimitKind::Ratio => "compression-ratio",
            LimitKind::Entries => "archive-entries",
            LimitKind::Parts => "mime-parts",
            LimitKind::MimeDepth => "mime-depth",
            LimitKind::Ole2Size => "ole2-size",
            LimitKind::HeldArchiveSize => "held-archive-size",
            LimitKind::UnsupportedArchive => "unsupported-archive",
        }
    }
}

/// The outcome of scanning one message or file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing found, no limit hit.
    Clean,
    /// A signature matched.
    Infected {
        /// The signature's name, as in the database.
        name: String,
    },
    /// A limit was hit before the whole content could be scanned (nothing was found
    /// in what was scanned).
    LimitExceeded(LimitKind),
    /// An encrypted archive entry could not be scanned and the policy is
    /// [`EncryptedPolicy::Reject`].
    Encrypted,
}

impl Verdict {
    /// True for [`Verdict::Clean`].
    pub fn is_clean(&self) -> bool {
        matches!(self, Verdict::Clean)
    }
}

impl std::fmt::Display for Verdict {
    /// `clean`, `infected: NAME`, `limit exceeded: KIND`, `encrypted archive`: for logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Verdict::Clean => f.write_str("clean"),
            Verdict::Infected { name } => write!(f, "infected: {name}"),
            Verdict::LimitExceeded(k) => write!(f, "limit exceeded: {}", k.as_str()),
            Verdict::Encrypted => f.write_str("encrypted archive"),
        }
    }
}

/// What to do with an encrypted archive entry, which cannot be scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EncryptedPolicy {
    /// Let it through: the verdict stays [`Verdict::Clean`] (counted in [`Stats`]).
    Allow,
    /// Give [`Verdict::Encrypted`]: password-protected zips are a common way to carry
    /// malware past scanners, so this is the default.
    #[default]
    Reject,
}

/// Bounds on the work and memory one message may cost. Every limit has a safe default
/// and a verdict of its own ([`LimitKind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest archive nesting scanned (an attachment is depth 0, a file in a zip in
    /// it depth 1, ...). Default 10.
    pub max_depth: usize,
    /// Decompressed bytes allowed per message, all archives together. Default 256 MiB.
    pub max_unpacked_bytes: u64,
    /// Largest output/input ratio of one compressed stream or zip entry. Default 250.
    pub max_ratio: u64,
    /// Decompressed bytes below which the ratio is not checked (small, very
    /// compressible files are normal). Default 1 MiB.
    pub ratio_floor: u64,
    /// Archive entries allowed per message. Default 10,000.
    pub max_entries: u64,
    /// MIME parts allowed per message. Default 1,000.
    pub max_parts: u64,
    /// Deepest MIME nesting (multiparts and message/rfc822). Default 32.
    pub max_mime_depth: usize,
    /// Header bytes kept per MIME part. Default 64 KiB.
    pub max_header_bytes: usize,
    /// First bytes of each file kept for the PCRE subsignatures of logical
    /// signatures, which run when the file ends (only with a database that has
    /// any). A file's regular expressions see no further than this; the memory it
    /// costs is this much per open file (three times for a text file, whose two
    /// normalised HTML forms are matched too), and files nest at most `max_depth`
    /// deep. Default 2 MiB (clamd reads up to its `PCREMaxFileSize`, 100 MB, instead).
    pub max_regex_window: usize,
    /// Encrypted archive entries: allow or reject. Default reject.
    pub encrypted: EncryptedPolicy,
    /// Largest OLE2 file (Office 97-2003 document, `vbaProject.bin`) taken apart
    /// into its streams and VBA macros. Its sectors can lie anywhere, so the file
    /// is held in memory until it ends: this much per open OLE2 file, and files
    /// nest at most `max_depth` deep. A bigger one is still matched as a whole
    /// but gives [`LimitKind::Ole2Size`]; so does a macro's source that
    /// decompresses to more than this. Default 8 MiB.
    pub max_ole2_size: usize,
    /// Largest 7z or cab archive unpacked. Neither can be unpacked as it
    /// streams (7z keeps its directory at its end, a cabinet's files point
    /// into its folders), so the archive is held in memory until it ends:
    /// this much per open archive, and files nest at most `max_depth` deep. A
    /// bigger one is still matched as a whole but gives
    /// [`LimitKind::HeldArchiveSize`]. Default 16 MiB: twice `max_ole2_size`,
    /// as archives, unlike documents, are commonly sent near the size mail
    /// servers accept (a 25 MB message carries about 18 MB of attachment).
    ///
    /// While `.imp` signatures are loaded, PE files are held up to the same size
    /// for their import hash; a bigger one is not import-hashed (counted in
    /// [`Stats::imports_not_hashed`], with no limit verdict).
    pub max_held_archive_size: usize,
    /// Report a document with VBA macros as `Heuristics.OLE2.ContainsMacros.VBA`
    /// when no signature matched, as ClamAV's `--alert-macros` (clamd's
    /// `AlertOLE2Macros`). Default off.
    pub alert_macros: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_depth: 10,
            max_unpacked_bytes: 256 << 20,
            max_ratio: 250,
            ratio_floor: 1 << 20,
            max_entries: 10_000,
            max_parts: 1_000,
            max_mime_depth: 32,
            max_header_bytes: 64 << 10,
            max_regex_window: 2 << 20,
            encrypted: EncryptedPolicy::Reject,
            max_ole2_size: 8 << 20,
            max_held_archive_size: 16 << 20,
            alert_macros: false,
        }
    }
}

/// Counters of one scan, for logs and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Bytes fed to the session.
    pub input_bytes: u64,
    /// MIME parts seen.
    pub parts: u64,
    /// Files scanned (leaf parts, uuencoded files, archive entries, decompressed streams).
    pub files: u64,
    /// Bytes produced by decompressors.
    pub unpacked_bytes: u64,
    /// Archive entries seen.
    pub entries: u64,
    /// Encrypted archive entries seen.
    pub encrypted_entries: u64,
    /// Archive entries skipped because their compression method is not supported.
    pub unsupported_entries: u64,
    /// Archives or compressed streams that were corrupt or truncated (scanned as far as
    /// they went).
    pub malformed_archives: u64,
    /// Header bytes dropped over the per-part header budget.
    pub dropped_header_bytes: u64,
    /// Signature anchor hits dropped because too many were pending (hostile input).
    pub dropped_candidates: u64,
    /// Files longer than [`Limits::max_regex_window`] while PCRE subsignatures were
    /// loaded: their regular expressions saw only the first bytes.
    pub regex_window_truncated: u64,
    /// PCRE searches stopped by the backtracking limit, or skipped because the
    /// file's regular expressions had covered 256 MiB already (taken as no match).
    pub regex_limit_hits: u64,
    /// Detections dropped because the file they were in, or a file around it, has
    /// a false-positive hash (`.fp`, `.sfp`).
    pub false_positives: u64,
    /// Links of mail text parts checked against the phishing lists (`.pdb`,
    /// `.wdb`, `.gdb`), text URLs included.
    pub links_checked: u64,
    /// PE files whose import table was not hashed for the `.imp` signatures
    /// loaded: bigger than [`Limits::max_held_archive_size`] (a PE file is held
    /// whole for its import hash) or importing more functions than the scanner
    /// hashes (65,536).
    pub imports_not_hashed: u64,
}
