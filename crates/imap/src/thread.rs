//! THREAD and UID THREAD (RFC 5256 §4): ORDEREDSUBJECT, REFERENCES, and
//! REFS (draft-ietf-morg-inthread §3: REFERENCES without the gathering by
//! subject, threads ordered by their latest message).
//!
//! Both work on the rows SORT uses ([`crate::sort::Row`]): base subject,
//! sent date and the message ids of the kept header block.

use std::collections::HashMap;

use imap_codec::imap_types::core::Charset;
use imap_codec::imap_types::search::SearchKey as Key;

use crate::reply::Reply;
use crate::session::Session;
use crate::sort::Row;

/// The threading algorithms offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Algorithm {
    OrderedSubject,
    References,
    Refs,
}

impl Algorithm {
    /// The algorithm a THREAD command names, if offered.
    pub(crate) fn named(name: &str) -> Option<Algorithm> {
        match name.to_ascii_uppercase().as_str() {
            "ORDEREDSUBJECT" => Some(Algorithm::OrderedSubject),
            "REFERENCES" => Some(Algorithm::References),
            "REFS" => Some(Algorithm::Refs),
            _ => None,
        }
    }
}

/// One container of the REFERENCES algorithm: a message (index into the
/// rows) or a dummy.
#[derive(Debug, Clone, Default)]
struct Node {
    msg: Option<usize>,
    parent: Option<usize>,
    children: Vec<usize>,
}

/// A thread forest over the rows.
struct Forest<'r> {
    rows: &'r [Row],
    nodes: Vec<Node>,
}

impl Forest<'_> {
    fn add(&mut self, msg: Option<usize>) -> usize {
        self.nodes.push(Node {
            msg,
            ..Node::default()
        });
        self.nodes.len() - 1
    }

    /// Whether `a` is `b` or one of `b`'s ancestors.
    fn is_ancestor(&self, a: usize, b: usize) -> bool {
        let mut at = Some(b);
        while let Some(n) = at {
            if n == a {
                return true;
            }
            at = self.nodes[n].parent;
        }
        false
    }

    fn unlink(&mut self, child: usize) {
        if let Some(p) = self.nodes[child].parent.take() {
            self.nodes[p].children.retain(|&c| c != child);
        }
    }

    fn link(&mut self, parent: usize, child: usize) {
        self.unlink(child);
        self.nodes[child].parent = Some(parent);
        self.nodes[parent].children.push(child);
    }

    /// The row that speaks for a node: its message, or for a dummy its
    /// first child's (RFC 5256 §4 REFERENCES steps 5 and 6).
    fn row_of(&self, n: usize) -> Option<&Row> {
        match self.nodes[n].msg {
            Some(m) => Some(&self.rows[m]),
            None => self.nodes[n].children.first().and_then(|&c| self.row_of(c)),
        }
    }

    /// Sent date, then sequence number, of what speaks for a node.
    fn date_key(&self, n: usize) -> (i64, u32) {
        self.row_of(n).map_or((0, 0), |r| (r.date, r.seq))
    }

    /// The latest sent date in a thread (REFS), then the sequence number
    /// of its latest message.
    fn latest_key(&self, n: usize) -> (i64, u32) {
        let mut best = self.nodes[n]
            .msg
            .map_or((i64::MIN, 0), |m| (self.rows[m].date, self.rows[m].seq));
        for &c in &self.nodes[n].children {
            best = best.max(self.latest_key(c));
        }
        best
    }

    /// Sorts every set of siblings under `n` by sent date, youngest sets
    /// first (RFC 5256 §4 REFERENCES step 7).
    fn sort_below(&mut self, n: usize) {
        let children = self.nodes[n].children.clone();
        for &c in &children {
            self.sort_below(c);
        }
        let mut children = children;
        children.sort_by_key(|&c| self.date_key(c));
        self.nodes[n].children = children;
    }

    /// Prunes dummies from `list` (step 4): one without children goes;
    /// one with children gives them to its parent's level, except at the
    /// root when it has more than one.
    fn prune(&mut self, list: Vec<usize>, root: bool) -> Vec<usize> {
        let mut out = Vec::new();
        for n in list {
            let children = std::mem::take(&mut self.nodes[n].children);
            let children = self.prune(children, false);
            self.nodes[n].children = children.clone();
            if self.nodes[n].msg.is_some() || (root && children.len() > 1) {
                out.push(n);
            } else if !children.is_empty() {
                let parent = self.nodes[n].parent;
                for &c in &children {
                    self.nodes[c].parent = parent;
                }
                self.nodes[n].children.clear();
                out.extend(children);
            }
        }
        out
    }

    /// The thread response of one node (RFC 5256 §5 `thread-list`), its
    /// number first unless it is a dummy; one child goes on in the same
    /// list, several are each a list of their own.
    fn write(&self, n: usize, uid: bool, out: &mut String) {
        let node = &self.nodes[n];
        let mut nested = node.children.len() > 1;
        if let Some(m) = node.msg {
            let r = &self.rows[m];
            out.push_str(&(if uid { r.uid } else { r.seq }).to_string());
        } else {
            nested = true;
        }
        if nested {
            if node.msg.is_some() {
                out.push(' ');
            }
            for &c in &node.children {
                out.push('(');
                self.write(c, uid, out);
                out.push(')');
            }
        } else if let Some(&c) = node.children.first() {
            out.push(' ');
            self.write(c, uid, out);
        }
    }
}

/// ORDEREDSUBJECT (RFC 5256 §4): messages with the same base subject are
/// one thread, the earliest the parent of the others; threads and
/// children by sent date. `rows` in sequence order.
fn ordered_subject(rows: &[Row]) -> (Forest<'_>, Vec<usize>) {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&rows[a], &rows[b]);
        (&a.base, a.date, a.seq).cmp(&(&b.base, b.date, b.seq))
    });
    let mut f = Forest {
        rows,
        nodes: Vec::new(),
    };
    let mut roots: Vec<usize> = Vec::new();
    let mut last: Option<(usize, &str)> = None;
    for m in order {
        let n = f.add(Some(m));
        match last {
            Some((root, base)) if base == rows[m].base => f.link(root, n),
            _ => {
                roots.push(n);
                last = Some((n, &rows[m].base));
            }
        }
    }
    roots.sort_by_key(|&r| f.date_key(r));
    (f, roots)
}

/// REFERENCES (RFC 5256 §4, steps 1 to 7), or REFS without step 6 and
/// with threads ordered by their latest message.
fn references(rows: &[Row], refs: bool) -> (Forest<'_>, Vec<usize>) {
    let mut f = Forest {
        rows,
        nodes: Vec::new(),
    };
    let mut ids: HashMap<&str, usize> = HashMap::new();
    // Step 1.
    for (m, row) in rows.iter().enumerate() {
        // A message without an id, or with one already taken, is unique.
        let own = match row.message_id.as_deref() {
            Some(id) => match ids.get(id) {
                Some(&n) if f.nodes[n].msg.is_none() => {
                    f.nodes[n].msg = Some(m);
                    n
                }
                Some(_) => f.add(Some(m)),
                None => {
                    let n = f.add(Some(m));
                    ids.insert(id, n);
                    n
                }
            },
            None => f.add(Some(m)),
        };
        // 1A: link the references in order, keeping links made before
        // and making no loop.
        let mut prev: Option<usize> = None;
        for r in &row.references {
            let n = match ids.get(r.as_str()) {
                Some(&n) => n,
                None => {
                    let n = f.add(None);
                    ids.insert(r, n);
                    n
                }
            };
            if let Some(p) = prev {
                if f.nodes[n].parent.is_none() && !f.is_ancestor(n, p) {
                    f.link(p, n);
                }
            }
            prev = Some(n);
        }
        // 1B: the last reference is the parent (or none), replacing an
        // older link, unless that makes a loop.
        match prev {
            Some(p) if !f.is_ancestor(own, p) => f.link(p, own),
            Some(_) => {}
            None => f.unlink(own),
        }
    }
    // Steps 2 and 3: the root set.
    let roots: Vec<usize> = (0..f.nodes.len())
        .filter(|&n| f.nodes[n].parent.is_none())
        .collect();
    // Step 4.
    let mut roots = f.prune(roots, true);
    // Step 5: dummies' children, then the root set, by sent date.
    for &r in &roots {
        if f.nodes[r].msg.is_none() {
            let mut c = f.nodes[r].children.clone();
            c.sort_by_key(|&c| f.date_key(c));
            f.nodes[r].children = c;
        }
    }
    roots.sort_by_key(|&r| f.date_key(r));
    if !refs {
        roots = gather_by_subject(&mut f, roots);
    }
    // Step 7.
    for &r in &roots {
        f.sort_below(r);
    }
    if refs {
        roots.sort_by_key(|&r| f.latest_key(r));
    } else {
        roots.sort_by_key(|&r| f.date_key(r));
    }
    (f, roots)
}

/// REFERENCES step 6: threads whose base subjects are equal are merged.
fn gather_by_subject(f: &mut Forest<'_>, roots: Vec<usize>) -> Vec<usize> {
    let subject = |f: &Forest<'_>, n: usize| -> Option<(String, bool)> {
        f.row_of(n)
            .filter(|r| !r.base.is_empty())
            .map(|r| (r.base.clone(), r.reply))
    };
    // 6A, 6B.
    let mut table: HashMap<String, usize> = HashMap::new();
    for &r in &roots {
        let Some((base, reply)) = subject(f, r) else {
            continue;
        };
        let dummy = f.nodes[r].msg.is_none();
        match table.get(&base) {
            None => {
                table.insert(base, r);
            }
            Some(&old) => {
                let old_dummy = f.nodes[old].msg.is_none();
                let old_reply = subject(f, old).is_some_and(|s| s.1);
                // A dummy wins over a message, a message that is not a reply
                // over one that is.
                if !old_dummy && (dummy || (old_reply && !reply)) {
                    table.insert(base, r);
                }
            }
        }
    }
    // 6C.
    let mut out: Vec<usize> = Vec::new();
    let mut replaced: HashMap<usize, usize> = HashMap::new();
    for &r in &roots {
        let Some((base, reply)) = subject(f, r) else {
            out.push(r);
            continue;
        };
        let there = table[&base];
        if there == r {
            out.push(r);
            continue;
        }
        let dummy = f.nodes[r].msg.is_none();
        let there_dummy = f.nodes[there].msg.is_none();
        let there_reply = f.nodes[there].msg.is_some_and(|m| f.rows[m].reply);
        if dummy && there_dummy {
            for c in f.nodes[r].children.clone() {
                f.link(there, c);
            }
        } else if there_dummy {
            f.link(there, r);
        } else if dummy {
            f.link(r, there);
            table.insert(base, r);
            replaced.insert(there, r);
            out.push(r);
        } else if !there_reply && reply {
            f.link(there, r);
        } else if there_reply && !reply {
            f.link(r, there);
            table.insert(base, r);
            replaced.insert(there, r);
            out.push(r);
        } else {
            let d = f.add(None);
            f.link(d, there);
            f.link(d, r);
            table.insert(base, d);
            replaced.insert(there, d);
        }
    }
    let mut result = Vec::new();
    for r in out {
        let mut r = r;
        while let Some(&to) = replaced.get(&r) {
            r = to;
        }
        if f.nodes[r].parent.is_none() && !result.contains(&r) {
            result.push(r);
        }
    }
    result
}

/// The `* THREAD` response for `rows` (in sequence order).
pub(crate) fn thread_response(rows: &[Row], algorithm: Algorithm, uid: bool) -> String {
    let (f, roots) = match algorithm {
        Algorithm::OrderedSubject => ordered_subject(rows),
        Algorithm::References => references(rows, false),
        Algorithm::Refs => references(rows, true),
    };
    let mut out = String::from("* THREAD");
    if !roots.is_empty() {
        out.push(' ');
    }
    for r in roots {
        out.push('(');
        f.write(r, uid, &mut out);
        out.push(')');
    }
    out.push_str("\r\n");
    out
}

impl Session<'_> {
    /// THREAD and UID THREAD (RFC 5256 §4).
    pub(crate) async fn thread(
        &mut self,
        algorithm: &str,
        charset: &Charset<'_>,
        search: &[Key<'_>],
        uid: bool,
    ) -> store::Result<Reply> {
        let Some(algorithm) = Algorithm::named(algorithm) else {
            return Ok(Reply::bad("Unknown threading algorithm"));
        };
        let rows = match self.matching_rows(charset, search).await? {
            Ok(rows) => rows,
            Err(reply) => return Ok(reply),
        };
        self.out
            .raw(thread_response(&rows, algorithm, uid).as_bytes());
        let reply = Reply::ok(if uid {
            "UID THREAD completed"
        } else {
            "THREAD completed"
        });
        Ok(if uid { reply } else { reply.no_expunge() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base_subject::{base_subject, collation_key};

    fn msg(seq: u32, subject: &str, date: i64, id: &str, refs: &[&str]) -> Row {
        let (base, reply) = base_subject(subject);
        Row {
            uid: seq + 100,
            seq,
            date,
            base: collation_key(&base),
            reply,
            message_id: (!id.is_empty()).then(|| id.to_string()),
            references: refs.iter().map(|s| s.to_string()).collect(),
            ..Row::default()
        }
    }

    #[test]
    fn ordered_subject_threads() {
        let rows = vec![
            msg(1, "Hello", 10, "", &[]),
            msg(2, "Other", 5, "", &[]),
            msg(3, "Re: hello", 30, "", &[]),
            msg(4, "Re: Hello", 20, "", &[]),
            msg(5, "Re: other", 6, "", &[]),
            msg(6, "Alone", 50, "", &[]),
        ];
        assert_eq!(
            thread_response(&rows, Algorithm::OrderedSubject, false),
            "* THREAD (2 5)(1 (4)(3))(6)\r\n"
        );
        assert_eq!(
            thread_response(&rows[5..], Algorithm::OrderedSubject, true),
            "* THREAD (106)\r\n"
        );
        assert_eq!(
            thread_response(&[], Algorithm::References, false),
            "* THREAD\r\n"
        );
    }

    #[test]
    fn references_threads() {
        let rows = vec![
            msg(1, "Root", 10, "a", &[]),
            msg(2, "Re: Root", 20, "b", &["a"]),
            msg(3, "Re: Root", 30, "c", &["a", "b"]),
            msg(4, "Re: Root", 25, "d", &["a"]),
            // Its parent is missing: a dummy stands for it, pruned away.
            msg(5, "Lost", 40, "e", &["zz"]),
            msg(6, "Re: lost", 45, "f", &["zz"]),
            // Same subject, no references: gathered by subject.
            msg(7, "Re: Root", 5, "g", &[]),
            // Loop attempts are ignored.
            msg(8, "Cycle", 60, "h", &["h"]),
        ];
        assert_eq!(
            thread_response(&rows, Algorithm::References, false),
            "* THREAD (1 (7)(2 3)(4))((5)(6))(8)\r\n"
        );
        // REFS: no subject gathering, latest message last.
        assert_eq!(
            thread_response(&rows, Algorithm::Refs, false),
            "* THREAD (7)(1 (2 3)(4))((5)(6))(8)\r\n"
        );
    }

    proptest::proptest! {
        /// Whatever the ids, references and subjects (loops, repeats,
        /// self-references), each algorithm names every message exactly
        /// once.
        #[test]
        fn every_message_once(
            specs in proptest::collection::vec(
                (0u8..6, 0i64..5, proptest::option::of(0u8..8), proptest::collection::vec(0u8..8, 0..4)),
                0..14,
            ),
        ) {
            let subjects = ["a", "Re: a", "b", "Fwd: b", "", "[x] a"];
            let rows: Vec<Row> = specs
                .iter()
                .enumerate()
                .map(|(i, (s, date, id, refs))| {
                    let id = id.map(|n| format!("m{n}")).unwrap_or_default();
                    let refs: Vec<String> = refs.iter().map(|n| format!("m{n}")).collect();
                    let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
                    msg(i as u32 + 1, subjects[*s as usize], *date, &id, &refs)
                })
                .collect();
            for algorithm in [Algorithm::OrderedSubject, Algorithm::References, Algorithm::Refs] {
                let out = thread_response(&rows, algorithm, false);
                let mut seen: Vec<u32> = out
                    .trim_start_matches("* THREAD")
                    .split(|c: char| !c.is_ascii_digit())
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().unwrap())
                    .collect();
                seen.sort_unstable();
                let want: Vec<u32> = (1..=rows.len() as u32).collect();
                proptest::prop_assert_eq!(seen, want, "{:?} {}", algorithm, out);
                proptest::prop_assert_eq!(
                    out.matches('(').count(),
                    out.matches(')').count()
                );
            }
        }
    }

    #[test]
    fn subject_gathering_makes_siblings_of_two_replies() {
        let rows = vec![
            msg(1, "Re: topic", 10, "a", &[]),
            msg(2, "Re: topic", 20, "b", &[]),
        ];
        assert_eq!(
            thread_response(&rows, Algorithm::References, false),
            "* THREAD ((1)(2))\r\n"
        );
        let rows = vec![
            msg(1, "Re: topic", 10, "a", &[]),
            msg(2, "topic", 20, "b", &[]),
        ];
        assert_eq!(
            thread_response(&rows, Algorithm::References, false),
            "* THREAD (2 1)\r\n"
        );
    }
}
