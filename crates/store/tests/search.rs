//! SEARCH against a brute-force evaluation: random messages, delivered
//! through the message writer, and random nested search keys. The model
//! below restates the matching rules of `Store::search` in plain Rust over
//! what the test itself wrote into each message.

use std::sync::Arc;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use store::{Delivery, PgOptions, PgStore, SearchKey, SqliteOptions, SqliteStore, Store, Uid};

/// Words of subjects, bodies and tag headers: few, so matches are frequent.
/// No word is another's case or accent variant, so the index's diacritic
/// folding and the model's plain lowercasing agree.
const WORDS: &[&str] = &[
    "alpha",
    "bravo",
    "Charlie",
    "delta",
    "zebra",
    "Zürich",
    "ÉCOLE",
    "report",
    "plans",
    "日本語",
    "東京",
    "ภาษา",
];
const NAMES: &[&str] = &["Alice", "Bob", "Zoë", "Dave"];
const LOCALS: &[&str] = &["alice", "bob", "carol", "info"];
const DOMAINS: &[&str] = &["example.org", "mail.test"];
const KEYWORDS: &[&str] = &["$Forwarded", "Work", "urgent", "$Junk"];
/// Header names a HEADER key asks for, some absent from every message.
const FIELDS: &[&str] = &[
    "X-Tag",
    "x-tag",
    "Subject",
    "FROM",
    "bcc",
    "Reply-To",
    "Message-ID",
    "date",
    "To",
    "Cc",
];
/// What substring needles are cut from.
const NEEDLE_SOURCES: &[&str] = &[
    "Alice <alice@example.org>",
    "bob@mail.test",
    "Zoë <carol@example.org>",
    "info@mail.test",
    "alpha bravo",
    "Zürich ÉCOLE",
    "report plans",
    "Charlie delta zebra",
    "日本語 東京",
];

#[derive(Debug, Clone)]
struct Addr {
    name: Option<usize>,
    local: usize,
    domain: usize,
}

impl Addr {
    fn render(&self) -> String {
        let email = format!("{}@{}", LOCALS[self.local], DOMAINS[self.domain]);
        match self.name {
            Some(n) => format!("{} <{email}>", NAMES[n]),
            None => email,
        }
    }
}

#[derive(Debug, Clone)]
struct Spec {
    from: Addr,
    to: Vec<Addr>,
    cc: Vec<Addr>,
    bcc: Vec<Addr>,
    subject: Option<Vec<usize>>,
    /// UTC seconds and the zone offset it is written in, in minutes.
    date: Option<(i64, i32)>,
    internal: i64,
    tag: Option<(Vec<usize>, bool)>,
    body: Vec<usize>,
    flags: u32,
    keywords: Vec<(usize, bool)>,
}

/// A delivered message as the model sees it.
#[derive(Debug)]
struct Model {
    uid: Uid,
    modseq: u64,
    size: u64,
    flags: u32,
    keywords: Vec<String>,
    internal: i64,
    /// The sent time as written (local to its zone), or the internal date.
    sent: i64,
    from: String,
    to: String,
    cc: String,
    subject: String,
    /// Header fields, unfolded.
    fields: Vec<(String, String)>,
    /// The subject, addresses and header block, and body, as
    /// [`text_fold`] leaves them.
    subject_text: String,
    address_text: String,
    body_text: String,
}

/// First day of the dates used: 2025-01-01.
const BASE_DAY: i64 = 20_089;
const DAYS: i64 = 6;

fn addr() -> impl Strategy<Value = Addr> {
    (
        proptest::option::of(0..NAMES.len()),
        0..LOCALS.len(),
        0..DOMAINS.len(),
    )
        .prop_map(|(name, local, domain)| Addr {
            name,
            local,
            domain,
        })
}

fn words(max: usize) -> impl Strategy<Value = Vec<usize>> {
    vec(0..WORDS.len(), 0..max)
}

fn time_in_range() -> impl Strategy<Value = i64> {
    (BASE_DAY * 86_400)..((BASE_DAY + DAYS) * 86_400)
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        (
            addr(),
            vec(addr(), 0..3),
            vec(addr(), 0..2),
            vec(addr(), 0..2),
        ),
        (
            proptest::option::of(words(4)),
            proptest::option::of((time_in_range(), prop_oneof![Just(0), Just(-300), Just(570)])),
            time_in_range(),
            proptest::option::of((vec(0..WORDS.len(), 1..4), any::<bool>())),
        ),
        (
            words(30),
            0u32..32,
            vec((0..KEYWORDS.len(), any::<bool>()), 0..3),
        ),
    )
        .prop_map(
            |((from, to, cc, bcc), (subject, date, internal, tag), (body, flags, keywords))| Spec {
                from,
                to,
                cc,
                bcc,
                subject,
                date,
                internal,
                tag,
                body,
                flags,
                keywords,
            },
        )
}

/// Proleptic Gregorian date of a day number (days since 1970-01-01).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn rfc5322_date(utc: i64, offset_min: i32) -> String {
    let local = utc + i64::from(offset_min) * 60;
    let (y, m, d) = civil(local.div_euclid(86_400));
    let secs = local.rem_euclid(86_400);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let sign = if offset_min < 0 { '-' } else { '+' };
    let off = offset_min.abs();
    format!(
        "{d} {} {y} {:02}:{:02}:{:02} {sign}{:02}{:02}",
        MONTHS[m as usize - 1],
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        off / 60,
        off % 60
    )
}

fn join_addrs(a: &[Addr]) -> String {
    a.iter().map(Addr::render).collect::<Vec<_>>().join(", ")
}

fn fold(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

/// Text as TEXT and BODY compare it: diacritics dropped, case folded,
/// white space runs one space, and no space beside a character of the
/// scripts written without spaces that WORDS holds.
fn text_fold(s: &str) -> String {
    use unicode_normalization::char::is_combining_mark;
    use unicode_normalization::UnicodeNormalization;
    let unspaced = |c: char| matches!(c, '\u{0E00}'..='\u{0E7F}' | '\u{3040}'..='\u{9FFF}');
    let mut out: Vec<char> = Vec::new();
    for c in s.nfd().filter(|&c| !is_combining_mark(c)) {
        if c.is_whitespace() {
            if out.last() != Some(&' ') {
                out.push(' ');
            }
        } else {
            out.extend(c.to_lowercase());
        }
    }
    let kept: Vec<char> = (0..out.len())
        .filter(|&i| {
            out[i] != ' '
                || !(i > 0 && unspaced(out[i - 1]) || out.get(i + 1).is_some_and(|&c| unspaced(c)))
        })
        .map(|i| out[i])
        .collect();
    kept.into_iter().collect()
}

fn case_variant(s: &str, upper: bool) -> String {
    if upper {
        s.to_uppercase()
    } else {
        s.to_lowercase()
    }
}

/// The raw message and the header fields the model keeps.
fn render(spec: &Spec, n: usize) -> (Vec<u8>, Vec<(String, String)>) {
    let mut fields: Vec<(String, String)> = vec![("From".into(), spec.from.render())];
    for (name, list) in [("To", &spec.to), ("Cc", &spec.cc), ("Bcc", &spec.bcc)] {
        if !list.is_empty() {
            fields.push((name.into(), join_addrs(list)));
        }
    }
    if let Some(s) = &spec.subject {
        let words: Vec<&str> = s.iter().map(|&i| WORDS[i]).collect();
        fields.push(("Subject".into(), words.join(" ")));
    }
    if let Some((utc, off)) = spec.date {
        fields.push(("Date".into(), rfc5322_date(utc, off)));
    }
    fields.push(("Message-ID".into(), format!("<m{n}@example.org>")));
    let mut raw = String::new();
    for (name, value) in &fields {
        raw.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some((tag, folded)) = &spec.tag {
        let words: Vec<&str> = tag.iter().map(|&i| WORDS[i]).collect();
        // Folded: the line break before a space is removed on unfolding.
        let sep = if *folded { "\r\n " } else { " " };
        raw.push_str(&format!("X-Tag: {}\r\n", words.join(sep)));
        fields.push(("X-Tag".into(), words.join(" ")));
    }
    raw.push_str("\r\n");
    for line in spec.body.chunks(7) {
        let words: Vec<&str> = line.iter().map(|&i| WORDS[i]).collect();
        raw.push_str(&words.join(" "));
        raw.push_str("\r\n");
    }
    (raw.into_bytes(), fields)
}

fn substring_needle() -> impl Strategy<Value = String> {
    (0..NEEDLE_SOURCES.len(), 0usize..30, 0usize..8, 0u8..3).prop_map(|(i, start, len, case)| {
        let chars: Vec<char> = NEEDLE_SOURCES[i].chars().collect();
        let start = start % (chars.len() + 1);
        let end = (start + len).min(chars.len());
        let s: String = chars[start..end].iter().collect();
        match case {
            0 => s,
            1 => s.to_uppercase(),
            _ => s.to_lowercase(),
        }
    })
}

/// A cut of some WORDS joined by spaces, in any case.
fn text_cut() -> impl Strategy<Value = String> {
    (
        vec(0..WORDS.len(), 1..4),
        0usize..30,
        0usize..12,
        any::<bool>(),
    )
        .prop_map(|(words, start, len, upper)| {
            let text: Vec<char> = words
                .iter()
                .map(|&i| WORDS[i])
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .collect();
            let start = start % text.len();
            let end = (start + len).min(text.len());
            case_variant(&text[start..end].iter().collect::<String>(), upper)
        })
}

fn text_query() -> impl Strategy<Value = String> {
    let pool: Vec<&'static str> = WORDS
        .iter()
        .chain(NAMES)
        .chain(LOCALS)
        .chain(&["example", "org", "test"])
        .copied()
        .collect();
    prop_oneof![
        8 => (vec(proptest::sample::select(pool), 1..3), any::<bool>(), 0usize..3).prop_map(
            |(words, upper, sep)| {
                let words: Vec<String> = words.iter().map(|w| case_variant(w, upper)).collect();
                words.join([" ", "-", ", "][sep])
            }
        ),
        6 => text_cut(),
        2 => substring_needle(),
        1 => Just(String::new()),
        1 => Just(" -- ".to_string()),
    ]
}

fn day() -> impl Strategy<Value = i64> {
    (BASE_DAY - 1)..(BASE_DAY + DAYS + 1)
}

fn leaf() -> impl Strategy<Value = SearchKey> {
    let keyword = prop_oneof![
        4 => (0..KEYWORDS.len(), any::<bool>()).prop_map(|(i, up)| case_variant(KEYWORDS[i], up)),
        1 => Just("Bogus".to_string()),
        1 => Just("not a keyword".to_string()),
    ];
    prop_oneof![
        Just(SearchKey::All),
        vec((0u32..40, 0u32..40), 0..4).prop_map(SearchKey::Uids),
        // Enough separate UIDs to go as one packed parameter.
        vec(0u32..25, 17..24)
            .prop_map(|v| SearchKey::Uids(v.into_iter().map(|u| (2 * u, 2 * u)).collect())),
        (0u32..32).prop_map(SearchKey::FlagsSet),
        (0u32..32).prop_map(SearchKey::FlagsUnset),
        keyword.clone().prop_map(SearchKey::Keyword),
        keyword.prop_map(SearchKey::Unkeyword),
        substring_needle().prop_map(SearchKey::From),
        substring_needle().prop_map(SearchKey::To),
        substring_needle().prop_map(SearchKey::Cc),
        substring_needle().prop_map(SearchKey::Bcc),
        substring_needle().prop_map(SearchKey::Subject),
        (proptest::sample::select(FIELDS), substring_needle())
            .prop_map(|(f, v)| SearchKey::Header(f.to_string(), v)),
        proptest::sample::select(FIELDS)
            .prop_map(|f| SearchKey::Header(f.to_string(), String::new())),
        text_query().prop_map(SearchKey::Body),
        text_query().prop_map(SearchKey::Text),
        day().prop_map(SearchKey::SentBefore),
        day().prop_map(SearchKey::SentOn),
        day().prop_map(SearchKey::SentSince),
        day().prop_map(SearchKey::Before),
        day().prop_map(SearchKey::On),
        day().prop_map(SearchKey::Since),
        (100u64..700).prop_map(SearchKey::Larger),
        (100u64..700).prop_map(SearchKey::Smaller),
        (0u64..40).prop_map(SearchKey::ModSeqAtLeast),
    ]
}

fn key() -> impl Strategy<Value = SearchKey> {
    leaf().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(SearchKey::And),
            (inner.clone(), inner.clone())
                .prop_map(|(a, b)| SearchKey::Or(Box::new(a), Box::new(b))),
            inner.prop_map(|k| SearchKey::Not(Box::new(k))),
        ]
    })
}

fn day_of(t: i64) -> i64 {
    t.div_euclid(86_400)
}

fn eval(key: &SearchKey, m: &Model) -> bool {
    use SearchKey::*;
    let has = |s: &str, needle: &str| fold(s).contains(&fold(needle));
    match key {
        All => true,
        And(keys) => keys.iter().all(|k| eval(k, m)),
        Or(a, b) => eval(a, m) || eval(b, m),
        Not(k) => !eval(k, m),
        Uids(ranges) => ranges
            .iter()
            .any(|&(a, b)| a.min(b) <= m.uid && m.uid <= a.max(b)),
        FlagsSet(bits) => m.flags & bits == *bits,
        FlagsUnset(bits) => m.flags & bits == 0,
        Keyword(k) => m.keywords.iter().any(|x| x.eq_ignore_ascii_case(k)),
        Unkeyword(k) => !m.keywords.iter().any(|x| x.eq_ignore_ascii_case(k)),
        From(s) => has(&m.from, s),
        To(s) => has(&m.to, s),
        Cc(s) => has(&m.cc, s),
        Subject(s) => has(&m.subject, s),
        Bcc(s) => {
            s.is_empty()
                || m.fields
                    .iter()
                    .any(|(n, v)| n.eq_ignore_ascii_case("bcc") && has(v, s))
        }
        Header(name, value) => m
            .fields
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case(name) && has(v, value)),
        Body(q) => m.body_text.contains(&text_fold(q.trim())),
        Text(q) => {
            let q = text_fold(q.trim());
            m.subject_text.contains(&q) || m.address_text.contains(&q) || m.body_text.contains(&q)
        }
        SentBefore(d) => day_of(m.sent) < *d,
        SentOn(d) => day_of(m.sent) == *d,
        SentSince(d) => day_of(m.sent) >= *d,
        Before(d) => day_of(m.internal) < *d,
        On(d) => day_of(m.internal) == *d,
        Since(d) => day_of(m.internal) >= *d,
        Larger(n) => m.size > *n,
        Smaller(n) => m.size < *n,
        ModSeqAtLeast(n) => m.modseq >= *n,
    }
}

/// Delivers the messages into a fresh mailbox, concurrently (so group
/// commit keeps it quick), and builds the model from what was written.
async fn load(
    store: &Arc<dyn Store>,
    account: i64,
    case: usize,
    specs: &[Spec],
) -> (i64, Vec<Model>) {
    let mailbox = store
        .create_mailbox(account, &format!("case{case}"), None)
        .await
        .unwrap()
        .id;
    let mut tasks = Vec::new();
    for (n, spec) in specs.iter().enumerate() {
        let (raw, fields) = render(spec, n);
        let keywords: Vec<String> = spec
            .keywords
            .iter()
            .map(|&(i, up)| case_variant(KEYWORDS[i], up))
            .collect();
        let store = Arc::clone(store);
        let spec = spec.clone();
        tasks.push(tokio::spawn(async move {
            let mut w = store.message_writer();
            // In two pieces, as a client's lines would come.
            let cut = raw.len() / 2;
            w.write(&raw[..cut]).await.unwrap();
            w.write(&raw[cut..]).await.unwrap();
            let receipt = w
                .deliver(Delivery {
                    mailboxes: vec![mailbox],
                    internal_date: Some(spec.internal),
                    flags: spec.flags,
                    keywords: keywords.clone(),
                    ..Default::default()
                })
                .await
                .unwrap();
            (spec, raw, fields, keywords, receipt)
        }));
    }
    let mut delivered = Vec::new();
    for t in tasks {
        delivered.push(t.await.unwrap());
    }
    let listed = store.list_messages(mailbox).await.unwrap();
    let mut models = Vec::new();
    for (spec, raw, fields, keywords, receipt) in delivered {
        let uid = receipt.entries[0].1;
        let entry = listed.iter().find(|e| e.uid == uid).unwrap();
        let subject = spec
            .subject
            .as_ref()
            .map(|s| s.iter().map(|&i| WORDS[i]).collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        let (from, to, cc) = (
            spec.from.render(),
            join_addrs(&spec.to),
            join_addrs(&spec.cc),
        );
        // The indexed columns hold what the model expects.
        let h = store.headers(receipt.blob).await.unwrap().unwrap();
        assert_eq!(
            (&h.from, &h.to, &h.cc, &h.subject, h.date),
            (&from, &to, &cc, &subject, spec.date.map(|d| d.0)),
            "indexed headers of {}",
            String::from_utf8_lossy(&raw)
        );
        let mut unique: Vec<String> = Vec::new();
        for k in keywords {
            if !unique.iter().any(|u| u.eq_ignore_ascii_case(&k)) {
                unique.push(k);
            }
        }
        assert_eq!(entry.keywords, unique);
        assert_eq!(entry.flags, spec.flags);
        let body: Vec<&str> = spec.body.iter().map(|&i| WORDS[i]).collect();
        models.push(Model {
            uid,
            modseq: entry.modseq,
            size: raw.len() as u64,
            flags: spec.flags,
            keywords: unique,
            internal: spec.internal,
            // SENT* keys compare the day as written, in the Date field's
            // own zone (RFC 3501 §6.4.4).
            sent: spec
                .date
                .map_or(spec.internal, |(utc, offset)| utc + i64::from(offset) * 60),
            subject_text: text_fold(&subject),
            // The addresses column carries the whole header block too, so
            // TEXT finds words of any field.
            address_text: {
                let text = String::from_utf8_lossy(&raw);
                let header = text.split("\r\n\r\n").next().unwrap_or_default();
                text_fold(&format!("{from} {to} {cc}\n{header}"))
            },
            body_text: text_fold(&body.join(" ")),
            from,
            to,
            cc,
            subject,
            fields,
        });
    }
    models.sort_by_key(|m| m.uid);
    (mailbox, models)
}

#[test]
fn search_agrees_with_brute_force() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path(), SqliteOptions::default()).unwrap();
    agrees_with_brute_force(&rt, Arc::new(store), 256);
}

/// The same on PostgreSQL: its own SQL and `pg_trgm` text search must
/// give the model's answers too. Fewer cases: a delivery there is a round
/// trip to a server.
#[test]
fn search_agrees_with_brute_force_on_postgres() {
    let rt = runtime();
    let pg = sluice_testkit::Postgres::start();
    let url = pg.create_database();
    let store = rt.block_on(PgStore::connect(PgOptions::new(&url))).unwrap();
    agrees_with_brute_force(&rt, Arc::new(store), 96);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Random mailboxes and keys, `cases` times; each answer of `store`
/// checked against the model.
fn agrees_with_brute_force(rt: &tokio::runtime::Runtime, store: Arc<dyn Store>, cases: u32) {
    let account = rt.block_on(async {
        store.add_domain("example.org").await.unwrap();
        store.add_account("s@example.org", "pw").await.unwrap()
    });
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    // The runner takes a `Fn`: counters in cells.
    let case = std::cell::Cell::new(0);
    let matched = std::cell::Cell::new(0usize);
    let total = std::cell::Cell::new(0usize);
    runner
        .run(&(vec(spec(), 1..40), vec(key(), 1..40)), |(specs, keys)| {
            case.set(case.get() + 1);
            let (mailbox, models) = rt.block_on(load(&store, account, case.get(), &specs));
            for key in &keys {
                let got = rt.block_on(store.search(mailbox, key)).unwrap();
                let want: Vec<Uid> = models
                    .iter()
                    .filter(|m| eval(key, m))
                    .map(|m| m.uid)
                    .collect();
                total.set(total.get() + 1);
                if !want.is_empty() && want.len() < models.len() {
                    matched.set(matched.get() + 1);
                }
                if got != want {
                    return Err(TestCaseError::fail(format!(
                        "{key:?}\nstore: {got:?}\nmodel: {want:?}\nmessages: {models:#?}"
                    )));
                }
            }
            Ok(())
        })
        .unwrap();
    // The vocabulary keeps results mixed: most keys split the mailbox.
    let (matched, total) = (matched.get(), total.get());
    eprintln!(
        "{} cases, {total} keys, {matched} split the mailbox",
        case.get()
    );
    assert!(
        matched * 3 > total,
        "only {matched} of {total} keys discriminated"
    );
}
