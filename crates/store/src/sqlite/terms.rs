//! Every word of the full-text index once, with an index of its
//! trigrams: what lets TEXT and BODY find a string inside a word (RFC 3501
//! §6.4.4 asks for substrings) from a word index (text_match.rs).
//!
//! `terms` holds each term the index's tokenizer ever produced, numbered
//! in the order they first came (frequent words come early, which is the
//! order a search reads them in); `term_grams` indexes the trigrams of
//! those terms (FTS5's `trigram` tokenizer, external content, no
//! positions), so the terms holding "ayst" are a lookup, not a scan.
//!
//! Why not a trigram index of the mail itself: measured on the 21,282
//! messages of the search bench, it had to check every candidate against
//! its text (about 25 µs each, 260 ms for a common word), and indexing
//! took four times the CPU. The terms are a few MB, and a word found in
//! them is then an exact lookup in the word index.
//!
//! How the terms are found: by FTS5 itself, so they are exactly the
//! index's (its case folding and diacritic removal, its token
//! characters). The text an index job writes is cut at white space into
//! raw words; those not seen before in this process ([`SeenWords`]) go
//! through a scratch FTS5 table in TEMP with the index's tokenizer, and
//! its vocabulary is what is new. Raw words seen before hold no new term:
//! a token never spans white space. Most of a job's words are known, so
//! this costs a fraction of the indexing itself.
//!
//! Terms are never deleted: a term of mail gone matches nothing in the
//! word index, so it costs a few bytes, never a wrong answer.

use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher, Hasher};

use rusqlite::{Connection, OptionalExtension};

use super::fts_file::index_tokenizer;
use crate::error::Result;

/// The terms and their trigram index, in the index file.
pub(crate) const CREATE_TERMS: &str = r#"
    CREATE TABLE IF NOT EXISTS main.terms (
        id INTEGER PRIMARY KEY,
        term TEXT NOT NULL UNIQUE
    ) STRICT;
    CREATE VIRTUAL TABLE IF NOT EXISTS main.term_grams USING fts5(
        term, content = 'terms', content_rowid = 'id',
        tokenize = 'trigram case_sensitive 1', detail = 'none', columnsize = 0
    );
"#;

/// The scratch table new words are tokenized in, on the writer's
/// connection; the same tokenizer as the index table (fts_file.rs).
const CREATE_FRESH: &str = concat!(
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.fresh USING fts5(
        t, content = '', detail = 'none', columnsize = 0, ",
    index_tokenizer!(),
    ");
    CREATE VIRTUAL TABLE IF NOT EXISTS temp.fresh_terms USING fts5vocab(temp, fresh, 'row');"
);

/// `index_meta` key set once `terms` holds every term of the index.
const COMPLETE: &str = "terms_complete";

/// Raw words remembered before the set is emptied: about 16 MiB. Past it,
/// words are simply tokenized again.
const SEEN_LIMIT: usize = 1 << 20;

/// Creates the tables if missing, and fills `terms` from the index when
/// it was made before them (an index file of an earlier version). `conn`
/// is the index file's writer, in a transaction.
pub(crate) fn create(conn: &Connection) -> Result<()> {
    conn.execute_batch(CREATE_TERMS)?;
    let complete: Option<i64> = conn
        .query_row(
            "SELECT value FROM index_meta WHERE key = ?1",
            [COMPLETE],
            |r| r.get(0),
        )
        .optional()?;
    if complete.is_none() {
        conn.execute_batch(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.index_terms USING fts5vocab(main, fts, 'row');
             INSERT OR IGNORE INTO terms (term) SELECT term FROM temp.index_terms;
             INSERT INTO term_grams (term_grams) VALUES ('rebuild');
             DROP TABLE temp.index_terms;",
        )?;
        conn.execute(
            "INSERT OR REPLACE INTO index_meta (key, value) VALUES (?1, 1)",
            [COMPLETE],
        )?;
    }
    Ok(())
}

/// Drops the tables, with the index table they were made from.
pub(crate) const DROP_TERMS: &str = "DROP TABLE IF EXISTS main.term_grams;
     DROP TABLE IF EXISTS main.terms;
     DELETE FROM main.index_meta WHERE key = 'terms_complete';";

/// Raw words (text between white space) already put through [`add`] by
/// this process, as 64-bit hashes.
#[derive(Default)]
pub(crate) struct SeenWords {
    hashes: HashSet<u64, Fixed>,
}

/// One fixed hash function, not a random one per set: the hashes are
/// compared across jobs (a collision only means a word tokenized again,
/// or, at one chance in 2^64, a term missed).
type Fixed = BuildHasherDefault<DefaultHasher>;

impl SeenWords {
    /// The raw words of `texts` not seen before, joined by spaces; notes
    /// them as seen.
    pub(crate) fn unseen<'a>(&mut self, texts: impl Iterator<Item = &'a str>) -> String {
        if self.hashes.len() > SEEN_LIMIT {
            self.hashes.clear();
        }
        let mut out = String::new();
        for text in texts {
            for word in text.split_ascii_whitespace() {
                let mut h = Fixed::default().build_hasher();
                h.write(word.as_bytes());
                if self.hashes.insert(h.finish()) {
                    out.push_str(word);
                    out.push(' ');
                }
            }
        }
        out
    }

    /// Forgets every word, after a job whose terms may not have been kept.
    pub(crate) fn forget(&mut self) {
        self.hashes.clear();
    }
}

/// Adds the terms of `words` (raw words from [`SeenWords::unseen`]) that
/// are new, in the index writer's transaction on `conn`.
pub(crate) fn add(conn: &Connection, words: &str) -> Result<()> {
    if words.is_empty() {
        return Ok(());
    }
    conn.execute_batch(CREATE_FRESH)?;
    conn.execute("INSERT INTO temp.fresh (rowid, t) VALUES (1, ?1)", [words])?;
    let last: i64 = conn.query_row("SELECT coalesce(max(id), 0) FROM terms", [], |r| r.get(0))?;
    conn.execute(
        "INSERT OR IGNORE INTO terms (term) SELECT term FROM temp.fresh_terms",
        [],
    )?;
    conn.execute(
        "INSERT INTO term_grams (rowid, term) SELECT id, term FROM terms WHERE id > ?1",
        [last],
    )?;
    conn.execute("INSERT INTO temp.fresh (fresh) VALUES ('delete-all')", [])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        super::super::fts_file::create_tables(&c).unwrap();
        c
    }

    fn terms(c: &Connection) -> Vec<String> {
        c.prepare("SELECT term FROM terms ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn new_words_give_the_index_tokenizers_terms_once() {
        let c = index();
        let mut seen = SeenWords::default();
        let words = seen.unseen(["Zürich, ÉCOLE", "zurich\r\nécole-x"].into_iter());
        assert_eq!(words, "Zürich, ÉCOLE zurich école-x ");
        add(&c, &words).unwrap();
        let mut got = terms(&c);
        got.sort();
        assert_eq!(got, ["ecole", "x", "zurich"]);
        // Seen words are not tokenized again; new ones add their terms.
        assert_eq!(seen.unseen(["ÉCOLE Zürich, née"].into_iter()), "née ");
        add(&c, "née ").unwrap();
        assert_eq!(terms(&c).len(), 4);
        let found: Vec<String> = c
            .prepare("SELECT term FROM term_grams WHERE term GLOB '*ri*' ORDER BY rowid")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(found, ["zurich"]);
    }

    #[test]
    fn an_index_made_before_the_terms_gets_them_all() {
        let c = Connection::open_in_memory().unwrap();
        super::super::fts_file::create_tables(&c).unwrap();
        c.execute_batch(DROP_TERMS).unwrap();
        c.execute(
            "INSERT INTO fts (rowid, subject, body) VALUES (1, 'Hello', 'brave new world')",
            [],
        )
        .unwrap();
        create(&c).unwrap();
        let mut got = terms(&c);
        got.sort();
        assert_eq!(got, ["brave", "hello", "new", "world"]);
        let n: i64 = c
            .query_row(
                "SELECT count(*) FROM term_grams WHERE term GLOB '*orl*'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 1);
        // Once complete, opening again adds nothing twice.
        create(&c).unwrap();
        assert_eq!(terms(&c).len(), 4);
    }
}
