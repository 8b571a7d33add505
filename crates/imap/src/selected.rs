//! The selected mailbox as one session sees it: message sequence numbers,
//! and catching up with what other sessions and new mail changed
//! (RFC 3501 §5.2, §7.4.1; RFC 7162 §3.1).

use std::collections::{BTreeSet, HashMap};
use std::num::{NonZeroU32, NonZeroU64};

use imap_codec::imap_types::core::Vec1;
use imap_codec::imap_types::fetch::MessageDataItem;
use imap_codec::imap_types::response::{Code, Data};
use imap_codec::imap_types::sequence::{SeqOrUid, Sequence, SequenceSet};
use roaring::RoaringBitmap;
use store::{MailboxInfo, MessageEntry, Store, Uid};
use tokio::sync::watch;

use crate::flags::flag_list;
use crate::out::Out;
use crate::uidmap::UidMap;

/// A set named a message sequence number the mailbox does not have.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadSequence;

pub(crate) struct Selected {
    pub(crate) info: MailboxInfo,
    pub(crate) read_only: bool,
    /// UID of each message sequence number.
    uids: UidMap,
    /// Flag changes this session made and already showed, since the last
    /// catch-up: `(uid, modseq)`. Not shown again when the catch-up
    /// reads them back.
    shown: HashMap<Uid, u64>,
    /// The store's HIGHESTMODSEQ this view has caught up to.
    pub(crate) highest_modseq: u64,
    /// Keywords announced in FLAGS.
    pub(crate) keywords: BTreeSet<String>,
    /// Expunged by someone else, not yet announced (EXPUNGE may not be
    /// sent during FETCH, STORE or SEARCH).
    pending_expunge: BTreeSet<Uid>,
    watch: watch::Receiver<u64>,
    /// A change was signalled and not yet looked at.
    dirty: bool,
    /// Keeps the blobs of messages expunged by others readable while this
    /// view may still show them; advanced once every expunge up to
    /// `highest_modseq` is announced.
    pin: store::ViewPin,
    /// RFC 5182: the UIDs of the last `SEARCH RETURN (SAVE)`, for `$`.
    /// Expunged ones drop out when `$` is read ([`Selected::saved_set`]).
    pub(crate) saved: RoaringBitmap,
    /// The messages that are `\Recent` in this session (RFC 3501 §2.3.2):
    /// new mail this session took first ([`store::Store::claim_recent`]).
    /// IMAP4rev2 sessions take none (RFC 9051 dropped `\Recent`).
    pub(crate) recent: RoaringBitmap,
    /// Whether this session takes new mail as recent: a read-write,
    /// IMAP4rev1 one.
    claims_recent: bool,
}

impl Selected {
    pub(crate) fn new(
        info: MailboxInfo,
        read_only: bool,
        uids: UidMap,
        keywords: BTreeSet<String>,
        highest_modseq: u64,
        watch: watch::Receiver<u64>,
        pin: store::ViewPin,
    ) -> Selected {
        Selected {
            info,
            read_only,
            uids,
            shown: HashMap::new(),
            highest_modseq,
            keywords,
            pending_expunge: BTreeSet::new(),
            watch,
            dirty: false,
            pin,
            saved: RoaringBitmap::new(),
            recent: RoaringBitmap::new(),
            claims_recent: false,
        }
    }

    /// Takes the mailbox's new mail as recent for this session, if it
    /// claims recent mail at all; returns whether anything was added.
    pub(crate) async fn claim_recent(&mut self, store: &dyn Store) -> store::Result<bool> {
        if !self.claims_recent {
            return Ok(false);
        }
        let (from, to) = match store.claim_recent(self.info.id).await {
            Ok(range) => range,
            // \Recent is advisory (RFC 3501 §2.3.2): on a full disk the
            // mailbox opens without claiming, and the new mail stays
            // recent for a later session. Reading must go on.
            Err(e) if e.is_full() => return Ok(false),
            Err(e) => return Err(e),
        };
        let before = self.recent.len();
        if from < to {
            self.recent.insert_range(from..to);
            // Only what the view has (messages expunged since are gone).
            let last = self.uids.last().unwrap_or(0);
            if to > last + 1 {
                self.recent.remove_range(last + 1..to);
            }
            let gone: Vec<Uid> = self
                .recent
                .range(from..to)
                .filter(|u| self.uids.position(*u).is_none())
                .collect();
            for u in gone {
                self.recent.remove(u);
            }
        }
        Ok(self.recent.len() != before)
    }

    /// Makes this session one that takes new mail as recent.
    pub(crate) fn take_recent_mail(&mut self) {
        self.claims_recent = true;
    }

    /// The FETCH FLAGS of a message as this session shows them: its
    /// stored flags and keywords, and `\Recent` when it is recent here.
    pub(crate) fn flags_of(
        &self,
        entry: &MessageEntry,
    ) -> Vec<imap_codec::imap_types::flag::FlagFetch<'static>> {
        let mut flags = flag_list(entry);
        if self.recent.contains(entry.uid) {
            flags.push(imap_codec::imap_types::flag::FlagFetch::Recent);
        }
        flags
    }

    /// The saved search result as a set of UIDs or of message sequence
    /// numbers, without the messages expunged since; `None` when empty.
    pub(crate) fn saved_set(&self, uid: bool) -> Option<String> {
        let numbers: Vec<u32> = self
            .saved
            .iter()
            .filter_map(|u| {
                let seq = self.seq_of(u)?;
                Some(if uid { u } else { seq })
            })
            .collect();
        (!numbers.is_empty()).then(|| crate::search::compact_set(&numbers))
    }

    /// Messages in the view (EXISTS).
    pub(crate) fn exists(&self) -> u32 {
        self.uids.len()
    }

    /// Sequence number of a UID in the view.
    pub(crate) fn seq_of(&self, uid: Uid) -> Option<u32> {
        self.uids.position(uid).map(|i| i + 1)
    }

    /// UID of a message sequence number.
    pub(crate) fn uid_at_seq(&self, seq: u32) -> Option<Uid> {
        self.uids.uid_at(seq.checked_sub(1)?)
    }

    /// Waits until a commit touches the mailbox.
    pub(crate) async fn changed(&mut self) {
        let result = self.watch.changed().await;
        self.dirty = true;
        if result.is_err() {
            // The store is gone (shutdown): nothing will change again.
            std::future::pending::<()>().await;
        }
    }

    /// The messages a set names, as `(sequence number, uid)` in order.
    /// UID sets name only the UIDs the view has; a message sequence number
    /// past the end is an error (RFC 3501 §6.4.8, §9 seq-number).
    pub(crate) fn resolve(
        &self,
        set: &SequenceSet,
        uid: bool,
    ) -> Result<Vec<(u32, Uid)>, BadSequence> {
        let mut idx: Vec<u32> = Vec::new();
        let largest_uid = self.uids.last().unwrap_or(0);
        let n = self.uids.len();
        for seq in set.0.as_ref() {
            let (a, b) = match seq {
                Sequence::Single(x) => (x, x),
                Sequence::Range(x, y) => (x, y),
            };
            let value = |v: &SeqOrUid| match v {
                SeqOrUid::Value(v) => v.get(),
                SeqOrUid::Asterisk => {
                    if uid {
                        largest_uid
                    } else {
                        n
                    }
                }
            };
            let (lo, hi) = {
                let (x, y) = (value(a), value(b));
                (x.min(y), x.max(y))
            };
            if uid {
                let start = self.uids.count_below(lo);
                let end = self.uids.count_below(hi.saturating_add(1));
                let end = if hi == u32::MAX { n } else { end };
                idx.extend(start..end);
            } else {
                if n == 0 && matches!((a, b), (SeqOrUid::Asterisk, _) | (_, SeqOrUid::Asterisk)) {
                    continue;
                }
                if lo == 0 || hi > n {
                    return Err(BadSequence);
                }
                idx.extend(lo - 1..hi);
            }
        }
        idx.sort_unstable();
        idx.dedup();
        Ok(idx
            .into_iter()
            .filter_map(|i| Some((i + 1, self.uids.uid_at(i)?)))
            .collect())
    }

    /// UID ranges covering a set, for the store's search.
    pub(crate) fn uid_ranges(
        &self,
        set: &SequenceSet,
        uid: bool,
    ) -> Result<Vec<(Uid, Uid)>, BadSequence> {
        if uid {
            let largest = self.uids.last().unwrap_or(0);
            return Ok(set
                .0
                .as_ref()
                .iter()
                .map(|s| {
                    let v = |x: &SeqOrUid| match x {
                        SeqOrUid::Value(v) => v.get(),
                        SeqOrUid::Asterisk => largest,
                    };
                    let (a, b) = match s {
                        Sequence::Single(x) => (v(x), v(x)),
                        Sequence::Range(x, y) => (v(x), v(y)),
                    };
                    (a.min(b), a.max(b))
                })
                .collect());
        }
        Ok(self
            .resolve(set, false)?
            .into_iter()
            .map(|(_, u)| (u, u))
            .collect())
    }

    /// The UID ranges a SEARCH sequence set names. Unlike FETCH and STORE,
    /// numbers past the last message simply match nothing (as Dovecot
    /// answers `SEARCH 1000` in a small mailbox), so a search is never BAD
    /// for asking about messages that are not there.
    pub(crate) fn search_ranges(&self, set: &SequenceSet, uid: bool) -> Vec<(Uid, Uid)> {
        if uid {
            return self.uid_ranges(set, true).unwrap_or_default();
        }
        let n = self.uids.len();
        let mut out = Vec::new();
        for s in set.0.as_ref() {
            let v = |x: &SeqOrUid| match x {
                SeqOrUid::Value(v) => v.get(),
                SeqOrUid::Asterisk => n,
            };
            let (a, b) = match s {
                Sequence::Single(x) => (v(x), v(x)),
                Sequence::Range(x, y) => (v(x), v(y)),
            };
            let (lo, hi) = (a.min(b).max(1), a.max(b).min(n));
            for seq in lo..=hi {
                if let Some(u) = self.uid_at_seq(seq) {
                    out.push((u, u));
                }
            }
        }
        out
    }

    /// Announces the keywords among `keywords` this view has not named
    /// yet, in an untagged FLAGS (and PERMANENTFLAGS when writable): no
    /// response may use a keyword before FLAGS named it (RFC 3501 §7.2.6),
    /// whoever set it and whenever.
    pub(crate) fn announce_keywords<'k>(
        &mut self,
        keywords: impl IntoIterator<Item = &'k String>,
        out: &mut Out,
    ) {
        let fresh: Vec<String> = keywords
            .into_iter()
            .filter(|k| !self.keywords.iter().any(|x| x.eq_ignore_ascii_case(k)))
            .cloned()
            .collect();
        if fresh.is_empty() {
            return;
        }
        self.keywords.extend(fresh);
        out.data(Data::Flags(crate::flags::mailbox_flags(&self.keywords)));
        if !self.read_only {
            out.ok(
                None,
                Some(Code::PermanentFlags(crate::flags::permanent_flags(
                    &self.keywords,
                ))),
                "Flags permitted",
            );
        }
    }

    /// Records a flag change this session made and has already shown.
    pub(crate) fn saw(&mut self, entry: &MessageEntry) {
        self.shown.insert(entry.uid, entry.modseq);
    }

    /// Removes expunged messages from the view and announces them.
    pub(crate) fn expunged(&mut self, uids: &[Uid], out: &mut Out) {
        let mut gone = uids.to_vec();
        gone.sort_unstable();
        gone.dedup();
        let positions = self.uids.remove(&gone);
        // Highest first, so the numbers of the others do not move.
        for &i in positions.iter().rev() {
            if let Some(seq) = NonZeroU32::new(i + 1) {
                out.data(Data::Expunge(seq));
            }
        }
        self.pending_expunge
            .retain(|u| gone.binary_search(u).is_err());
        for u in &gone {
            self.recent.remove(*u);
        }
    }

    /// Catches up with the store: new messages (EXISTS), flag changes by
    /// others (FETCH) and, when `expunge_ok`, expunges (EXPUNGE).
    pub(crate) async fn sync(
        &mut self,
        store: &dyn Store,
        out: &mut Out,
        expunge_ok: bool,
        condstore: bool,
        rev2: bool,
    ) -> store::Result<()> {
        let dirty = self.dirty || self.watch.has_changed().unwrap_or(false);
        if dirty {
            self.dirty = false;
            self.watch.borrow_and_update();
            let changes = store
                .changes_since(self.info.id, self.highest_modseq)
                .await?;
            for uid in &changes.expunged {
                if self.uids.position(*uid).is_some() {
                    self.pending_expunge.insert(*uid);
                }
            }
            let last = self.uids.last().unwrap_or(0);
            let mut new = Vec::new();
            let mut flags_changed = Vec::new();
            let shown = std::mem::take(&mut self.shown);
            for entry in changes.changed {
                match self.uids.position(entry.uid) {
                    Some(_) if shown.get(&entry.uid) == Some(&entry.modseq) => {}
                    Some(_) if self.pending_expunge.contains(&entry.uid) => {}
                    Some(i) => flags_changed.push((i + 1, entry)),
                    None if entry.uid > last => new.push(entry),
                    None => {}
                }
            }
            let used: Vec<String> = new
                .iter()
                .chain(flags_changed.iter().map(|(_, e)| e))
                .flat_map(|e| e.keywords.iter().cloned())
                .collect();
            self.announce_keywords(used.iter(), out);
            for (seq, entry) in &flags_changed {
                let mut items = vec![MessageDataItem::Flags(self.flags_of(entry))];
                items.push(MessageDataItem::Uid(
                    NonZeroU32::new(entry.uid).unwrap_or(NonZeroU32::MIN),
                ));
                if condstore {
                    if let Some(m) = NonZeroU64::new(entry.modseq) {
                        items.push(MessageDataItem::ModSeq(m));
                    }
                }
                if let (Some(seq), Ok(items)) = (NonZeroU32::new(*seq), Vec1::try_from(items)) {
                    out.data(Data::Fetch { seq, items });
                }
            }
            if !new.is_empty() {
                for e in &new {
                    self.uids.push(e.uid);
                }
                self.highest_modseq = self.highest_modseq.max(changes.highest_modseq);
                out.data(Data::Exists(self.exists()));
                self.claim_recent(store).await?;
                // RFC 9051 removed RECENT.
                if !rev2 {
                    out.data(Data::Recent(self.recent.len() as u32));
                }
            }
            self.highest_modseq = self.highest_modseq.max(changes.highest_modseq);
            self.info.uid_next = self.info.uid_next.max(changes.uid_next);
        }
        if expunge_ok && !self.pending_expunge.is_empty() {
            let pending: Vec<Uid> = std::mem::take(&mut self.pending_expunge)
                .into_iter()
                .collect();
            self.expunged(&pending, out);
        }
        if self.pending_expunge.is_empty() {
            self.pin.advance(self.highest_modseq);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use imap_codec::imap_types::sequence::SequenceSet;

    fn view(uids: &[Uid]) -> Selected {
        let info = MailboxInfo {
            id: 1,
            account: 1,
            name: "INBOX".into(),
            uid_validity: 1,
            uid_next: 100,
            highest_modseq: 1,
            special_use: None,
            subscribed: true,
            messages: uids.len() as u32,
            unseen: 0,
        };
        Selected::new(
            info,
            false,
            UidMap::from_sorted(uids.iter().copied()),
            BTreeSet::new(),
            1,
            watch::channel(0).1,
            std::sync::Arc::new(store::ViewPins::default()).pin(1, 1),
        )
    }

    fn set(s: &str) -> SequenceSet {
        SequenceSet::try_from(s).unwrap()
    }

    #[test]
    fn sequence_numbers() {
        let v = view(&[3, 5, 9, 20]);
        assert_eq!(v.resolve(&set("1"), false), Ok(vec![(1, 3)]));
        assert_eq!(
            v.resolve(&set("2:*"), false),
            Ok(vec![(2, 5), (3, 9), (4, 20)])
        );
        assert_eq!(v.resolve(&set("4,1,4"), false), Ok(vec![(1, 3), (4, 20)]));
        assert_eq!(v.resolve(&set("5"), false), Err(BadSequence));
        assert_eq!(v.resolve(&set("*:3"), false), Ok(vec![(3, 9), (4, 20)]));
    }

    #[test]
    fn uid_sets_name_only_existing_uids() {
        let v = view(&[3, 5, 9, 20]);
        assert_eq!(v.resolve(&set("4:9"), true), Ok(vec![(2, 5), (3, 9)]));
        assert_eq!(v.resolve(&set("21:*"), true), Ok(vec![(4, 20)]));
        assert_eq!(v.resolve(&set("1:4294967295"), true).unwrap().len(), 4);
        assert_eq!(v.resolve(&set("100"), true), Ok(vec![]));
    }

    #[test]
    fn empty_mailbox_star() {
        let v = view(&[]);
        assert_eq!(v.resolve(&set("1:*"), false), Ok(vec![]));
        assert_eq!(v.resolve(&set("1:*"), true), Ok(vec![]));
        assert_eq!(v.resolve(&set("1"), false), Err(BadSequence));
    }

    #[test]
    fn own_expunges_are_announced_highest_first() {
        let mut v = view(&[3, 5, 9, 20]);
        let mut out = Out::default();
        v.expunged(&[5, 20], &mut out);
        assert_eq!(out.buf, b"* 4 EXPUNGE\r\n* 2 EXPUNGE\r\n");
        assert_eq!(v.uids.to_vec(), vec![3, 9]);
    }

    #[test]
    fn saved_results_lose_expunged_messages() {
        let mut v = view(&[3, 5, 9, 20]);
        assert_eq!(v.saved_set(true), None);
        v.saved = [5, 9, 20].into_iter().collect();
        assert_eq!(v.saved_set(true).as_deref(), Some("5,9,20"));
        assert_eq!(v.saved_set(false).as_deref(), Some("2:4"));
        v.expunged(&[9], &mut Out::default());
        assert_eq!(v.saved_set(true).as_deref(), Some("5,20"));
        assert_eq!(v.saved_set(false).as_deref(), Some("2:3"));
        v.expunged(&[5, 20], &mut Out::default());
        assert_eq!(v.saved_set(false), None);
    }
}
