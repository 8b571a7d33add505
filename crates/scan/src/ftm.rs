//! ClamAV `.ftm` file-type magic: `magictype:offset:magicbytes:name:rtype:type[:min_flevel[:max_flevel]]`.
//!
//! Magic type 0 compares `magicbytes` at a fixed offset of the file's first bytes;
//! those lines whose ClamAV type is one this engine distinguishes ([`FileType`])
//! take precedence over the built-in recognition, later lines over earlier ones, as
//! ClamAV prepends each loaded entry to its list. Magic type 1 (a body pattern
//! anywhere in the file, used by ClamAV for embedded and text-derived types) and 4
//! (partition types) are validated and counted, not used: this engine does not
//! look for files embedded at arbitrary offsets nor read disk images.

use crate::filetype::{FileType, SNIFF_LEN};
use crate::logical::FLEVEL;
use crate::signature::{decode_hex, parse_hex, parse_offset, Refusal};

/// A parsed `.ftm` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FtmLine {
    /// A magic-type-0 line this engine uses: `bytes` at `offset` make a file `ft`.
    Magic(Magic),
    /// A valid line this engine has no use for, and why.
    Unused(&'static str),
}

/// Magic bytes at a fixed offset that give a file type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Magic {
    pub offset: usize,
    pub bytes: Vec<u8>,
    pub ft: FileType,
}

impl Magic {
    /// Whether the file whose first bytes are `head` carries this magic.
    pub fn matches(&self, head: &[u8]) -> bool {
        head.get(self.offset..self.offset + self.bytes.len()) == Some(&self.bytes[..])
    }
}

/// Whether `name` is one of ClamAV's `CL_TYPE_*` names: the type this engine
/// gives it, or `None` for a type it does not distinguish.
fn clamav_type(name: &str) -> Result<Option<FileType>, Refusal> {
    Ok(Some(match name {
        "CL_TYPE_GZ" => FileType::Gzip,
        "CL_TYPE_ZIP" => FileType::Zip,
        "CL_TYPE_POSIX_TAR" | "CL_TYPE_OLD_TAR" => FileType::Tar,
        "CL_TYPE_BZ" => FileType::Bzip2,
        "CL_TYPE_XZ" => FileType::Xz,
        "CL_TYPE_7Z" => FileType::SevenZip,
        "CL_TYPE_RAR" => FileType::Rar,
        "CL_TYPE_MSCAB" => FileType::Cab,
        "CL_TYPE_MSEXE" => FileType::Pe,
        "CL_TYPE_ELF" => FileType::Elf,
        "CL_TYPE_MACHO" | "CL_TYPE_MACHO_UNIBIN" => FileType::MachO,
        "CL_TYPE_PDF" => FileType::Pdf,
        "CL_TYPE_SWF" => FileType::Swf,
        "CL_TYPE_JAVA" => FileType::JavaClass,
        "CL_TYPE_MSOLE2" => FileType::Ole2,
        "CL_TYPE_GRAPHICS" | "CL_TYPE_GIF" | "CL_TYPE_PNG" | "CL_TYPE_JPEG" | "CL_TYPE_TIFF" => {
            FileType::Image
        }
        other => {
            let known = other.strip_prefix("CL_TYPE_").is_some_and(|rest| {
                !rest.is_empty()
                    && rest
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
            });
            return if known {
                Ok(None)
            } else {
                Err("ftm: not a ClamAV file type name")
            };
        }
    }))
}

/// Parses one `.ftm` line (not a comment or a blank line).
pub(crate) fn parse_ftm(line: &str) -> Result<FtmLine, Refusal> {
    let fields: Vec<&str> = line.split(':').collect();
    if !(6..=8).contains(&fields.len()) {
        return Err("ftm: wrong number of fields");
    }
    let number = |s: &str| s.parse::<u32>().map_err(|_| "ftm: bad functionality level");
    if let Some(min) = fields.get(6) {
        if number(min)? > FLEVEL {
            return Ok(FtmLine::Unused("ftm: needs a newer engine"));
        }
    }
    if let Some(max) = fields.get(7) {
        if number(max)? < FLEVEL {
            return Ok(FtmLine::Unused("ftm: for older engines only"));
        }
    }
    clamav_type(fields[4])?;
    let ft = clamav_type(fields[5])?;
    let magictype: u32 = fields[0].parse().map_err(|_| "ftm: bad magic type")?;
    match magictype {
        0 | 4 => {
            let offset: usize = fields[1].parse().map_err(|_| "ftm: bad offset")?;
            let bytes = decode_hex(fields[2])
                .filter(|b| !b.is_empty())
                .ok_or("ftm: bad magic bytes")?;
            if magictype == 4 {
                return Ok(FtmLine::Unused("ftm: partition magic (type 4)"));
            }
            let Some(ft) = ft else {
                return Ok(FtmLine::Unused(
                    "ftm: a file type this engine does not distinguish",
                ));
            };
            if offset.saturating_add(bytes.len()) > SNIFF_LEN {
                return Err("ftm: magic beyond the first 512 bytes");
            }
            Ok(FtmLine::Magic(Magic { offset, bytes, ft }))
        }
        1 => {
            parse_offset(fields[1]).map_err(|_| "ftm: bad offset")?;
            parse_hex(fields[2]).map_err(|_| "ftm: bad magic pattern")?;
            Ok(FtmLine::Unused(
                "ftm: relative magic (type 1, embedded and text types)",
            ))
        }
        _ => Ok(FtmLine::Unused("ftm: unknown magic type")),
    }
}

/// Recognises a file by the loaded magic (first match; the list is in precedence
/// order), else by the built-in rules.
pub(crate) fn detect(magic: &[Magic], head: &[u8]) -> FileType {
    magic
        .iter()
        .find(|m| m.matches(head))
        .map_or_else(|| FileType::detect(head), |m| m.ft)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn clamav_lines() {
        assert_eq!(
            parse_ftm("0:0:1f8b:GZip:CL_TYPE_ANY:CL_TYPE_GZ"),
            Ok(FtmLine::Magic(Magic {
                offset: 0,
                bytes: vec![0x1f, 0x8b],
                ft: FileType::Gzip
            }))
        );
        assert_eq!(
            parse_ftm("0:0:46726f6d3a20:Exim mail:CL_TYPE_ANY:CL_TYPE_MAIL"),
            Ok(FtmLine::Unused(
                "ftm: a file type this engine does not distinguish"
            ))
        );
        assert!(matches!(
            parse_ftm("1:*:504b0304:ZIP-SFX:CL_TYPE_ANY:CL_TYPE_ZIPSFX"),
            Ok(FtmLine::Unused(_))
        ));
        assert!(matches!(
            parse_ftm("4:1024:482B0004:HFS+ partition:CL_TYPE_PART_ANY:CL_TYPE_PART_HFSPLUS:75"),
            Ok(FtmLine::Unused("ftm: partition magic (type 4)"))
        ));
        assert_eq!(
            parse_ftm("0:0:1f8b:GZip:CL_TYPE_ANY:CL_TYPE_GZ:999"),
            Ok(FtmLine::Unused("ftm: needs a newer engine"))
        );
        assert_eq!(
            parse_ftm("0:0:1f8b:GZip:CL_TYPE_ANY:CL_TYPE_GZ:1:2"),
            Ok(FtmLine::Unused("ftm: for older engines only"))
        );
        assert!(matches!(
            parse_ftm("0:0:1f8b:GZip:CL_TYPE_ANY:CL_TYPE_GZ:1:999"),
            Ok(FtmLine::Magic(_))
        ));
        assert_eq!(
            parse_ftm("0:0:1f8b:GZip:CL_TYPE_ANY:GZ"),
            Err("ftm: not a ClamAV file type name")
        );
        assert_eq!(
            parse_ftm("0:x:1f8b:GZip:CL_TYPE_ANY:CL_TYPE_GZ"),
            Err("ftm: bad offset")
        );
        assert_eq!(
            parse_ftm("0:0:1f8:GZip:CL_TYPE_ANY:CL_TYPE_GZ"),
            Err("ftm: bad magic bytes")
        );
        assert_eq!(
            parse_ftm("0:600:1f8b:GZip:CL_TYPE_ANY:CL_TYPE_GZ"),
            Err("ftm: magic beyond the first 512 bytes")
        );
        assert_eq!(parse_ftm("0:0:1f8b"), Err("ftm: wrong number of fields"));
    }

    #[test]
    fn loaded_magic_overrides_the_built_in_rules() {
        let magic = [Magic {
            offset: 2,
            bytes: b"ZZ".to_vec(),
            ft: FileType::Pdf,
        }];
        assert_eq!(detect(&magic, b"MZZZ"), FileType::Pdf);
        assert_eq!(detect(&magic, b"MZ\x90\0"), FileType::Pe);
        assert_eq!(detect(&magic, b"M"), FileType::Other);
    }

    proptest! {
        #[test]
        fn never_panics(line in "[0-9a-zA-Z_:*,+ -]{0,80}") {
            let _ = parse_ftm(&line);
        }

        #[test]
        fn fields_round_trip(
            offset in 0usize..500,
            bytes in proptest::collection::vec(any::<u8>(), 1..12),
        ) {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let line = format!("0:{offset}:{hex}:T:CL_TYPE_ANY:CL_TYPE_PDF");
            match parse_ftm(&line) {
                Ok(FtmLine::Magic(m)) => {
                    prop_assert_eq!(m.offset, offset);
                    prop_assert_eq!(&m.bytes, &bytes);
                    let mut head = vec![0u8; offset];
                    head.extend_from_slice(&bytes);
                    prop_assert_eq!(detect(&[m], &head), FileType::Pdf);
                }
                Err(r) => prop_assert!(offset + bytes.len() > SNIFF_LEN, "{}", r),
                Ok(other) => prop_assert!(false, "{:?}", other),
            }
        }
    }
}
