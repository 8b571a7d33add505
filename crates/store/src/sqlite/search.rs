//! SEARCH: a [`SearchKey`] tree compiled into one SQL query over the
//! mailbox's messages and their blobs, its TEXT and BODY keys resolved
//! first against the full-text index (text_match.rs). User text only ever
//! travels as bound parameters; the SQL text is built from fixed pieces.
//!
//! The matching rules are documented on [`crate::Store::search`].

use std::rc::Rc;

use rusqlite::types::{ToSql, Value};

use super::functions::fold;
use super::text_match::{Found, TextMatches};
use crate::error::{Result, StoreError};
use crate::keyword;
use crate::model::{MailboxId, SearchKey, Uid};

/// Deepest key tree accepted; SQLite's own expression depth limit is 1000,
/// and no client needs more than a handful of levels.
const MAX_DEPTH: usize = 64;

/// Up to this many UID ranges are written inline as `BETWEEN`s; more go
/// as one `rarray` parameter.
const INLINE_RANGES: usize = 16;

const DAY: i64 = 86_400;

/// A compiled search: SQL text and its parameters, in order.
pub(crate) struct Query {
    pub sql: String,
    pub params: Vec<Box<dyn ToSql>>,
}

/// Compiles a search of `mailbox`.
/// `texts`: its TEXT and BODY keys, resolved (text_match.rs).
pub(crate) fn compile(mailbox: MailboxId, key: &SearchKey, texts: &TextMatches) -> Result<Query> {
    let mut c = Compiler {
        texts,
        sql: String::new(),
        params: vec![Box::new(mailbox)],
        uses_blob: false,
        uses_parsed: false,
    };
    c.key(key, 0)?;
    let mut from = String::from("messages m");
    if c.uses_blob {
        from.push_str(" JOIN blobs b ON b.id = m.blob_id");
    }
    if c.uses_parsed {
        // Blobs stored before header blocks were kept have no row: their
        // header is NULL, which `sluice_header` matches with nothing.
        from.push_str(" LEFT JOIN blob_parsed p ON p.blob_id = m.blob_id");
    }
    Ok(Query {
        sql: format!(
            "SELECT m.uid FROM {from} WHERE m.mailbox_id = ? AND ({}) ORDER BY m.uid",
            c.sql
        ),
        params: c.params,
    })
}

/// Whether a search reads the full-text index (BODY, TEXT).
pub(crate) fn reads_text(key: &SearchKey) -> bool {
    match key {
        SearchKey::Body(_) | SearchKey::Text(_) => true,
        SearchKey::And(keys) => keys.iter().any(reads_text),
        SearchKey::Or(a, b) => reads_text(a) || reads_text(b),
        SearchKey::Not(k) => reads_text(k),
        _ => false,
    }
}

struct Compiler<'t> {
    texts: &'t TextMatches,
    sql: String,
    params: Vec<Box<dyn ToSql>>,
    /// The expression reads a `blobs` column, so the query needs the join.
    uses_blob: bool,
    /// The expression reads the header block in `blob_parsed`.
    uses_parsed: bool,
}

impl Compiler<'_> {
    fn param(&mut self, v: impl ToSql + 'static) {
        self.params.push(Box::new(v));
    }

    fn key(&mut self, key: &SearchKey, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(StoreError::Invalid("search nested too deeply".into()));
        }
        match key {
            SearchKey::All => self.sql.push('1'),
            SearchKey::And(keys) => {
                if keys.is_empty() {
                    self.sql.push('1');
                } else {
                    self.and(keys, depth + 1)?;
                }
            }
            SearchKey::Or(a, b) => {
                self.sql.push('(');
                self.key(a, depth + 1)?;
                self.sql.push_str(" OR ");
                self.key(b, depth + 1)?;
                self.sql.push(')');
            }
            SearchKey::Not(k) => {
                // Every leaf is 0 or 1, never NULL, so NOT is exact.
                self.sql.push_str("NOT (");
                self.key(k, depth + 1)?;
                self.sql.push(')');
            }
            SearchKey::Uids(ranges) => self.uids(ranges),
            SearchKey::FlagsSet(bits) => {
                self.sql.push_str("(m.flags & ?) = ?");
                self.param(*bits);
                self.param(*bits);
            }
            SearchKey::FlagsUnset(bits) => {
                self.sql.push_str("(m.flags & ?) = 0");
                self.param(*bits);
            }
            SearchKey::Keyword(k) => self.keyword(k, true),
            SearchKey::Unkeyword(k) => self.keyword(k, false),
            SearchKey::From(s) => self.column("b.hdr_from", s),
            SearchKey::To(s) => self.column("b.hdr_to", s),
            SearchKey::Cc(s) => self.column("b.hdr_cc", s),
            SearchKey::Subject(s) => self.column("b.hdr_subject", s),
            // BCC is not an indexed column: the raw header has it. An
            // empty string is in every message, as for FROM and the rest.
            SearchKey::Bcc(s) if s.is_empty() => self.sql.push('1'),
            SearchKey::Bcc(s) => self.header("Bcc", s),
            SearchKey::Header(name, value) => self.header(name, value),
            SearchKey::Body(s) => self.text(true, s)?,
            SearchKey::Text(s) => self.text(false, s)?,
            SearchKey::SentBefore(d) => self.sent(None, Some(*d)),
            SearchKey::SentOn(d) => self.sent(Some(*d), Some(d.saturating_add(1))),
            SearchKey::SentSince(d) => self.sent(Some(*d), None),
            SearchKey::Before(d) => self.date_before("m.internal_date", *d),
            SearchKey::On(d) => self.date_on("m.internal_date", *d),
            SearchKey::Since(d) => self.date_since("m.internal_date", *d),
            SearchKey::Larger(n) => match i64::try_from(*n) {
                Ok(n) => {
                    self.sql.push_str("m.size > ?");
                    self.param(n);
                }
                Err(_) => self.sql.push('0'),
            },
            SearchKey::Smaller(n) => match i64::try_from(*n) {
                Ok(n) => {
                    self.sql.push_str("m.size < ?");
                    self.param(n);
                }
                Err(_) => self.sql.push('1'),
            },
            SearchKey::ModSeqAtLeast(n) => match i64::try_from(*n) {
                Ok(n) => {
                    self.sql.push_str("m.modseq >= ?");
                    self.param(n);
                }
                Err(_) => self.sql.push('0'),
            },
        }
        Ok(())
    }

    /// A conjunction, written as a balanced tree of parenthesised halves:
    /// SQLite parses `a AND b AND c ...` into a chain as deep as it is
    /// long, and refuses chains past its expression depth limit (1000),
    /// which a SEARCH of a thousand flat keys would reach.
    fn and(&mut self, keys: &[SearchKey], depth: usize) -> Result<()> {
        if let [only] = keys {
            return self.key(only, depth);
        }
        let (left, right) = keys.split_at(keys.len() / 2);
        self.sql.push('(');
        self.and(left, depth)?;
        self.sql.push_str(" AND ");
        self.and(right, depth)?;
        self.sql.push(')');
        Ok(())
    }

    fn uids(&mut self, ranges: &[(Uid, Uid)]) {
        // Sorted and merged: IMAP sets like 1,2,3,5:7 become few ranges.
        let mut merged: Vec<(i64, i64)> = ranges
            .iter()
            .map(|&(a, b)| (i64::from(a.min(b)), i64::from(a.max(b))))
            .collect();
        merged.sort_unstable();
        let mut out: Vec<(i64, i64)> = Vec::with_capacity(merged.len());
        for (lo, hi) in merged {
            match out.last_mut() {
                Some(last) if lo <= last.1 + 1 => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        if out.is_empty() {
            self.sql.push('0');
        } else if out.len() <= INLINE_RANGES {
            self.sql.push('(');
            for (i, (lo, hi)) in out.into_iter().enumerate() {
                if i > 0 {
                    self.sql.push_str(" OR ");
                }
                self.sql.push_str("m.uid BETWEEN ? AND ?");
                self.param(lo);
                self.param(hi);
            }
            self.sql.push(')');
        } else {
            // Each range packed into one integer: low UID in the high 32
            // bits. One parameter whatever the number of ranges. UIDs from
            // 2^31 make it negative; SQLite shifts with the sign, hence
            // the mask after the shift.
            self.sql.push_str(
                "EXISTS (SELECT 1 FROM rarray(?) r \
                 WHERE m.uid BETWEEN ((r.value >> 32) & 4294967295) AND (r.value & 4294967295))",
            );
            let packed: Vec<Value> = out
                .into_iter()
                .map(|(lo, hi)| Value::Integer(lo.wrapping_shl(32) | hi))
                .collect();
            self.param(Rc::new(packed));
        }
    }

    fn keyword(&mut self, k: &str, set: bool) {
        if !keyword::is_keyword(k) {
            // Not a keyword any message can have.
            self.sql.push(if set { '0' } else { '1' });
            return;
        }
        // Keywords are ASCII atoms: SQLite's lower() folds all of them.
        self.sql.push_str(if set {
            "instr(' ' || lower(m.keywords) || ' ', ?) > 0"
        } else {
            "instr(' ' || lower(m.keywords) || ' ', ?) = 0"
        });
        self.param(format!(" {} ", k.to_ascii_lowercase()));
    }

    fn column(&mut self, column: &str, needle: &str) {
        self.uses_blob = true;
        self.sql.push_str("sluice_contains(");
        self.sql.push_str(column);
        self.sql.push_str(", ?)");
        self.param(fold(needle));
    }

    fn header(&mut self, name: &str, value: &str) {
        self.uses_parsed = true;
        self.sql
            .push_str("sluice_header(sluice_header_block(p.header_codec, p.header), ?, ?)");
        self.param(name.to_string());
        self.param(fold(value));
    }

    /// BODY (`body_only`) or TEXT, as [`text_match::resolve`] found it.
    fn text(&mut self, body_only: bool, needle: &str) -> Result<()> {
        match self.texts.get(body_only, needle) {
            Some(Found::All) => self.sql.push('1'),
            Some(Found::Uids(uids)) if uids.is_empty() => self.sql.push('0'),
            Some(Found::Uids(uids)) => {
                // With the mailbox, the primary key: a lookup per UID.
                self.sql.push_str("m.uid IN (SELECT value FROM rarray(?))");
                self.param(Rc::clone(uids));
            }
            Some(Found::Blobs(blobs)) if blobs.is_empty() => self.sql.push('0'),
            Some(Found::Blobs(blobs)) => {
                // As a subquery: read once into a temporary index. As
                // `IN rarray(?)` SQLite consulted the array for each
                // message of the mailbox (1.1 ms for 21,282, found or not).
                self.sql
                    .push_str("m.blob_id IN (SELECT value FROM rarray(?))");
                self.param(Rc::clone(blobs));
            }
            None => return Err(StoreError::Invalid("text search not resolved".into())),
        }
        Ok(())
    }

    /// A message's sent day is the day its `Date:` field names, as
    /// written (RFC 3501 §6.4.4 disregards time and zone), or its internal
    /// date's day when it has no Date that parses; it lies in
    /// `[since, before)` (days). A test on the joined blob row, as FROM
    /// and SUBJECT are: an index by day cost every delivery a page at a
    /// random place in it (schema.rs).
    fn sent(&mut self, since: Option<i64>, before: Option<i64>) {
        self.uses_blob = true;
        let range = |c: &mut Self, column: &str, unit: i64| {
            let mut parts = Vec::new();
            if let Some(d) = since {
                parts.push(format!("{column} >= ?"));
                c.params.push(Box::new(d.saturating_mul(unit)));
            }
            if let Some(d) = before {
                parts.push(format!("{column} < ?"));
                c.params.push(Box::new(d.saturating_mul(unit)));
            }
            parts.join(" AND ")
        };
        // Both branches compare non-NULL values: 0 or 1, never NULL.
        self.sql.push_str("(CASE WHEN b.hdr_day IS NULL THEN (");
        let internal = range(self, "m.internal_date", DAY);
        self.sql.push_str(&internal);
        self.sql.push_str(") ELSE (");
        let dated = range(self, "b.hdr_day", 1);
        self.sql.push_str(&dated);
        self.sql.push_str(") END)");
    }

    fn date_before(&mut self, expr: &str, day: i64) {
        self.sql.push_str(expr);
        self.sql.push_str(" < ?");
        self.param(day.saturating_mul(DAY));
    }

    fn date_since(&mut self, expr: &str, day: i64) {
        self.sql.push_str(expr);
        self.sql.push_str(" >= ?");
        self.param(day.saturating_mul(DAY));
    }

    fn date_on(&mut self, expr: &str, day: i64) {
        self.sql.push('(');
        self.sql.push_str(expr);
        self.sql.push_str(" >= ? AND ");
        self.sql.push_str(expr);
        self.sql.push_str(" < ?)");
        self.param(day.saturating_mul(DAY));
        self.param(day.saturating_add(1).saturating_mul(DAY));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_user_text_in_the_sql() {
        let key = SearchKey::And(vec![
            SearchKey::Subject("'; DROP TABLE messages; --".into()),
            SearchKey::Header("X-Evil'".into(), "?".into()),
            SearchKey::Text("robert'); --".into()),
            SearchKey::Keyword("$Evil".into()),
        ]);
        let mut texts = TextMatches::default();
        texts.insert(
            false,
            "robert'); --",
            Found::Uids(Rc::new(vec![Value::Integer(1)])),
        );
        let q = compile(1, &key, &texts).unwrap();
        assert!(!q.sql.contains("DROP"));
        assert!(!q.sql.contains("Evil"));
        assert!(!q.sql.contains("robert"));
        assert_eq!(q.params.len(), 1 + 1 + 2 + 1 + 1);
    }

    #[test]
    fn many_uid_ranges_travel_packed_and_match_as_few_do() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        rusqlite::vtab::array::load_module(&c).unwrap();
        c.execute_batch(
            "CREATE TABLE messages (mailbox_id INTEGER, uid INTEGER, blob_id INTEGER,
                 flags INTEGER, size INTEGER, keywords TEXT, internal_date INTEGER, modseq INTEGER);",
        )
        .unwrap();
        let uids: [u32; 6] = [1, 5, 40, 2_147_483_647, 2_147_483_648, u32::MAX];
        for uid in uids {
            c.execute(
                "INSERT INTO messages (mailbox_id, uid) VALUES (1, ?1)",
                [uid],
            )
            .unwrap();
        }
        let run = |ranges: Vec<(Uid, Uid)>| -> Vec<Uid> {
            let q = compile(1, &SearchKey::Uids(ranges), &TextMatches::default()).unwrap();
            c.prepare(&q.sql)
                .unwrap()
                .query_map(rusqlite::params_from_iter(q.params.iter()), |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        // Twenty single UIDs apart from each other (packed), and the same
        // wanted set as three ranges (inline).
        let mut many: Vec<(Uid, Uid)> = (0..18).map(|i| (100 + 2 * i, 100 + 2 * i)).collect();
        many.push((5, 5));
        many.push((u32::MAX, 2_147_483_648));
        assert!(
            compile(1, &SearchKey::Uids(many.clone()), &TextMatches::default())
                .unwrap()
                .sql
                .contains("rarray")
        );
        let expected = vec![5, 2_147_483_648, u32::MAX];
        assert_eq!(run(many), expected);
        assert_eq!(run(vec![(5, 5), (2_147_483_648, u32::MAX)]), expected);
        assert_eq!(run(vec![(2_147_483_647, 1)]).len(), 4);
        assert_eq!(run(vec![]), Vec::<Uid>::new());
    }

    #[test]
    fn thousands_of_flat_keys_stay_within_sqlites_depth_limit() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE messages (mailbox_id INTEGER, uid INTEGER, blob_id INTEGER,
                 flags INTEGER, size INTEGER, keywords TEXT, internal_date INTEGER, modseq INTEGER);
             INSERT INTO messages VALUES (1, 7, 1, 0, 100, '', 0, 1);
             INSERT INTO messages VALUES (1, 8, 2, 1, 100, '', 0, 1);",
        )
        .unwrap();
        for n in [1, 2, 3, 999, 1000, 5000] {
            let keys: Vec<SearchKey> = (0..n)
                .map(|i| {
                    if i % 2 == 0 {
                        SearchKey::FlagsUnset(1)
                    } else {
                        SearchKey::Smaller(1000 + i as u64)
                    }
                })
                .collect();
            let q = compile(1, &SearchKey::And(keys), &TextMatches::default()).unwrap();
            let found: Vec<Uid> = c
                .prepare(&q.sql)
                .unwrap()
                .query_map(rusqlite::params_from_iter(q.params.iter()), |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert_eq!(found, [7], "{n} keys");
        }
    }

    #[test]
    fn the_sent_day_is_the_date_fields_or_else_the_internal_dates() {
        let c = rusqlite::Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE messages (mailbox_id INTEGER, uid INTEGER, blob_id INTEGER,
                 flags INTEGER, size INTEGER, keywords TEXT, internal_date INTEGER, modseq INTEGER);
             CREATE TABLE blobs (id INTEGER PRIMARY KEY, hdr_day INTEGER);
             -- Sent on day 10 (its Date: field), received on day 12.
             INSERT INTO blobs VALUES (1, 10);
             INSERT INTO messages VALUES (1, 1, 1, 0, 100, '', 12 * 86400 + 5, 1);
             -- No Date: field that parses: its internal date's day, 11.
             INSERT INTO blobs VALUES (2, NULL);
             INSERT INTO messages VALUES (1, 2, 2, 0, 100, '', 11 * 86400 + 7, 1);
             -- Sent on day 11, in another mailbox.
             INSERT INTO blobs VALUES (3, 11);
             INSERT INTO messages VALUES (2, 3, 3, 0, 100, '', 11 * 86400, 1);",
        )
        .unwrap();
        let run = |key: SearchKey| -> Vec<Uid> {
            let q = compile(1, &key, &TextMatches::default()).unwrap();
            c.prepare(&q.sql)
                .unwrap()
                .query_map(rusqlite::params_from_iter(q.params.iter()), |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        assert_eq!(run(SearchKey::SentOn(10)), [1]);
        assert_eq!(run(SearchKey::SentOn(11)), [2]);
        assert_eq!(run(SearchKey::SentOn(12)), Vec::<Uid>::new());
        assert_eq!(run(SearchKey::SentBefore(11)), [1]);
        assert_eq!(run(SearchKey::SentSince(11)), [2]);
        assert_eq!(run(SearchKey::SentSince(10)), [1, 2]);
        assert_eq!(run(SearchKey::Not(Box::new(SearchKey::SentOn(10)))), [2]);
        assert_eq!(
            run(SearchKey::Or(
                Box::new(SearchKey::SentOn(11)),
                Box::new(SearchKey::SentOn(10))
            )),
            [1, 2]
        );
    }

    #[test]
    fn deep_trees_are_refused_not_crashed() {
        let mut key = SearchKey::All;
        for _ in 0..200 {
            key = SearchKey::Not(Box::new(key));
        }
        assert!(matches!(
            compile(1, &key, &TextMatches::default()),
            Err(StoreError::Invalid(_))
        ));
    }
}
