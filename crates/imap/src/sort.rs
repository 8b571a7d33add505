//! SORT and UID SORT (RFC 5256 §3), with SORT=DISPLAY (RFC 5957) and
//! ESORT (RFC 5267 §3: `SORT RETURN (...)` answered with ESEARCH).
//!
//! The keys come from what the store computed at delivery: the entry
//! (arrival, size, mod-sequence), the indexed header columns (decoded
//! subject, sent date) and the kept top-level header block, parsed here
//! for the address fields and message ids. No message text is read.

use std::cmp::Ordering;
use std::collections::HashSet;

use imap_codec::imap_types::core::{Charset, Tag};
use imap_codec::imap_types::extensions::sort::{SortCriterion, SortKey};
use imap_codec::imap_types::response::Code;
use imap_codec::imap_types::search::SearchKey as Key;
use mail_parser::{Address, HeaderValue, MessageParser};
use store::{SearchKey, Uid};

use crate::base_subject::{base_subject, collation_key};
use crate::reply::Reply;
use crate::search::{self, ReturnOptions};
use crate::session::Session;

/// What SORT and THREAD know of one message of the view.
#[derive(Debug, Clone, Default)]
pub(crate) struct Row {
    pub(crate) uid: Uid,
    pub(crate) seq: u32,
    /// Internal date (ARRIVAL).
    pub(crate) arrival: i64,
    pub(crate) size: u64,
    pub(crate) modseq: u64,
    /// Sent date in UTC seconds, the internal date when `Date:` is
    /// missing or does not parse (RFC 5256 §2.2).
    pub(crate) date: i64,
    /// Base subject, i;ascii-casemap form (RFC 5256 §2.1).
    pub(crate) base: String,
    /// The subject was a reply or forward (RFC 5256 §2.1).
    pub(crate) reply: bool,
    /// Local part of the first address of From, To, Cc (RFC 5256 §3).
    pub(crate) from: String,
    pub(crate) to: String,
    pub(crate) cc: String,
    /// Display name (else the address) of the first From and To address
    /// (RFC 5957 §3).
    pub(crate) display_from: String,
    pub(crate) display_to: String,
    /// `Message-ID:`, without angle brackets.
    pub(crate) message_id: Option<String>,
    /// The ids of `References:`, else the first of `In-Reply-To:`
    /// (RFC 5256 §4, REFERENCES step 1).
    pub(crate) references: Vec<String>,
}

/// The first address of a field: its local part and its display form.
fn first_address(addr: Option<&Address<'_>>) -> (String, String) {
    let Some(a) = addr.and_then(Address::first) else {
        return (String::new(), String::new());
    };
    let spec = a.address().unwrap_or_default();
    let local = spec.rsplit_once('@').map_or(spec, |(l, _)| l);
    let display = match a.name() {
        Some(n) if !n.trim().is_empty() => n.trim(),
        _ => spec,
    };
    (collation_key(local), collation_key(display))
}

/// The message ids of a field as mail-parser read it.
fn ids(value: &HeaderValue<'_>) -> Vec<String> {
    value
        .as_text_list()
        .map(|l| {
            l.iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// A row from a message's stored data.
pub(crate) fn row(seq: u32, data: &store::MessageData) -> Row {
    let e = &data.entry;
    let (base, reply) = base_subject(&data.headers.subject);
    let mut row = Row {
        uid: e.uid,
        seq,
        arrival: e.internal_date,
        size: e.size,
        modseq: e.modseq,
        date: data.headers.date.unwrap_or(e.internal_date),
        base: collation_key(&base),
        reply,
        ..Row::default()
    };
    if let Some(msg) = MessageParser::default().parse_headers(&data.header[..]) {
        (row.from, row.display_from) = first_address(msg.from());
        (row.to, row.display_to) = first_address(msg.to());
        row.cc = first_address(msg.cc()).0;
        row.message_id = msg.message_id().map(str::to_string);
        row.references = ids(msg.references());
        if row.references.is_empty() {
            row.references = ids(msg.in_reply_to()).into_iter().take(1).collect();
        }
    }
    row
}

/// Orders two rows by the criteria, then by sequence number (RFC 5256
/// §3: exact matches keep message order).
fn compare(criteria: &[SortCriterion], a: &Row, b: &Row) -> Ordering {
    for c in criteria {
        let o = match c.key {
            SortKey::Arrival => a.arrival.cmp(&b.arrival),
            SortKey::Cc => a.cc.cmp(&b.cc),
            SortKey::Date => a.date.cmp(&b.date),
            SortKey::From => a.from.cmp(&b.from),
            SortKey::Size => a.size.cmp(&b.size),
            SortKey::Subject => a.base.cmp(&b.base),
            SortKey::To => a.to.cmp(&b.to),
            SortKey::DisplayFrom => a.display_from.cmp(&b.display_from),
            SortKey::DisplayTo => a.display_to.cmp(&b.display_to),
        };
        let o = if c.reverse { o.reverse() } else { o };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.seq.cmp(&b.seq)
}

/// Sorts rows by the criteria (RFC 5256 §3).
pub(crate) fn sort_rows(rows: &mut [Row], criteria: &[SortCriterion]) {
    rows.sort_by(|a, b| compare(criteria, a, b));
}

/// Whether a search key uses MODSEQ (RFC 7162 §3.1.5).
pub(crate) fn uses_modseq(key: &Key<'_>) -> bool {
    match key {
        Key::ModSequence { .. } => true,
        Key::Not(k) => uses_modseq(k),
        Key::Or(a, b) => uses_modseq(a) || uses_modseq(b),
        Key::And(keys) => keys.as_ref().iter().any(uses_modseq),
        _ => false,
    }
}

impl Session<'_> {
    /// The messages of the view matching the search criteria, as rows in
    /// sequence order; or the reply refusing the charset or a set.
    pub(crate) async fn matching_rows(
        &mut self,
        charset: &Charset<'_>,
        criteria: &[Key<'_>],
    ) -> store::Result<Result<Vec<Row>, Reply>> {
        let c = charset.as_ref().to_ascii_uppercase();
        if c != "US-ASCII" && c != "UTF-8" {
            return Ok(Err(Reply::no("Unsupported charset").code(
                Code::BadCharset {
                    allowed: ["US-ASCII", "UTF-8"]
                        .into_iter()
                        .filter_map(|c| Charset::try_from(c).ok())
                        .collect(),
                },
            )));
        }
        if criteria.iter().any(uses_modseq) {
            self.enable_condstore();
        }
        let sel = self.selected.as_ref().expect("selected state");
        let keys: Result<Vec<SearchKey>, _> =
            criteria.iter().map(|k| search::convert(k, sel)).collect();
        let Ok(keys) = keys else {
            return Ok(Err(
                Reply::bad("Invalid message sequence number").no_expunge()
            ));
        };
        let key = if keys.len() == 1 {
            keys.into_iter().next().expect("one key")
        } else {
            SearchKey::And(keys)
        };
        let store = self.ctx.store.as_ref();
        // Only what this session's view has.
        let found: Vec<Uid> = store
            .search(sel.info.id, &key)
            .await?
            .into_iter()
            .filter(|u| sel.seq_of(*u).is_some())
            .collect();
        let data = store.message_data(sel.info.id, &found).await?;
        Ok(Ok(data
            .iter()
            .filter_map(|d| sel.seq_of(d.entry.uid).map(|seq| row(seq, d)))
            .collect()))
    }

    /// SORT and UID SORT (RFC 5256 §3), with RETURN (RFC 5267 §3).
    pub(crate) async fn sort(
        &mut self,
        tag: &Tag<'static>,
        criteria: &[SortCriterion],
        charset: &Charset<'_>,
        search: &[Key<'_>],
        uid: bool,
        returns: Option<ReturnOptions>,
    ) -> store::Result<Reply> {
        if returns.as_ref().is_some_and(|o| o.save) {
            return Ok(Reply::bad("SAVE is not supported with SORT"));
        }
        let mut rows = match self.matching_rows(charset, search).await? {
            Ok(rows) => rows,
            Err(reply) => return Ok(reply),
        };
        sort_rows(&mut rows, criteria);
        let numbers: Vec<u32> = rows
            .iter()
            .map(|r| if uid { r.uid } else { r.seq })
            .collect();
        let modseq_wanted = self.condstore && search.iter().any(uses_modseq);
        match returns {
            Some(opts) => {
                // RFC 7162 §3.1.5 with RFC 4731 §3.2: the highest
                // mod-sequence of the messages returned.
                let modseq = modseq_wanted.then(|| {
                    let shown: HashSet<usize> =
                        if (opts.min || opts.max) && !(opts.all || opts.count) {
                            let mut s = HashSet::new();
                            if opts.min {
                                s.insert(0);
                            }
                            if opts.max && !rows.is_empty() {
                                s.insert(rows.len() - 1);
                            }
                            s
                        } else {
                            (0..rows.len()).collect()
                        };
                    rows.iter()
                        .enumerate()
                        .filter(|(i, _)| shown.contains(i))
                        .map(|(_, r)| r.modseq)
                        .max()
                        .unwrap_or(0)
                });
                self.out
                    .raw(&search::esearch(tag.inner(), uid, &opts, &numbers, modseq));
            }
            None => {
                let mut line = String::from("* SORT");
                for n in &numbers {
                    line.push_str(&format!(" {n}"));
                }
                if let (true, Some(m)) = (modseq_wanted, rows.iter().map(|r| r.modseq).max()) {
                    line.push_str(&format!(" (MODSEQ {m})"));
                }
                line.push_str("\r\n");
                self.out.raw(line.as_bytes());
            }
        }
        let reply = Reply::ok(if uid {
            "UID SORT completed"
        } else {
            "SORT completed"
        });
        Ok(if uid { reply } else { reply.no_expunge() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crit(key: SortKey, reverse: bool) -> SortCriterion {
        SortCriterion { reverse, key }
    }

    fn data(uid: Uid, header: &str, subject: &str, date: Option<i64>) -> store::MessageData {
        store::MessageData {
            entry: store::MessageEntry {
                uid,
                blob: uid as i64,
                size: 100 - uid as u64,
                flags: 0,
                internal_date: 1000 + uid as i64,
                modseq: uid as u64,
                keywords: Vec::new(),
            },
            headers: store::IndexedHeaders {
                subject: subject.into(),
                date,
                ..store::IndexedHeaders::default()
            },
            structure: Default::default(),
            header: header.as_bytes().to_vec(),
        }
    }

    #[test]
    fn rows_from_stored_data() {
        let r = row(
            3,
            &data(
                7,
                "From: \"Doe, Jane\" <jane.doe@example.org>, b@x\r\nTo: team: zed@example.org;\r\nCc: <cc@x>\r\nMessage-ID: <m3@x>\r\nReferences: <m1@x>\r\n <m2@x>\r\nIn-Reply-To: <m2@x>\r\n\r\n",
                "Re: [list] Hello",
                None,
            ),
        );
        assert_eq!((r.uid, r.seq, r.date), (7, 3, 1007));
        assert_eq!(r.from, "JANE.DOE");
        assert_eq!(r.display_from, "DOE, JANE");
        assert_eq!(r.to, "ZED");
        assert_eq!(r.display_to, "ZED@EXAMPLE.ORG");
        assert_eq!(r.cc, "CC");
        assert_eq!((r.base.as_str(), r.reply), ("HELLO", true));
        assert_eq!(r.message_id.as_deref(), Some("m3@x"));
        assert_eq!(r.references, vec!["m1@x".to_string(), "m2@x".to_string()]);
        let r = row(1, &data(1, "In-Reply-To: <p@x> <q@x>\r\n\r\n", "", Some(5)));
        assert_eq!(r.references, vec!["p@x".to_string()]);
        assert_eq!((r.from.as_str(), r.date), ("", 5));
    }

    #[test]
    fn criteria_then_sequence() {
        let mut rows: Vec<Row> = [("b", 3), ("a", 2), ("b", 1), ("a", 4)]
            .iter()
            .map(|(f, seq)| Row {
                seq: *seq,
                from: f.to_string(),
                size: u64::from(*seq % 2),
                ..Row::default()
            })
            .collect();
        sort_rows(&mut rows, &[crit(SortKey::From, false)]);
        assert_eq!(rows.iter().map(|r| r.seq).collect::<Vec<_>>(), [2, 4, 1, 3]);
        sort_rows(&mut rows, &[crit(SortKey::From, true)]);
        assert_eq!(rows.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 3, 2, 4]);
        sort_rows(
            &mut rows,
            &[crit(SortKey::Size, true), crit(SortKey::From, false)],
        );
        assert_eq!(rows.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 3, 2, 4]);
    }

    #[test]
    fn sets_in_sort_order() {
        assert_eq!(search::compact_set(&[5, 6, 7, 1, 3, 2]), "5:7,1,3,2");
        assert_eq!(search::compact_set(&[]), "");
        assert_eq!(search::compact_set(&[4]), "4");
        let opts = ReturnOptions {
            min: true,
            max: true,
            all: true,
            count: true,
            save: false,
        };
        assert_eq!(
            String::from_utf8(search::esearch("t", true, &opts, &[9, 2, 3], Some(4))).unwrap(),
            "* ESEARCH (TAG \"t\") UID MIN 9 MAX 3 ALL 9,2:3 COUNT 3 MODSEQ 4\r\n"
        );
    }
}
