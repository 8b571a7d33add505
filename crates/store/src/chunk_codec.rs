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
//! before compression existed (codec 0) read as they are. Once the store
//! has trained a dictionary on its mail (dictionary.rs), chunks are packed
//! with it (codec 2), which small messages need to pack well.

use std::borrow::Cow;

use zstd::zstd_safe;

use crate::dictionary::{self, Dictionary};
use crate::error::{Result, StoreError};
use crate::CHUNK_SIZE;

/// The chunk is stored as it came.
pub(crate) const RAW: i64 = 0;
/// The chunk is one zstd frame.
pub(crate) const ZSTD: i64 = 1;
/// The chunk is one zstd frame made with a dictionary, which the frame
/// names (dictionary.rs).
pub(crate) const ZSTD_DICTIONARY: i64 = 2;

/// zstd's level: its fastest with a real ratio, and a small context.
const LEVEL: i32 = 1;

/// A chunk as stored: its codec and bytes, packed with `dictionary`
/// when the store has one.
pub(crate) fn pack(data: Vec<u8>, dictionary: Option<&Dictionary>) -> (i64, Vec<u8>) {
    let packed = match dictionary {
        Some(d) => d.compress(&data).map(|p| (ZSTD_DICTIONARY, p)),
        None => zstd::bulk::compress(&data, LEVEL).map(|p| (ZSTD, p)),
    };
    match packed {
        Ok((codec, packed)) if packed.len() <= data.len() - data.len() / 8 => (codec, packed),
        _ => (RAW, data),
    }
}

/// Like [`unpack`], for a chunk read into a vector of its own.
pub(crate) fn unpack_owned(codec: i64, data: Vec<u8>, blob: i64) -> Result<Vec<u8>> {
    match codec {
        RAW => Ok(data),
        _ => unpack(codec, &data, blob).map(Cow::into_owned),
    }
}

/// A chunk as the database holds it (`blob_chunks.codec` and `.data`),
/// decoded: for tools and tests that read the database file directly.
/// Chunks packed with a dictionary need [`crate::load_dictionaries`]
/// on that database first.
pub fn decode_chunk(codec: i64, data: &[u8]) -> Result<Vec<u8>> {
    unpack(codec, data, 0).map(Cow::into_owned)
}

/// A stored chunk's bytes as they came. `blob` names it in errors.
pub(crate) fn unpack(codec: i64, data: &[u8], blob: i64) -> Result<Cow<'_, [u8]>> {
    // No chunk is larger than CHUNK_SIZE, which bounds what a damaged
    // frame could make us allocate.
    unpack_within(codec, data, CHUNK_SIZE, "a chunk", blob)
}

/// Longest header block a blob keeps (`blob_parsed.header`): the index
/// window, and header fields put in front of it (less than a chunk).
const HEADER_LIMIT: usize = crate::INDEX_WINDOW + CHUNK_SIZE;

/// A blob's stored header block (`blob_parsed.header_codec` and
/// `.header`) as it came. Header blocks are packed as chunks are
/// ([`pack`]): about 600 bytes of header fields shrink by a third.
pub(crate) fn unpack_header(codec: i64, data: &[u8], blob: i64) -> Result<Cow<'_, [u8]>> {
    unpack_within(codec, data, HEADER_LIMIT, "the header block", blob)
}

/// Unpacks `data`, which may not grow past `limit` bytes; `what` and
/// `blob` name it in errors.
fn unpack_within<'a>(
    codec: i64,
    data: &'a [u8],
    limit: usize,
    what: &str,
    blob: i64,
) -> Result<Cow<'a, [u8]>> {
    match codec {
        RAW => Ok(Cow::Borrowed(data)),
        ZSTD | ZSTD_DICTIONARY => decompress(data, limit)
            .map(Cow::Owned)
            .map_err(|e| StoreError::Corrupt(format!("{what} of blob {blob}: {e}"))),
        other => Err(StoreError::Corrupt(format!(
            "{what} of blob {blob} has an unknown codec {other}"
        ))),
    }
}

thread_local! {
    /// One decompression context per thread, reused: making one for each
    /// frame cost more than decompressing a header block of 600 bytes.
    static DECOMPRESSOR: std::cell::RefCell<zstd_safe::DCtx<'static>> =
        std::cell::RefCell::new(zstd_safe::DCtx::create());
}

/// Decompresses one frame of at most `limit` bytes into a vector of the
/// size its header gives (every frame [`pack`] writes says it), so a
/// header block of 600 bytes does not allocate `limit`. A frame that names
/// a dictionary is read with it.
fn decompress(data: &[u8], limit: usize) -> std::result::Result<Vec<u8>, String> {
    let size = match zstd_safe::get_frame_content_size(data) {
        Ok(Some(n)) if n <= limit as u64 => n as usize,
        _ => limit,
    };
    let mut out = Vec::with_capacity(size);
    DECOMPRESSOR.with(|cell| {
        let mut dctx = cell.borrow_mut();
        match zstd_safe::get_dict_id_from_frame(data) {
            Some(id) => dictionary::decompress_with(&mut dctx, id.get(), data, &mut out),
            None => dctx
                .decompress(&mut out, data)
                .map(|_| ())
                .map_err(|code| zstd_safe::get_error_name(code).to_string()),
        }
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn text_is_compressed_and_random_bytes_stay_raw() {
        let text = b"Subject: hello\r\n\r\n".repeat(500);
        let (codec, packed) = pack(text.clone(), None);
        assert_eq!(codec, ZSTD);
        assert!(packed.len() < text.len() / 4, "{}", packed.len());
        assert_eq!(unpack(codec, &packed, 1).unwrap(), &text[..]);
        assert_eq!(unpack_owned(codec, packed, 1).unwrap(), text);

        // Incompressible, like an already compressed attachment.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        let (codec, packed) = pack(noise.clone(), None);
        assert_eq!(codec, RAW);
        assert_eq!(packed, noise);
        assert_eq!(pack(Vec::new(), None).0, RAW);
    }

    #[test]
    fn damage_and_unknown_codecs_are_errors_naming_the_blob() {
        let (_, mut damaged) = pack(b"abc".repeat(1000), None);
        damaged.truncate(damaged.len() / 2);
        let e = unpack(ZSTD, &damaged, 42).unwrap_err().to_string();
        assert!(e.contains("blob 42"), "{e}");
        let e = unpack(7, b"x", 43).unwrap_err().to_string();
        assert!(e.contains("unknown codec 7"), "{e}");
    }

    #[test]
    fn header_blocks_larger_than_a_chunk_read_back() {
        let header = b"X-Long: some words that repeat\r\n".repeat(CHUNK_SIZE / 16);
        assert!(header.len() > CHUNK_SIZE);
        let (codec, packed) = pack(header.clone(), None);
        assert_eq!(codec, ZSTD);
        assert!(
            unpack(codec, &packed, 1).is_err(),
            "a chunk is never this long"
        );
        assert_eq!(unpack_header(codec, &packed, 1).unwrap(), &header[..]);
        let e = unpack_header(9, b"x", 5).unwrap_err().to_string();
        assert!(e.contains("header block of blob 5"), "{e}");
    }

    #[test]
    fn a_frame_larger_than_its_limit_is_refused_and_others_read_exactly() {
        let text = b"Received: from a by b\r\n".repeat(100);
        let (codec, packed) = pack(text.clone(), None);
        assert_eq!(codec, ZSTD);
        let back = unpack_within(codec, &packed, text.len(), "it", 1).unwrap();
        assert_eq!(back.as_ref(), text.as_slice());
        assert_eq!(back.into_owned().capacity(), text.len());
        let e = unpack_within(codec, &packed, text.len() - 1, "it", 9)
            .unwrap_err()
            .to_string();
        assert!(e.contains("it of blob 9"), "{e}");
    }

    proptest! {
        #[test]
        fn every_chunk_reads_back_as_written(data in proptest::collection::vec(any::<u8>(), 0..4096), repeat in 1usize..40) {
            let data = data.repeat(repeat);
            let data = data[..data.len().min(CHUNK_SIZE)].to_vec();
            let (codec, packed) = pack(data.clone(), None);
            prop_assert_eq!(unpack_owned(codec, packed, 0).unwrap(), data);
        }
    }
}
