//! What every message writer does with the bytes of a message as they
//! stream in, whatever the back end stores them in: cut them into pieces
//! of [`PIECE_SIZE`] for the caller to store, build the MIME structure
//! IMAP serves, and keep the start of the header fields and text (the
//! index window) to fill the header and full-text indexes from.
//!
//! Memory is bounded per message: one piece, the window, and the
//! structure builder's header blocks.

use mime_tree::StructureBuilder;

use crate::error::{Result, StoreError};
use crate::index::{header_block, index_long_message, index_message, MessageIndex};
use crate::{CHUNK_SIZE, INDEX_WINDOW};

/// Messages up to this size are indexed inline; larger ones on a blocking
/// thread, so parsing a megabyte of MIME does not hold a runtime thread.
const INLINE_INDEX_LIMIT: usize = 64 * 1024;

/// The chunk number of a lead written after the message's own chunks
/// ([`crate::Delivery::lead`]); it sorts first.
pub(crate) const LEAD_SEQ: i64 = -1;

/// Size of the pieces a new blob is stored in. Readers still get
/// [`CHUNK_SIZE`] at a time (`read_chunk` joins pieces); the piece is what
/// each receiving connection holds until it is written, so it sets most of
/// the store's memory per connection in the data stage: 128 KiB pieces
/// cost about 180 KiB per connection, 32 KiB ones about 60 KiB (200
/// concurrent 10 MB mails, `bench/probes/concurrent_scan_memory.py`).
/// Smaller pieces would mean more rows and a worse compression ratio for
/// little more saving.
pub(crate) const PIECE_SIZE: usize = 32 * 1024;

/// A message coming in (see the module comment).
pub(crate) struct Intake {
    /// Bytes not yet handed out as a piece, never more than one piece.
    pending: Vec<u8>,
    /// Pieces handed out so far.
    pieces: u32,
    /// The start of the message's header fields and text, until the index
    /// is taken from it: the bodies of attachments are left out as they
    /// stream by (`text_tap`), so a large attachment holds no memory here.
    head: Vec<u8>,
    text_tap: Option<mime_tree::PartRewriter>,
    /// The index, computed as soon as the head is full so that the head
    /// need not be kept for the rest of a large message.
    index: Option<MessageIndex>,
    /// The top-level header block, cut out of the head with the index.
    header: Vec<u8>,
    /// Sees every byte: the MIME structure IMAP serves without parsing.
    structure: StructureBuilder,
    size: u64,
}

/// What a delivery stores of a message, once all of it came in.
pub(crate) struct Taken {
    /// Pieces still to store, numbered, not packed: the lead
    /// ([`crate::Delivery::lead`]) as a piece of its own numbered
    /// [`LEAD_SEQ`] before the pieces already handed out, or, when none
    /// was, the whole message with the lead in front.
    pub(crate) pieces: Vec<(i64, Vec<u8>)>,
    /// Bytes of the message, lead included.
    pub(crate) size: u64,
    /// `MessageStructure::to_bytes()`, lead included.
    pub(crate) structure: Vec<u8>,
    pub(crate) index: MessageIndex,
    /// The top-level header block, lead included.
    pub(crate) header: Vec<u8>,
}

impl Intake {
    pub(crate) fn new() -> Intake {
        Intake {
            pending: Vec::new(),
            pieces: 0,
            head: Vec::new(),
            text_tap: Some(mime_tree::PartRewriter::text_only()),
            index: None,
            header: Vec::new(),
            structure: StructureBuilder::new(),
            size: 0,
        }
    }

    /// Bytes taken in so far.
    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Whether a piece was handed out: the back end holds a blob for it.
    pub(crate) fn any_piece(&self) -> bool {
        self.pieces > 0
    }

    /// Reads `data`, the next bytes of the message, into the structure
    /// and the window; the caller then cuts it into pieces with
    /// [`Intake::next_piece`]. Indexes the window once it is full, on a
    /// blocking thread.
    pub(crate) async fn read(&mut self, data: &[u8]) -> Result<()> {
        self.size += data.len() as u64;
        self.structure.feed(data);
        let Some(tap) = &mut self.text_tap else {
            return Ok(());
        };
        tap.push(data, &mut self.head);
        if self.head.len() >= INDEX_WINDOW {
            self.text_tap = None;
            let mut head = std::mem::take(&mut self.head);
            head.truncate(INDEX_WINDOW);
            self.header = header_block(&head).to_vec();
            self.index = Some(
                tokio::task::spawn_blocking(move || index_long_message(&head))
                    .await
                    .map_err(|_| StoreError::Closed)?,
            );
        }
        Ok(())
    }

    /// Moves bytes of `data` (read before) into the pending piece and
    /// returns the piece with its number once it is full; `None` once
    /// `data` is used up. Filling the piece exactly keeps its buffer from
    /// growing past one piece.
    pub(crate) fn next_piece(&mut self, data: &mut &[u8]) -> Option<(i64, Vec<u8>)> {
        while !data.is_empty() {
            let room = PIECE_SIZE - self.pending.len();
            let (now, later) = data.split_at(room.min(data.len()));
            self.pending.extend_from_slice(now);
            *data = later;
            if self.pending.len() == PIECE_SIZE {
                let seq = i64::from(self.pieces);
                self.pieces += 1;
                let piece = std::mem::replace(&mut self.pending, Vec::with_capacity(PIECE_SIZE));
                return Some((seq, piece));
            }
        }
        None
    }

    /// Everything the delivery stores, with `lead` in front of the
    /// message. `Invalid` for a lead of a chunk or more.
    pub(crate) async fn take(&mut self, lead: &[u8]) -> Result<Taken> {
        if lead.len() >= CHUNK_SIZE {
            return Err(StoreError::Invalid(format!(
                "header fields put in front of a message take {} bytes, more than {CHUNK_SIZE}",
                lead.len()
            )));
        }
        let mut structure = std::mem::take(&mut self.structure).finish();
        structure.prepend(lead.len() as u64);
        let index = match self.index.take() {
            Some(index) => index,
            None => self.index_head(lead).await?,
        };
        let mut header = std::mem::take(&mut self.header);
        if !lead.is_empty() && !header.starts_with(lead) {
            // A large message's header was cut out before the lead existed.
            header.splice(0..0, lead.iter().copied());
        }
        Ok(Taken {
            pieces: self.last_pieces(lead),
            size: self.size + lead.len() as u64,
            structure: structure.to_bytes(),
            index,
            header,
        })
    }

    /// Indexes the head still held (the message was shorter than the
    /// window), with `lead` in front, and cuts out its header block.
    async fn index_head(&mut self, lead: &[u8]) -> Result<MessageIndex> {
        if let Some(tap) = self.text_tap.take() {
            tap.finish(&mut self.head);
        }
        let mut head = std::mem::take(&mut self.head);
        head.truncate(INDEX_WINDOW);
        if !lead.is_empty() {
            head.splice(0..0, lead.iter().copied());
        }
        self.header = header_block(&head).to_vec();
        if head.len() <= INLINE_INDEX_LIMIT {
            Ok(index_message(&head))
        } else {
            tokio::task::spawn_blocking(move || index_message(&head))
                .await
                .map_err(|_| StoreError::Closed)
        }
    }

    /// The pieces still to store ([`Taken::pieces`]).
    fn last_pieces(&mut self, lead: &[u8]) -> Vec<(i64, Vec<u8>)> {
        let seq = i64::from(self.pieces);
        let last = std::mem::take(&mut self.pending);
        if self.any_piece() {
            // Pieces are stored already: the lead is a piece of its own
            // before them, which readers fold back into chunks of the
            // usual size.
            [(LEAD_SEQ, lead.to_vec()), (seq, last)]
                .into_iter()
                .filter(|(_, data)| !data.is_empty())
                .collect()
        } else {
            // The whole message is still here: the lead simply comes first.
            [lead, last.as_slice()]
                .concat()
                .chunks(PIECE_SIZE)
                .enumerate()
                .map(|(n, data)| (seq + n as i64, data.to_vec()))
                .collect()
        }
    }
}
