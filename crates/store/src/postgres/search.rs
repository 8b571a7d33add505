//! SEARCH on PostgreSQL: a [`SearchKey`] tree compiled into one query over
//! the mailbox's messages, joined with their blobs for the indexed header
//! columns. User text only ever travels as bound parameters; the SQL text
//! is built from fixed pieces. The matching rules are documented on
//! [`crate::Store::search`]; this module gives the SQLite back end's
//! answers (sqlite/search.rs), with these means:
//!
//! - TEXT and BODY are `LIKE` substring tests on `blob_text`, whose columns
//!   hold the text folded as the SQLite back end's check folds it
//!   (`match_fold`), against the needle folded the same way
//!   ([`Matcher`]). A needle of three characters or more is answered
//!   once per search, through the `pg_trgm` indexes or through the
//!   mailbox's messages, whichever the planner finds cheaper; a shorter
//!   one holds no trigram and is tested on the mailbox's own messages.
//! - HEADER and BCC read the raw header block, which is stored packed
//!   (`blob_parsed.header_codec`): the mailbox's blocks are unpacked and
//!   matched here, in the same snapshot as the query, by the SQLite back
//!   end's own matcher, and the query gets the blobs that matched.
//!
//! Where the answers can differ from SQLite's:
//! - FROM, TO, CC and SUBJECT fold case with PostgreSQL's `lower()`, under
//!   the database's collation, where SQLite calls Rust's per-character
//!   lowercasing. The two agree on ASCII always, and on other text under
//!   a UTF-8 libc collation (`C.UTF-8`, `en_US.UTF-8`) but for the one
//!   letter whose lowercase is two characters (U+0130 `İ`); a database
//!   created with the `C` collation folds ASCII only.
//! - A FROM, TO, CC, SUBJECT, TEXT or BODY needle holding NUL matches
//!   nothing: PostgreSQL text cannot hold NUL, so no stored text has it.
//! - A search needing more than 65,535 parameters is refused (`Invalid`),
//!   the protocol's limit; no IMAP command line comes near it.

use tokio_postgres::types::ToSql;
use tokio_postgres::{IsolationLevel, Transaction};

use super::PgStore;
use crate::chunk_codec::unpack_header;
use crate::error::{Result, StoreError};
use crate::keyword;
use crate::model::{MailboxId, SearchKey, Uid};
use crate::sqlite::functions::{fold, header_contains};
use crate::sqlite::text_match::Matcher;

/// Deepest key tree accepted, as in the SQLite back end.
const MAX_DEPTH: usize = 64;

/// Up to this many UID ranges are written inline as `BETWEEN`s; more go
/// as two array parameters.
const INLINE_RANGES: usize = 16;

/// Most parameters one statement may bind (the protocol counts them in 16
/// bits).
const MAX_PARAMS: usize = u16::MAX as usize;

/// Needles at least this long (in characters) hold a trigram the
/// `pg_trgm` indexes answer.
const TRIGRAM: usize = 3;

/// Header blocks read from the database at a time.
const HEADER_BATCH: i32 = 1024;

const DAY: i64 = 86_400;

/// ASCII letters, for folding keywords with `translate()`.
const ASCII_UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const ASCII_LOWER: &str = "abcdefghijklmnopqrstuvwxyz";

type Param = Box<dyn ToSql + Sync + Send>;

impl PgStore {
    pub(super) async fn search(&self, mailbox: MailboxId, key: &SearchKey) -> Result<Vec<Uid>> {
        let mut query = compile(mailbox, key)?;
        if super::sections::has_text_key(key) {
            self.write_pending_sections(Some(mailbox)).await?;
        }
        let mut conn = self.conn().await?;
        // One snapshot for the header blocks read and the query itself.
        let tx = conn
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        resolve_headers(&tx, mailbox, &mut query).await?;
        let params: Vec<&(dyn ToSql + Sync)> = query
            .params
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect();
        let rows = tx.query(query.sql.as_str(), &params).await?;
        tx.commit().await?;
        rows.iter()
            .map(|r| {
                let uid: i64 = r.try_get(0)?;
                Uid::try_from(uid).map_err(|_| StoreError::Corrupt(format!("UID {uid}")))
            })
            .collect()
    }
}

/// A HEADER (or BCC) key whose matching blobs the query takes as the
/// array parameter at `param`.
struct HeaderKey {
    param: usize,
    name: String,
    folded_value: String,
}

/// A compiled search: SQL text, its parameters in order, and the header
/// keys whose parameters are still to be filled in.
struct Query {
    sql: String,
    params: Vec<Param>,
    headers: Vec<HeaderKey>,
}

/// Compiles a search of `mailbox`.
fn compile(mailbox: MailboxId, key: &SearchKey) -> Result<Query> {
    let mut c = Compiler {
        sql: String::new(),
        params: vec![Box::new(mailbox)],
        headers: Vec::new(),
        uses_blob: false,
    };
    c.key(key, 0)?;
    if c.params.len() > MAX_PARAMS {
        return Err(StoreError::Invalid("search too long".into()));
    }
    let join = if c.uses_blob {
        " JOIN blobs b ON b.id = m.blob_id"
    } else {
        ""
    };
    Ok(Query {
        sql: format!(
            "SELECT m.uid FROM messages m{join} WHERE m.mailbox_id = $1 AND ({}) ORDER BY m.uid",
            c.sql
        ),
        params: c.params,
        headers: c.headers,
    })
}

/// Fills in the blobs each HEADER key of `query` matches among the
/// mailbox's messages. Blobs stored before header blocks were kept have
/// no `blob_parsed` row and match no HEADER key, as in SQLite.
async fn resolve_headers(
    tx: &Transaction<'_>,
    mailbox: MailboxId,
    query: &mut Query,
) -> Result<()> {
    if query.headers.is_empty() {
        return Ok(());
    }
    let mut found: Vec<Vec<i64>> = vec![Vec::new(); query.headers.len()];
    let statement = tx
        .prepare(
            "SELECT m.blob_id, p.header_codec, p.header
             FROM messages m JOIN blob_parsed p ON p.blob_id = m.blob_id
             WHERE m.mailbox_id = $1",
        )
        .await?;
    // Read a batch at a time: a large mailbox's blocks need not all be
    // in memory at once.
    let portal = tx.bind(&statement, &[&mailbox]).await?;
    loop {
        let rows = tx.query_portal(&portal, HEADER_BATCH).await?;
        for row in &rows {
            let blob: i64 = row.try_get(0)?;
            let codec: i32 = row.try_get(1)?;
            let packed: &[u8] = row.try_get(2)?;
            let block = unpack_header(i64::from(codec), packed, blob)?;
            for (key, blobs) in query.headers.iter().zip(found.iter_mut()) {
                if header_contains(&block, &key.name, &key.folded_value) {
                    blobs.push(blob);
                }
            }
        }
        if rows.len() < HEADER_BATCH as usize {
            break;
        }
    }
    for (key, blobs) in query.headers.iter().zip(found) {
        query.params[key.param] = Box::new(blobs);
    }
    Ok(())
}

struct Compiler {
    sql: String,
    params: Vec<Param>,
    headers: Vec<HeaderKey>,
    /// The expression reads a `blobs` column, so the query needs the join.
    uses_blob: bool,
}

impl Compiler {
    /// Adds a parameter and returns its placeholder, cast to `ty` so that
    /// its type never depends on what PostgreSQL infers.
    fn param(&mut self, value: impl ToSql + Sync + Send + 'static, ty: &str) -> String {
        self.params.push(Box::new(value));
        format!("${}::{ty}", self.params.len())
    }

    fn push(&mut self, sql: &str) {
        self.sql.push_str(sql);
    }

    fn key(&mut self, key: &SearchKey, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(StoreError::Invalid("search nested too deeply".into()));
        }
        match key {
            SearchKey::All => self.push("TRUE"),
            SearchKey::And(keys) if keys.is_empty() => self.push("TRUE"),
            SearchKey::And(keys) => self.and(keys, depth + 1)?,
            SearchKey::Or(a, b) => {
                self.push("(");
                self.key(a, depth + 1)?;
                self.push(" OR ");
                self.key(b, depth + 1)?;
                self.push(")");
            }
            SearchKey::Not(k) => {
                // Every leaf is true or false, never NULL, so NOT is exact.
                self.push("NOT (");
                self.key(k, depth + 1)?;
                self.push(")");
            }
            SearchKey::Uids(ranges) => self.uids(ranges),
            SearchKey::FlagsSet(bits) => {
                let p = self.param(flag_bits(*bits), "integer");
                self.push(&format!("(m.flags & {p}) = {p}"));
            }
            SearchKey::FlagsUnset(bits) => {
                let p = self.param(flag_bits(*bits), "integer");
                self.push(&format!("(m.flags & {p}) = 0"));
            }
            SearchKey::Keyword(k) => self.keyword(k, true),
            SearchKey::Unkeyword(k) => self.keyword(k, false),
            SearchKey::From(s) => self.column("b.hdr_from", s),
            SearchKey::To(s) => self.column("b.hdr_to", s),
            SearchKey::Cc(s) => self.column("b.hdr_cc", s),
            SearchKey::Subject(s) => self.column("b.hdr_subject", s),
            // An empty string is in every message, as for FROM and the rest.
            SearchKey::Bcc(s) if s.is_empty() => self.push("TRUE"),
            SearchKey::Bcc(s) => self.header("Bcc", s),
            SearchKey::Header(name, value) => self.header(name, value),
            SearchKey::Body(s) => self.text(true, s),
            SearchKey::Text(s) => self.text(false, s),
            SearchKey::SentBefore(d) => self.sent(None, Some(*d)),
            SearchKey::SentOn(d) => self.sent(Some(*d), Some(d.saturating_add(1))),
            SearchKey::SentSince(d) => self.sent(Some(*d), None),
            SearchKey::Before(d) => self.compare("m.internal_date", "<", day_start(*d)),
            SearchKey::On(d) => {
                self.push("(");
                self.compare("m.internal_date", ">=", day_start(*d));
                self.push(" AND ");
                self.compare("m.internal_date", "<", day_start(d.saturating_add(1)));
                self.push(")");
            }
            SearchKey::Since(d) => self.compare("m.internal_date", ">=", day_start(*d)),
            SearchKey::Larger(n) => match i64::try_from(*n) {
                Ok(n) => self.compare("m.size", ">", n),
                Err(_) => self.push("FALSE"),
            },
            SearchKey::Smaller(n) => match i64::try_from(*n) {
                Ok(n) => self.compare("m.size", "<", n),
                Err(_) => self.push("TRUE"),
            },
            SearchKey::ModSeqAtLeast(n) => match i64::try_from(*n) {
                Ok(n) => self.compare("m.modseq", ">=", n),
                Err(_) => self.push("FALSE"),
            },
        }
        Ok(())
    }

    /// A conjunction, written as a balanced tree of parenthesised halves,
    /// so a search of thousands of flat keys nests only as deep as the
    /// logarithm of their number in the parser.
    fn and(&mut self, keys: &[SearchKey], depth: usize) -> Result<()> {
        if let [only] = keys {
            return self.key(only, depth);
        }
        let (left, right) = keys.split_at(keys.len() / 2);
        self.push("(");
        self.and(left, depth)?;
        self.push(" AND ");
        self.and(right, depth)?;
        self.push(")");
        Ok(())
    }

    /// `column op value` on a `bigint` column.
    fn compare(&mut self, column: &str, op: &str, value: i64) {
        let p = self.param(value, "bigint");
        self.push(&format!("{column} {op} {p}"));
    }

    fn uids(&mut self, ranges: &[(Uid, Uid)]) {
        let merged = merged_ranges(ranges);
        if merged.is_empty() {
            self.push("FALSE");
        } else if merged.len() <= INLINE_RANGES {
            self.push("(");
            for (i, (lo, hi)) in merged.into_iter().enumerate() {
                if i > 0 {
                    self.push(" OR ");
                }
                let lo = self.param(lo, "bigint");
                let hi = self.param(hi, "bigint");
                self.push(&format!("m.uid BETWEEN {lo} AND {hi}"));
            }
            self.push(")");
        } else {
            // Two parameters whatever the number of ranges.
            let (los, his): (Vec<i64>, Vec<i64>) = merged.into_iter().unzip();
            let lo = self.param(los, "bigint[]");
            let hi = self.param(his, "bigint[]");
            self.push(&format!(
                "EXISTS (SELECT 1 FROM unnest({lo}, {hi}) AS r(lo, hi) \
                 WHERE m.uid BETWEEN r.lo AND r.hi)"
            ));
        }
    }

    fn keyword(&mut self, k: &str, set: bool) {
        if !keyword::is_keyword(k) {
            // Not a keyword any message can have.
            self.push(if set { "FALSE" } else { "TRUE" });
            return;
        }
        // Keywords are ASCII atoms, folded as SQLite's lower() folds them:
        // ASCII letters only, whatever the database's collation (lower()
        // under a Turkish one would make `I` a dotless `ı`).
        let p = self.param(format!(" {} ", k.to_ascii_lowercase()), "text");
        let op = if set { ">" } else { "=" };
        self.push(&format!(
            "strpos(' ' || translate(m.keywords, '{ASCII_UPPER}', '{ASCII_LOWER}') || ' ', {p}) \
             {op} 0"
        ));
    }

    /// An indexed header column (`blobs.hdr_*`) contains the needle,
    /// ignoring case.
    fn column(&mut self, column: &str, needle: &str) {
        if needle.is_empty() {
            // The empty string is in every column.
            self.push("TRUE");
            return;
        }
        if needle.contains('\0') {
            // PostgreSQL text never holds NUL, so no column contains it.
            self.push("FALSE");
            return;
        }
        self.uses_blob = true;
        let p = self.param(fold(needle), "text");
        self.push(&format!("strpos(lower({column}), {p}) > 0"));
    }

    /// A header field `name` contains `value`: the blobs that match are
    /// found by [`resolve_headers`] and bound in this parameter.
    fn header(&mut self, name: &str, value: &str) {
        let p = self.param(Vec::<i64>::new(), "bigint[]");
        self.headers.push(HeaderKey {
            param: self.params.len() - 1,
            name: name.to_string(),
            folded_value: fold(value),
        });
        self.push(&format!("m.blob_id = ANY({p})"));
    }

    /// BODY (`body_only`) or TEXT: the folded needle is a substring of the
    /// folded text (its body, or also its subject and header text).
    fn text(&mut self, body_only: bool, needle: &str) {
        let folded = Matcher::new(needle, body_only).folded;
        if folded.is_empty() {
            // The empty string is in every message.
            self.push("TRUE");
            return;
        }
        if folded.contains('\0') {
            // PostgreSQL text never holds NUL, so no text contains it.
            self.push("FALSE");
            return;
        }
        let long = folded.chars().count() >= TRIGRAM;
        let p = self.param(format!("%{}%", like_escaped(&folded)), "text");
        let like = |column: &str| format!("t.{column} LIKE {p} ESCAPE '\\'");
        let test = if body_only {
            like("body")
        } else {
            format!(
                "({} OR {} OR {})",
                like("body"),
                like("subject"),
                like("addresses")
            )
        };
        if long {
            // Uncorrelated, so answered once wherever the key sits in the
            // tree: through the trigram indexes, or through the mailbox
            // when the needle is in too many texts, as the planner finds
            // cheaper; never more rows than the mailbox has.
            self.push(&format!(
                "m.blob_id IN (SELECT t.blob_id FROM messages x \
                 JOIN blob_text t ON t.blob_id = x.blob_id \
                 WHERE x.mailbox_id = $1 AND {test})"
            ));
        } else {
            // No trigram to look up: the mailbox's own texts are read.
            self.push(&format!(
                "EXISTS (SELECT 1 FROM blob_text t WHERE t.blob_id = m.blob_id AND {test})"
            ));
        }
    }

    /// A message's sent day is the day its `Date:` field names, as
    /// written (RFC 3501 §6.4.4 disregards time and zone), or its internal
    /// date's day when it has no Date that parses; it lies in
    /// `[since, before)` (days).
    fn sent(&mut self, since: Option<i64>, before: Option<i64>) {
        self.uses_blob = true;
        let range = |c: &mut Self, column: &str, unit: i64| {
            let mut parts = Vec::new();
            if let Some(d) = since {
                parts.push(format!(
                    "{column} >= {}",
                    c.param(d.saturating_mul(unit), "bigint")
                ));
            }
            if let Some(d) = before {
                parts.push(format!(
                    "{column} < {}",
                    c.param(d.saturating_mul(unit), "bigint")
                ));
            }
            parts.join(" AND ")
        };
        // Both branches compare non-NULL values: never NULL.
        let internal = range(self, "m.internal_date", DAY);
        let dated = range(self, "b.hdr_day", 1);
        self.push(&format!(
            "(CASE WHEN b.hdr_day IS NULL THEN ({internal}) ELSE ({dated}) END)"
        ));
    }
}

/// The first second of `day` (days since 1970-01-01).
fn day_start(day: i64) -> i64 {
    day.saturating_mul(DAY)
}

/// Flag bits as the `integer` column holds them: the same 32 bits.
fn flag_bits(bits: u32) -> i32 {
    i32::from_ne_bytes(bits.to_ne_bytes())
}

/// UID ranges put in order (either end first) and merged where they touch
/// or overlap: IMAP sets like 1,2,3,5:7 become few ranges.
fn merged_ranges(ranges: &[(Uid, Uid)]) -> Vec<(i64, i64)> {
    let mut sorted: Vec<(i64, i64)> = ranges
        .iter()
        .map(|&(a, b)| (i64::from(a.min(b)), i64::from(a.max(b))))
        .collect();
    sorted.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(sorted.len());
    for (lo, hi) in sorted {
        match out.last_mut() {
            Some(last) if lo <= last.1 + 1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// `s` with `LIKE`'s wildcards and its escape character escaped by `\`.
fn like_escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_user_text_in_the_sql() {
        let key = SearchKey::And(vec![
            SearchKey::Subject("'; DROP TABLE messages; --".into()),
            SearchKey::Header("X-Evil'".into(), "$1".into()),
            SearchKey::Text("robert'); --".into()),
            SearchKey::Keyword("$Evil".into()),
        ]);
        let q = compile(1, &key).unwrap();
        assert!(!q.sql.contains("DROP"));
        assert!(!q.sql.contains("Evil"));
        assert!(!q.sql.contains("robert"));
        assert_eq!(q.params.len(), 1 + 1 + 1 + 1 + 1);
        assert_eq!(q.headers.len(), 1);
        assert_eq!(q.headers[0].param, 2);
        assert_eq!(q.headers[0].folded_value, "$1");
    }

    #[test]
    fn like_wildcards_in_a_needle_are_literal() {
        assert_eq!(like_escaped(r"50% off_now \o/"), r"50\% off\_now \\o/");
        assert_eq!(like_escaped("plain"), "plain");
    }

    #[test]
    fn uid_ranges_are_ordered_and_merged() {
        assert_eq!(
            merged_ranges(&[(7, 5), (1, 1), (2, 3), (9, 9), (4, 4), (u32::MAX, 10)]),
            [(1, 7), (9, i64::from(u32::MAX))]
        );
        assert_eq!(merged_ranges(&[(1, 2), (4, 5)]), [(1, 2), (4, 5)]);
        assert_eq!(merged_ranges(&[(3, 4), (1, 2)]), [(1, 4)]);
        assert!(merged_ranges(&[]).is_empty());
    }

    #[test]
    fn many_flat_keys_nest_shallowly() {
        let keys: Vec<SearchKey> = (0..4096).map(|_| SearchKey::FlagsUnset(1)).collect();
        let q = compile(1, &SearchKey::And(keys)).unwrap();
        let mut depth = 0usize;
        let mut deepest = 0usize;
        for c in q.sql.chars() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            deepest = deepest.max(depth);
        }
        // log2(4096) levels of halves, each leaf's own parentheses, and the
        // WHERE clause's.
        assert!(deepest <= 12 + 3, "{deepest}");
    }

    #[test]
    fn deep_trees_are_refused_not_crashed() {
        let mut key = SearchKey::All;
        for _ in 0..200 {
            key = SearchKey::Not(Box::new(key));
        }
        assert!(matches!(compile(1, &key), Err(StoreError::Invalid(_))));
    }
}
