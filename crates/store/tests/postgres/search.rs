//! PostgreSQL: search. Messages are written straight into the tables (the
//! blob with its indexed header columns, its raw header block, its folded
//! text, the mailbox entry), as the message writer leaves them, so each
//! search key is checked against rows whose content the test chose.

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
        // Marks of a character that decomposes go; a mark written on its
        // own (Thai vowels and tones) stays.
        let drop_marks = std::iter::once(c).nfd().nth(1).is_some();
        for d in std::iter::once(c)
            .nfd()
            .filter(|&d| !(drop_marks && is_combining_mark(d)))
        {
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
