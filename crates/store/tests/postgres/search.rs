//! PostgreSQL: search. Messages are written straight into the tables (the
//! blob with its indexed header columns, its raw header block, its folded
//! text, the mailbox entry), as the message writer leaves them, so each
//! search key is checked against rows whose content the test chose.

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use store::{SearchKey, Store, StoreError, Uid};
use tokio_postgres::{Client, NoTls};
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;
use unicode_segmentation::UnicodeSegmentation;

use super::{open, Fixture};

const DAY: i64 = 86_400;

/// One message as the tables hold it.
#[derive(Debug, Clone, Default)]
struct Mail {
    from: String,
    to: String,
    cc: String,
    subject: String,
    /// The raw header block.
    header: String,
    /// Store the header block packed with zstd (codec 1).
    packed_header: bool,
    /// No `blob_parsed` row: a blob from before header blocks were kept.
    no_header_row: bool,
    /// The decoded text parts.
    body: String,
    /// The day the Date field names, if it has one that parses.
    sent_day: Option<i64>,
    internal: i64,
    size: i64,
    flags: i32,
    keywords: String,
    modseq: i64,
}

/// Whether `c` is of a script written without spaces (the ones used
/// here: Thai and CJK).
fn unspaced(c: char) -> bool {
    matches!(c, '\u{0E00}'..='\u{0EFF}' | '\u{3040}'..='\u{9FFF}')
}

/// Text as the message writer puts it into `blob_text`: a space around
/// each character (grapheme) of a script written without spaces, then
/// diacritics dropped, case folded, white space runs one space.
fn index_fold(text: &str) -> String {
    let mut spaced = String::new();
    let mut after_unspaced = false;
    for cluster in text.graphemes(true) {
        let is_unspaced = cluster.chars().next().is_some_and(unspaced);
        let apart = spaced.is_empty()
            || spaced.ends_with(char::is_whitespace)
            || cluster.starts_with(char::is_whitespace);
        if (is_unspaced || after_unspaced) && !apart {
            spaced.push(' ');
        }
        spaced.push_str(cluster);
        after_unspaced = is_unspaced;
    }
    let mut out = String::new();
    let mut space = false;
    for c in spaced.chars() {
        if c.is_whitespace() {
            if !space {
                out.push(' ');
            }
            space = true;
            continue;
        }
        space = false;
        for d in std::iter::once(c).nfd().filter(|&d| !is_combining_mark(d)) {
            out.extend(d.to_lowercase());
        }
    }
    out
}

/// A direct connection to the store's database, for writing rows.
struct Tables {
    client: Client,
    account: i64,
}

impl Tables {
    async fn connect(f: &Fixture) -> Tables {
        let (client, connection) = tokio_postgres::connect(&f.pg.url(&f.db), NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let domain: i64 = client
            .query_one(
                "INSERT INTO domains (name) VALUES ('example.org') RETURNING id",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let account: i64 = client
            .query_one(
                "INSERT INTO accounts (address, domain_id, password_hash, created)
                 VALUES ('a@example.org', $1, 'x', 0) RETURNING id",
                &[&domain],
            )
            .await
            .unwrap()
            .get(0);
        Tables { client, account }
    }

    async fn mailbox(&self, name: &str) -> i64 {
        self.client
            .query_one(
                "INSERT INTO mailboxes (account_id, name, uid_validity) VALUES ($1, $2, 1)
                 RETURNING id",
                &[&self.account, &name],
            )
            .await
            .unwrap()
            .get(0)
    }

    /// Files `mail` in `mailbox` under `uid`; its blob's id.
    async fn put(&self, mailbox: i64, uid: Uid, mail: &Mail) -> i64 {
        let c = &self.client;
        let blob: i64 = c
            .query_one(
                "INSERT INTO blobs (created, complete, size, hdr_from, hdr_to, hdr_cc,
                     hdr_subject, hdr_day)
                 VALUES (0, true, $1, $2, $3, $4, $5, $6) RETURNING id",
                &[
                    &mail.size,
                    &mail.from,
                    &mail.to,
                    &mail.cc,
                    &mail.subject,
                    &mail.sent_day,
                ],
            )
            .await
            .unwrap()
            .get(0);
        if !mail.no_header_row {
            let (codec, header): (i32, Vec<u8>) = if mail.packed_header {
                (1, zstd::bulk::compress(mail.header.as_bytes(), 1).unwrap())
            } else {
                (0, mail.header.as_bytes().to_vec())
            };
            c.execute(
                "INSERT INTO blob_parsed (blob_id, structure, header, header_codec)
                 VALUES ($1, '\\x', $2, $3)",
                &[&blob, &header, &codec],
            )
            .await
            .unwrap();
        }
        let addresses = index_fold(&format!(
            "{} {} {}\n{}",
            mail.from, mail.to, mail.cc, mail.header
        ));
        c.execute(
            "INSERT INTO blob_text (blob_id, part, subject, addresses, body)
             VALUES ($1, 0, $2, $3, $4)",
            &[
                &blob,
                &index_fold(&mail.subject),
                &addresses,
                &index_fold(&mail.body),
            ],
        )
        .await
        .unwrap();
        c.execute(
            "INSERT INTO messages (mailbox_id, uid, blob_id, size, flags, keywords,
                 internal_date, modseq)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &mailbox,
                &i64::from(uid),
                &blob,
                &mail.size,
                &mail.flags,
                &mail.keywords,
                &mail.internal,
                &mail.modseq,
            ],
        )
        .await
        .unwrap();
        blob
    }
}

/// A mail with this subject and body, and a header block naming them.
fn mail(subject: &str, body: &str) -> Mail {
    Mail {
        subject: subject.into(),
        header: format!("Subject: {subject}\r\n"),
        body: body.into(),
        size: 100,
        modseq: 1,
        ..Mail::default()
    }
}

/// The store, a mailbox, and its messages filed as UIDs 1, 2, ...
async fn with_mails(mails: &[Mail]) -> (Fixture, Tables, i64) {
    let f = open().await;
    let t = Tables::connect(&f).await;
    let mbox = t.mailbox("INBOX").await;
    for (i, m) in mails.iter().enumerate() {
        t.put(mbox, i as Uid + 1, m).await;
    }
    (f, t, mbox)
}

async fn found(f: &Fixture, mbox: i64, key: SearchKey) -> Vec<Uid> {
    f.store.search(mbox, &key).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_body_find_any_substring_of_the_text() {
    let mut first = mail(
        "The haystack",
        "A needle, in the hay-stack.\r\nHello\r\n  world\r\n",
    );
    first.header.push_str("X-Note: Zurich\r\n");
    let mut second = mail("Zürich", "สวัสดี haystacks\r\n");
    second.header = "Subject: =?UTF-8?Q?Z=C3=BCrich?=\r\n".into();
    let mails = [
        first,
        second,
        mail("other", "Nothing here but stacks of hay.\r\n"),
        mail("--", "-- \r\nsignature\r\n"),
    ];
    let (f, _t, mbox) = with_mails(&mails).await;
    let body = |s: &str| SearchKey::Body(s.into());
    let text = |s: &str| SearchKey::Text(s.into());
    // Inside a word, at its ends, in any case.
    assert_eq!(found(&f, mbox, body("AYST")).await, [2]);
    assert_eq!(found(&f, mbox, text("ayst")).await, [1, 2]);
    assert_eq!(found(&f, mbox, text("haystack")).await, [1, 2]);
    assert_eq!(found(&f, mbox, text("haystacks")).await, [2]);
    assert_eq!(found(&f, mbox, body("tack")).await, [1, 2, 3]);
    assert_eq!(found(&f, mbox, body("eedl")).await, [1]);
    // Across words and punctuation, exactly as written: white space runs
    // count as one space, punctuation must be there.
    assert_eq!(found(&f, mbox, body("hay-stack.")).await, [1]);
    assert_eq!(found(&f, mbox, body("ay-sta")).await, [1]);
    assert_eq!(found(&f, mbox, body("dle, in t")).await, [1]);
    assert!(found(&f, mbox, body("dle in t")).await.is_empty());
    assert_eq!(found(&f, mbox, body("hello world")).await, [1]);
    assert_eq!(found(&f, mbox, body(" hello\t\r\n world ")).await, [1]);
    assert_eq!(found(&f, mbox, body("stacks of")).await, [3]);
    assert!(found(&f, mbox, body("stacks, of")).await.is_empty());
    // Diacritics fold; the header counts for TEXT, not for BODY.
    assert_eq!(found(&f, mbox, text("zurich")).await, [1, 2]);
    assert_eq!(found(&f, mbox, text("ZÜRICH")).await, [1, 2]);
    assert!(found(&f, mbox, body("zurich")).await.is_empty());
    assert_eq!(found(&f, mbox, text("x-note: zur")).await, [1]);
    // Thai, written without spaces: any run of its characters, in order.
    assert_eq!(found(&f, mbox, body("\u{e27}\u{e31}\u{e2a}")).await, [2]);
    assert!(found(&f, mbox, body("\u{e14}\u{e35}\u{e2a}"))
        .await
        .is_empty());
    // No word in the needle at all: punctuation is looked for as such.
    assert_eq!(found(&f, mbox, body("--")).await, [4]);
    assert_eq!(found(&f, mbox, text(" ")).await, [1, 2, 3, 4]);
    assert_eq!(found(&f, mbox, body("")).await, [1, 2, 3, 4]);
    // A letter or two (no trigram): still exact.
    assert_eq!(found(&f, mbox, body("y")).await, [1, 2, 3]);
    assert_eq!(found(&f, mbox, body("ig")).await, [4]);
    // Under NOT and OR, long and short needles alike.
    assert_eq!(
        found(&f, mbox, SearchKey::Not(Box::new(body("haystack")))).await,
        [1, 3, 4]
    );
    assert_eq!(
        found(
            &f,
            mbox,
            SearchKey::Or(Box::new(body("ig")), Box::new(text("ZURICH")))
        )
        .await,
        [1, 2, 4]
    );
    assert_eq!(
        found(&f, mbox, SearchKey::Not(Box::new(body("y")))).await,
        [4]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_needle_in_thousands_of_words_is_found_exactly() {
    let mut many = String::new();
    for n in 0..3000 {
        many.push_str(&format!("w{n}qz{} ", n * 7));
        if n % 10 == 9 {
            many.push_str("\r\n");
        }
    }
    let mails = [
        mail("words", &many),
        mail("one", "xqzx\r\n"),
        mail("none", "q z\r\n"),
        mail("none", "xq\r\nzx\r\n"),
    ];
    let (f, _t, mbox) = with_mails(&mails).await;
    assert_eq!(found(&f, mbox, SearchKey::Body("QZ".into())).await, [1, 2]);
    assert_eq!(
        found(&f, mbox, SearchKey::Body("w2999qz20993".into())).await,
        [1]
    );
    assert_eq!(found(&f, mbox, SearchKey::Text("9qz6".into())).await, [1]);
    // A line break is white space like any other.
    assert_eq!(found(&f, mbox, SearchKey::Body("q z".into())).await, [3, 4]);
    assert_eq!(found(&f, mbox, SearchKey::Body("xq zx".into())).await, [4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn like_wildcards_in_a_needle_match_only_themselves() {
    let mails = [
        mail("a", "100% sure_thing \\o/\r\n"),
        mail("b", "1000 surely things o\r\n"),
        mail("c", "50%\r\n"),
    ];
    let (f, _t, mbox) = with_mails(&mails).await;
    let body = |s: &str| SearchKey::Body(s.into());
    assert_eq!(found(&f, mbox, body("0% s")).await, [1]);
    assert_eq!(found(&f, mbox, body("%")).await, [1, 3]);
    assert_eq!(found(&f, mbox, body("_")).await, [1]);
    assert_eq!(found(&f, mbox, body("e_t")).await, [1]);
    assert!(found(&f, mbox, body("1_0")).await.is_empty());
    assert!(found(&f, mbox, body("1%0")).await.is_empty());
    assert_eq!(found(&f, mbox, body("\\o/")).await, [1]);
    assert_eq!(found(&f, mbox, body("\\")).await, [1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_and_bcc_read_the_raw_header_block_packed_or_not() {
    let header = "Subject: one\r\nX-Tag: alpha\r\n\tbeta\r\nBCC: Ann <ann@b.test>\r\n\
                  x-tag:gamma \r\n";
    let mut raw = mail("one", "body X-Tag: body\r\n");
    raw.header = header.into();
    let mut packed = raw.clone();
    packed.packed_header = true;
    let mut plain = mail("two", "nothing\r\n");
    plain.header = "Subject: two\r\nCc: c@d.test\r\n".into();
    let mut old = mail("three", "old\r\n");
    old.no_header_row = true;
    let (f, _t, mbox) = with_mails(&[raw, packed, plain, old]).await;
    let header = |n: &str, v: &str| SearchKey::Header(n.into(), v.into());
    // Unfolded values, names and values ignoring case.
    assert_eq!(found(&f, mbox, header("x-TAG", "ALPHA\tBE")).await, [1, 2]);
    assert_eq!(found(&f, mbox, header("X-Tag", "gamma")).await, [1, 2]);
    assert!(found(&f, mbox, header("X-Tag", "body")).await.is_empty());
    // An empty value: the messages having the field; a blob without its
    // header block has none.
    assert_eq!(found(&f, mbox, header("x-tag", "")).await, [1, 2]);
    assert_eq!(found(&f, mbox, header("subject", "")).await, [1, 2, 3]);
    assert_eq!(found(&f, mbox, header("cc", "")).await, [3]);
    assert_eq!(
        found(&f, mbox, SearchKey::Not(Box::new(header("subject", "")))).await,
        [4]
    );
    // BCC looks in the header; the empty string is in every message.
    assert_eq!(
        found(&f, mbox, SearchKey::Bcc("ANN@b".into())).await,
        [1, 2]
    );
    assert_eq!(
        found(&f, mbox, SearchKey::Bcc(String::new())).await,
        [1, 2, 3, 4]
    );
    // Two header keys in one search, with other keys.
    assert_eq!(
        found(
            &f,
            mbox,
            SearchKey::Or(
                Box::new(SearchKey::And(vec![
                    header("bcc", "ann"),
                    SearchKey::Uids(vec![(2, 9)])
                ])),
                Box::new(header("CC", "D.TEST")),
            )
        )
        .await,
        [2, 3]
    );
    // User text that looks like SQL or a placeholder is only text.
    assert!(found(&f, mbox, header("X-Tag'; --", "$1")).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_columns_match_substrings_ignoring_case() {
    let mut a = mail("Café PLANS", "");
    a.from = "Zoë <ZOE@Example.org>".into();
    a.to = "bob@mail.test".into();
    let mut b = mail("Ελληνικά", "");
    b.from = "alice@example.org".into();
    b.cc = "Bob <bob@mail.test>".into();
    let (f, _t, mbox) = with_mails(&[a, b]).await;
    assert_eq!(
        found(&f, mbox, SearchKey::From("zoë <zoe@".into())).await,
        [1]
    );
    assert_eq!(found(&f, mbox, SearchKey::From("ZOË".into())).await, [1]);
    assert!(found(&f, mbox, SearchKey::From("zoe <".into()))
        .await
        .is_empty());
    assert_eq!(
        found(&f, mbox, SearchKey::From("EXAMPLE.ORG".into())).await,
        [1, 2]
    );
    assert_eq!(found(&f, mbox, SearchKey::To("BOB@".into())).await, [1]);
    assert_eq!(found(&f, mbox, SearchKey::Cc("bob <".into())).await, [2]);
    assert_eq!(
        found(&f, mbox, SearchKey::Subject("café plans".into())).await,
        [1]
    );
    assert_eq!(
        found(&f, mbox, SearchKey::Subject("ΕΛΛΗΝ".into())).await,
        [2]
    );
    assert_eq!(
        found(&f, mbox, SearchKey::Subject("%".into())).await,
        Vec::<Uid>::new()
    );
    assert_eq!(found(&f, mbox, SearchKey::Cc(String::new())).await, [1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flags_keywords_sizes_dates_uids_and_modseqs() {
    let base = 20_089; // 2025-01-01
    let mut mails = Vec::new();
    for i in 0..6i64 {
        let mut m = mail("s", "b");
        m.flags = [0, 1, 3, 8, 9, 1][i as usize];
        m.keywords = ["", "$Forwarded Work", "work", "Urgent", "", "$Junk"][i as usize].into();
        m.size = 100 * (i + 1);
        m.modseq = 10 + i;
        m.internal = (base + i) * DAY + 5;
        // Sent the day before it arrived, but for the last two: one has no
        // Date field (its internal date's day counts), one a later one.
        m.sent_day = match i {
            4 => None,
            5 => Some(base + 9),
            _ => Some(base + i - 1),
        };
        mails.push(m);
    }
    let (f, t, mbox) = with_mails(&mails).await;
    // Another mailbox's message is never found.
    let other = t.mailbox("Other").await;
    t.put(other, 1, &mails[0]).await;
    use SearchKey::*;
    let not = |k: SearchKey| Not(Box::new(k));
    assert_eq!(found(&f, mbox, All).await, [1, 2, 3, 4, 5, 6]);
    assert_eq!(found(&f, mbox, And(vec![])).await, [1, 2, 3, 4, 5, 6]);
    assert_eq!(found(&f, mbox, FlagsSet(1)).await, [2, 3, 5, 6]);
    assert_eq!(found(&f, mbox, FlagsSet(9)).await, [5]);
    assert_eq!(found(&f, mbox, FlagsSet(0)).await, [1, 2, 3, 4, 5, 6]);
    assert_eq!(found(&f, mbox, FlagsUnset(9)).await, [1]);
    assert_eq!(found(&f, mbox, FlagsUnset(0)).await, [1, 2, 3, 4, 5, 6]);
    assert!(found(&f, mbox, FlagsSet(0x8000_0000)).await.is_empty());
    assert_eq!(found(&f, mbox, Keyword("WORK".into())).await, [2, 3]);
    assert_eq!(found(&f, mbox, Keyword("$forwarded".into())).await, [2]);
    assert!(found(&f, mbox, Keyword("Wor".into())).await.is_empty());
    assert!(found(&f, mbox, Keyword("not a keyword".into()))
        .await
        .is_empty());
    assert_eq!(
        found(&f, mbox, Unkeyword("work".into())).await,
        [1, 4, 5, 6]
    );
    assert_eq!(
        found(&f, mbox, Unkeyword("not a keyword".into())).await,
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(found(&f, mbox, Larger(300)).await, [4, 5, 6]);
    assert_eq!(found(&f, mbox, Smaller(300)).await, [1, 2]);
    assert!(found(&f, mbox, Larger(u64::MAX)).await.is_empty());
    assert_eq!(found(&f, mbox, Smaller(u64::MAX)).await.len(), 6);
    assert_eq!(found(&f, mbox, ModSeqAtLeast(14)).await, [5, 6]);
    assert!(found(&f, mbox, ModSeqAtLeast(u64::MAX)).await.is_empty());
    assert_eq!(found(&f, mbox, Before(base + 2)).await, [1, 2]);
    assert_eq!(found(&f, mbox, On(base + 2)).await, [3]);
    assert_eq!(found(&f, mbox, Since(base + 4)).await, [5, 6]);
    // The sent day: the Date field's, else the internal date's.
    assert_eq!(found(&f, mbox, SentOn(base + 1)).await, [3]);
    assert_eq!(found(&f, mbox, SentOn(base + 4)).await, [5]);
    assert_eq!(found(&f, mbox, SentOn(base + 9)).await, [6]);
    assert_eq!(found(&f, mbox, SentBefore(base + 2)).await, [1, 2, 3]);
    assert_eq!(found(&f, mbox, SentSince(base + 3)).await, [5, 6]);
    assert_eq!(
        found(&f, mbox, not(SentOn(base + 4))).await,
        [1, 2, 3, 4, 6]
    );
    assert_eq!(
        found(&f, mbox, SentBefore(i64::MIN)).await,
        Vec::<Uid>::new()
    );
    assert_eq!(found(&f, mbox, SentSince(i64::MIN)).await.len(), 6);
    // UID ranges, either end first; many ranges go as arrays.
    assert_eq!(
        found(&f, mbox, Uids(vec![(5, 3), (1, 1)])).await,
        [1, 3, 4, 5]
    );
    assert_eq!(found(&f, mbox, Uids(vec![])).await, Vec::<Uid>::new());
    let many: Vec<(Uid, Uid)> = (0..40).map(|i| (2 * i, 2 * i)).collect();
    assert_eq!(found(&f, mbox, Uids(many.clone())).await, [2, 4, 6]);
    assert_eq!(found(&f, mbox, not(Uids(many))).await, [1, 3, 5]);
    assert_eq!(
        found(&f, mbox, Uids(vec![(u32::MAX, 6), (0, 0)])).await,
        [6]
    );
    // Nesting.
    assert_eq!(
        found(
            &f,
            mbox,
            And(vec![
                Or(Box::new(FlagsSet(8)), Box::new(Keyword("work".into()))),
                not(Larger(400)),
            ])
        )
        .await,
        [2, 3, 4]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_flat_keys_are_answered_and_deep_trees_refused() {
    let mut a = mail("s", "b");
    a.size = 100;
    let mut b = a.clone();
    b.flags = 1;
    let (f, _t, mbox) = with_mails(&[a, b]).await;
    for n in [1, 2, 999, 1000, 5000] {
        let keys: Vec<SearchKey> = (0..n)
            .map(|i| {
                if i % 2 == 0 {
                    SearchKey::FlagsUnset(1)
                } else {
                    SearchKey::Smaller(1000 + i as u64)
                }
            })
            .collect();
        assert_eq!(found(&f, mbox, SearchKey::And(keys)).await, [1], "{n} keys");
    }
    let texts: Vec<SearchKey> = (0..1500)
        .map(|i| SearchKey::Not(Box::new(SearchKey::Body(format!("absent{i}")))))
        .collect();
    assert_eq!(found(&f, mbox, SearchKey::And(texts)).await, [1, 2]);
    let mut deep = SearchKey::All;
    for _ in 0..200 {
        deep = SearchKey::Not(Box::new(deep));
    }
    assert!(matches!(
        f.store.search(mbox, &deep).await,
        Err(StoreError::Invalid(_))
    ));
    let mut deep_or = SearchKey::All;
    for _ in 0..65 {
        deep_or = SearchKey::Or(Box::new(SearchKey::FlagsSet(1)), Box::new(deep_or));
    }
    assert!(matches!(
        f.store.search(mbox, &deep_or).await,
        Err(StoreError::Invalid(_))
    ));
}

// The brute-force comparison of tests/search.rs: random messages and
// random nested keys, each answer checked against a plain Rust model.

/// Words of subjects, bodies and tag headers: few, so matches are frequent.
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
/// First day of the dates used: 2025-01-01.
const BASE_DAY: i64 = 20_089;
const DAYS: i64 = 6;

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
    /// The sent time as written (local to its zone).
    sent: Option<i64>,
    internal: i64,
    tag: Option<(Vec<usize>, bool)>,
    body: Vec<usize>,
    flags: u32,
    keywords: Vec<(usize, bool)>,
    modseq: u64,
    packed_header: bool,
}

/// A filed message as the model sees it.
#[derive(Debug)]
struct Model {
    uid: Uid,
    modseq: u64,
    size: u64,
    flags: u32,
    keywords: Vec<String>,
    internal: i64,
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
    (BASE_DAY * DAY)..((BASE_DAY + DAYS) * DAY)
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
            proptest::option::of(time_in_range()),
            time_in_range(),
            proptest::option::of((vec(0..WORDS.len(), 1..4), any::<bool>())),
        ),
        (
            words(30),
            0u32..32,
            vec((0..KEYWORDS.len(), any::<bool>()), 0..3),
            1u64..40,
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (from, to, cc, bcc),
                (subject, sent, internal, tag),
                (body, flags, keywords, modseq, packed_header),
            )| Spec {
                from,
                to,
                cc,
                bcc,
                subject,
                sent,
                internal,
                tag,
                body,
                flags,
                keywords,
                modseq,
                packed_header,
            },
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
        // Enough separate UIDs to go as arrays.
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
    t.div_euclid(DAY)
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

/// The raw header block, the fields the model keeps, and the body text.
fn render(spec: &Spec, n: usize) -> (String, Vec<(String, String)>, String) {
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
    if let Some(sent) = spec.sent {
        fields.push(("Date".into(), format!("{sent}")));
    }
    fields.push(("Message-ID".into(), format!("<m{n}@example.org>")));
    let mut header = String::new();
    for (name, value) in &fields {
        header.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some((tag, folded)) = &spec.tag {
        let words: Vec<&str> = tag.iter().map(|&i| WORDS[i]).collect();
        // Folded: the line break before a space is removed on unfolding.
        let sep = if *folded { "\r\n " } else { " " };
        header.push_str(&format!("X-Tag: {}\r\n", words.join(sep)));
        fields.push(("X-Tag".into(), words.join(" ")));
    }
    let mut body = String::new();
    for line in spec.body.chunks(7) {
        let words: Vec<&str> = line.iter().map(|&i| WORDS[i]).collect();
        body.push_str(&words.join(" "));
        body.push_str("\r\n");
    }
    (header, fields, body)
}

/// Files the messages in a new mailbox and builds the model of each.
async fn load(t: &Tables, case: usize, specs: &[Spec]) -> (i64, Vec<Model>) {
    let mailbox = t.mailbox(&format!("case{case}")).await;
    let mut models = Vec::new();
    for (n, spec) in specs.iter().enumerate() {
        let uid = n as Uid + 1;
        let (header, fields, body) = render(spec, n);
        let size = (header.len() + 2 + body.len()) as u64;
        let mut keywords: Vec<String> = Vec::new();
        for &(i, up) in &spec.keywords {
            let k = case_variant(KEYWORDS[i], up);
            if !keywords.iter().any(|u| u.eq_ignore_ascii_case(&k)) {
                keywords.push(k);
            }
        }
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
        let mail = Mail {
            from: from.clone(),
            to: to.clone(),
            cc: cc.clone(),
            subject: subject.clone(),
            header: header.clone(),
            packed_header: spec.packed_header,
            no_header_row: false,
            body: body.clone(),
            sent_day: spec.sent.map(day_of),
            internal: spec.internal,
            size: size as i64,
            flags: spec.flags as i32,
            keywords: keywords.join(" "),
            modseq: spec.modseq as i64,
        };
        t.put(mailbox, uid, &mail).await;
        models.push(Model {
            uid,
            modseq: spec.modseq,
            size,
            flags: spec.flags,
            keywords,
            internal: spec.internal,
            sent: spec.sent.unwrap_or(spec.internal),
            subject_text: text_fold(&subject),
            address_text: text_fold(&format!("{from} {to} {cc}\n{header}")),
            body_text: text_fold(&body),
            from,
            to,
            cc,
            subject,
            fields,
        });
    }
    (mailbox, models)
}

#[test]
fn search_agrees_with_brute_force() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (f, t) = rt.block_on(async {
        let f = open().await;
        let t = Tables::connect(&f).await;
        (f, t)
    });
    let mut runner = TestRunner::new(Config {
        cases: 128,
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
            let (mailbox, models) = rt.block_on(load(&t, case.get(), &specs));
            for key in &keys {
                let got = rt.block_on(f.store.search(mailbox, key)).unwrap();
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
    assert!(
        matched * 3 > total,
        "only {matched} of {total} keys discriminated"
    );
}
