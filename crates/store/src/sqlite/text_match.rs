//! TEXT and BODY as exact substring matches (RFC 3501 §6.4.4), answered
//! from the word index.
//!
//! A search resolves its TEXT and BODY keys here first ([`resolve`]),
//! then compiles the rest into one SQL query (search.rs) that uses what
//! was found.
//!
//! - **A piece of one word** ("ayst", "haystack"): the index's terms that
//!   contain it are looked up in the terms' trigram index (terms.rs); a
//!   message matches when it holds one of them. That is exact: a string
//!   of letters and digits lies inside one word wherever it occurs, and
//!   the index holds every word. A few terms become one index query; many
//!   (a needle of one or two letters) are read [`UNION_TERMS`] at a time,
//!   frequent terms first, until every message of the mailbox is found,
//!   and past [`TERMS_READ`] the messages still left are checked against
//!   their text.
//! - **Anything else** (several words, punctuation, a script written
//!   without spaces): the index gives the candidates, a phrase of the
//!   needle's words where the first may end a longer word and the last
//!   may begin one, and each candidate is checked against its text
//!   ([`Matcher`]).
//!
//! What matches: the needle in the message's subject, addresses and
//! header block, or text parts (BODY: text parts only), the whole text
//! of a long message included (in its sections, text_sections.rs), with
//! case and diacritics folded ("zurich" finds "Zürich", as the index's
//! tokenizer folds them) and every run of white space counted as one space (a
//! folded header line or a line break in the body is no mismatch).

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use rusqlite::types::Value;
use rusqlite::Connection;
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

use super::fts_batch::{each_section, text_from_chunks, FtsText};
use super::fts_file::{blob_of_row, index_tokenizer, section_rowid};
use crate::error::Result;
use crate::model::{BlobId, MailboxId, SearchKey};
use crate::segment::spaced;

/// Most terms one index query asks for at once: FTS5 merges an OR of
/// terms pairwise, so a query of thousands took seconds (a term at a time
/// takes about 30 µs).
const OR_TERMS: usize = 64;

/// Terms per index query when many are read.
const UNION_TERMS: usize = 16;

/// Most expansions of a phrase's first word before it is left out of the
/// candidate query (its check still holds it).
const FIRST_WORD_TERMS: usize = 32;

/// Terms read one query at a time before the messages still unmatched
/// are checked against their text instead.
const TERMS_READ: usize = 2048;

/// Most matching messages looked up one by one (by blob) to hand SEARCH
/// their UIDs, which it then reads directly; more are matched by a pass
/// over the mailbox (about 1 ms for 21,282 messages).
const UID_LOOKUP: usize = 1024;

/// What a TEXT or BODY key matches in the searched mailbox.
pub(crate) enum Found {
    /// Every message (the empty string).
    All,
    /// The messages with these UIDs (a few).
    Uids(Rc<Vec<Value>>),
    /// The messages holding these blobs (many, or none).
    Blobs(Rc<Vec<Value>>),
}

/// The TEXT and BODY keys of one search, resolved: by (BODY only, needle).
#[derive(Default)]
pub(crate) struct TextMatches(HashMap<(bool, String), Found>);

impl TextMatches {
    /// What the key BODY (`body_only`) or TEXT `needle` matches; every
    /// key of the search was resolved.
    pub(crate) fn get(&self, body_only: bool, needle: &str) -> Option<&Found> {
        self.0.get(&(body_only, needle.to_string()))
    }

    #[cfg(test)]
    pub(crate) fn insert(&mut self, body_only: bool, needle: &str, found: Found) {
        self.0.insert((body_only, needle.to_string()), found);
    }
}

/// Resolves every TEXT and BODY key in `key`, a search of `mailbox`.
pub(crate) fn resolve(c: &Connection, mailbox: MailboxId, key: &SearchKey) -> Result<TextMatches> {
    let mut keys = Vec::new();
    text_keys(key, &mut keys);
    let mut out = TextMatches::default();
    for (body_only, needle) in keys {
        if out.0.contains_key(&(body_only, needle.to_string())) {
            continue;
        }
        let found = Search::new(c, mailbox, body_only).needle(needle)?;
        out.0.insert((body_only, needle.to_string()), found);
    }
    Ok(out)
}

pub(crate) fn text_keys<'a>(key: &'a SearchKey, out: &mut Vec<(bool, &'a str)>) {
    match key {
        SearchKey::Body(s) => out.push((true, s)),
        SearchKey::Text(s) => out.push((false, s)),
        SearchKey::And(keys) => keys.iter().for_each(|k| text_keys(k, out)),
        SearchKey::Or(a, b) => {
            text_keys(a, out);
            text_keys(b, out);
        }
        SearchKey::Not(k) => text_keys(k, out),
        _ => {}
    }
}

/// Whether the index's tokenizer keeps `c` in a word: letters, numbers,
/// private-use characters and combining marks (its categories
/// `L* N* Co M*`, fts_file.rs).
pub(crate) fn is_word_char(c: char) -> bool {
    c.is_alphanumeric()
        || is_combining_mark(c)
        || matches!(c, '\u{E000}'..='\u{F8FF}' | '\u{F0000}'..='\u{FFFFD}' | '\u{100000}'..='\u{10FFFD}')
}

/// Text as [`Matcher`] compares it: decomposed, diacritics dropped, case
/// folded a character at a time, every run of white space one space.
///
/// A byte at a time through ASCII, which most mail text is: a candidate
/// check folds the whole text of a message, and a loop of `char`s through
/// a decomposing iterator took most of a search's time.
pub(crate) fn match_fold(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(text.len());
    let mut space = false;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            i += 1;
            // ' ' and \t \n \x0b \x0c \r: `char::is_whitespace` in ASCII.
            if matches!(b, b' ' | b'\t'..=b'\r') {
                if !space {
                    out.push(b' ');
                }
                space = true;
            } else {
                out.push(b.to_ascii_lowercase());
                space = false;
            }
            continue;
        }
        let c = text[i..].chars().next().expect("a character starts here");
        i += c.len_utf8();
        if c.is_whitespace() {
            if !space {
                out.push(b' ');
            }
            space = true;
            continue;
        }
        space = false;
        let mut buf = [0u8; 4];
        // A character that decomposes (é into e and an accent) loses its
        // marks, as the index's tokenizer drops diacritics; a mark written
        // on its own (Thai vowels and tones, an accent typed apart) is a
        // letter of the text to the tokenizer, and stays. Decomposing one
        // character alone is enough: the marks it reorders are dropped.
        let drop_marks = std::iter::once(c).nfd().nth(1).is_some();
        for d in std::iter::once(c)
            .nfd()
            .filter(|&d| !(drop_marks && is_combining_mark(d)))
        {
            for l in d.to_lowercase() {
                out.extend_from_slice(l.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    String::from_utf8(out).expect("whole characters copied")
}

/// The check of one needle against a message's text.
pub(crate) struct Matcher {
    pub(crate) folded: String,
    body_only: bool,
}

impl Matcher {
    /// `needle` as a user typed it: white space around it is no part of it.
    pub(crate) fn new(needle: &str, body_only: bool) -> Matcher {
        Matcher {
            folded: match_fold(&spaced(needle.trim())),
            body_only,
        }
    }

    /// Whether the needle is in `text`'s columns.
    pub(crate) fn finds(&self, text: &FtsText) -> bool {
        let has = |column: &str| match_fold(column).contains(&self.folded);
        has(&text.body) || !self.body_only && (has(&text.subject) || has(&text.addresses))
    }
}

/// How a looked-up term must hold a word of the needle.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Holds {
    Anywhere,
    AtEnd,
}

/// The words of a needle, as the index's tokenizer makes them.
#[derive(Debug, PartialEq)]
struct Words {
    words: Vec<String>,
    /// The needle is nothing but one word: no white space, punctuation or
    /// second word in it.
    one_word: bool,
    /// The needle starts (ends) inside a word: its first (last) word may
    /// be the end (start) of a longer one.
    open_start: bool,
    open_end: bool,
}

/// The candidate query of a needle that is not one word alone.
enum Phrase {
    Query(String),
    /// The first word is in no term: nothing matches.
    NoMatch,
    /// One word with punctuation, in too many terms (these) for one
    /// query.
    TooMany(Vec<String>),
}

/// One search's view of the index.
struct Search<'c> {
    c: &'c Connection,
    mailbox: MailboxId,
    body_only: bool,
}

impl<'c> Search<'c> {
    fn new(c: &'c Connection, mailbox: MailboxId, body_only: bool) -> Search<'c> {
        Search {
            c,
            mailbox,
            body_only,
        }
    }

    fn needle(&self, needle: &str) -> Result<Found> {
        let matcher = Matcher::new(needle, self.body_only);
        if matcher.folded.is_empty() {
            // The empty string is in every message.
            return Ok(Found::All);
        }
        let words = self.words(needle.trim())?;
        if words.words.is_empty() {
            // No word to look up (punctuation alone): every message is a
            // candidate.
            let all = self.mailbox_blobs()?;
            return self.blobs(self.checked(all, &matcher)?);
        }
        if words.one_word {
            let terms = self.terms(&words.words[0], Holds::Anywhere)?;
            if terms.is_empty() {
                return self.blobs(Vec::new());
            }
            if terms.len() <= OR_TERMS {
                return self.blobs(self.index_rows(&self.any_of(&terms))?);
            }
            let (mut found, unread) = self.union(&terms)?;
            found.extend(self.checked(unread, &matcher)?);
            return self.blobs(found);
        }
        let candidates = match self.phrase(&words)? {
            Phrase::Query(query) => self.in_mailbox(self.index_rows(&query)?)?,
            Phrase::NoMatch => Vec::new(),
            Phrase::TooMany(terms) => {
                let (mut found, unread) = self.union(&terms)?;
                found.extend(unread);
                found
            }
        };
        self.blobs(self.checked(candidates, &matcher)?)
    }

    /// Cuts `needle` (trimmed) into the words the index's tokenizer makes
    /// of it, by tokenizing each run of word characters in a scratch table
    /// with the index's tokenizer.
    fn words(&self, needle: &str) -> Result<Words> {
        let mut runs: Vec<String> = Vec::new();
        let mut in_run = false;
        for c in needle.chars() {
            if is_word_char(c) {
                if !in_run {
                    runs.push(String::new());
                }
                runs.last_mut().expect("a run").push(c);
            }
            in_run = is_word_char(c);
        }
        let chars = || needle.chars();
        let open_start = chars().next().is_some_and(is_word_char);
        let open_end = chars().next_back().is_some_and(is_word_char);
        if needle.is_ascii() {
            // The tokenizer's words of ASCII text are its runs of letters
            // and digits, lower-cased: no table needed (most needles).
            return Ok(Words {
                one_word: runs.len() == 1 && chars().all(is_word_char),
                open_start,
                open_end,
                words: runs.iter().map(|r| r.to_ascii_lowercase()).collect(),
            });
        }
        let c = self.c;
        c.execute_batch(concat!(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.needle USING fts5(t, content = '', ",
            index_tokenizer!(),
            ");
             CREATE VIRTUAL TABLE IF NOT EXISTS temp.needle_words
                 USING fts5vocab(temp, needle, 'instance');"
        ))?;
        let mut insert = c.prepare_cached("INSERT INTO temp.needle (rowid, t) VALUES (?1, ?2)")?;
        for (i, run) in runs.iter().enumerate() {
            insert.execute(rusqlite::params![i as i64 + 1, spaced(run).as_ref()])?;
        }
        let words = c
            .prepare_cached("SELECT term FROM temp.needle_words ORDER BY doc, offset")?
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        c.execute("INSERT INTO temp.needle (needle) VALUES ('delete-all')", [])?;
        Ok(Words {
            one_word: words.len() == 1 && runs.len() == 1 && chars().all(is_word_char),
            open_start,
            open_end,
            words,
        })
    }

    /// The index's terms holding `word` (at its end, or anywhere), in the
    /// order they first came.
    fn terms(&self, word: &str, holds: Holds) -> Result<Vec<String>> {
        let found = if word.chars().count() >= 3 && !word.contains(['*', '?', '[']) {
            // Words are of word characters, never GLOB's; checked anyway.
            let pattern = match holds {
                Holds::Anywhere => format!("*{word}*"),
                Holds::AtEnd => format!("*{word}"),
            };
            self.c
                .prepare_cached("SELECT term FROM term_grams WHERE term GLOB ?1 ORDER BY rowid")?
                .query_map([pattern], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?
        } else {
            // Too short for a trigram: every term is read.
            self.c
                .prepare_cached("SELECT term FROM terms WHERE instr(term, ?1) > 0 ORDER BY id")?
                .query_map([word], |r| r.get::<_, String>(0))?
                .filter(|t| match (t, holds) {
                    (Ok(t), Holds::AtEnd) => t.ends_with(word),
                    _ => true,
                })
                .collect::<rusqlite::Result<Vec<_>>>()?
        };
        Ok(found)
    }

    /// An index query for rows holding any of `terms` (at least one).
    fn any_of(&self, terms: &[String]) -> String {
        let any = terms.iter().map(|t| quoted(t)).collect::<Vec<_>>();
        self.in_column(&any.join(" OR "))
    }

    fn in_column(&self, query: &str) -> String {
        if self.body_only {
            format!("body : ({query})")
        } else {
            format!("({query})")
        }
    }

    /// The candidate query of a needle of several words, or of one word
    /// with punctuation: a phrase of the words, the first possibly the end
    /// of a longer word, the last possibly the start of one.
    fn phrase(&self, w: &Words) -> Result<Phrase> {
        let n = w.words.len();
        let mut rest: Vec<String> = w.words[1..].iter().map(|t| quoted(t)).collect();
        if w.open_end && n > 1 {
            rest.last_mut().expect("a word").push('*');
        }
        let first = &w.words[0];
        let firsts: Vec<String> = match (w.open_start, w.open_end && n == 1) {
            (false, false) => vec![quoted(first)],
            (false, true) => vec![format!("{}*", quoted(first))],
            (true, anywhere) => {
                let holds = if anywhere {
                    Holds::Anywhere
                } else {
                    Holds::AtEnd
                };
                let terms = self.terms(first, holds)?;
                if terms.is_empty() {
                    return Ok(Phrase::NoMatch);
                }
                if terms.len() > FIRST_WORD_TERMS {
                    if rest.is_empty() {
                        return Ok(Phrase::TooMany(terms));
                    }
                    return Ok(Phrase::Query(self.in_column(&rest.join(" + "))));
                }
                terms.iter().map(|t| quoted(t)).collect()
            }
        };
        let phrases: Vec<String> = firsts
            .into_iter()
            .map(|f| {
                let mut p = vec![f];
                p.extend(rest.iter().cloned());
                format!("({})", p.join(" + "))
            })
            .collect();
        Ok(Phrase::Query(self.in_column(&phrases.join(" OR "))))
    }

    /// The blobs of the mailbox's messages.
    fn mailbox_blobs(&self) -> Result<Vec<BlobId>> {
        Ok(self
            .c
            .prepare_cached("SELECT blob_id FROM messages WHERE mailbox_id = ?1")?
            .query_map([self.mailbox], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The blobs (of any mailbox) whose index rows match `query`.
    fn index_rows(&self, query: &str) -> Result<Vec<BlobId>> {
        Ok(self
            .c
            .prepare_cached(concat!(
                "SELECT DISTINCT ",
                blob_of_row!(),
                " FROM fts WHERE fts MATCH ?1"
            ))?
            .query_map([query], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Those of `blobs` that messages of the mailbox hold: looked up one
    /// by one when they are few, else by a pass over the mailbox.
    fn in_mailbox(&self, blobs: Vec<BlobId>) -> Result<Vec<BlobId>> {
        if blobs.is_empty() {
            return Ok(blobs);
        }
        let sql = if blobs.len() <= UID_LOOKUP {
            "SELECT DISTINCT blob_id FROM messages INDEXED BY messages_blob
             WHERE blob_id IN (SELECT value FROM rarray(?1)) AND mailbox_id = ?2"
        } else {
            "SELECT DISTINCT blob_id FROM messages
             WHERE mailbox_id = ?2 AND blob_id IN (SELECT value FROM rarray(?1))"
        };
        let list = Rc::new(blobs.into_iter().map(Value::Integer).collect::<Vec<_>>());
        Ok(self
            .c
            .prepare_cached(sql)?
            .query_map(rusqlite::params![list, self.mailbox], |r| r.get(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// The mailbox's blobs holding any of `terms`, read a few terms at a
    /// time until every blob of the mailbox is found or [`TERMS_READ`]
    /// terms are read; and the blobs not found when terms were left
    /// unread (else none).
    fn union(&self, terms: &[String]) -> Result<(Vec<BlobId>, Vec<BlobId>)> {
        let all = self.mailbox_blobs()?;
        let mut left: HashSet<BlobId> = all.iter().copied().collect();
        let mut found = Vec::new();
        let mut read = 0;
        let mut stmt = self.c.prepare_cached(concat!(
            "SELECT ",
            blob_of_row!(),
            " FROM fts WHERE fts MATCH ?1"
        ))?;
        for group in terms.chunks(UNION_TERMS) {
            if left.is_empty() {
                return Ok((found, Vec::new()));
            }
            if read >= TERMS_READ {
                return Ok((found, left.into_iter().collect()));
            }
            read += group.len();
            let mut rows = stmt.query([self.any_of(group)])?;
            while let Some(row) = rows.next()? {
                let blob: BlobId = row.get(0)?;
                if left.remove(&blob) {
                    found.push(blob);
                }
            }
        }
        Ok((found, Vec::new()))
    }

    /// The blobs of `blobs` whose text holds the needle: in their main
    /// row's text, or in a section of a long one's.
    fn checked(&self, blobs: Vec<BlobId>, matcher: &Matcher) -> Result<Vec<BlobId>> {
        let mut out = Vec::new();
        let mut long = self
            .c
            .prepare_cached("SELECT 1 FROM fts_docsize WHERE id = ?1")?;
        for blob in blobs {
            let mut found = matcher.finds(&text_from_chunks(self.c, blob)?);
            if !found && long.exists([section_rowid(blob, 1)])? {
                each_section(self.c, blob, |text| {
                    found = matcher.finds(&FtsText::section(&text));
                    Ok(!found)
                })?;
            }
            if found {
                out.push(blob);
            }
        }
        Ok(out)
    }

    /// What SEARCH gets for the messages holding `blobs`: their UIDs when
    /// they are few, so it reads just those messages.
    fn blobs(&self, blobs: Vec<BlobId>) -> Result<Found> {
        let list = Rc::new(blobs.into_iter().map(Value::Integer).collect::<Vec<_>>());
        if list.is_empty() || list.len() > UID_LOOKUP {
            return Ok(Found::Blobs(list));
        }
        let uids = self
            .c
            .prepare_cached(
                "SELECT uid FROM messages INDEXED BY messages_blob
                 WHERE blob_id IN (SELECT value FROM rarray(?1)) AND mailbox_id = ?2",
            )?
            .query_map(rusqlite::params![list, self.mailbox], |r| {
                r.get::<_, i64>(0).map(Value::Integer)
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(Found::Uids(Rc::new(uids)))
    }
}

/// `s` as an FTS5 string: in double quotes, quotes doubled.
fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(needle: &str) -> Words {
        let c = Connection::open_in_memory().unwrap();
        Search::new(&c, 1, false).words(needle).unwrap()
    }

    #[test]
    fn needles_are_cut_into_the_index_tokenizers_words() {
        let w = words("Ayst");
        assert_eq!(w.words, ["ayst"]);
        assert!(w.one_word && w.open_start && w.open_end);
        let w = words("Hello, WÖR");
        assert_eq!(w.words, ["hello", "wor"]);
        assert!(!w.one_word && w.open_start && w.open_end);
        let w = words("-foo bar.");
        assert_eq!(w.words, ["foo", "bar"]);
        assert!(!w.open_start && !w.open_end);
        // Scripts written without spaces: a word per character.
        let w = words("日本語");
        assert_eq!(w.words, ["日", "本", "語"]);
        assert!(!w.one_word && w.open_start && w.open_end);
        assert!(words("-- ").words.is_empty());
        // ASCII needles skip the table: the same words as through it.
        let through_table = |n: &str| words(&format!("{n}\u{e9}")).words;
        for n in ["Hello, WOR", "a_b-c9 x", "x\u{7f}y", "ab\tcd"] {
            let mut want = words(n).words;
            want.last_mut().unwrap().push('e');
            assert_eq!(through_table(n), want, "{n:?}");
        }
        // A combining mark stays with its letter.
        assert_eq!(words("e\u{301}cole").words, ["ecole"]);
    }

    #[test]
    fn folding_drops_case_diacritics_and_extra_space() {
        assert_eq!(match_fold("Zürich  ÉCOLE\r\n\tx"), "zurich ecole x");
        assert_eq!(match_fold("Ǻ"), "a");
        assert_eq!(match_fold("ø ß Σ"), "ø ß σ");
        // Marks written on their own are letters: Thai keeps its vowels
        // and tones, as the index's tokenizer does.
        assert_eq!(match_fold("สวัสดี"), "สวัสดี");
        assert_eq!(match_fold("e\u{301}"), "e\u{301}");
        let m = Matcher::new("  Zurich ecole ", false);
        let text = FtsText {
            subject: "Bonjour".into(),
            addresses: "a@b".into(),
            body: "De Zürich,\r\n  École".into(),
            long: false,
        };
        assert!(!m.finds(&text));
        assert!(Matcher::new("zürich, école", true).finds(&text));
        assert!(Matcher::new("JOUR", false).finds(&text));
        assert!(!Matcher::new("JOUR", true).finds(&text));
    }
}
