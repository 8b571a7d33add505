//! Streaming body-signature matching for one file.
//!
//! The anchor index ([`crate::anchor`]) is run over each block as it arrives and its
//! state is carried from one fed chunk to the next (the automaton's state id, the
//! position of the next 4-gram), so an anchor split across chunks is found without
//! rescanning anything. Each anchor hit becomes a candidate that is verified (wildcards, gaps,
//! alternatives on both sides of the anchor) once enough bytes after it have arrived;
//! a sliding window keeps just the bytes that pending and future candidates can still
//! need, which the database bounds (see [`crate::signature::MAX_GROUP_SPAN`]).
//! Candidates are verified in the order their anchors were seen, which is what lets
//! the groups of a signature split by `*` be matched in order, greedily.
//!
//! Subsignatures of logical signatures go through the same index; their matches are
//! counted (with the offset of the last one, as ClamAV's `lsig_sub_matched` does)
//! instead of ending the scan, and the logical expressions are evaluated when the
//! file ends ([`BodyMatcher::finish`]). PCRE and byte-compare subsignatures need
//! the file's bytes at that point; rather than hold the file, the matcher keeps its first
//! [`crate::Limits::max_regex_window`] bytes (only when the database has a PCRE
//! subsignature) and runs the regular expressions over that prefix: what lies
//! beyond it is not seen by them (counted in [`crate::Stats`]). ClamAV holds the
//! whole file for them, up to `PCREMaxFileSize` (100 MB), and skips them past it.

use std::collections::{HashMap, VecDeque};

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::Anchored;

use crate::anchor::bit;
use crate::database::{Database, Hit};
use crate::filetype::FileType;
use crate::logical::PcreSub;
use crate::pcre::Found;
use crate::signature::{match_backward, match_forward, same, Offset};

/// Bytes stepped through the automaton between two looks at the pending candidates.
const BLOCK: usize = 64 * 1024;

/// Bytes the PCRE searches of one file may cover in all (each search counts the
/// bytes from where it starts to the end of its subject): with many signatures whose
/// triggers a crafted file fires, the regular expressions would otherwise cost the
/// window size times their number. Searches past it are skipped and counted.
const REGEX_BUDGET: u64 = 256 << 20;

/// Most candidates waiting for their trailing bytes at once; beyond this new anchor
/// hits are dropped (and counted), which only pathological input reaches.
const MAX_PENDING: usize = 1 << 16;

#[derive(Debug, Clone, Copy)]
struct Candidate {
    pattern: u32,
    anchor_start: u64,
    ready: u64,
}

/// Queues the patterns `pids`, whose anchors start at `at`, as candidates.
fn push_candidates(fresh: &mut Vec<Candidate>, db: &Database, pids: &[u32], at: u64) {
    for &pid in pids {
        let pr = db.patterns[pid as usize];
        let g = &db.sigs[pr.sig as usize].groups[pr.group as usize];
        fresh.push(Candidate {
            pattern: pid,
            anchor_start: at,
            ready: at + (g.anchor.len() + g.after_max) as u64,
        });
    }
}

/// Match counts of one logical signature's subsignatures in one file (about a
/// hundred bytes, for the logical signatures a file touches only).
#[derive(Debug, Clone)]
struct SubCounts {
    count: Vec<u32>,
    /// Offset of the last counted match (`u64::MAX`: none yet).
    last: Vec<u64>,
}

impl SubCounts {
    fn new(subsigs: u8) -> Self {
        Self {
            count: vec![0; subsigs as usize],
            last: vec![u64::MAX; subsigs as usize],
        }
    }

    /// Counts a match at `off` unless it is not past the last one counted (at or past
    /// it for the final part of a `*`-split subsignature, `partial`), as ClamAV does.
    fn record(&mut self, id: u8, off: u64, partial: bool) {
        let i = id as usize;
        let last = self.last[i];
        if last != u64::MAX && ((!partial && off <= last) || (partial && off < last)) {
            return;
        }
        self.count[i] = self.count[i].wrapping_add(1);
        self.last[i] = off;
    }
}

fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// ClamAV's `(W)` boundary before a match starting at `start` (`rel` in `buf`).
fn left_boundary(buf: &[u8], rel: usize, start: u64, wide: bool) -> bool {
    if start == 0 {
        return true;
    }
    if wide {
        start == 1 || (rel >= 2 && !(word(buf[rel - 2]) && buf[rel - 1] == 0))
    } else {
        rel >= 1 && !word(buf[rel - 1])
    }
}

/// ClamAV's `(W)` boundary after a match ending at `rel` in `buf` (which ends the
/// bytes seen so far of the file).
fn right_boundary(buf: &[u8], rel: usize, wide: bool) -> bool {
    if rel >= buf.len() {
        return true;
    }
    if wide && rel + 1 < buf.len() {
        !(word(buf[rel]) && buf[rel + 1] == 0)
    } else {
        !word(buf[rel])
    }
}

/// Matching state of one file being scanned.
#[derive(Debug)]
pub(crate) struct BodyMatcher {
    state: StateID,
    /// Next file position whose 4-gram has not been looked up.
    next_gram: u64,
    /// File bytes `buf_start .. buf_start + buf.len()`.
    buf: Vec<u8>,
    buf_start: u64,
    pending: VecDeque<Candidate>,
    /// Candidates found in the current block, before they join `pending`.
    fresh: Vec<Candidate>,
    /// Multi-group signatures: next group wanted, where it may start, and where the
    /// first group started.
    progress: HashMap<u32, (u16, u64, u64)>,
    /// Subsignature match counts of the logical signatures that have any.
    lsig: HashMap<u32, Box<SubCounts>>,
    /// The first bytes of the file, for PCRE subsignatures.
    window: Vec<u8>,
    /// The file was longer than the window.
    pub window_truncated: bool,
    /// PCRE searches that hit the backtracking limit, or were not run because the
    /// file's regex budget was spent.
    pub pcre_limit_hits: u64,
    /// Bytes of window the PCRE searches of this file may still cover.
    regex_budget: u64,
    /// Anchor hits dropped because too many candidates were pending.
    pub dropped: u64,
}

impl BodyMatcher {
    pub fn new(db: &Database) -> Self {
        let state = db.anchors.automaton.as_ref().map_or(StateID::ZERO, |a| {
            a.start_state(Anchored::No)
                .expect("unanchored search is supported")
        });
        Self {
            state,
            next_gram: 0,
            buf: Vec::new(),
            buf_start: 0,
            pending: VecDeque::new(),
            fresh: Vec::new(),
            progress: HashMap::new(),
            lsig: HashMap::new(),
            window: Vec::new(),
            window_truncated: false,
            pcre_limit_hits: 0,
            regex_budget: REGEX_BUDGET,
            dropped: 0,
        }
    }

    fn pos(&self) -> u64 {
        self.buf_start + self.buf.len() as u64
    }

    /// Scans the next bytes of the file; returns a body signature that matched.
    /// `window` is how many first bytes of the file to keep for PCRE subsignatures.
    pub fn feed(&mut self, db: &Database, ft: FileType, data: &[u8], window: usize) -> Option<Hit> {
        if db.has_pcre && !self.window_truncated {
            let room = window.saturating_sub(self.window.len());
            self.window.extend_from_slice(&data[..room.min(data.len())]);
            self.window_truncated = data.len() > room;
        }
        for block in data.chunks(BLOCK) {
            let base = self.pos();
            self.buf.extend_from_slice(block);
            self.step(db, block, base);
            if let Some(sig) = self.verify_ready(db, ft, false) {
                return Some(sig);
            }
            self.trim(db);
        }
        None
    }

    fn candidate(&mut self, db: &Database, pid: u32, anchor_start: u64) {
        let pr = db.patterns[pid as usize];
        let g = &db.sigs[pr.sig as usize].groups[pr.group as usize];
        self.fresh.push(Candidate {
            pattern: pid,
            anchor_start,
            ready: anchor_start + (g.anchor.len() + g.after_max) as u64,
        });
    }

    /// Finds the anchors that end in (automaton) or start before the last three bytes
    /// of (4-grams) the new block, and queues them in anchor order.
    fn step(&mut self, db: &Database, block: &[u8], base: u64) {
        let idx = &db.anchors;
        if let Some(aut) = idx.automaton.as_ref() {
            let mut sid = self.state;
            for (i, &b) in block.iter().enumerate() {
                sid = aut.next_state(Anchored::No, sid, b);
                if aut.is_special(sid) && aut.is_match(sid) {
                    let end = base + i as u64 + 1;
                    for k in 0..aut.match_len(sid) {
                        let pid = idx.automaton_patterns[aut.match_pattern(sid, k).as_usize()];
                        let len = db.sigs[db.patterns[pid as usize].sig as usize].groups
                            [db.patterns[pid as usize].group as usize]
                            .anchor
                            .len();
                        self.candidate(db, pid, end - len as u64);
                    }
                }
            }
            self.state = sid;
        }
        if idx.has_grams() {
            let end = self.pos().saturating_sub(3);
            let from = self.next_gram.max(self.buf_start);
            if from < end {
                let lo = (from - self.buf_start) as usize;
                let hi = (end - self.buf_start) as usize;
                let fresh = &mut self.fresh;
                idx.scan_grams(&self.buf[lo..hi + 3], |i, pids| {
                    push_candidates(fresh, db, pids, from + i as u64)
                });
                self.next_gram = end;
            }
        }
        if self.fresh.is_empty() {
            return;
        }
        // Both sources together: keep the queue in anchor order (see the module doc).
        self.fresh.sort_by_key(|c| c.anchor_start);
        for c in self.fresh.drain(..) {
            if self.pending.len() >= MAX_PENDING {
                self.dropped += 1;
            } else {
                self.pending.push_back(c);
            }
        }
    }

    /// At the end of the file: the last positions, which have fewer than four bytes
    /// after them, for the two- and three-byte anchors.
    fn step_tail(&mut self, db: &Database) {
        let idx = &db.anchors;
        let size = self.pos();
        let from = self.next_gram.max(self.buf_start);
        for at in from..size {
            let rel = (at - self.buf_start) as usize;
            let rest = &self.buf[rel..];
            if rest.len() >= 3 && !idx.tri_bits.is_empty() {
                let g3 = u32::from_le_bytes([rest[0], rest[1], rest[2], 0]);
                if bit(&idx.tri_bits, g3) {
                    if let Some(pids) = idx.tris.get(&g3) {
                        push_candidates(&mut self.fresh, db, pids, at);
                    }
                }
            }
            if rest.len() >= 2 && !idx.bi_bits.is_empty() {
                let g2 = u32::from(u16::from_le_bytes([rest[0], rest[1]]));
                if bit(&idx.bi_bits, g2) {
                    if let Some(pids) = idx.bis.get(&g2) {
                        push_candidates(&mut self.fresh, db, pids, at);
                    }
                }
            }
        }
        self.next_gram = size;
        self.fresh.sort_by_key(|c| c.anchor_start);
        for c in self.fresh.drain(..) {
            if self.pending.len() >= MAX_PENDING {
                self.dropped += 1;
            } else {
                self.pending.push_back(c);
            }
        }
    }

    /// Verifies candidates in anchor order while the oldest has all its bytes
    /// (or all of them, at the end of the file).
    fn verify_ready(&mut self, db: &Database, ft: FileType, eof: bool) -> Option<Hit> {
        let pos = self.pos();
        while let Some(c) = self.pending.front().copied() {
            if !eof && c.ready > pos {
                break;
            }
            self.pending.pop_front();
            if let Some(sig) = self.verify(db, ft, c, eof.then_some(pos)) {
                return Some(sig);
            }
        }
        None
    }

    fn verify(
        &mut self,
        db: &Database,
        ft: FileType,
        c: Candidate,
        size: Option<u64>,
    ) -> Option<Hit> {
        let pr = db.patterns[c.pattern as usize];
        let sig = &db.sigs[pr.sig as usize];
        if !ft.matches_target(sig.target) {
            return None;
        }
        let g = pr.group;
        let multi = sig.groups.len() > 1;
        let (next, min_start, first_start) = if multi {
            self.progress.get(&pr.sig).copied().unwrap_or((0, 0, 0))
        } else {
            (0, 0, 0)
        };
        if g != next {
            return None;
        }
        let group = &sig.groups[g as usize];
        let rel = c.anchor_start.checked_sub(self.buf_start)? as usize;
        let here = self.buf.get(rel..rel + group.anchor.len())?;
        if !same(here, &group.anchor, group.anchor_fold) {
            return None; // a 4-gram hit whose anchor goes on differently
        }
        let end = match_forward(&group.after, &self.buf, rel + group.anchor.len())?;
        let buf_start = self.buf_start;
        let offset = sig.offset;
        let buf = &self.buf;
        let mut accept = |s: usize| {
            let start = buf_start + s as u64;
            if g == 0 {
                offset.allows(start, size)
                    && sig
                        .fullword
                        .is_none_or(|wide| left_boundary(buf, s, start, wide))
            } else {
                start >= min_start
            }
        };
        let start = buf_start + match_backward(&group.before, &self.buf, rel, &mut accept)? as u64;
        let last = g as usize + 1 == sig.groups.len();
        if last {
            if let Some(wide) = sig.fullword {
                if !right_boundary(&self.buf, end, wide) {
                    return None;
                }
            }
        }
        if !multi {
            return self.complete(db, pr.sig, sig.owner, start, false);
        }
        let first_start = if g == 0 { start } else { first_start };
        if last {
            if sig.owner.is_some() {
                // Later matches of the final part count again (ClamAV's partial
                // matches): the progress stays.
                return self.complete(db, pr.sig, sig.owner, first_start, true);
            }
            self.progress.remove(&pr.sig);
            return Some(Hit::Body(pr.sig));
        }
        let gap = sig.groups[g as usize + 1].min_gap as u64;
        self.progress
            .insert(pr.sig, (g + 1, buf_start + end as u64 + gap, first_start));
        None
    }

    /// A whole match of body signature `sig` starting at `start`: reported, or
    /// counted for the logical signature that owns it.
    fn complete(
        &mut self,
        db: &Database,
        sig: u32,
        owner: Option<(u32, u8)>,
        start: u64,
        partial: bool,
    ) -> Option<Hit> {
        match owner {
            None => Some(Hit::Body(sig)),
            Some((l, id)) => {
                let n = db.lsigs[l as usize].subsigs;
                self.lsig
                    .entry(l)
                    .or_insert_with(|| Box::new(SubCounts::new(n)))
                    .record(id, start, partial);
                None
            }
        }
    }

    /// Drops window bytes that no pending or future candidate can need.
    fn trim(&mut self, db: &Database) {
        let pos = self.pos();
        // An anchor that straddles the next block starts up to its length back, and
        // its group reaches `max_before` further back still.
        let keep = ((db.max_before + db.max_anchor).max(db.eof_window).max(4)) as u64;
        let mut keep_from = pos.saturating_sub(keep);
        if let Some(c) = self.pending.front() {
            let g = {
                let pr = db.patterns[c.pattern as usize];
                &db.sigs[pr.sig as usize].groups[pr.group as usize]
            };
            keep_from = keep_from.min(c.anchor_start.saturating_sub(g.before_max as u64));
        }
        let drop = keep_from.saturating_sub(self.buf_start) as usize;
        if drop > 0 && (drop >= self.buf.len() / 2 || drop >= BLOCK) {
            self.buf.drain(..drop);
            self.buf_start += drop as u64;
        }
    }

    /// Ends the file: verifies what is pending with the bytes there are, then the
    /// signatures anchored at the end of the file, then the logical signatures
    /// (`ancestry`: the types of the containers of this file, outermost first).
    pub fn finish(&mut self, db: &Database, ft: FileType, ancestry: &[FileType]) -> Option<Hit> {
        self.step_tail(db);
        if let Some(hit) = self.verify_ready(db, ft, true) {
            return Some(hit);
        }
        let size = self.pos();
        for &si in &db.eof_sigs {
            let sig = &db.sigs[si as usize];
            if !ft.matches_target(sig.target) {
                continue;
            }
            let Offset::Eof { back, extra } = sig.offset else {
                continue;
            };
            let Some(first) = size.checked_sub(back) else {
                continue;
            };
            let g = &sig.groups[0];
            // Anchors can only sit between the earliest start and the latest end.
            let from = first.max(self.buf_start);
            let to = (first + extra + (g.before_max + g.anchor.len()) as u64).min(size);
            if from >= to {
                continue;
            }
            let lo = (from - self.buf_start) as usize;
            let hi = (to - self.buf_start) as usize;
            for rel in lo..hi.saturating_sub(g.anchor.len() - 1) {
                if !same(
                    &self.buf[rel..rel + g.anchor.len()],
                    &g.anchor,
                    g.anchor_fold,
                ) {
                    continue;
                }
                let Some(end) = match_forward(&g.after, &self.buf, rel + g.anchor.len()) else {
                    continue;
                };
                let buf_start = self.buf_start;
                let buf = &self.buf;
                let mut accept = |s: usize| {
                    let start = buf_start + s as u64;
                    sig.offset.allows(start, Some(size))
                        && sig
                            .fullword
                            .is_none_or(|wide| left_boundary(buf, s, start, wide))
                };
                let Some(s) = match_backward(&g.before, &self.buf, rel, &mut accept) else {
                    continue;
                };
                if sig
                    .fullword
                    .is_some_and(|wide| !right_boundary(&self.buf, end, wide))
                {
                    continue;
                }
                if let Some(hit) = self.complete(db, si, sig.owner, buf_start + s as u64, false) {
                    return Some(hit);
                }
            }
        }
        self.logical(db, ft, size, ancestry).map(Hit::Logical)
    }

    /// The first logical signature (in load order) that holds for this file.
    fn logical(
        &mut self,
        db: &Database,
        ft: FileType,
        size: u64,
        ancestry: &[FileType],
    ) -> Option<u32> {
        if db.lsigs.is_empty() {
            return None;
        }
        let mut candidates: Vec<u32> = self.lsig.keys().copied().collect();
        candidates.extend_from_slice(&db.always_lsigs);
        candidates.sort_unstable();
        candidates.dedup();
        for l in candidates {
            let sig = &db.lsigs[l as usize];
            if !ft.matches_target(sig.target) {
                continue;
            }
            let mut counts = match self.lsig.remove(&l) {
                Some(c) => c,
                None => Box::new(SubCounts::new(sig.subsigs)),
            };
            // ClamAV runs byte compares after the body matching, PCRE last.
            for b in &sig.bytecmp {
                let r = b.reference as usize;
                if counts.count.get(r).is_some_and(|&c| c > 0) {
                    let at = counts.last[r];
                    let at = if at == u64::MAX { 0 } else { at };
                    if b.holds(&self.window, at) {
                        counts.count[b.id as usize] += 1;
                    }
                }
            }
            for p in &sig.pcre {
                if p.trigger.eval(&counts.count).is_some() {
                    self.run_pcre(p, &mut counts, size);
                }
            }
            if sig.expr.eval(&counts.count).is_none() {
                continue;
            }
            if let Some(c) = sig.container {
                if !c.is(ancestry.last().copied()) {
                    continue;
                }
            }
            if let Some(types) = &sig.intermediates {
                if ancestry.len() < types.len()
                    || !types
                        .iter()
                        .rev()
                        .zip(ancestry.iter().rev())
                        .all(|(t, a)| t.is(Some(*a)))
                {
                    continue;
                }
            }
            if let Some((min, max)) = sig.filesize {
                if size < min || size > max {
                    continue;
                }
            }
            return Some(l);
        }
        None
    }

    /// Runs one PCRE subsignature over the window, counting its matches as ClamAV's
    /// `cli_pcre_scanbuf` does: from its offset (anchored there unless rolling or
    /// shifted), within the shift when encompassing, every match when global.
    fn run_pcre(&mut self, p: &PcreSub, counts: &mut SubCounts, size: u64) {
        let (adj, shift, any) = match p.offset {
            Offset::Any => (0, 0, true),
            Offset::Abs { start, extra } => (start, extra, false),
            Offset::Eof { back, extra } => match size.checked_sub(back) {
                Some(s) => (s, extra, false),
                None => return,
            },
        };
        let len = self.window.len() as u64;
        if adj >= len {
            return;
        }
        let re = &p.re;
        let anchored = !re.rolling && shift == 0 && !any;
        let adjlen = if re.encompass && shift != 0 {
            shift.min(len - adj)
        } else {
            len - adj
        };
        let subject = &self.window[adj as usize..(adj + adjlen) as usize];
        let mut from = 0usize;
        loop {
            let work = (subject.len() - from) as u64;
            if work > self.regex_budget {
                self.pcre_limit_hits += 1;
                break;
            }
            self.regex_budget -= work;
            let (s, e) = match re.find_at(subject, from, anchored) {
                Found::At(s, e) => (s, e),
                Found::None => break,
                Found::Limit => {
                    self.pcre_limit_hits += 1;
                    break;
                }
            };
            if !re.encompass && shift != 0 && s as u64 > shift {
                break;
            }
            counts.record(p.id, adj + s as u64, false);
            // An empty match would find itself again (ClamAV loops until its time
            // limit there): step past it.
            from = if e > from { e } else { from + 1 };
            if !re.global || from >= subject.len() {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::DatabaseBuilder;

    fn db(ndb: &str) -> Database {
        DatabaseBuilder::new().add_ndb(ndb).build().unwrap().0
    }

    fn both(ndb: &str) -> [Database; 2] {
        [false, true].map(|only| {
            DatabaseBuilder::new()
                .automaton_only(only)
                .add_ndb(ndb)
                .build()
                .unwrap()
                .0
        })
    }

    fn scan(db: &Database, chunks: &[&[u8]]) -> Option<String> {
        let mut m = BodyMatcher::new(db);
        for c in chunks {
            if let Some(s) = m.feed(db, FileType::Other, c, 1 << 20) {
                return Some(db.hit_name(s).to_string());
            }
        }
        m.finish(db, FileType::Other, &[])
            .map(|s| db.hit_name(s).to_string())
    }

    #[test]
    fn split_anywhere() {
        for d in both("T:0:*:414243??45{2-4}46(47|4849)\nL:0:*:6c6f6e67616e63686f72??21") {
            let hay = b"xxxxABCDEzzzFHIyyyy";
            for cut in 0..hay.len() {
                let (a, b) = hay.split_at(cut);
                assert_eq!(scan(&d, &[a, b]).as_deref(), Some("T"), "cut {cut}");
            }
            assert_eq!(scan(&d, &[b"xxABCDEzFHI"]), None);
            let hay = b"..longanchor?!..";
            for cut in 0..hay.len() {
                let (a, b) = hay.split_at(cut);
                assert_eq!(scan(&d, &[a, b]).as_deref(), Some("L"), "cut {cut}");
            }
        }
    }

    proptest::proptest! {
        /// Any chunking gives the same answer as one chunk, with both anchor indexes,
        /// and a planted signature is always found.
        #[test]
        fn chunking_never_changes_the_answer(
            hay in proptest::collection::vec(proptest::sample::select(b"abcd".to_vec()), 0..400),
            plant in proptest::option::of(0usize..400),
            sizes in proptest::collection::vec(1usize..50, 1..5),
        ) {
            let sigs = "P:0:*:6162636461{1-3}6364*646464\nQ:0:*:6361(6161|6262)62??63\nR:0:EOF-5:61626364";
            let mut hay = hay;
            if let Some(at) = plant {
                let at = at.min(hay.len());
                hay.splice(at..at, b"abcdaXcd-ddd".iter().copied());
            }
            let mut answers = Vec::new();
            for d in both(sigs) {
                let mut chunks = Vec::new();
                let mut rest = hay.as_slice();
                let mut i = 0;
                while !rest.is_empty() {
                    let n = sizes[i % sizes.len()].min(rest.len());
                    chunks.push(&rest[..n]);
                    rest = &rest[n..];
                    i += 1;
                }
                let whole = scan(&d, &[&hay]);
                proptest::prop_assert_eq!(&scan(&d, &chunks), &whole);
                if plant.is_some() {
                    proptest::prop_assert!(whole.is_some());
                }
                answers.push(whole.is_some());
            }
            proptest::prop_assert_eq!(answers[0], answers[1]);
        }
    }

    fn ldb(text: &str) -> Database {
        let (db, report) = DatabaseBuilder::new().add_ldb(text).build().unwrap();
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        db
    }

    proptest::proptest! {
        /// Logical signatures see the same counts however the file is chunked: body
        /// subsignatures across chunk edges, `*` parts, wide and case-folded forms,
        /// and PCRE subsignatures over the window.
        #[test]
        fn logical_signatures_ignore_chunking(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    &b"ABCD"[..], b"abcd", b"w\0i\0d\0e\0", b"xyz12", b"Xyz123", b"....",
                    b"EFGH", b"-", b"\x00\x01",
                ]),
                0..40,
            ),
            sizes in proptest::collection::vec(1usize..20, 1..5),
        ) {
            let d = ldb("L.Count;Target:0;0>2;41424344::i\n\
                L.Star;Target:0;(0&1)=2;41424344*45464748;2d2d\n\
                L.Wide;Target:0;0&1>1;77696465::w;2e2e2e2e\n\
                L.Pcre;Target:0;0&1;78797a;0/xyz[0-9]{3}/i\n\
                L.Block;Target:0;(0|1|2)>3,2;2d2d;0001;45464748");
            let hay: Vec<u8> = pieces.concat();
            let whole = scan(&d, &[&hay]);
            let mut chunks = Vec::new();
            let mut rest = hay.as_slice();
            let mut i = 0;
            while !rest.is_empty() {
                let n = sizes[i % sizes.len()].min(rest.len());
                chunks.push(&rest[..n]);
                rest = &rest[n..];
                i += 1;
            }
            proptest::prop_assert_eq!(scan(&d, &chunks), whole);
        }
    }

    #[test]
    fn logical_counts_and_window() {
        let d = ldb("L.Count;Target:0;0=3;61626364\nL.Pcre;Target:0;0&1;7a7a;0/zz[0-9]+q/");
        assert_eq!(
            scan(&d, &[b"abcdabcd", b"abcd"]).as_deref(),
            Some("L.Count")
        );
        assert_eq!(scan(&d, &[b"abcdabcdabcdabcd"]), None);
        assert_eq!(scan(&d, &[b"..zz", b"12q"]).as_deref(), Some("L.Pcre"));
        // Past the window the regular expressions see nothing.
        let mut m = BodyMatcher::new(&d);
        let mut long = vec![b'.'; 100];
        long.extend_from_slice(b"zz12q");
        assert!(m.feed(&d, FileType::Other, &long, 50).is_none());
        assert!(m.finish(&d, FileType::Other, &[]).is_none());
        assert!(m.window_truncated);
    }

    #[test]
    fn regex_work_per_file_is_bounded() {
        // 200 signatures whose trigger the file fires, each running a regular
        // expression over a 2 MiB window: 400 MiB of searching, over the budget.
        let text: String = (0..200)
            .map(|i| format!("L.{i};Target:0;0&1;74726967;0/zzzq{i:03}[0-9]/\n"))
            .collect();
        let d = ldb(&text);
        let mut file = vec![b'.'; 2 << 20];
        file[..4].copy_from_slice(b"trig");
        let mut m = BodyMatcher::new(&d);
        assert!(m.feed(&d, FileType::Other, &file, 2 << 20).is_none());
        assert!(m.finish(&d, FileType::Other, &[]).is_none());
        assert!(m.pcre_limit_hits > 0 && m.pcre_limit_hits < 200);
    }

    #[test]
    fn short_anchors_up_to_the_last_byte() {
        // Anchors of two and three bytes (wildcards split the rest off) are found
        // by the 2- and 3-gram bitmaps, at the very end of the file too.
        for d in both("Two:0:*:7a79??\nThree:0:*:??717273") {
            for cut in 0..4 {
                let hay = b"...zy!";
                let (a, b) = hay.split_at(cut);
                assert_eq!(scan(&d, &[a, b]).as_deref(), Some("Two"), "cut {cut}");
            }
            assert_eq!(scan(&d, &[b"..", b".", b"!qrs"]).as_deref(), Some("Three"));
            assert_eq!(scan(&d, &[b"qrs"]), None);
            assert_eq!(scan(&d, &[b"zy"]), None);
        }
    }

    #[test]
    fn star_groups_in_order() {
        let d = db("S:0:*:41414141*42424242{3-}43434343");
        assert_eq!(scan(&d, &[b"AAAA..BBBB...CCCC"]).as_deref(), Some("S"));
        assert_eq!(scan(&d, &[b"AAAA..BBBB..CCCC"]), None);
        assert_eq!(scan(&d, &[b"BBBB..AAAA...CCCC"]), None);
        let long = [b"AAAA".as_slice(), &vec![b'.'; 300_000], b"BBBB...CCCC"].concat();
        assert_eq!(scan(&d, &[&long]).as_deref(), Some("S"));
    }

    #[test]
    fn offsets() {
        let d = db("A:0:4:41424344\nE:0:EOF-6:45464748");
        assert_eq!(scan(&d, &[b"....ABCD"]).as_deref(), Some("A"));
        assert_eq!(scan(&d, &[b".....ABCD"]), None);
        assert_eq!(scan(&d, &[b"xxxEFGH..", b"zzEFGHzz"]).as_deref(), Some("E"));
        assert_eq!(scan(&d, &[b"xxxEFGH..", b"zzEFGHz"]), None);
    }

    #[test]
    fn eicar_one_byte_at_a_time() {
        let d = Database::builtin();
        let mut m = BodyMatcher::new(&d);
        let mut hit = None;
        for b in crate::database::EICAR {
            hit = hit.or(m.feed(&d, FileType::Other, &[*b], 0));
        }
        hit = hit.or(m.finish(&d, FileType::Other, &[]));
        assert!(hit.is_some());
    }
}
