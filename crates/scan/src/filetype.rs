//! File-type recognition by content (magic bytes), not by name: it decides whether a
//! file is unpacked as well as scanned, and which target-typed signatures apply.

/// Bytes looked at to recognise a file (enough for the tar magic at offset 257).
pub const SNIFF_LEN: usize = 512;

/// A recognised kind of file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileType {
    /// gzip (RFC 1952).
    Gzip,
    /// zip (PKWARE APPNOTE), read from its local headers.
    Zip,
    /// POSIX ustar or GNU tar.
    Tar,
    /// bzip2.
    Bzip2,
    /// xz.
    Xz,
    /// 7-Zip archive.
    SevenZip,
    /// RAR (recognised, not unpacked: it gives [`LimitKind::UnsupportedArchive`](crate::LimitKind::UnsupportedArchive)).
    Rar,
    /// Microsoft Cabinet.
    Cab,
    /// Windows PE / MS-DOS executable (`MZ`).
    Pe,
    /// ELF executable.
    Elf,
    /// Mach-O executable.
    MachO,
    /// PDF document: its streams are decoded and scanned.
    Pdf,
    /// Shockwave Flash.
    Swf,
    /// Java class file.
    JavaClass,
    /// OLE2 compound document (old Office formats, OOXML's `vbaProject.bin`):
    /// its streams and VBA macro source are scanned.
    Ole2,
    /// GIF, PNG, JPEG, BMP or TIFF image.
    Image,
    /// Anything else.
    Other,
    /// The normalised forms of an HTML file (ClamAV's `CL_TYPE_HTML`): only they
    /// have this type, never a file as it comes, so that target-type-3 (HTML)
    /// signatures see them and nothing else.
    Html,
    /// A whole mail message as received (only the raw stream of a mail session has
    /// this type; it is what ClamAV target type 4 signatures look at).
    Mail,
}

/// What the pipeline does with a file of a given type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Scan the bytes with signatures and hashes.
    Scan,
    /// Scan the bytes and also unpack the contents and scan those recursively.
    Unpack,
}

impl FileType {
    /// Recognises a file from its first bytes (up to [`SNIFF_LEN`]).
    pub fn detect(head: &[u8]) -> FileType {
        let starts = |m: &[u8]| head.starts_with(m);
        if starts(&[0x1f, 0x8b]) {
            FileType::Gzip
        } else if starts(b"PK\x03\x04") || starts(b"PK\x05\x06") || starts(b"PK\x07\x08") {
            FileType::Zip
        } else if starts(b"BZh") && head.len() > 3 && (b'1'..=b'9').contains(&head[3]) {
            FileType::Bzip2
        } else if starts(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            FileType::Xz
        } else if head.len() >= 262 && &head[257..262] == b"ustar" {
            FileType::Tar
        } else if starts(b"7z\xbc\xaf\x27\x1c") {
            FileType::SevenZip
        } else if starts(b"Rar!\x1a\x07") {
            FileType::Rar
        } else if starts(b"MSCF") {
            FileType::Cab
        } else if starts(b"MZ") {
            FileType::Pe
        } else if starts(b"\x7fELF") {
            FileType::Elf
        } else if starts(&[0xfe, 0xed, 0xfa, 0xce])
            || starts(&[0xfe, 0xed, 0xfa, 0xcf])
            || starts(&[0xce, 0xfa, 0xed, 0xfe])
            || starts(&[0xcf, 0xfa, 0xed, 0xfe])
        {
            FileType::MachO
        } else if starts(&[0xca, 0xfe, 0xba, 0xbe]) {
            // Also the fat Mach-O magic; a class file is the likelier in mail.
            FileType::JavaClass
        } else if starts(b"%PDF-") {
            FileType::Pdf
        } else if starts(b"FWS") || starts(b"CWS") || starts(b"ZWS") {
            FileType::Swf
        } else if starts(&[0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]) {
            FileType::Ole2
        } else if starts(b"GIF87a")
            || starts(b"GIF89a")
            || starts(b"\x89PNG\r\n\x1a\n")
            || starts(&[0xff, 0xd8, 0xff])
            || starts(b"II*\0")
            || starts(b"MM\0*")
            || (starts(b"BM") && head.len() >= 14)
        {
            FileType::Image
        } else {
            FileType::Other
        }
    }

    /// Whether the pipeline unpacks this type.
    pub fn action(self) -> Action {
        match self {
            FileType::Gzip
            | FileType::Zip
            | FileType::Tar
            | FileType::Bzip2
            | FileType::Xz
            | FileType::Ole2
            | FileType::Pdf
            | FileType::SevenZip
            | FileType::Cab => Action::Unpack,
            _ => Action::Scan,
        }
    }

    /// Whether an `.ndb` signature with ClamAV target type `target` applies to this type.
    /// Only the targets the database loader accepts are asked about.
    pub fn matches_target(self, target: u8) -> bool {
        match target {
            0 => self != FileType::Mail,
            1 => self == FileType::Pe,
            // The OLE2 file itself (in a zip too), as ClamAV matches it; not its
            // streams or macros, which are files of their own types.
            2 => self == FileType::Ole2,
            3 => self == FileType::Html,
            4 => self == FileType::Mail,
            5 => self == FileType::Image,
            6 => self == FileType::Elf,
            9 => self == FileType::MachO,
            10 => self == FileType::Pdf,
            11 => self == FileType::Swf,
            12 => self == FileType::JavaClass,
            _ => false,
        }
    }
}

/// Whether `head` (the first bytes of a file) looks like an RFC 5322 message or an
/// mbox: it opens with `From ` or with a header field name and a colon, and is not a
/// recognised binary type. `sluice scan FILE` uses this to choose between a mail
/// session and a file session.
pub fn looks_like_mail(head: &[u8]) -> bool {
    if FileType::detect(head) != FileType::Other {
        return false;
    }
    if head.starts_with(b"From ") {
        return true;
    }
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = &head[..line_end];
    match line.iter().position(|&b| b == b':') {
        Some(c) if c > 0 => line[..c].iter().all(|&b| b.is_ascii_graphic() && b != b':'),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn magic() {
        assert_eq!(FileType::detect(&[0x1f, 0x8b, 8]), FileType::Gzip);
        assert_eq!(FileType::detect(b"PK\x03\x04rest"), FileType::Zip);
        assert_eq!(FileType::detect(b"BZh91AY"), FileType::Bzip2);
        assert_eq!(FileType::detect(b"MZ\x90\0"), FileType::Pe);
        assert_eq!(FileType::detect(b"hello"), FileType::Other);
        let mut tar = vec![0u8; 512];
        tar[257..262].copy_from_slice(b"ustar");
        assert_eq!(FileType::detect(&tar), FileType::Tar);
        assert_eq!(FileType::Tar.action(), Action::Unpack);
        assert!(FileType::Pe.matches_target(1));
        assert!(!FileType::Other.matches_target(1));
        assert!(FileType::Mail.matches_target(4));
        assert!(!FileType::Mail.matches_target(0));
        assert!(!FileType::Other.matches_target(4));
        assert!(FileType::Html.matches_target(3));
        assert!(FileType::Html.matches_target(0));
        assert!(!FileType::Other.matches_target(3));
    }

    #[test]
    fn mail_or_file() {
        assert!(looks_like_mail(b"Return-Path: <a@b>\r\nReceived: x\r\n"));
        assert!(looks_like_mail(b"From a@b Sat Jan  1 00:00:00 2000\n"));
        assert!(!looks_like_mail(b"PK\x03\x04"));
        assert!(!looks_like_mail(b"just some text: with a colon"));
        assert!(!looks_like_mail(b""));
    }
}
