//! Sluice's streaming content-scanning pipeline.
//!
//! A mail message (or a single file) is fed to a [`Session`] chunk by chunk as it
//! arrives; MIME parsing, transfer decoding (base64, quoted-printable, uuencode),
//! decompression (gzip, zip, tar, bzip2, xz, 7z, cab, recursively; 7z and cab
//! held in memory up to [`Limits::max_held_archive_size`]), OLE2 documents taken
//! apart into their streams and VBA macro source, PDF streams decoded (Flate,
//! ASCIIHex, ASCII85), HTML normalised as ClamAV normalises it for its target-3
//! signatures, and signature matching
//! (ClamAV `.ndb`, `.ldb`, `.hdb`, `.hsb`, `.cdb` container metadata on zip, 7z and cab entries and mail attachments,
//! `.mdb`/`.msb` PE section hashes, `.imp` PE import table hashes (a PE file
//! held in memory for it, up to the same limit, only while `.imp` signatures
//! are loaded), with `.ftm` file-type magic, `.ign2` ignore
//! lists and `.fp`/`.sfp` false-positive hashes, in `.cvd`/`.cld` containers too,
//! a `.cvd` only with a good digital signature) and ClamAV's phishing check of the
//! links in mail text parts (`.pdb` protected domains, `.wdb` allowed links, `.gdb`
//! URL hashes) are interleaved on
//! each chunk, in memory bounded by [`Limits`] rather than by the message, with no temp
//! files and no I/O of its own (the optional [`clamd`] client aside). The session's
//! [`Verdict`] comes at the end.
//!
//! What is scanned: every leaf MIME part and uuencoded block, decoded, as a file; every
//! file inside an archive, recursively; every stream of an OLE2 document and each
//! of its VBA modules' source code; every stream of a PDF, decoded; the two
//! normalised forms of an HTML file (for target-0 and target-3 signatures); the
//! archive bytes themselves; and, for
//! target-type-4 (mail) signatures only, the raw message. Unlike ClamAV, target-0
//! signatures are not run over the raw message (its header lines and encoded text),
//! which keeps one pass per byte of decoded content.
//!
//! ```
//! use std::sync::Arc;
//! use scan::{Database, Limits, Scanner, Verdict};
//!
//! let scanner = Scanner::new(Arc::new(Database::builtin()), Limits::default());
//! let mut session = scanner.session();
//! session.feed(b"Subject: test\r\n\r\n");
//! session.feed(scan::EICAR);
//! assert_eq!(session.finish(), Verdict::Infected { name: scan::EICAR_NAME.into() });
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod anchor;
mod bytecmp;
mod cab;
mod cdb;
pub mod clamd;
mod cvd;
mod database;
mod digests;
mod engine;
mod error;
pub mod filetype;
mod ftm;
mod held;
mod html;
mod imports;
mod links;
mod logical;
mod matcher;
pub mod mime;
mod ole2;
mod ordinals;
mod pcre;
mod pdf;
mod pe;
mod phish;
mod pipeline;
mod session;
mod sevenz;
mod signature;
mod unpack;
mod vba;
mod verdict;

pub use database::{Database, DatabaseBuilder, LoadReport, EICAR, EICAR_NAME};
pub use engine::{Engine, EngineSession};
pub use error::ScanError;
pub use links::extract_links;
pub use session::{Scanner, Session};
pub use verdict::{EncryptedPolicy, LimitKind, Limits, Stats, Verdict};
