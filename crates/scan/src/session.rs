//! The face of the pipeline: a [`Scanner`] holds the shared database and the limits and
//! opens one [`Session`] per message (or per raw file); the session is fed bytes as
//! they arrive and gives a [`Verdict`] at the end.

use std::sync::Arc;

use crate::database::Database;
use crate::filetype::FileType;
use crate::links::{Link, LinkExtractor, TextUrls};
use crate::matcher::BodyMatcher;
use crate::mime::{Encoding, MimeLimits, MimeParser, MimeSink, PartInfo, PartKind};
use crate::phish::{LinkKind, PhishDb, MAX_PART};
use crate::pipeline::{check_attachment, Ctx, FileNode, Findings};
use crate::verdict::{EncryptedPolicy, LimitKind, Limits, Stats, Verdict};

/// Scans messages and files against one signature database with one set of limits.
/// Cheap to clone; share one across connections.
#[derive(Debug, Clone)]
pub struct Scanner {
    db: Arc<Database>,
    limits: Limits,
}

impl Scanner {
    /// A scanner over `db` with `limits`.
    pub fn new(db: Arc<Database>, limits: Limits) -> Self {
        Self { db, limits }
    }

    /// The signature database.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// The limits every session gets.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A session for one mail message (RFC 5322 text, as after DATA dot-unstuffing).
    pub fn session(&self) -> Session {
        let parser = MimeParser::new(MimeLimits {
            max_header_bytes: self.limits.max_header_bytes,
            max_depth: self.limits.max_mime_depth,
        });
        let raw = self
            .db
            .has_mail_sigs
            .then(|| Box::new(BodyMatcher::new(&self.db)));
        let mut s = self.open(Mode::Mail {
            parser: Box::new(parser),
            nodes: Vec::new(),
            raw,
            scope: LinkScope::default(),
        });
        // The parts of a message are contained in it, as ClamAV sees them.
        s.found.ancestry.push(FileType::Mail);
        s
    }

    /// A session that treats its input as one file (an attachment, a zip on disk),
    /// for `sluice scan FILE`.
    pub fn file_session(&self) -> Session {
        let mut found = Findings::default();
        found.stats.files = 1;
        let mut s = self.open(Mode::File {
            node: Some(Box::new(FileNode::new(0, &self.db))),
        });
        s.found = found;
        s
    }

    /// Scans a whole message held in memory.
    pub fn scan_mail(&self, message: &[u8]) -> Verdict {
        let mut s = self.session();
        s.feed(message);
        s.finish()
    }

    /// Scans a whole file held in memory.
    pub fn scan_file(&self, file: &[u8]) -> Verdict {
        let mut s = self.file_session();
        s.feed(file);
        s.finish()
    }

    fn open(&self, mode: Mode) -> Session {
        Session {
            db: Arc::clone(&self.db),
            limits: self.limits,
            mode,
            found: Findings::default(),
        }
    }
}

enum Mode {
    Mail {
        parser: Box<MimeParser>,
        /// One slot per open MIME part; leaf parts hold the file being scanned.
        nodes: Vec<Option<PartNode>>,
        /// The raw message, matched against target type 4 (mail) signatures.
        raw: Option<Box<BodyMatcher>>,
        /// Where the phishing check stands in the part tree.
        scope: LinkScope,
    },
    File {
        node: Option<Box<FileNode>>,
    },
}

/// The scan of one message or file, fed as it streams. Its memory is bounded by the
/// limits and the database, not by the size of what it is fed.
pub struct Session {
    db: Arc<Database>,
    limits: Limits,
    mode: Mode,
    found: Findings,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("stats", &self.found.stats)
            .field("infected", &self.found.infected)
            .finish_non_exhaustive()
    }
}

/// A leaf part being scanned, with its file name when `.cdb` signatures may
/// check it, and its links when the phishing check reads them.
type PartNode = (FileNode, Option<String>, Option<Box<LinkCheck>>);

/// The phishing check of one text part: its links are checked as they come, and
/// the first finding is reported when the part ends no bigger than ClamAV checks.
struct LinkCheck {
    links: LinkExtractor,
    /// The part's size as ClamAV counts it: line ends as one byte, and one more
    /// for each 1000 bytes of a long line (it keeps a text part as lines of at
    /// most 1000 bytes), carriage returns not counted.
    size: u64,
    /// Bytes of the current line so far.
    line: u64,
    found: Option<&'static str>,
    /// With `.gdb` hashes loaded, the URLs in the text, and the first one found
    /// with its offset (used only if no tag gave a URL).
    text: Option<(TextUrls, Option<(u64, &'static str)>)>,
    /// Links (and text URLs) checked.
    checked: u64,
}

/// Longest line piece ClamAV keeps of a text part.
const LINE_PIECE: u64 = 1000;

impl LinkCheck {
    /// Takes the next decoded bytes of the part (`None`: its end). A bigger part
    /// than ClamAV checks is not read further.
    fn feed(&mut self, db: &PhishDb, data: Option<&[u8]>) {
        let pieces = |len: u64| len + len.div_ceil(LINE_PIECE).max(1);
        match data {
            Some(d) => {
                for (i, seg) in d.split(|&b| b == b'\n').enumerate() {
                    if i > 0 {
                        self.size += pieces(self.line);
                        self.line = 0;
                    }
                    self.line += seg.iter().filter(|&&b| b != b'\r').count() as u64;
                }
            }
            None if self.line > 0 => {
                self.size += pieces(self.line);
                self.line = 0;
            }
            None => {}
        }
        if self.size + self.line > MAX_PART || self.found.is_some() {
            return;
        }
        let found = &mut self.found;
        let checked = &mut self.checked;
        let mut check = |l: Link| {
            if found.is_none() {
                *checked += 1;
                *found = crate::phish::check(db, &l.real, &l.display, l.kind);
            }
        };
        match data {
            Some(d) => self.links.feed(d, &mut check),
            None => self.links.finish(&mut check),
        }
        if let Some((urls, first)) = self.text.as_mut() {
            let checked = &mut self.checked;
            let mut check = |at: u64, url: Vec<u8>| {
                if first.is_none() {
                    *checked += 1;
                    *first = crate::phish::check(db, &url, b"", LinkKind::Href).map(|n| (at, n));
                }
            };
            match data {
                Some(d) => urls.feed(d, &mut check),
                None => urls.finish(&mut check),
            }
        }
    }

    /// Links checked so far.
    fn checked(&self) -> u64 {
        self.checked
    }

    /// What the part's links gave, once it has ended: those of its tags, or, with
    /// no tag giving a URL, those of its text (starting more than 10 bytes before
    /// its end, as ClamAV reads them).
    fn finding(&self) -> Option<&'static str> {
        let text = self.text.as_ref().and_then(|(urls, first)| {
            first
                .filter(|(at, _)| !self.links.tag_urls && at + 10 < urls.len())
                .map(|(_, n)| n)
        });
        self.found.or(text).filter(|_| self.size <= MAX_PART)
    }
}

/// What the phishing check needs to know of the parts around the one starting.
#[derive(Debug, Default)]
struct LinkScope {
    /// The depth of the message/rfc822 part being read, if any: ClamAV does not
    /// check the links of a message inside a message.
    inner_message: Option<usize>,
    /// The Content-Type of the part about to start has a `name` parameter.
    named: bool,
    /// The part about to start is an attachment by its Content-Disposition.
    attachment: bool,
}

/// Whether a Content-Type value has a `name` parameter (RFC 2045 §5.1; RFC 2231
/// `name*`).
fn has_name_param(value: &[u8]) -> bool {
    value.split(|&b| b == b';').skip(1).any(|p| {
        let key = p.split(|&b| b == b'=').next().unwrap_or(b"").trim_ascii();
        key.eq_ignore_ascii_case(b"name")
            || (key.len() > 4 && key[..5].eq_ignore_ascii_case(b"name*"))
    })
}

/// Whether ClamAV checks the links of this part: a text part whose Content-Type
/// names no file, outside any message/rfc822 part; inside a multipart, not an
/// attachment by its Content-Disposition, and a text/plain part only with a
/// base64 or quoted-printable body (a plain one is read as the message's text).
/// Called for every part, to follow the tree.
fn checks_links(part: &PartInfo, scope: &mut LinkScope) -> bool {
    if scope.inner_message.is_some_and(|d| part.depth <= d) {
        scope.inner_message = None;
    }
    if part.kind == PartKind::Message && scope.inner_message.is_none() {
        scope.inner_message = Some(part.depth);
    }
    let named = std::mem::take(&mut scope.named);
    let attachment = std::mem::take(&mut scope.attachment);
    part.kind == PartKind::Leaf
        && scope.inner_message.is_none()
        && !named
        && !(attachment && part.depth > 0)
        && part.content_type.starts_with("text/")
        && (part.depth == 0
            || part.content_type != "text/plain"
            || part.encoding != Encoding::Identity)
}

struct MailSink<'a, 'b> {
    ctx: Ctx<'a>,
    nodes: &'b mut Vec<Option<PartNode>>,
    scope: &'b mut LinkScope,
}

impl MimeSink for MailSink<'_, '_> {
    fn header(&mut self, name: &[u8], value: &[u8]) {
        if name.eq_ignore_ascii_case(b"content-type") {
            self.scope.named = has_name_param(value);
        } else if name.eq_ignore_ascii_case(b"content-disposition") {
            self.scope.attachment =
                value.len() >= 10 && value[..10].eq_ignore_ascii_case(b"attachment");
        }
    }

    fn part_start(&mut self, part: &PartInfo) {
        let stats = &mut self.ctx.found.stats;
        stats.parts += 1;
        let leaf = matches!(part.kind, PartKind::Leaf | PartKind::Uuencoded);
        let check_links = checks_links(part, self.scope);
        if stats.parts > self.ctx.limits.max_parts {
            self.ctx.found.limit(LimitKind::Parts);
            self.nodes.push(None);
        } else if leaf {
            stats.files += 1;
            let name = if self.ctx.db.cdb.is_empty() {
                None
            } else {
                part.filename.clone()
            };
            let links = (self.ctx.db.phish.active() && check_links).then(|| {
                Box::new(LinkCheck {
                    links: LinkExtractor::new(),
                    size: 0,
                    line: 0,
                    found: None,
                    checked: 0,
                    text: (!self.ctx.db.phish.url_hashes.is_empty())
                        .then(|| (TextUrls::default(), None)),
                })
            });
            self.nodes
                .push(Some((FileNode::new(0, self.ctx.db), name, links)));
        } else {
            self.nodes.push(None);
        }
    }

    fn body(&mut self, data: &[u8]) {
        if let Some(Some((node, _, links))) = self.nodes.last_mut() {
            node.feed(data, &mut self.ctx);
            if let Some(lc) = links
                .as_mut()
                .filter(|_| self.ctx.found.heuristic.is_none())
            {
                lc.feed(&self.ctx.db.phish, Some(data));
            }
        }
    }

    fn part_end(&mut self) {
        if let Some(Some((node, name, links))) = self.nodes.pop() {
            let (size, serial) = (node.size(), node.serial());
            node.finish(&mut self.ctx);
            if let Some(name) = name.filter(|_| self.ctx.found.infected.is_none()) {
                check_attachment(&mut self.ctx, &name, size, serial);
            }
            if let Some(mut lc) = links {
                if self.ctx.found.heuristic.is_none() {
                    lc.feed(&self.ctx.db.phish, None);
                    self.ctx.found.heuristic = lc.finding();
                }
                self.ctx.found.stats.links_checked += lc.checked();
            }
        }
    }
}

/// Largest piece of input the pipeline takes in one step. Each stage (the
/// raw mail's matcher, the MIME decoder's output, the matchers of the
/// files inside) holds about one piece in its buffers, so the piece sets
/// much of the memory of a session: about 110 KB mid-way through a zipped
/// attachment fed in 16 KiB pieces, 70 KB in 4 KiB ones, for a few calls
/// more per byte.
const FEED_PIECE: usize = 4 * 1024;

impl Session {
    /// Feeds the next chunk. Once a signature has matched, further input is ignored.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.found.stats.input_bytes += chunk.len() as u64;
        for piece in chunk.chunks(FEED_PIECE) {
            if self.found.infected.is_some() {
                return;
            }
            self.feed_piece(piece);
        }
    }

    fn feed_piece(&mut self, chunk: &[u8]) {
        let ctx = Ctx {
            db: &self.db,
            limits: &self.limits,
            found: &mut self.found,
        };
        match &mut self.mode {
            Mode::Mail {
                parser,
                nodes,
                raw,
                scope,
            } => {
                if let Some(m) = raw.as_mut() {
                    let window = ctx.limits.max_regex_window;
                    if let Some(hit) = m.feed(ctx.db, FileType::Mail, chunk, window) {
                        ctx.found.infected = Some(ctx.db.hit_name(hit).to_string());
                        return;
                    }
                }
                let mut sink = MailSink { ctx, nodes, scope };
                parser.feed(chunk, &mut sink);
            }
            Mode::File { node } => {
                let mut ctx = ctx;
                if let Some(n) = node.as_mut() {
                    n.feed(chunk, &mut ctx);
                }
            }
        }
    }

    /// The name of the signature found so far, if any: a caller may stop feeding.
    /// (With false-positive hashes loaded, a detection is known only when the file
    /// it is in ends: until then this says nothing.)
    pub fn infected(&self) -> Option<&str> {
        self.found.infected.as_deref()
    }

    /// Counters so far.
    pub fn stats(&self) -> &Stats {
        &self.found.stats
    }

    /// Ends the input and gives the verdict.
    pub fn finish(self) -> Verdict {
        self.finish_with_stats().0
    }

    /// Ends the input and gives the verdict with the counters of the whole scan.
    pub fn finish_with_stats(mut self) -> (Verdict, Stats) {
        let mut ctx = Ctx {
            db: &self.db,
            limits: &self.limits,
            found: &mut self.found,
        };
        match &mut self.mode {
            Mode::Mail {
                parser,
                nodes,
                raw,
                scope,
            } => {
                if let (Some(m), None) = (raw.as_mut(), &ctx.found.infected) {
                    if let Some(hit) = m.finish(ctx.db, FileType::Mail, &[]) {
                        ctx.found.infected = Some(ctx.db.hit_name(hit).to_string());
                    }
                }
                if ctx.found.infected.is_none() {
                    let mut sink = MailSink { ctx, nodes, scope };
                    parser.finish(&mut sink);
                    ctx = sink.ctx;
                }
                // Attachment signatures that also constrain the message's size.
                let size = ctx.found.stats.input_bytes;
                let waiting = ctx.found.mail_cdb_wait.iter().find_map(|&i| {
                    let sig = &ctx.db.cdb[i as usize];
                    sig.container_size.allows(Some(size)).then_some(i)
                });
                if let Some(i) = waiting.filter(|_| ctx.found.infected.is_none()) {
                    ctx.found.detect(ctx.db, &ctx.db.cdb[i as usize].name, 0);
                }
                ctx.found.stats.dropped_header_bytes = parser.dropped_header_bytes();
                if parser.depth_capped() {
                    ctx.found.limit(LimitKind::MimeDepth);
                }
            }
            Mode::File { node } => {
                if let Some(n) = node.take() {
                    if ctx.found.infected.is_none() {
                        n.finish(&mut ctx);
                    }
                }
            }
        }
        let f = &self.found;
        let verdict = if let Some(name) = f.detection().or(f.heuristic) {
            Verdict::Infected {
                name: name.to_string(),
            }
        } else if let Some(kind) = f.limit {
            Verdict::LimitExceeded(kind)
        } else if f.stats.encrypted_entries > 0 && self.limits.encrypted == EncryptedPolicy::Reject
        {
            Verdict::Encrypted
        } else {
            Verdict::Clean
        };
        (verdict, self.found.stats.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_move_between_threads() {
        fn send<T: Send>() {}
        fn send_sync<T: Send + Sync>() {}
        send::<Session>();
        send_sync::<Scanner>();
        send_sync::<Database>();
    }

    #[test]
    fn rar_archives_are_an_unsupported_archive_unless_something_is_found() {
        let s = Scanner::new(Arc::new(Database::builtin()), Limits::default());
        let mut rar = b"Rar!\x1a\x07\x01\x00".to_vec();
        rar.extend_from_slice(&[0x5a; 64]);
        assert_eq!(
            s.scan_file(&rar),
            Verdict::LimitExceeded(LimitKind::UnsupportedArchive)
        );
        // Its bytes are still matched: a signature found beats the limit.
        rar.extend_from_slice(crate::EICAR);
        assert_eq!(
            s.scan_file(&rar),
            Verdict::Infected {
                name: crate::EICAR_NAME.into()
            }
        );
    }

    #[test]
    fn mail_target_signatures_see_the_raw_message() {
        let mut b = crate::DatabaseBuilder::new();
        b.add_ndb(
            "Mail.Test:4:*:582d50687973683a2079657321\nAny.Test:0:*:6e6f7420696e206d61696c21",
        );
        let s = Scanner::new(Arc::new(b.build().unwrap().0), Limits::default());
        let mail = b"X-Physh: yes!\r\nSubject: s\r\n\r\nbody\r\n";
        for cut in 0..mail.len() {
            let mut session = s.session();
            session.feed(&mail[..cut]);
            session.feed(&mail[cut..]);
            assert_eq!(
                session.finish(),
                Verdict::Infected {
                    name: "Mail.Test".into()
                }
            );
        }
        // Target 4 never matches a file, target 0 never the raw mail.
        assert_eq!(s.scan_file(b"X-Physh: yes!"), Verdict::Clean);
        assert_eq!(
            s.scan_mail(b"X-Note: not in mail!\r\n\r\nhi\r\n"),
            Verdict::Clean
        );
    }

    #[test]
    fn false_positive_hashes_clear_detections_in_and_under_a_file() {
        use md5::Digest;
        let good = b"known good file with the marker FPMARK in it".to_vec();
        let hex: String = md5::Md5::digest(&good)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut b = crate::DatabaseBuilder::new();
        b.add_ndb("Fp.Marker:0:*:46504d41524b");
        b.add_false_positives(&format!("{hex}:{}:Good.File\n", good.len()));
        let s = Scanner::new(Arc::new(b.build().unwrap().0), Limits::default());
        // The marker comes in the first chunk, the end of the file later.
        let mut session = s.file_session();
        session.feed(&good[..40]);
        assert_eq!(session.infected(), None);
        session.feed(&good[40..]);
        let (v, stats) = session.finish_with_stats();
        assert_eq!(v, Verdict::Clean);
        assert_eq!(stats.false_positives, 1);
        // Another file with the marker is still found, and so is a later one in
        // the same message after a cleared one.
        let other = b"another FPMARK file".to_vec();
        assert!(matches!(s.scan_file(&other), Verdict::Infected { .. }));
        let mail = [
            b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n".as_slice(),
            &good,
            b"\r\n--b\r\n\r\n",
            &other,
            b"\r\n--b--\r\n",
        ]
        .concat();
        assert_eq!(
            s.scan_mail(&mail),
            Verdict::Infected {
                name: "Fp.Marker".into()
            }
        );
        let mail = [
            b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\r\n".as_slice(),
            &good,
            b"\r\n--b--\r\n",
        ]
        .concat();
        assert_eq!(s.scan_mail(&mail), Verdict::Clean);
    }

    #[test]
    fn phishing_links_split_anywhere_in_the_stream() {
        let mut b = crate::DatabaseBuilder::new();
        b.add_pdb("t.pdb", "H:paypal.com\n");
        let s = Scanner::new(Arc::new(b.build().unwrap().0), Limits::default());
        let spoof = "Heuristics.Phishing.Email.SpoofedDomain";
        let html = b"<p>Hi</p><a href=\"http&#58;//evil.example.net/\">www.paypal.com</a>";
        // base64 in 16-character lines: the link spans several of them.
        let b64 = {
            const T: &[u8; 64] =
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut out = Vec::new();
            for (i, c) in html.chunks(3).enumerate() {
                let n = c.iter().fold(0u32, |n, &b| n << 8 | u32::from(b)) << (8 * (3 - c.len()));
                for k in 0..4 {
                    out.push(if k <= c.len() {
                        T[(n >> (18 - 6 * k)) as usize & 63]
                    } else {
                        b'='
                    });
                }
                if i % 4 == 3 {
                    out.extend_from_slice(b"\r\n");
                }
            }
            out
        };
        let mail = [
            b"Content-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n\
Content-Type: text/html\r\nContent-Transfer-Encoding: base64\r\n\r\n"
                .as_slice(),
            &b64,
            b"\r\n--b--\r\n",
        ]
        .concat();
        for cut in 0..=mail.len() {
            let mut stream = s.session();
            stream.feed(&mail[..cut]);
            stream.feed(&mail[cut..]);
            assert_eq!(
                stream.finish(),
                Verdict::Infected { name: spoof.into() },
                "cut at {cut}"
            );
        }
        let (_, stats) = {
            let mut stream = s.session();
            stream.feed(&mail);
            stream.finish_with_stats()
        };
        assert_eq!(stats.links_checked, 1);
        // The same HTML as an attachment, or with no phishing list, is not checked.
        let attached = [
            b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\
Content-Type: application/octet-stream\r\n\r\n"
                .as_slice(),
            html,
            b"\r\n--b--\r\n",
        ]
        .concat();
        assert_eq!(s.scan_mail(&attached), Verdict::Clean);
        let plain = Scanner::new(Arc::new(Database::builtin()), Limits::default());
        assert_eq!(plain.scan_mail(&mail), Verdict::Clean);
    }

    #[test]
    fn stops_feeding_after_a_find() {
        let s = Scanner::new(Arc::new(Database::builtin()), Limits::default());
        let mut session = s.file_session();
        session.feed(crate::EICAR);
        session.feed(&[0; 100_000]);
        assert_eq!(session.infected(), Some(crate::EICAR_NAME));
        let (v, stats) = session.finish_with_stats();
        assert!(matches!(v, Verdict::Infected { .. }));
        assert_eq!(stats.input_bytes, 100_068);
    }
}
