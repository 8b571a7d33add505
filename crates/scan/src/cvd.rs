//! The `.cvd` header and its checks: a 512-byte text header
//! `ClamAV-VDB:time:version:signatures:flevel:MD5:dsig:builder:stime`, padded with
//! spaces, then the body (a gzip-compressed tar). The header's MD5 is that of the
//! body, and `dsig` is that MD5 signed with ClamAV's RSA key: the signature, read
//! as base-64 digits least significant first, raised to the public exponent modulo
//! the public modulus, gives back the 16 bytes of the MD5.
//!
//! As ClamAV does, only `.cvd` files are checked: a `.cld` is a `.cvd` that
//! freshclam updated in place with incremental patches (its header keeps the old
//! MD5 and signature), and a `.cud` is unsigned by design (`sigtool --unsigned`).

use md5::Digest;
use num_bigint::BigUint;

/// ClamAV's public modulus for `.cvd` signatures (`CLI_NSTR` in `libclamav/dsig.c`).
const MODULUS: &str = "118640995551645342603070001658453189751527774412027743746599405743243142607464144767361060640655844749760788890022283424922762488917565551002467771109669598189410434699034532232228621591089508178591428456220796841621637175567590476666928698770143328137383952820383197532047771780196576957695822641224262693037";

/// ClamAV's public exponent (`CLI_ESTR`).
const EXPONENT: u32 = 100_001_027;

/// The digits of the signature encoding, by value.
const DIGITS: &[u8; 64] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/";

/// The fields of a `.cvd` header the checks use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CvdHeader {
    /// Hex MD5 of the body.
    pub md5: String,
    /// The digital signature of that MD5.
    pub dsig: String,
}

/// Reads the header from the first 512 bytes.
pub(crate) fn parse_header(bytes: &[u8]) -> Result<CvdHeader, String> {
    let head = bytes.get(..512).ok_or("shorter than its 512-byte header")?;
    let text = std::str::from_utf8(head)
        .map_err(|_| "header is not text")?
        .trim_end_matches([' ', '\0', '\n', '\r']);
    let fields: Vec<&str> = text.split(':').collect();
    if fields.first() != Some(&"ClamAV-VDB") {
        return Err("no ClamAV-VDB header".into());
    }
    if fields.len() < 8 {
        return Err(format!("header has {} fields, not 8 or 9", fields.len()));
    }
    Ok(CvdHeader {
        md5: fields[5].to_ascii_lowercase(),
        dsig: fields[6].to_string(),
    })
}

/// The 16 bytes a signature decodes to with ClamAV's public key, or `None` when
/// it has a character outside the encoding or decodes to more than 16 bytes.
pub(crate) fn decode_dsig(dsig: &str) -> Option<[u8; 16]> {
    let mut c = BigUint::default();
    for (i, ch) in dsig.bytes().enumerate() {
        let digit = DIGITS.iter().position(|&d| d == ch)?;
        c += BigUint::from(digit) << (6 * i);
    }
    let n: BigUint = MODULUS.parse().expect("the modulus is a decimal number");
    let plain = c.modpow(&BigUint::from(EXPONENT), &n).to_bytes_be();
    if plain.len() > 16 {
        return None;
    }
    // Leading zero bytes are not in the number.
    let mut out = [0u8; 16];
    out[16 - plain.len()..].copy_from_slice(&plain);
    Some(out)
}

/// Checks a whole `.cvd` file: the body against the header's MD5, and the MD5
/// against the signature. The error says which failed.
pub(crate) fn verify(bytes: &[u8]) -> Result<(), String> {
    let header = parse_header(bytes)?;
    let body: [u8; 16] = md5::Md5::digest(&bytes[512..]).into();
    let hex: String = body.iter().map(|b| format!("{b:02x}")).collect();
    if hex != header.md5 {
        return Err(format!(
            "body MD5 {hex} does not match the header's {} (damaged or tampered with)",
            header.md5
        ));
    }
    match decode_dsig(&header.dsig) {
        Some(signed) if signed == body => Ok(()),
        _ => Err("digital signature does not match (not signed with ClamAV's key)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Header fields of two `.cvd` files ClamAV publishes in its test material
    /// (`unit_tests/input/freshclam_testfiles/test-1.cvd` and
    /// `unit_tests/input/bytecode_sigs/bytecode.cvd`): the MD5 and its signature.
    const SIGNED: [(&str, &str); 2] = [
        (
            "a4ab60ae1c1c4e8f787459102dcfd90b",
            "ttQeKzTSL5iF5/IWsA8weveL64WDVkhgfbm/ABaW3xAWalVKcAp65Q/cWmhkhKFfHSLIXNfCzTLbhfTeISKpfWAheL7NZk+t6nQ8NEFBBst6CQcoFTwwyVLwwTSN38VYLW/vZFYphnkBcCotyo++NYU5VQ9JUA6dFQXxaU00b6c",
        ),
        (
            "f341ae79c7e73561b89d4e0b8f6a79c0",
            "u1zx79ANlYhjROCU1oZTRrgWIeOzEKWpF0i3Qzz5jW9RRuLuW3pHDM2LB28kcAStuzM2lURMP9/diA0Q13qvK4Sx82+HS5aMKbOWtMz3OKPWrnk6A/KbAz+GG8N8bL3yRcTeGTHJn9d8zWL1Lb411Kpid+JYEwszbTMaUIi6xig",
        ),
    ];

    fn hex(b: &[u8]) -> String {
        b.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn clamav_signatures_decode_to_their_md5() {
        for (md5, dsig) in SIGNED {
            assert_eq!(decode_dsig(dsig).map(|d| hex(&d)).as_deref(), Some(md5));
        }
    }

    #[test]
    fn altered_signatures_do_not() {
        for (md5, dsig) in SIGNED {
            let mut bad = dsig.as_bytes().to_vec();
            bad[10] = if bad[10] == b'a' { b'b' } else { b'a' };
            let bad = String::from_utf8(bad).unwrap();
            assert_ne!(decode_dsig(&bad).map(|d| hex(&d)).as_deref(), Some(md5));
        }
        assert_eq!(decode_dsig("not*base64"), None);
    }

    fn cvd(md5: &str, dsig: &str, body: &[u8]) -> Vec<u8> {
        let mut f =
            format!("ClamAV-VDB:27 Nov 2026 00-00 +0000:1:1:90:{md5}:{dsig}:test:1").into_bytes();
        f.resize(512, b' ');
        f.extend_from_slice(body);
        f
    }

    #[test]
    fn checks_say_what_failed() {
        let body = b"the body";
        let right = hex(&md5::Md5::digest(body));
        let err = verify(&cvd(&"0".repeat(32), "x", body)).unwrap_err();
        assert!(err.contains("does not match the header's"), "{err}");
        let err = verify(&cvd(&right, SIGNED[0].1, body)).unwrap_err();
        assert!(err.contains("digital signature"), "{err}");
        assert!(verify(b"ClamAV-VDB:short")
            .unwrap_err()
            .contains("512-byte"));
        let mut no_magic = cvd(&right, "x", body);
        no_magic[0] = b'X';
        assert_eq!(verify(&no_magic).unwrap_err(), "no ClamAV-VDB header");
    }

    proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..700), sig in "[a-zA-Z0-9+/*]{0,200}") {
            let _ = verify(&data);
            let _ = parse_header(&data);
            let _ = decode_dsig(&sig);
        }
    }
}
