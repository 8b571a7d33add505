//! ClamAV `.cdb` container metadata signatures:
//! `VirusName:ContainerType:ContainerSize:FileNameREGEX:FileSizeInContainer:FileSizeReal:IsEncrypted:FilePos:Res1:Res2[:MinFL[:MaxFL]]`.
//!
//! Each entry of an archive is checked, as the archive is walked, against its name,
//! its compressed and real sizes, whether it is encrypted and its 1-based position;
//! the container size is known only when the archive ends, so a signature that
//! constrains it is decided then. Numbers are `*`, `n` or `a-b` (a bound of 0 is
//! open), as ClamAV reads them; the name is a POSIX extended regular expression
//! searched anywhere in the entry's name.
//!
//! Entries are zip entries, 7z entries (`CL_TYPE_7Z`) and cabinet files
//! (`CL_TYPE_MSCAB`), both with a compressed size of 0 and a 0-based position
//! as ClamAV gives them, and, as ClamAV checks them, the attachments of a mail
//! message (container type `CL_TYPE_MAIL`; the name is the part's file name, both
//! sizes its decoded size, the position 0). ClamAV also walks rar, arj and
//! others; lines for those container types are valid but counted as not used.

use crate::filetype::FileType;
use crate::logical::FLEVEL;
use crate::signature::Refusal;

/// A number constraint: `*`, `n`, or `a-b` where a bound of 0 is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Range {
    Any,
    Exact(u64),
    Between(u64, u64),
}

impl Range {
    fn parse(s: &str) -> Result<Range, Refusal> {
        let num = |s: &str| {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err("cdb: bad number or range");
            }
            s.parse::<u64>().map_err(|_| "cdb: bad number or range")
        };
        if s == "*" {
            return Ok(Range::Any);
        }
        match s.split_once('-') {
            Some((a, b)) => Ok(Range::Between(num(a)?, num(b)?)),
            None => Ok(Range::Exact(num(s)?)),
        }
    }

    /// Whether `value` is allowed; an unknown value (`None`) only by `*`.
    pub fn allows(self, value: Option<u64>) -> bool {
        match (self, value) {
            (Range::Any, _) => true,
            (_, None) => false,
            (Range::Exact(n), Some(v)) => n == v,
            (Range::Between(lo, hi), Some(v)) => (lo == 0 || lo <= v) && (hi == 0 || v <= hi),
        }
    }
}

/// One loaded `.cdb` signature.
#[derive(Debug, Clone)]
pub(crate) struct ContainerSig {
    pub name: String,
    /// The container type, or `None` for `*`.
    pub container: Option<FileType>,
    pub container_size: Range,
    pub file_name: Option<regex::bytes::Regex>,
    pub compressed_size: Range,
    pub real_size: Range,
    /// `None` for `*`.
    pub encrypted: Option<bool>,
    pub position: Range,
}

/// What an archive says about one entry; sizes unknown until a data descriptor
/// gives them are `None`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryMeta<'a> {
    pub container: FileType,
    pub name: &'a [u8],
    pub compressed_size: Option<u64>,
    pub real_size: Option<u64>,
    pub encrypted: bool,
    /// 1-based position of the entry in the archive.
    pub position: u64,
}

impl ContainerSig {
    /// Whether the entry matches everything but the container size.
    pub fn matches_entry(&self, e: &EntryMeta<'_>) -> bool {
        self.container.is_none_or(|c| c == e.container)
            && self.encrypted.is_none_or(|x| x == e.encrypted)
            && self.compressed_size.allows(e.compressed_size)
            && self.real_size.allows(e.real_size)
            && self.position.allows(Some(e.position))
            && self.file_name.as_ref().is_none_or(|re| re.is_match(e.name))
    }
}

/// A parsed `.cdb` line.
#[derive(Debug, Clone)]
pub(crate) enum CdbLine {
    Sig(Box<ContainerSig>),
    /// A valid line this engine has no use for, and why.
    Unused(&'static str),
}

/// Parses one `.cdb` line (not a comment or a blank line).
pub(crate) fn parse_cdb(line: &str) -> Result<CdbLine, Refusal> {
    let f: Vec<&str> = line.split(':').collect();
    if !(10..=12).contains(&f.len()) {
        return Err("cdb: wrong number of fields");
    }
    let level = |s: &str| s.parse::<u32>().map_err(|_| "cdb: bad functionality level");
    if let Some(min) = f.get(10) {
        if level(min)? > FLEVEL {
            return Ok(CdbLine::Unused("cdb: needs a newer engine"));
        }
    }
    if let Some(max) = f.get(11) {
        if level(max)? < FLEVEL {
            return Ok(CdbLine::Unused("cdb: for older engines only"));
        }
    }
    if f[0].is_empty() {
        return Err("cdb: empty name");
    }
    let container = match f[1] {
        "*" => None,
        "CL_TYPE_ZIP" => Some(FileType::Zip),
        "CL_TYPE_MAIL" => Some(FileType::Mail),
        "CL_TYPE_7Z" => Some(FileType::SevenZip),
        "CL_TYPE_MSCAB" => Some(FileType::Cab),
        t if t.starts_with("CL_TYPE_") && t.len() > 8 => {
            return Ok(CdbLine::Unused(
                "cdb: a container type whose entries this engine does not walk",
            ))
        }
        _ => return Err("cdb: not a ClamAV container type"),
    };
    let file_name = match f[3] {
        "*" => None,
        re => Some(
            regex::bytes::RegexBuilder::new(re)
                .unicode(false)
                .size_limit(1 << 20)
                .build()
                .map_err(|_| "cdb: bad file name regular expression")?,
        ),
    };
    let encrypted = match f[6] {
        "*" => None,
        "0" => Some(false),
        "1" => Some(true),
        _ => return Err("cdb: bad encryption flag"),
    };
    Ok(CdbLine::Sig(Box::new(ContainerSig {
        name: f[0].to_string(),
        container,
        container_size: Range::parse(f[2])?,
        file_name,
        compressed_size: Range::parse(f[4])?,
        real_size: Range::parse(f[5])?,
        encrypted,
        position: Range::parse(f[7])?,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sig(line: &str) -> ContainerSig {
        match parse_cdb(line) {
            Ok(CdbLine::Sig(s)) => *s,
            other => panic!("{line}: {other:?}"),
        }
    }

    fn entry(name: &[u8]) -> EntryMeta<'_> {
        EntryMeta {
            container: FileType::Zip,
            name,
            compressed_size: Some(100),
            real_size: Some(300),
            encrypted: false,
            position: 2,
        }
    }

    #[test]
    fn fields() {
        let s = sig("Test.Exe:CL_TYPE_ZIP:*:\\.exe$:*:*:*:*:*:*");
        assert!(s.matches_entry(&entry(b"dir/run.exe")));
        assert!(!s.matches_entry(&entry(b"run.exe.txt")));
        let s = sig("T:*:*:*:100:200-400:0:2:*:*");
        assert!(s.matches_entry(&entry(b"a")));
        assert!(!s.matches_entry(&EntryMeta {
            encrypted: true,
            ..entry(b"a")
        }));
        assert!(!s.matches_entry(&EntryMeta {
            position: 3,
            ..entry(b"a")
        }));
        assert!(!s.matches_entry(&EntryMeta {
            real_size: None,
            ..entry(b"a")
        }));
        // A bound of 0 is open.
        assert!(!sig("T:*:*:*:0-100:301-0:*:*:*:*").matches_entry(&entry(b"a")));
        assert!(sig("T:*:*:*:0-100:300-0:*:*:*:*").matches_entry(&entry(b"a")));
        assert!(matches!(
            parse_cdb("T:CL_TYPE_RAR:*:*:*:*:*:*:*:*"),
            Ok(CdbLine::Unused(_))
        ));
        assert!(matches!(
            parse_cdb("T:CL_TYPE_ZIP:*:*:*:*:*:*:*:*:999"),
            Ok(CdbLine::Unused("cdb: needs a newer engine"))
        ));
        assert!(matches!(
            parse_cdb("T:ZIP:*:*:*:*:*:*:*:*"),
            Err("cdb: not a ClamAV container type")
        ));
        assert!(matches!(
            parse_cdb("T:*:*:(:*:*:*:*:*:*"),
            Err("cdb: bad file name regular expression")
        ));
        assert!(matches!(
            parse_cdb("T:*:*:*:*:*:2:*:*:*"),
            Err("cdb: bad encryption flag")
        ));
        assert!(matches!(
            parse_cdb("T:*:*:*:1-x:*:*:*:*:*"),
            Err("cdb: bad number or range")
        ));
        assert!(matches!(
            parse_cdb("T:*:*:*:*"),
            Err("cdb: wrong number of fields")
        ));
    }

    proptest! {
        #[test]
        fn never_panics(line in "[0-9a-zA-Z_:*.\\\\$^()|+-]{0,80}") {
            let _ = parse_cdb(&line);
        }

        #[test]
        fn ranges(lo in 0u64..1000, hi in 0u64..1000, v in 0u64..1000) {
            let r = Range::parse(&format!("{lo}-{hi}")).unwrap();
            let inside = (lo == 0 || lo <= v) && (hi == 0 || v <= hi);
            prop_assert_eq!(r.allows(Some(v)), inside);
            prop_assert!(Range::parse(&v.to_string()).unwrap().allows(Some(v)));
            prop_assert!(!Range::parse(&v.to_string()).unwrap().allows(Some(v + 1)));
        }
    }
}
