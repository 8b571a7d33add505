//! Fixture generators shared by the integration tests: mails in every transfer
//! encoding, archives of every supported kind, bombs. Generated in code, never
//! committed as binaries.
#![allow(dead_code)]

mod base64_body;
pub mod cfb;
pub mod clamscan;
pub mod pe;

pub use base64_body::b64;
use std::io::{Cursor, Write};

/// Test `.ndb` signatures: a body one (matches [`NDB_PAYLOAD`]) and a target type 4
/// (mail) one that matches the header line `X-Sluice-Test: phish`.
pub const NDB: &str = "Sluice.Test.Ndb-1:0:*:534c554943452d54455354{2-6}5349474e41545552452d2a2a\n\
Sluice.Test.Mail-1:4:*:582d536c756963652d546573743a207068697368\n";
/// Name reported for the mail signature in [`NDB`].
pub const MAIL_NAME: &str = "Sluice.Test.Mail-1";
/// Bytes that match [`NDB`]: `SLUICE-TEST` .. `SIGNATURE-**`.
pub const NDB_PAYLOAD: &[u8] = b"prefix SLUICE-TEST::::SIGNATURE-** suffix\n";
/// Name reported for [`NDB`].
pub const NDB_NAME: &str = "Sluice.Test.Ndb-1";
/// A whole file matched by hash only.
pub const HDB_FILE: &[u8] = b"this exact file is known bad, by its MD5 and size\n";
/// Name reported for the hash signature of [`HDB_FILE`].
pub const HDB_NAME: &str = "Sluice.Test.Hdb-1";

/// Bytes in lower-case hex, as signature files write digests.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

/// The MD5 of `data` in hex, as `.hdb` lines give it.
pub fn md5_hex(data: &[u8]) -> String {
    use md5::Digest;
    hex(&md5::Md5::digest(data))
}

/// The `.hdb` line for [`HDB_FILE`].
pub fn hdb_line() -> String {
    format!("{}:{}:{HDB_NAME}\n", md5_hex(HDB_FILE), HDB_FILE.len())
}

/// The EICAR body signature in `.ndb` form, for giving ClamAV the same database.
pub fn eicar_ndb() -> String {
    let hex: String = scan::EICAR.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}:0:*:{hex}\n", scan::EICAR_NAME)
}

pub fn qp(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut col = 0;
    for &b in data {
        let enc = if (33..=126).contains(&b) && b != b'=' {
            vec![b]
        } else {
            format!("={b:02X}").into_bytes()
        };
        if col + enc.len() > 72 {
            out.extend_from_slice(b"=\r\n");
            col = 0;
        }
        col += enc.len();
        out.extend_from_slice(&enc);
    }
    out.extend_from_slice(b"\r\n");
    out
}

pub fn uu(name: &str, data: &[u8]) -> Vec<u8> {
    let mut out = format!("begin 644 {name}\r\n").into_bytes();
    let enc = |v: u32| if v == 0 { b'`' } else { v as u8 + b' ' };
    for line in data.chunks(45) {
        out.push(enc(line.len() as u32));
        for c in line.chunks(3) {
            let v = (u32::from(c[0]) << 16)
                | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                | u32::from(*c.get(2).unwrap_or(&0));
            for s in [18, 12, 6, 0] {
                out.push(enc((v >> s) & 63));
            }
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"`\r\nend\r\n");
    out
}

/// A mail with a text part and one attachment in `encoding` (`base64`,
/// `quoted-printable`, `7bit`).
pub fn mail_with(name: &str, data: &[u8], encoding: &str) -> Vec<u8> {
    let body = match encoding {
        "base64" => b64(data),
        "quoted-printable" => qp(data),
        _ => {
            let mut d = data.to_vec();
            d.extend_from_slice(b"\r\n");
            d
        }
    };
    let mut m = format!(
        "From: sender@example.org\r\nTo: rcpt@example.org\r\nSubject: fixture {name}\r\n\
MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"=_sluice_b\"\r\n\r\n\
This is a multi-part message in MIME format.\r\n--=_sluice_b\r\n\
Content-Type: text/plain; charset=us-ascii\r\n\r\nPlease see the attachment.\r\n--=_sluice_b\r\n\
Content-Type: application/octet-stream; name=\"{name}\"\r\n\
Content-Transfer-Encoding: {encoding}\r\n\
Content-Disposition: attachment; filename=\"{name}\"\r\n\r\n"
    )
    .into_bytes();
    m.extend_from_slice(&body);
    m.extend_from_slice(b"--=_sluice_b--\r\n");
    m
}

/// A plain mail whose text body holds `data` as it is.
pub fn plain_mail(data: &[u8]) -> Vec<u8> {
    let mut m = b"From: a@example.org\r\nTo: b@example.org\r\nSubject: plain\r\n\r\n".to_vec();
    m.extend_from_slice(data);
    m.extend_from_slice(b"\r\n");
    m
}

/// A mail whose text body carries a uuencoded file.
pub fn uu_mail(name: &str, data: &[u8]) -> Vec<u8> {
    let mut m =
        b"From: a@example.org\r\nTo: b@example.org\r\nSubject: uu\r\n\r\nHere it is:\r\n\r\n"
            .to_vec();
    m.extend_from_slice(&uu(name, data));
    m.extend_from_slice(b"\r\nbye\r\n");
    m
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub fn bzip2(data: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub fn xz(data: &[u8]) -> Vec<u8> {
    let mut e = xz2::write::XzEncoder::new(Vec::new(), 6);
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A zip made by the `zip` crate (sizes in the local headers).
pub fn zip(files: &[(&str, &[u8])], deflate: bool) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let method = if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let opts = zip::write::SimpleFileOptions::default().compression_method(method);
    for (name, data) in files {
        w.start_file(*name, opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// A zip written by hand as a streaming writer would: deflate entries with data
/// descriptors (sizes unknown in the local header), optionally flagged encrypted.
pub fn zip_streamed(files: &[(&str, &[u8])], encrypted: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in files {
        let offset = out.len() as u32;
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        let comp = e.finish().unwrap();
        let crc = crc32fast::hash(data);
        let flags: u16 = 0x08 | u16::from(encrypted);
        let mut lh = Vec::new();
        lh.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        lh.extend_from_slice(&20u16.to_le_bytes());
        lh.extend_from_slice(&flags.to_le_bytes());
        lh.extend_from_slice(&8u16.to_le_bytes());
        lh.extend_from_slice(&[0; 4]); // time, date
        lh.extend_from_slice(&[0; 12]); // crc, sizes: in the descriptor
        lh.extend_from_slice(&(name.len() as u16).to_le_bytes());
        lh.extend_from_slice(&0u16.to_le_bytes());
        lh.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&lh);
        out.extend_from_slice(&comp);
        out.extend_from_slice(&0x0807_4b50u32.to_le_bytes());
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&(comp.len() as u32).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&flags.to_le_bytes());
        central.extend_from_slice(&8u16.to_le_bytes());
        central.extend_from_slice(&[0; 4]);
        central.extend_from_slice(&crc.to_le_bytes());
        central.extend_from_slice(&(comp.len() as u32).to_le_bytes());
        central.extend_from_slice(&(data.len() as u32).to_le_bytes());
        central.extend_from_slice(&(name.len() as u16).to_le_bytes());
        central.extend_from_slice(&[0; 12]); // extra, comment, disk, attrs
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let cd_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

pub fn tar(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// Bytes that do not compress (a simple xorshift stream).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The named fixtures used by the corpus and ClamAV tests: (file name, bytes,
/// expected detection name or None for clean). `.eml` files are mails.
pub fn corpus() -> Vec<(String, Vec<u8>, Option<&'static str>)> {
    let eicar = scan::EICAR;
    let e = Some(scan::EICAR_NAME);
    let n = Some(NDB_NAME);
    let h = Some(HDB_NAME);
    let clean_text = b"Nothing to see here, just a letter.\r\n".repeat(20);
    let mut v: Vec<(String, Vec<u8>, Option<&'static str>)> = vec![
        ("eicar.com".into(), eicar.to_vec(), e),
        ("plain-eicar.eml".into(), plain_mail(eicar), e),
        (
            "b64-eicar.eml".into(),
            mail_with("eicar.com", eicar, "base64"),
            e,
        ),
        (
            "qp-eicar.eml".into(),
            mail_with("eicar.com", eicar, "quoted-printable"),
            e,
        ),
        ("uu-eicar.eml".into(), uu_mail("eicar.com", eicar), e),
        (
            "b64-ndb.eml".into(),
            mail_with("sig.txt", NDB_PAYLOAD, "base64"),
            n,
        ),
        (
            "qp-ndb.eml".into(),
            mail_with("sig.txt", NDB_PAYLOAD, "quoted-printable"),
            n,
        ),
        (
            "b64-hdb.eml".into(),
            mail_with("known.bin", HDB_FILE, "base64"),
            h,
        ),
        (
            "gz-eicar.eml".into(),
            mail_with("eicar.gz", &gzip(eicar), "base64"),
            e,
        ),
        (
            "zip-eicar.eml".into(),
            mail_with("eicar.zip", &zip(&[("eicar.com", eicar)], true), "base64"),
            e,
        ),
        (
            "zip-stored-ndb.eml".into(),
            mail_with(
                "s.zip",
                &zip(&[("a.txt", &clean_text), ("sig.txt", NDB_PAYLOAD)], false),
                "base64",
            ),
            n,
        ),
        (
            "zip-stream-hdb.eml".into(),
            mail_with(
                "d.zip",
                &zip_streamed(&[("a.txt", &clean_text), ("k.bin", HDB_FILE)], false),
                "base64",
            ),
            h,
        ),
        (
            "zip-in-zip-eicar.eml".into(),
            mail_with(
                "outer.zip",
                &zip(
                    &[
                        ("readme.txt", &clean_text),
                        ("inner.zip", &zip(&[("eicar.com", eicar)], true)),
                    ],
                    true,
                ),
                "base64",
            ),
            e,
        ),
        (
            "tar-gz-ndb.eml".into(),
            mail_with(
                "t.tar.gz",
                &gzip(&tar(&[("a.txt", &clean_text), ("sig.txt", NDB_PAYLOAD)])),
                "base64",
            ),
            n,
        ),
        (
            "tar-hdb.tar".into(),
            tar(&[("a.txt", &clean_text), ("k.bin", HDB_FILE)]),
            h,
        ),
        (
            "bz2-eicar.eml".into(),
            mail_with("eicar.bz2", &bzip2(eicar), "base64"),
            e,
        ),
        (
            "xz-ndb.eml".into(),
            mail_with("sig.xz", &xz(NDB_PAYLOAD), "base64"),
            n,
        ),
        ("eicar.zip".into(), zip(&[("eicar.com", eicar)], true), e),
        (
            "ndb.tar.gz".into(),
            gzip(&tar(&[("sig.txt", NDB_PAYLOAD)])),
            n,
        ),
        (
            "clean.eml".into(),
            mail_with("letter.txt", &clean_text, "base64"),
            None,
        ),
        (
            "clean-zip.eml".into(),
            mail_with(
                "l.zip",
                &zip(&[("letter.txt", &clean_text)], true),
                "base64",
            ),
            None,
        ),
        ("clean-noise.bin".into(), noise(100_000, 7), None),
        ("clean-plain.eml".into(), plain_mail(&clean_text), None),
        (
            "mail-target.eml".into(),
            // (ClamAV takes a file starting with `From: ` for an Exim spool file, not a
            // mail, and then skips its mail signatures: start with `Received:`.)
            b"Received: from x\r\nFrom: a@example.org\r\nX-Sluice-Test: phish\r\n\r\nhello\r\n"
                .to_vec(),
            Some(MAIL_NAME),
        ),
        // A mail signature does not match inside an attachment.
        (
            "mail-sig-in-file.bin".into(),
            b"X-Sluice-Test: phish\r\n".to_vec(),
            None,
        ),
    ];
    // OLE2 documents: a signature in a stream, in a macro's source (inside a
    // string literal, where ClamAV keeps the case), in a .docm's vbaProject.bin.
    let payload = NDB_PAYLOAD.strip_suffix(b"\n").unwrap_or(NDB_PAYLOAD);
    let macro_src = [
        b"Sub AutoOpen()\r\n  x = \"".as_slice(),
        payload,
        b"\"\r\nEnd Sub\r\n",
    ]
    .concat();
    let clean_src = b"Sub AutoOpen()\r\n  MsgBox \"hello\"\r\nEnd Sub\r\n";
    let vba_bin = cfb::vba_project_bin(&[("Module1", &macro_src)]);
    v.extend([
        ("eicar-stream.doc".into(), cfb::word_doc(eicar, &[]), e),
        (
            "ndb-macro.doc".into(),
            cfb::word_doc(&clean_text, &[("Module1", &macro_src)]),
            n,
        ),
        (
            "doc-macro-ndb.eml".into(),
            mail_with(
                "letter.doc",
                &cfb::word_doc(
                    &clean_text,
                    &[("ThisDocument", clean_src), ("Module1", &macro_src)],
                ),
                "base64",
            ),
            n,
        ),
        (
            "ndb-vba.docm".into(),
            zip(
                &[
                    ("[Content_Types].xml", b"<Types/>".as_slice()),
                    ("word/document.xml", b"<w:document/>"),
                    ("word/vbaProject.bin", &vba_bin),
                ],
                true,
            ),
            n,
        ),
        (
            "clean-macro.doc".into(),
            cfb::word_doc(&clean_text, &[("Module1", clean_src)]),
            None,
        ),
    ]);
    // The EICAR string split by a line break is not EICAR.
    let mut broken = eicar.to_vec();
    broken.insert(30, b'\n');
    v.push(("broken-eicar.eml".into(), plain_mail(&broken), None));
    v
}
