//! The digests hash signatures compare (MD5, SHA-1, SHA-256), computed
//! side by side as the bytes stream past, each only while some signature
//! may want it: of whole files (`.hdb`, `.hsb`, `.fp`), PE sections
//! (`.mdb`, `.msb`) and PE import tables (`.imp`).

use md5::Digest;

use crate::database::HashTable;

/// The digests being computed over one run of bytes.
#[derive(Clone)]
pub(crate) struct Digests {
    pub md5: Option<md5::Md5>,
    pub sha1: Option<sha1::Sha1>,
    pub sha256: Option<sha2::Sha256>,
    hashed: u64,
}

impl Digests {
    /// The digests `wanted` asks for, in the order MD5, SHA-1, SHA-256.
    pub fn new([md5, sha1, sha256]: [bool; 3]) -> Self {
        Self {
            md5: md5.then(md5::Md5::new),
            sha1: sha1.then(sha1::Sha1::new),
            sha256: sha256.then(sha2::Sha256::new),
            hashed: 0,
        }
    }

    /// None of them.
    pub fn none() -> Self {
        Self::new([false; 3])
    }

    /// Hashes the next bytes.
    pub fn update(&mut self, part: &[u8]) {
        if let Some(h) = self.md5.as_mut() {
            h.update(part);
        }
        if let Some(h) = self.sha1.as_mut() {
            h.update(part);
        }
        if let Some(h) = self.sha256.as_mut() {
            h.update(part);
        }
        self.hashed += part.len() as u64;
    }

    /// How many bytes were hashed.
    pub fn hashed(&self) -> u64 {
        self.hashed
    }

    /// The digests, for bytes that signatures give as `size` long.
    pub fn finish(self, size: u64) -> Digested {
        Digested {
            size,
            md5: self.md5.map(|h| h.finalize().into()),
            sha1: self.sha1.map(|h| h.finalize().into()),
            sha256: self.sha256.map(|h| h.finalize().into()),
        }
    }
}

/// A size and the digests asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Digested {
    pub size: u64,
    pub md5: Option<[u8; 16]>,
    pub sha1: Option<[u8; 20]>,
    pub sha256: Option<[u8; 32]>,
}

impl Digested {
    /// The first signature of `tables` (MD5, SHA-1, SHA-256) these match.
    pub fn lookup(&self, [md5, sha1, sha256]: [&HashTable; 3]) -> Option<u32> {
        self.md5
            .and_then(|d| md5.lookup(&d, self.size))
            .or_else(|| self.sha1.and_then(|d| sha1.lookup(&d, self.size)))
            .or_else(|| self.sha256.and_then(|d| sha256.lookup(&d, self.size)))
    }
}
