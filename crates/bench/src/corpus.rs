//! A deterministic, realistic message corpus: varied senders (people at
//! many domains and mailing lists, Zipf-popular), a year of dates in
//! order, threads (replies with `Re:`, `In-Reply-To`, `References`), a
//! Zipf-distributed vocabulary, plain, alternative (text + HTML) and mixed
//! (with a base64 attachment) messages, sizes whose mean is near the IMAP
//! study's 4.7 KB, and chosen marker words and a marker sender at exact
//! rates, so searches have known answers.
//!
//! Every message is a pure function of the seed and its index: message i
//! can be built alone, in any order, on any machine.

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

use base64::Engine;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use time::{Date, Month, OffsetDateTime, Time};

use crate::distribution::{standard_normal, Zipf};
use crate::error::BenchError;

/// A word that must appear in an exact share of the messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Marker {
    /// The word (letters only, at least three, lower case).
    pub word: String,
    /// Share of messages containing it, 0 to 1.
    pub rate: f64,
}

impl std::str::FromStr for Marker {
    type Err = BenchError;
    /// `word:rate`, e.g. `happy:0.01`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BenchError::Invalid(format!("marker {s:?}: want word:rate"));
        let (w, r) = s.split_once(':').ok_or_else(bad)?;
        let rate: f64 = r.parse().map_err(|_| bad())?;
        Ok(Marker {
            word: w.to_string(),
            rate,
        })
    }
}

/// What the corpus is made of.
#[derive(Debug, Clone, Serialize)]
pub struct CorpusSpec {
    /// Number of messages.
    pub count: usize,
    /// Seed: the same seed gives the same corpus, byte for byte.
    pub seed: u64,
    /// Dates run through this calendar year, in message order.
    pub year: i32,
    /// The recipient named in `To:`.
    pub to: String,
    /// Marker words and their exact rates.
    pub markers: Vec<Marker>,
    /// A sender address that sends exactly this share of the messages.
    pub from_marker: Option<(String, f64)>,
}

impl CorpusSpec {
    /// The defaults of the IMAP study: "happy" in 1% of the messages,
    /// "free" in 25%, one list sender with 3%.
    pub fn seed_study(count: usize, seed: u64) -> CorpusSpec {
        CorpusSpec {
            count,
            seed,
            year: 2026,
            to: "user1@example.org".into(),
            markers: vec![
                Marker {
                    word: "happy".into(),
                    rate: 0.01,
                },
                Marker {
                    word: "free".into(),
                    rate: 0.25,
                },
            ],
            from_marker: Some(("digest@lists.example.com".into(), 0.03)),
        }
    }
}

/// One generated message and what it is known to contain.
#[derive(Debug, Clone)]
pub struct CorpusMessage {
    /// Position in the corpus.
    pub index: usize,
    /// The `Date:` of the message.
    pub date: OffsetDateTime,
    /// The sender address.
    pub from: String,
    /// The whole message, CRLF line ends.
    pub bytes: Vec<u8>,
    /// Indexes into the spec's markers of the marker words it contains.
    pub markers: Vec<usize>,
}

/// A corpus ready to generate messages.
#[derive(Debug, Clone)]
pub struct Corpus {
    spec: CorpusSpec,
    vocabulary: Vec<String>,
    zipf: Zipf,
    people: Vec<String>,
    people_zipf: Zipf,
    chosen: Vec<HashSet<usize>>,
    from_chosen: HashSet<usize>,
}

const FIRST: &[&str] = &[
    "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory",
    "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "yves", "zoe",
    "amir", "bea", "chen", "dana", "emil", "fatima", "goran", "hana", "ines", "jonas", "kofi",
    "lena", "marta", "noor", "omar", "priya", "quinn", "rosa", "sven",
];
const LAST: &[&str] = &[
    "smith", "jones", "garcia", "muller", "rossi", "kowalski", "tanaka", "silva", "novak",
    "dubois", "jensen", "nguyen", "okafor", "petrov", "ahmed", "larsen", "moreau", "santos",
    "weber", "young", "ito", "kim", "lopez", "meyer", "olsen", "park", "reyes", "schmidt", "varga",
    "wagner",
];
const DOMAINS: &[&str] = &[
    "example.com",
    "example.net",
    "mail.example.org",
    "uni.example.edu",
    "corp.example.com",
    "research.example.net",
    "shop.example.com",
    "post.example.de",
    "mx.example.fr",
    "inbox.example.it",
    "dept.example.ac.uk",
    "team.example.io",
    "home.example.nl",
    "office.example.se",
    "lab.example.ch",
];
const LISTS: &[&str] = &[
    "devel", "announce", "users", "security", "kernel", "rust", "postgres", "debian", "linux",
    "netdev", "plumbing", "seminars",
];
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ren", "tor", "ul", "sa", "ve", "din", "pra", "mo", "lek", "ta", "shi",
    "bar", "nu", "qui", "zel", "or", "an", "te", "dro", "mas", "pel", "ri", "so", "gun", "fa",
    "ly", "cor", "ben", "vi", "tha", "em", "os", "wi", "ju", "ne", "cal", "pi",
];

/// Words in the vocabulary; ranks follow Zipf's law with s = 1.
const VOCABULARY: usize = 5000;

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A random stream for one purpose of one message.
fn stream(seed: u64, index: usize, purpose: u64) -> StdRng {
    StdRng::seed_from_u64(splitmix(
        splitmix(seed ^ purpose.wrapping_mul(0xA24B_AED4_963E_E407)) ^ index as u64,
    ))
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty()
        && hay
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

fn pseudo_words(rng: &mut StdRng, n: usize, banned: &[String]) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut words = Vec::with_capacity(n);
    // Short, common words first, as in real text.
    for w in [
        "the", "and", "to", "of", "a", "in", "is", "it", "for", "on", "we", "this", "that", "be",
        "with",
    ] {
        if seen.insert(w.to_string()) {
            words.push(w.to_string());
        }
    }
    let mut misses = 0u32;
    while words.len() < n {
        // Shorter words are the commoner ranks; lengthen when short
        // combinations run out.
        let syl = 1 + (words.len() * 3 / n) + rng.gen_range(0..2) + (misses / 64) as usize;
        let w: String = (0..syl)
            .map(|_| SYLLABLES[rng.gen_range(0..SYLLABLES.len())])
            .collect();
        if banned
            .iter()
            .any(|b| contains_ci(w.as_bytes(), b.as_bytes()))
        {
            continue;
        }
        if seen.insert(w.clone()) {
            words.push(w);
            misses = 0;
        } else {
            misses += 1;
        }
    }
    words
}

impl Corpus {
    /// Prepares a corpus; fails on markers that cannot be exact.
    pub fn new(spec: CorpusSpec) -> Result<Corpus, BenchError> {
        for m in &spec.markers {
            if m.word.len() < 3 || !m.word.chars().all(|c| c.is_ascii_lowercase()) {
                return Err(BenchError::Invalid(format!(
                    "marker {:?}: lower-case letters only, at least three",
                    m.word
                )));
            }
            if !(0.0..=1.0).contains(&m.rate) {
                return Err(BenchError::Invalid(format!(
                    "marker rate {} not in 0..1",
                    m.rate
                )));
            }
        }
        if let Some((addr, rate)) = &spec.from_marker {
            if !(0.0..=1.0).contains(rate) || !addr.contains('@') {
                return Err(BenchError::Invalid(format!("from marker {addr}:{rate}")));
            }
        }
        let banned: Vec<String> = spec.markers.iter().map(|m| m.word.clone()).collect();
        let mut rng = stream(spec.seed, 0, 1);
        let vocabulary = pseudo_words(&mut rng, VOCABULARY, &banned);
        let mut people = Vec::new();
        for f in FIRST {
            for l in LAST {
                people.push(format!("{f}.{l}"));
            }
        }
        // A fixed shuffle so popular senders differ between seeds.
        for i in (1..people.len()).rev() {
            people.swap(i, rng.gen_range(0..=i));
        }
        people.truncate(600);
        let chosen = spec
            .markers
            .iter()
            .enumerate()
            .map(|(k, m)| {
                let n = (m.rate * spec.count as f64).round() as usize;
                let mut r = stream(spec.seed, k, 2);
                sample(&mut r, spec.count, n.min(spec.count))
                    .into_iter()
                    .collect()
            })
            .collect();
        let from_chosen = match &spec.from_marker {
            Some((_, rate)) => {
                let n = (rate * spec.count as f64).round() as usize;
                let mut r = stream(spec.seed, 0, 3);
                sample(&mut r, spec.count, n.min(spec.count))
                    .into_iter()
                    .collect()
            }
            None => HashSet::new(),
        };
        Ok(Corpus {
            zipf: Zipf::new(vocabulary.len(), 1.0),
            people_zipf: Zipf::new(people.len(), 0.8),
            vocabulary,
            people,
            chosen,
            from_chosen,
            spec,
        })
    }

    /// The spec the corpus was made from.
    pub fn spec(&self) -> &CorpusSpec {
        &self.spec
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.spec.count
    }

    /// Whether the corpus has no messages.
    pub fn is_empty(&self) -> bool {
        self.spec.count == 0
    }

    /// Exactly how many messages contain marker `k`.
    pub fn marker_count(&self, k: usize) -> usize {
        self.chosen[k].len()
    }

    /// Exactly how many messages come from the marker sender.
    pub fn from_count(&self) -> usize {
        self.from_chosen.len()
    }

    /// The `Date:` of message `i`: the year split evenly in message order,
    /// with a few minutes of jitter, UTC.
    pub fn date(&self, i: usize) -> OffsetDateTime {
        let start = Date::from_calendar_date(self.spec.year, Month::January, 1)
            .expect("valid year")
            .with_time(Time::MIDNIGHT)
            .assume_utc();
        let days = if time::util::is_leap_year(self.spec.year) {
            366
        } else {
            365
        };
        let span = days as f64 * 86_400.0;
        let mut rng = stream(self.spec.seed, i, 4);
        let slot = span / self.spec.count.max(1) as f64;
        let secs = (i as f64 + rng.gen_range(0.0..0.9)) * slot;
        start + time::Duration::seconds(secs as i64)
    }

    /// How many messages are dated on `date` (UTC day).
    pub fn count_on(&self, date: Date) -> usize {
        (0..self.spec.count)
            .filter(|&i| self.date(i).date() == date)
            .count()
    }

    fn word(&self, rng: &mut StdRng) -> &str {
        &self.vocabulary[self.zipf.sample(rng)]
    }

    fn sentence(&self, rng: &mut StdRng, words: usize) -> String {
        let mut s = String::new();
        for k in 0..words {
            if k > 0 {
                s.push(' ');
            }
            s.push_str(self.word(rng));
        }
        s
    }

    fn base_subject(&self, i: usize) -> String {
        let mut rng = stream(self.spec.seed, i, 5);
        let n = rng.gen_range(2..7);
        let mut s = self.sentence(&mut rng, n);
        if let Some(c) = s.get_mut(0..1) {
            c.make_ascii_uppercase();
        }
        s
    }

    fn message_id(&self, i: usize) -> String {
        format!("<{:x}.{i}@corpus.example.com>", self.spec.seed)
    }

    /// Builds message `i`.
    pub fn message(&self, i: usize) -> CorpusMessage {
        // Regenerate with another stream in the rare case a marker word
        // turns up where it was not placed (inside base64, say), so the
        // rates stay exact.
        for attempt in 0..64 {
            let m = self.build(i, attempt);
            let stray = self.spec.markers.iter().enumerate().any(|(k, mk)| {
                !self.chosen[k].contains(&i) && contains_ci(&m.bytes, mk.word.as_bytes())
            });
            if !stray {
                return m;
            }
        }
        self.build(i, 64)
    }

    fn build(&self, i: usize, attempt: u64) -> CorpusMessage {
        let mut rng = stream(self.spec.seed, i, 6 + attempt * 16);
        let date = self.date(i);
        let (from_name, from) = if self.from_chosen.contains(&i) {
            let a = self
                .spec
                .from_marker
                .as_ref()
                .expect("marker sender")
                .0
                .clone();
            ("Digest".to_string(), a)
        } else if rng.gen_bool(0.3) {
            let l = LISTS[rng.gen_range(0..LISTS.len())];
            (
                format!("{l} list"),
                format!("{l}@lists.{}", DOMAINS[rng.gen_range(0..DOMAINS.len())]),
            )
        } else {
            let p = &self.people[self.people_zipf.sample(&mut rng)];
            let d = DOMAINS[p.len() % DOMAINS.len()];
            let (f, l) = p.split_once('.').unwrap_or((p, ""));
            (format!("{} {}", capital(f), capital(l)), format!("{p}@{d}"))
        };
        let is_list = from.contains("@lists.");
        let reply_to = if i > 0 && rng.gen_bool(0.3) {
            Some(i - 1 - rng.gen_range(0..i.min(50)))
        } else {
            None
        };
        let subject = match reply_to {
            Some(j) => format!("Re: {}", self.base_subject(j)),
            None => self.base_subject(i),
        };
        // Body text: log-normal word count (median about 280 words).
        let words = (280.0 * (0.9 * standard_normal(&mut rng)).exp()).clamp(5.0, 20_000.0) as usize;
        let mut tokens: Vec<String> = (0..words)
            .map(|_| self.word(&mut rng).to_string())
            .collect();
        let mut markers = Vec::new();
        for (k, m) in self.spec.markers.iter().enumerate() {
            if self.chosen[k].contains(&i) {
                let at = rng.gen_range(0..=tokens.len());
                tokens.insert(at, m.word.clone());
                markers.push(k);
            }
        }
        let text = wrap(&tokens, 72);
        let kind = rng.gen_range(0..100);
        let boundary = format!("=_corpus_{:x}_{i}", self.spec.seed);
        let mut head = String::new();
        head.push_str(&format!(
            "Received: from mx{}.example.net (mx{}.example.net [192.0.2.{}])\r\n\tby mail.example.org with ESMTP id {:08X}\r\n\tfor <{}>; {}\r\n",
            rng.gen_range(1..9), rng.gen_range(1..9), rng.gen_range(1..255), rng.gen::<u32>(), self.spec.to, rfc2822(date)
        ));
        head.push_str(&format!("From: {from_name} <{from}>\r\nTo: <{}>\r\nSubject: {subject}\r\nDate: {}\r\nMessage-ID: {}\r\n", self.spec.to, rfc2822(date), self.message_id(i)));
        if let Some(j) = reply_to {
            head.push_str(&format!(
                "In-Reply-To: {id}\r\nReferences: {id}\r\n",
                id = self.message_id(j)
            ));
        }
        if is_list {
            let l = from.split('@').next().unwrap_or("list");
            head.push_str(&format!(
                "List-Id: <{l}.lists.example.com>\r\nPrecedence: list\r\n"
            ));
        }
        head.push_str("MIME-Version: 1.0\r\n");
        let body = if kind < 72 {
            head.push_str(
                "Content-Type: text/plain; charset=us-ascii\r\nContent-Transfer-Encoding: 7bit\r\n",
            );
            text
        } else if kind < 90 {
            head.push_str(&format!(
                "Content-Type: multipart/alternative; boundary=\"{boundary}\"\r\n"
            ));
            let html = format!(
                "<html><body><p>{}</p></body></html>\r\n",
                text.replace("\r\n\r\n", "</p>\r\n<p>")
            );
            format!(
                "This is a multi-part message in MIME format.\r\n\r\n--{b}\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n{text}\r\n--{b}\r\nContent-Type: text/html; charset=us-ascii\r\n\r\n{html}\r\n--{b}--\r\n",
                b = boundary
            )
        } else {
            head.push_str(&format!(
                "Content-Type: multipart/mixed; boundary=\"{boundary}\"\r\n"
            ));
            let size =
                (7000.0 * (1.0 * standard_normal(&mut rng)).exp()).clamp(200.0, 2e6) as usize;
            // Bytes with the high bit set: the decoded attachment holds no
            // ASCII text, so no marker can hide in it.
            let data: Vec<u8> = (0..size).map(|_| rng.gen_range(0x80..=0xFF)).collect();
            let b64 = base64::engine::general_purpose::STANDARD.encode(&data);
            let mut enc = String::with_capacity(b64.len() + b64.len() / 38);
            for chunk in b64.as_bytes().chunks(76) {
                enc.push_str(std::str::from_utf8(chunk).expect("base64 is ascii"));
                enc.push_str("\r\n");
            }
            let name = format!(
                "{}.{}",
                self.word(&mut rng),
                ["pdf", "png", "zip", "docx"][rng.gen_range(0..4)]
            );
            format!(
                "This is a multi-part message in MIME format.\r\n\r\n--{b}\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\n{text}\r\n--{b}\r\nContent-Type: application/octet-stream; name=\"{name}\"\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"{name}\"\r\n\r\n{enc}--{b}--\r\n",
                b = boundary
            )
        };
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(b"\r\n");
        bytes.extend_from_slice(body.as_bytes());
        CorpusMessage {
            index: i,
            date,
            from,
            bytes,
            markers,
        }
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

/// Words wrapped into CRLF lines of at most `width` (a blank line every
/// few lines, as paragraphs), the last line ending in CRLF.
fn wrap(tokens: &[String], width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    let mut lines = 0;
    for t in tokens {
        if line > 0 && line + 1 + t.len() > width {
            out.push_str("\r\n");
            lines += 1;
            line = 0;
            if lines % 6 == 0 {
                out.push_str("\r\n");
            }
        }
        if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(t);
        line += t.len();
    }
    out.push_str("\r\n");
    out
}

/// `date` as an RFC 5322 §3.3 date-time.
pub fn rfc2822(d: OffsetDateTime) -> String {
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} +0000",
        &d.weekday().to_string()[..3],
        d.day(),
        &d.month().to_string()[..3],
        d.year(),
        d.hour(),
        d.minute(),
        d.second()
    )
}

/// Now as an RFC 5322 date-time.
pub fn rfc2822_now() -> String {
    rfc2822(OffsetDateTime::now_utc())
}

/// `date` as an IMAP date (RFC 3501 §9 `date`): `30-Nov-2026`.
pub fn imap_date(d: Date) -> String {
    format!("{}-{}-{}", d.day(), &d.month().to_string()[..3], d.year())
}

/// `date-time` for IMAP APPEND (RFC 3501 §9): `"30-Nov-2026 10:00:00 +0000"`.
pub fn imap_date_time(d: OffsetDateTime) -> String {
    format!(
        "\"{:02}-{}-{} {:02}:{:02}:{:02} +0000\"",
        d.day(),
        &d.month().to_string()[..3],
        d.year(),
        d.hour(),
        d.minute(),
        d.second()
    )
}

/// `len` bytes of Zipf-distributed words in CRLF lines of at most 72
/// characters, none starting with a dot: filler bodies for load messages.
pub(crate) fn filler_text(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = stream(seed, 0, 7);
    let words = pseudo_words(&mut rng, 2000, &[]);
    let zipf = Zipf::new(words.len(), 1.0);
    let mut out = Vec::with_capacity(len + 80);
    let mut line = 0;
    while out.len() < len {
        let w = &words[zipf.sample(&mut rng)];
        if line > 0 && line + 1 + w.len() > 72 {
            out.extend_from_slice(b"\r\n");
            line = 0;
        }
        if line > 0 {
            out.push(b' ');
            line += 1;
        }
        out.extend_from_slice(w.as_bytes());
        line += w.len();
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Options of `sluice bench corpus`.
#[derive(Debug, Clone, clap::Args)]
pub struct CorpusArgs {
    /// Number of messages (the IMAP study used 1,046, 8,734 and 21,282).
    #[arg(long, default_value_t = 1046)]
    pub count: usize,
    /// Seed; the same seed gives the same corpus.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Year the dates run through.
    #[arg(long, default_value_t = 2026)]
    pub year: i32,
    /// Recipient named in `To:`.
    #[arg(long, default_value = "user1@example.org")]
    pub to: String,
    /// Marker words with exact rates, `word:rate` (repeat the option).
    #[arg(long = "marker", default_values = ["happy:0.01", "free:0.25"])]
    pub markers: Vec<Marker>,
    /// A sender with an exact share of the messages, `address:rate`.
    #[arg(long, default_value = "digest@lists.example.com:0.03")]
    pub from_marker: String,
    /// Output: an mbox file, or a directory for one `N.eml` per message;
    /// `-` writes an mbox to stdout.
    #[arg(long, default_value = "-")]
    pub out: PathBuf,
    /// Write one file per message into --out (a directory).
    #[arg(long)]
    pub dir: bool,
    /// Print the summary as JSON (on stderr when the corpus goes to stdout).
    #[arg(long)]
    pub json: bool,
}

/// What `sluice bench corpus` wrote.
#[derive(Debug, Clone, Serialize)]
pub struct CorpusSummary {
    /// Messages written.
    pub count: usize,
    /// Total bytes (CRLF form).
    pub bytes: u64,
    /// Mean message size in bytes.
    pub mean_size: f64,
    /// Each marker word with the number of messages containing it.
    pub markers: Vec<(String, usize)>,
    /// The marker sender and its number of messages.
    pub from_marker: Option<(String, usize)>,
}

/// Runs `sluice bench corpus`.
pub async fn run(args: CorpusArgs) -> anyhow::Result<()> {
    let json = args.json;
    let to_stdout = args.out.as_os_str() == "-";
    let summary = summarize(args).await?;
    let text = if json {
        serde_json::to_string_pretty(&summary)?
    } else {
        let marks: Vec<String> = summary
            .markers
            .iter()
            .map(|(w, n)| format!("{w:?} in {n}"))
            .collect();
        format!(
            "{} messages, {} bytes, mean {:.0} bytes; markers: {}{}",
            summary.count,
            summary.bytes,
            summary.mean_size,
            marks.join(", "),
            summary
                .from_marker
                .as_ref()
                .map(|(a, n)| format!("; {n} from {a}"))
                .unwrap_or_default()
        )
    };
    // The corpus itself may be on stdout: the summary then goes to stderr.
    if to_stdout {
        eprintln!("{text}");
    } else {
        println!("{text}");
    }
    Ok(())
}

/// Writes the corpus as asked and returns what was written.
pub(crate) async fn summarize(args: CorpusArgs) -> anyhow::Result<CorpusSummary> {
    tokio::task::spawn_blocking(move || write_corpus(&args)).await?
}

fn parse_from_marker(s: &str) -> anyhow::Result<Option<(String, f64)>> {
    if s.is_empty() || s == "none" {
        return Ok(None);
    }
    let (a, r) = s
        .rsplit_once(':')
        .ok_or_else(|| anyhow::anyhow!("--from-marker wants address:rate"))?;
    Ok(Some((a.to_string(), r.parse()?)))
}

fn write_corpus(args: &CorpusArgs) -> anyhow::Result<CorpusSummary> {
    let spec = CorpusSpec {
        count: args.count,
        seed: args.seed,
        year: args.year,
        to: args.to.clone(),
        markers: args.markers.clone(),
        from_marker: parse_from_marker(&args.from_marker)?,
    };
    let corpus = Corpus::new(spec)?;
    let to_stdout = args.out.as_os_str() == "-";
    let mut mbox: Option<Box<dyn Write>> = if args.dir {
        std::fs::create_dir_all(&args.out)?;
        None
    } else if to_stdout {
        Some(Box::new(std::io::BufWriter::new(std::io::stdout().lock())))
    } else {
        Some(Box::new(std::io::BufWriter::new(std::fs::File::create(
            &args.out,
        )?)))
    };
    let mut bytes = 0u64;
    for i in 0..corpus.len() {
        let m = corpus.message(i);
        bytes += m.bytes.len() as u64;
        match &mut mbox {
            None => std::fs::write(args.out.join(format!("{:06}.eml", i + 1)), &m.bytes)?,
            Some(w) => write_mbox_entry(w, &m)?,
        }
    }
    if let Some(mut w) = mbox {
        w.flush()?;
    }
    let summary = CorpusSummary {
        count: corpus.len(),
        bytes,
        mean_size: bytes as f64 / corpus.len().max(1) as f64,
        markers: corpus
            .spec()
            .markers
            .iter()
            .enumerate()
            .map(|(k, m)| (m.word.clone(), corpus.marker_count(k)))
            .collect(),
        from_marker: corpus
            .spec()
            .from_marker
            .as_ref()
            .map(|(a, _)| (a.clone(), corpus.from_count())),
    };
    Ok(summary)
}

/// One mboxrd entry: a `From ` line, the message with LF line ends and
/// `>`-quoted `From ` lines, a blank line.
fn write_mbox_entry(w: &mut dyn Write, m: &CorpusMessage) -> std::io::Result<()> {
    let d = m.date;
    writeln!(
        w,
        "From {} {} {} {:2} {:02}:{:02}:{:02} {}",
        m.from,
        &d.weekday().to_string()[..3],
        &d.month().to_string()[..3],
        d.day(),
        d.hour(),
        d.minute(),
        d.second(),
        d.year()
    )?;
    let text = String::from_utf8_lossy(&m.bytes);
    for line in text.split("\r\n") {
        let unquoted = line.trim_start_matches('>');
        if unquoted.starts_with("From ") {
            w.write_all(b">")?;
        }
        w.write_all(line.as_bytes())?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

/// The day the IMAP date search asks for: 30 November, as in the study.
pub fn search_day(year: i32) -> Date {
    Date::from_calendar_date(year, Month::November, 30).expect("valid date")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(count: usize, seed: u64) -> Corpus {
        Corpus::new(CorpusSpec::seed_study(count, seed)).unwrap()
    }

    #[test]
    fn marker_rates_are_exact() {
        for (count, seed) in [(1046, 1), (2000, 7), (333, 42)] {
            let c = corpus(count, seed);
            let mut happy = 0;
            let mut free = 0;
            let mut from = 0;
            for i in 0..count {
                let m = c.message(i);
                happy += usize::from(contains_ci(&m.bytes, b"happy"));
                free += usize::from(contains_ci(&m.bytes, b"free"));
                from += usize::from(m.from == "digest@lists.example.com");
                // The recorded markers match the content.
                assert_eq!(m.markers.contains(&0), contains_ci(&m.bytes, b"happy"));
            }
            assert_eq!(happy, (count as f64 * 0.01).round() as usize);
            assert_eq!(free, (count as f64 * 0.25).round() as usize);
            assert_eq!(from, (count as f64 * 0.03).round() as usize);
            assert_eq!(happy, c.marker_count(0));
            assert_eq!(free, c.marker_count(1));
            assert_eq!(from, c.from_count());
        }
    }

    #[test]
    fn same_seed_same_bytes_other_seed_other_bytes() {
        let a = corpus(300, 5);
        let b = corpus(300, 5);
        let c = corpus(300, 6);
        let mut differ = 0;
        for i in 0..300 {
            assert_eq!(a.message(i).bytes, b.message(i).bytes);
            differ += usize::from(a.message(i).bytes != c.message(i).bytes);
        }
        assert!(differ > 290);
        // Random access: building out of order gives the same message.
        assert_eq!(a.message(250).bytes, corpus(300, 5).message(250).bytes);
    }

    #[test]
    fn mean_size_is_near_the_study() {
        let c = corpus(3000, 11);
        let total: usize = (0..3000).map(|i| c.message(i).bytes.len()).sum();
        let mean = total as f64 / 3000.0;
        assert!((4200.0..5200.0).contains(&mean), "mean size {mean}");
    }

    #[test]
    fn a_year_of_dates_in_order_with_threads_and_parts() {
        let c = corpus(2000, 3);
        let mut last = c.date(0);
        assert_eq!(last.year(), 2026);
        let (mut replies, mut alt, mut mixed, mut lists) = (0, 0, 0, 0);
        let mut senders = HashSet::new();
        for i in 0..2000 {
            let m = c.message(i);
            assert!(m.date >= last);
            last = m.date;
            let text = String::from_utf8(m.bytes.clone()).unwrap();
            replies += usize::from(text.contains("In-Reply-To: "));
            alt += usize::from(text.contains("multipart/alternative"));
            mixed += usize::from(text.contains("multipart/mixed"));
            lists += usize::from(text.contains("List-Id: "));
            senders.insert(m.from);
            // Every line ends in CRLF, no bare LF.
            assert!(!text.replace("\r\n", "").contains('\n'));
        }
        assert_eq!(last.year(), 2026);
        assert!(last.month() == Month::December);
        assert!((400..800).contains(&replies), "replies {replies}");
        assert!((200..500).contains(&alt), "alternative {alt}");
        assert!((100..300).contains(&mixed), "mixed {mixed}");
        assert!(lists > 400, "lists {lists}");
        assert!(senders.len() > 200, "senders {}", senders.len());
        assert!(c.count_on(search_day(2026)) >= 3);
    }

    #[test]
    fn vocabulary_is_zipf() {
        let c = corpus(10, 1);
        let mut counts = std::collections::HashMap::new();
        for i in 0..10 {
            let m = c.message(i);
            let text = String::from_utf8_lossy(&m.bytes).to_string();
            for w in text.split_whitespace() {
                *counts.entry(w.to_string()).or_insert(0usize) += 1;
            }
        }
        // The most common word is far more common than the median one.
        let mut v: Vec<usize> = counts.values().copied().collect();
        v.sort_unstable_by(|a, b| b.cmp(a));
        assert!(v[0] > 10 * v[v.len() / 2]);
    }

    #[test]
    fn rejects_bad_markers() {
        let mut spec = CorpusSpec::seed_study(10, 1);
        spec.markers.push(Marker {
            word: "A1".into(),
            rate: 0.1,
        });
        assert!(Corpus::new(spec).is_err());
        assert!("happy".parse::<Marker>().is_err());
        assert_eq!(
            "happy:0.5".parse::<Marker>().unwrap(),
            Marker {
                word: "happy".into(),
                rate: 0.5
            }
        );
    }

    #[test]
    fn dates_format() {
        let d = Date::from_calendar_date(2026, Month::November, 30).unwrap();
        assert_eq!(imap_date(d), "30-Nov-2026");
        let t = d.with_time(Time::from_hms(9, 5, 7).unwrap()).assume_utc();
        assert_eq!(rfc2822(t), "Mon, 30 Nov 2026 09:05:07 +0000");
        assert_eq!(imap_date_time(t), "\"30-Nov-2026 09:05:07 +0000\"");
    }

    #[test]
    fn filler_has_no_dot_lines() {
        let f = filler_text(1, 100_000);
        let text = String::from_utf8(f).unwrap();
        assert!(text
            .split("\r\n")
            .all(|l| !l.starts_with('.') && l.len() <= 72));
    }
}
