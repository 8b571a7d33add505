//! zstd dictionaries trained on a store's own mail, for packing small
//! messages.
//!
//! Why: a message of a few kilobytes compresses poorly on its own (zstd
//! has nothing to refer back to but the message itself), and SQLite keeps
//! a row within one page when it fits. On 4 KiB pages a 4.4 KB message
//! packed to 2.6 KB took a page of its own, so chunk pages were 60% full.
//! With a 64 KiB dictionary trained on the store's first thousand messages
//! (the header fields, words and markup they share) the same messages pack
//! to about 1.8 KB at zstd level 3 and two share a page: half the chunk
//! pages, on disk and in the write-ahead log.
//!
//! A frame made with a dictionary names it (zstd's dictionary id), and
//! the store keeps every dictionary it trained, so a chunk reads back
//! whichever dictionary is current now. Decoders are registered
//! process-wide by id: ids are picked at training so that no two
//! registered dictionaries share one, and registering another dictionary
//! under a known id is refused, never used.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, LazyLock, RwLock};

use zstd::dict::{DecoderDictionary, EncoderDictionary};
use zstd::zstd_safe;

use crate::error::{Result, StoreError};

/// A store trains its first dictionary once it has this many blobs.
pub(crate) const TRAIN_AFTER: i64 = 1000;
/// How many recent messages the dictionary is trained on ...
pub(crate) const SAMPLES: i64 = 1000;
/// ... how much of each: the start, where the header fields are ...
const SAMPLE_BYTES: usize = 4 * 1024;
/// ... and of all. Training holds its samples and about 6 MiB of tables;
/// more samples gained little on mail (a 64 KiB dictionary from 450
/// messages of 4.4 KB packed others to 1.85 KB, one from 1,000 to 1.80).
const SAMPLE_TOTAL: usize = 2 * 1024 * 1024;
/// zstd's usual dictionary size: larger ones gained little on mail.
const DICTIONARY_SIZE: usize = 64 * 1024;
/// Chunks up to this size are packed at [`SMALL_LEVEL`]: they are the
/// ones whose packed size decides how many share a page. Larger ones get
/// zstd's fastest level, as without a dictionary.
const SMALL: usize = 16 * 1024;
/// Level 3 packs small messages about 15% tighter than level 1 with the
/// same dictionary (2.1 against 1.8 KB), enough for two to share a page.
const SMALL_LEVEL: i32 = 3;
const LARGE_LEVEL: i32 = 1;
/// Dictionary ids zstd leaves free for private use (RFC 8878 §5).
const PRIVATE_IDS: std::ops::Range<u32> = 32_768..(1 << 31);

/// A dictionary ready for packing chunks.
pub(crate) struct Dictionary {
    id: u32,
    small: EncoderDictionary<'static>,
    large: EncoderDictionary<'static>,
}

struct Decoder {
    bytes: Vec<u8>,
    dictionary: DecoderDictionary<'static>,
}

static DECODERS: LazyLock<RwLock<HashMap<u32, Arc<Decoder>>>> = LazyLock::new(Default::default);

thread_local! {
    /// One compression context per thread, reused across chunks.
    static COMPRESSOR: RefCell<zstd_safe::CCtx<'static>> = RefCell::new(zstd_safe::CCtx::create());
}

impl Dictionary {
    /// Prepares `bytes` (a dictionary as stored) for packing.
    pub(crate) fn new(bytes: &[u8]) -> Result<Dictionary> {
        Ok(Dictionary {
            id: id_of(bytes)?,
            small: EncoderDictionary::copy(bytes, SMALL_LEVEL),
            large: EncoderDictionary::copy(bytes, LARGE_LEVEL),
        })
    }

    /// The id its frames carry.
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// `data` as one zstd frame made with this dictionary.
    pub(crate) fn compress(&self, data: &[u8]) -> io::Result<Vec<u8>> {
        let prepared = if data.len() <= SMALL {
            &self.small
        } else {
            &self.large
        };
        let mut out = Vec::with_capacity(zstd_safe::compress_bound(data.len()));
        COMPRESSOR
            .with(|c| {
                c.borrow_mut()
                    .compress_using_cdict(&mut out, data, prepared.as_cdict())
            })
            .map_err(|code| io::Error::other(zstd_safe::get_error_name(code)))?;
        Ok(out)
    }
}

/// Registers a stored dictionary for reading the frames that name it. The
/// same dictionary may be registered again (another store holding a copy,
/// a reopened store); another one under a known id is refused.
pub(crate) fn register(bytes: &[u8]) -> Result<()> {
    let id = id_of(bytes)?;
    {
        let mut decoders = DECODERS.write().expect("dictionary registry");
        match decoders.get(&id) {
            Some(known) if known.bytes != bytes => {
                return Err(StoreError::Corrupt(format!(
                    "two different zstd dictionaries have the id {id}"
                )))
            }
            Some(_) => {}
            None => {
                decoders.insert(
                    id,
                    Arc::new(Decoder {
                        bytes: bytes.to_vec(),
                        dictionary: DecoderDictionary::copy(bytes),
                    }),
                );
            }
        }
    }
    Ok(())
}

/// The id a dictionary's frames will carry.
pub(crate) fn id_of(bytes: &[u8]) -> Result<u32> {
    zstd_safe::get_dict_id_from_dict(bytes)
        .map(|id| id.get())
        .ok_or_else(|| StoreError::Corrupt("a stored zstd dictionary has no id".into()))
}

/// What a dictionary is trained on: the start of messages, end to end.
#[derive(Default)]
pub(crate) struct Samples {
    data: Vec<u8>,
    sizes: Vec<usize>,
}

impl Samples {
    /// Adds the start of `message`; false once there are enough.
    pub(crate) fn push(&mut self, message: &[u8]) -> bool {
        let take = message.len().min(SAMPLE_BYTES);
        if self.data.len() + take > SAMPLE_TOTAL {
            return false;
        }
        self.data.extend_from_slice(&message[..take]);
        self.sizes.push(take);
        true
    }
}

/// Trains a dictionary on `samples` and gives it an id no registered
/// dictionary has.
pub(crate) fn train(samples: &Samples) -> Result<Vec<u8>> {
    let mut bytes = zstd::dict::from_continuous(&samples.data, &samples.sizes, DICTIONARY_SIZE)
        .map_err(|e| StoreError::Invalid(format!("training a zstd dictionary: {e}")))?;
    // The id sits after the 4-byte magic number (RFC 8878 §5); zstd picks
    // it from the content, and we pick a free one instead.
    if bytes.len() < 8 {
        return Err(StoreError::Invalid("zstd made an empty dictionary".into()));
    }
    let decoders = DECODERS.read().expect("dictionary registry");
    let id = loop {
        let id = rand::Rng::gen_range(&mut rand::thread_rng(), PRIVATE_IDS);
        if !decoders.contains_key(&id) {
            break id;
        }
    };
    bytes[4..8].copy_from_slice(&id.to_le_bytes());
    Ok(bytes)
}

/// Decompresses a frame made with a dictionary into `out` (whose capacity
/// bounds it), with `dctx`.
pub(crate) fn decompress_with(
    dctx: &mut zstd_safe::DCtx<'static>,
    id: u32,
    frame: &[u8],
    out: &mut Vec<u8>,
) -> std::result::Result<(), String> {
    let decoder = DECODERS
        .read()
        .expect("dictionary registry")
        .get(&id)
        .cloned()
        .ok_or_else(|| format!("its zstd dictionary {id} is not in the store"))?;
    dctx.decompress_using_ddict(out, frame, decoder.dictionary.as_ddict())
        .map(|_| ())
        .map_err(|code| zstd_safe::get_error_name(code).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Messages that share header fields and a vocabulary, as a mailbox's do.
    fn mail(n: usize) -> Vec<u8> {
        let words = [
            "meeting", "report", "invoice", "tomorrow", "project", "budget", "review", "hello",
            "thanks", "schedule", "attached", "please", "update", "deadline", "customer",
        ];
        let mut x = n as u64 * 0x9e37_79b9 + 1;
        let mut body = String::new();
        for _ in 0..600 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            body.push_str(words[(x % words.len() as u64) as usize]);
            body.push(if x.is_multiple_of(11) { '\n' } else { ' ' });
        }
        format!(
            "Received: from mx{n}.example.org by mail.example.com with ESMTPS id {x:x}\r\n\
             From: Sender {n} <sender{n}@example.org>\r\nTo: user@example.com\r\n\
             Subject: {} {n}\r\nMessage-ID: <{x:x}@example.org>\r\n\
             Content-Type: text/plain; charset=utf-8\r\n\r\n{body}",
            words[n % words.len()]
        )
        .into_bytes()
    }

    #[test]
    fn a_trained_dictionary_packs_small_mail_tighter_and_reads_back() {
        let samples = samples_of(0..500);
        let bytes = train(&samples).unwrap();
        register(&bytes).unwrap();
        let dictionary = Dictionary::new(&bytes).unwrap();
        assert!(PRIVATE_IDS.contains(&dictionary.id()));
        let message = mail(10_000);
        let plain = zstd::bulk::compress(&message, 1).unwrap();
        let packed = dictionary.compress(&message).unwrap();
        assert!(
            packed.len() * 10 < plain.len() * 9,
            "{} against {}",
            packed.len(),
            plain.len()
        );
        let id = zstd_safe::get_dict_id_from_frame(&packed).unwrap().get();
        assert_eq!(id, dictionary.id());
        let mut out = Vec::with_capacity(message.len());
        let mut dctx = zstd_safe::DCtx::create();
        decompress_with(&mut dctx, id, &packed, &mut out).unwrap();
        assert_eq!(out, message);

        // Registering it again is fine; another dictionary under its id is not.
        register(&bytes).unwrap();
        let mut other = train(&samples_of(0..400)).unwrap();
        other[4..8].copy_from_slice(&id.to_le_bytes());
        let e = register(&other).err().unwrap().to_string();
        assert!(e.contains(&format!("the id {id}")), "{e}");
        // A frame naming an unknown dictionary is an error, not a guess.
        let e = decompress_with(&mut dctx, 1, &packed, &mut out).unwrap_err();
        assert!(e.contains("dictionary 1 is not in the store"), "{e}");
    }

    fn samples_of(messages: std::ops::Range<usize>) -> Samples {
        let mut samples = Samples::default();
        for n in messages {
            assert!(samples.push(&mail(n)));
        }
        samples
    }

    #[test]
    fn too_few_samples_are_an_error() {
        let mut samples = Samples::default();
        samples.push(b"tiny");
        assert!(train(&samples).is_err());
    }

    #[test]
    fn samples_take_the_start_of_messages_up_to_a_total() {
        let mut samples = Samples::default();
        let big = vec![b'x'; 100_000];
        let mut taken = 0;
        while samples.push(&big) {
            taken += 1;
        }
        assert_eq!(taken, SAMPLE_TOTAL / SAMPLE_BYTES);
        assert!(samples.sizes.iter().all(|&n| n == SAMPLE_BYTES));
        assert!(samples.data.len() <= SAMPLE_TOTAL);
    }
}
