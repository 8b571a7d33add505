//! How a message chunk is kept on disk: compressed with zstd when that
//! saves space, raw otherwise.
//!
//! Mail is mostly text (headers, plain and HTML bodies, base64 and
//! quoted-printable attachments) and shrinks two to four times under
//! zstd's fastest level, which compresses at hundreds of megabytes and
//! decompresses at over a gigabyte per second per core: cheaper than the
//! disk writes it saves, the write-ahead log's among them. Chunks that do
//! not shrink by an eighth (already compressed attachments) stay raw, so
//! reading them costs nothing. Each row names its codec, so chunks written
//! before compression existed (codec 0) read as they are.

use std::borrow::Cow;

use crate::error::{Result, StoreError};
use crate::CHUNK_SIZE;

/// The chunk is stored as it came.
pub(crate) const RAW: i64 = 0;
/// The chunk is one zstd frame.
pub(crate) const ZSTD: i64 = 1;

/// zstd's level: its fastest with a real ratio, and a small context.
const LEVEL: i32 = 1;

/// A chunk as stored: its codec and bytes.
pub(crate) fn pack(data: &[u8]) -> (i64, Cow<'_, [u8]>) {
    match zstd::bulk::compress(data, LEVEL) {
        Ok(packed) if packed.len() <= data.len() - data.len() / 8 => (ZSTD, Cow::Owned(packed)),
        _ => (RAW, Cow::Borrowed(data)),
    }
}

/// A stored chunk's bytes as they came. `blob` names it in errors.
pub(crate) fn unpack(codec: i64, data: &[u8], blob: i64) -> Result<Cow<'_, [u8]>> {
    match codec {
        RAW => Ok(Cow::Borrowed(data)),
        // No chunk is larger than CHUNK_SIZE, which bounds what a damaged
        // frame could make us allocate.
        ZSTD => zstd::bulk::decompress(data, CHUNK_SIZE)
            .map(Cow::Owned)
            .map_err(|e| StoreError::Corrupt(format!("a chunk of blob {blob}: {e}"))),
        other => Err(StoreError::Corrupt(format!(
            "a chunk of blob {blob} has an unknown codec {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn text_is_compressed_and_random_bytes_stay_raw() {
        let text = b"Subject: hello\r\n\r\n".repeat(500);
        let (codec, packed) = pack(&text);
        assert_eq!(codec, ZSTD);
        assert!(packed.len() < text.len() / 4, "{}", packed.len());
        assert_eq!(unpack(codec, &packed, 1).unwrap(), &text[..]);

        let noise: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let (codec, packed) = pack(&noise);
        assert_eq!(codec, RAW);
        assert_eq!(&*packed, &noise[..]);
        assert_eq!(pack(b"").0, RAW);
    }

    #[test]
    fn damage_and_unknown_codecs_are_errors_naming_the_blob() {
        let (_, packed) = pack(&b"abc".repeat(1000));
        let mut damaged = packed.into_owned();
        damaged.truncate(damaged.len() / 2);
        let e = unpack(ZSTD, &damaged, 42).unwrap_err().to_string();
        assert!(e.contains("blob 42"), "{e}");
        let e = unpack(7, b"x", 43).unwrap_err().to_string();
        assert!(e.contains("unknown codec 7"), "{e}");
    }

    proptest! {
        #[test]
        fn every_chunk_reads_back_as_written(data in proptest::collection::vec(any::<u8>(), 0..4096), repeat in 1usize..40) {
            let data = data.repeat(repeat);
            let data = &data[..data.len().min(CHUNK_SIZE)];
            let (codec, packed) = pack(data);
            prop_assert_eq!(unpack(codec, &packed, 0).unwrap(), data);
        }
    }
}
