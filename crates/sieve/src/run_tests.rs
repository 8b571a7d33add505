//! Running scripts end to end: each extension, the action rules, limits.

use super::*;
use crate::{Envelope, Message, SpamVerdict};

const MSG: &[u8] = b"From: Alice <alice@example.org>\r\n\
To: Bob <bob+lists@example.com>, carol@example.net\r\n\
Cc: dave@example.com\r\n\
Subject: [list] Hello there\r\n\
Date: Tue, 1 Jul 2003 10:52:37 +0200\r\n\
Message-ID: <abc@example.org>\r\n\
X-Num: 10\r\n\
X-Num: 9\r\n\
Content-Type: text/plain\r\n\
\r\n\
Hi Bob,\r\nthe meeting moved.\r\n";

#[derive(Default)]
struct TestHost {
    mailboxes: Vec<&'static str>,
    scripts: Vec<(Location, &'static str, &'static str)>,
    seen: Vec<String>,
}

impl Host for TestHost {
    fn mailbox_exists(&self, name: &str) -> bool {
        self.mailboxes.contains(&name)
    }
    fn script_source(&self, location: Location, name: &str) -> Option<String> {
        self.scripts
            .iter()
            .find(|(l, n, _)| *l == location && *n == name)
            .map(|(_, _, s)| s.to_string())
    }
    fn duplicate_seen(&self, id: &str, _period_secs: u64) -> bool {
        self.seen.iter().any(|s| s == id)
    }
}

fn now() -> time::OffsetDateTime {
    // 2024-03-05 14:30:00 +01:00, a Tuesday.
    time::OffsetDateTime::from_unix_timestamp(1_709_645_400)
        .unwrap()
        .to_offset(time::UtcOffset::from_hms(1, 0, 0).unwrap())
}

fn run_with(src: &str, msg: &[u8], host: &TestHost) -> Result<Outcome, RuntimeError> {
    let script = compile(src).unwrap_or_else(|e| panic!("{e}"));
    let message = Message::parse(msg);
    let envelope = Envelope {
        from: "alice@example.org".into(),
        to: "bob+lists@example.com".into(),
        auth: None,
    };
    let addresses = vec!["bob@example.com".to_string()];
    let ctx = Context {
        message: &message,
        envelope: &envelope,
        addresses: &addresses,
        spam: Some(SpamVerdict {
            score: 7,
            percent: None,
        }),
        virus: Some(1),
        now: now(),
    };
    run(&script, &ctx, host, &Limits::default())
}

fn actions(src: &str) -> Vec<Action> {
    run_with(src, MSG, &TestHost::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .actions
}

fn keep() -> Action {
    Action::Keep { flags: vec![] }
}

fn into(m: &str) -> Action {
    Action::FileInto {
        mailbox: m.into(),
        flags: vec![],
        create: false,
    }
}

#[test]
fn base_language() {
    assert_eq!(actions(""), [keep()]);
    assert_eq!(actions("discard;"), []);
    assert_eq!(actions("keep; discard;"), [keep()]);
    assert_eq!(
        actions("if header :contains \"subject\" \"hello\" { redirect \"x@y.z\"; }"),
        [Action::Redirect {
            address: "x@y.z".into()
        }]
    );
    assert_eq!(
        actions("if header :is \"subject\" \"nope\" { discard; } elsif exists \"x-num\" { stop; } else { discard; }"),
        [keep()]
    );
    assert_eq!(actions("if size :over 100K { discard; }"), [keep()]);
    assert_eq!(actions("if size :under 100 { discard; }"), [keep()]);
    assert_eq!(actions("if size :over 100 { discard; }"), []);
    assert_eq!(
        actions("if address :domain :is \"to\" \"example.net\" { discard; }"),
        []
    );
    assert_eq!(
        actions("if address :localpart :is \"from\" \"ALICE\" { discard; }"),
        []
    );
    assert_eq!(
        actions(
            "if address :comparator \"i;octet\" :localpart :is \"from\" \"ALICE\" { discard; }"
        ),
        [keep()]
    );
    assert_eq!(
        actions("if not anyof (false, header :matches \"subject\" \"*there\") { discard; }"),
        [keep()]
    );
    assert_eq!(
        actions("if allof (true, exists [\"to\", \"cc\"]) { discard; }"),
        []
    );
    assert_eq!(
        actions("if exists [\"to\", \"bcc\"] { discard; }"),
        [keep()]
    );
}

#[test]
fn fileinto_copy_flags_mailbox() {
    assert_eq!(
        actions("require \"fileinto\"; fileinto \"A\"; fileinto \"A\"; fileinto \"INBOX\";"),
        [into("A"), keep()]
    );
    assert_eq!(
        actions("require [\"fileinto\", \"copy\"]; fileinto :copy \"A\";"),
        [into("A"), keep()]
    );
    assert_eq!(
        actions("require [\"fileinto\", \"imap4flags\"]; addflag \"\\\\Seen\"; fileinto \"A\"; removeflag \"\\\\seen\"; addflag [\"a b\", \"c\"]; keep; fileinto :flags \"z\" \"B\";"),
        [
            Action::FileInto { mailbox: "A".into(), flags: vec!["\\Seen".into()], create: false },
            Action::Keep { flags: vec!["a".into(), "b".into(), "c".into()] },
            Action::FileInto { mailbox: "B".into(), flags: vec!["z".into()], create: false },
        ]
    );
    assert_eq!(
        actions("require \"imap4flags\"; setflag \"x\"; if hasflag \"X\" { addflag \"y\"; }"),
        [Action::Keep {
            flags: vec!["x".into(), "y".into()]
        }]
    );
    assert_eq!(
        actions("require [\"imap4flags\", \"variables\", \"relational\", \"comparator-i;ascii-numeric\"]; setflag \"v\" \"a b\"; addflag \"v\" \"c\"; if hasflag :count \"eq\" :comparator \"i;ascii-numeric\" \"v\" \"3\" { discard; }"),
        Vec::<Action>::new()
    );
    let host = TestHost {
        mailboxes: vec!["Exists"],
        ..Default::default()
    };
    let out = run_with(
        "require [\"fileinto\", \"mailbox\"]; if mailboxexists \"Exists\" { fileinto :create \"New\"; } if mailboxexists [\"Exists\", \"Nope\"] { discard; }",
        MSG,
        &host,
    )
    .unwrap();
    assert_eq!(
        out.actions,
        [Action::FileInto {
            mailbox: "New".into(),
            flags: vec![],
            create: true
        }]
    );
}

#[test]
fn reject_rules() {
    assert_eq!(
        actions("require \"reject\"; reject \"go away\";"),
        [Action::Reject {
            reason: "go away".into(),
            extended: false
        }]
    );
    assert_eq!(
        actions("require \"ereject\"; ereject \"no\"; discard;"),
        [Action::Reject {
            reason: "no".into(),
            extended: true
        }]
    );
    for s in [
        "require [\"reject\", \"fileinto\"]; fileinto \"A\"; reject \"x\";",
        "require [\"reject\"]; reject \"x\"; keep;",
        "require [\"reject\"]; redirect \"a@b.c\"; reject \"x\";",
    ] {
        let e = run_with(s, MSG, &TestHost::default()).unwrap_err();
        assert!(matches!(e, RuntimeError::Conflict(_)), "{s}: {e}");
    }
}

#[test]
fn variables_and_matches() {
    assert_eq!(
        actions("require [\"fileinto\", \"variables\"]; if header :matches \"subject\" \"[*] *\" { fileinto \"${1}/${2}\"; }"),
        [into("list/Hello there")]
    );
    assert_eq!(
        actions("require [\"fileinto\", \"variables\"]; set :upperfirst :lower \"x\" \"hELLO\"; set :length \"n\" \"${x}\"; fileinto \"${x}-${n}-${unset}\";"),
        [into("Hello-5-")]
    );
    assert_eq!(
        actions("require [\"variables\"]; set \"a\" \"x*\"; set :quotewildcard \"b\" \"${a}\"; if string :matches \"x*\" \"${b}\" { discard; }"),
        []
    );
    assert_eq!(
        actions("require [\"variables\", \"relational\"]; if string :count \"eq\" [\"a\", \"\", \"b\"] \"2\" { discard; }"),
        Vec::<Action>::new()
    );
    assert_eq!(
        actions("require [\"fileinto\", \"variables\", \"regex\"]; if header :regex \"subject\" \"^\\\\[([a-z]+)\\\\]\" { fileinto \"${1}\"; }"),
        [into("list")]
    );
}

#[test]
fn relational_and_index() {
    assert_eq!(
        actions("require [\"relational\", \"comparator-i;ascii-numeric\"]; if header :value \"gt\" :comparator \"i;ascii-numeric\" \"x-num\" \"9\" { discard; }"),
        []
    );
    assert_eq!(
        actions("require \"relational\"; if header :count \"eq\" \"x-num\" \"2\" { discard; }"),
        []
    );
    assert_eq!(
        actions("require [\"relational\", \"comparator-i;ascii-numeric\"]; if address :count \"ge\" :comparator \"i;ascii-numeric\" [\"to\", \"cc\"] \"3\" { discard; }"),
        []
    );
    assert_eq!(
        actions("require \"index\"; if header :index 2 :is \"x-num\" \"9\" { discard; }"),
        []
    );
    assert_eq!(
        actions("require \"index\"; if header :index 1 :last :is \"x-num\" \"10\" { discard; }"),
        [keep()]
    );
}

#[test]
fn subaddress_and_envelope() {
    assert_eq!(
        actions("require [\"subaddress\", \"fileinto\", \"variables\", \"envelope\"]; if envelope :detail :matches \"to\" \"*\" { fileinto \"${1}\"; }"),
        [into("lists")]
    );
    assert_eq!(
        actions("require [\"subaddress\"]; if address :user :is \"to\" \"bob\" { discard; }"),
        []
    );
    assert_eq!(
        actions(
            "require [\"envelope\"]; if envelope :domain :is \"from\" \"example.org\" { discard; }"
        ),
        []
    );
}

#[test]
fn body_tests() {
    assert_eq!(
        actions("require \"body\"; if body :contains \"meeting moved\" { discard; }"),
        []
    );
    assert_eq!(
        actions("require \"body\"; if body :raw :contains \"Subject\" { discard; }"),
        [keep()]
    );
    assert_eq!(
        actions("require \"body\"; if body :content \"text\" :contains \"meeting\" { discard; }"),
        []
    );
    assert_eq!(
        actions("require \"body\"; if body :content \"image\" :contains \"\" { discard; }"),
        [keep()]
    );
    assert!(
        compile("require \"body\"; if body :text :contains \"x\" {}")
            .unwrap()
            .uses_body()
    );
    assert!(!compile("keep;").unwrap().uses_body());
}

#[test]
fn dates() {
    assert_eq!(
        actions("require \"date\"; if date :is \"date\" \"date\" \"2003-07-01\" { discard; }"),
        []
    );
    // 10:52 +0200 is 09:52 in the local zone (+0100).
    assert_eq!(
        actions("require \"date\"; if date :is \"date\" \"hour\" \"09\" { discard; }"),
        []
    );
    assert_eq!(
        actions(
            "require \"date\"; if date :originalzone :is \"date\" \"zone\" \"+0200\" { discard; }"
        ),
        []
    );
    assert_eq!(
        actions("require \"date\"; if date :zone \"-0500\" :is \"date\" \"time\" \"03:52:37\" { discard; }"),
        []
    );
    assert_eq!(
        actions("require \"date\"; if currentdate :is \"weekday\" \"2\" { if currentdate :is \"iso8601\" \"2024-03-05T14:30:00+01:00\" { discard; } }"),
        []
    );
    assert_eq!(
        actions("require [\"date\", \"relational\"]; if currentdate :value \"ge\" \"date\" \"2024-01-01\" { discard; }"),
        []
    );
}

#[test]
fn vacation() {
    let out = actions("require \"vacation\"; vacation :addresses \"carol@example.net\" \"away\";");
    assert_eq!(out.len(), 2);
    match &out[0] {
        Action::Vacation {
            to,
            subject,
            reason,
            period_secs,
            ..
        } => {
            assert_eq!(to, "alice@example.org");
            assert_eq!(subject, "Auto: [list] Hello there");
            assert_eq!(reason, "away");
            assert_eq!(*period_secs, 7 * 86400);
        }
        a => panic!("{a:?}"),
    }
    let out = actions(
        "require \"vacation-seconds\"; vacation :seconds 60 :subject \"s\" :handle \"h\" \"away\";",
    );
    assert!(
        matches!(&out[0], Action::Vacation { period_secs: 60, handle, subject, .. } if handle == "h" && subject == "s")
    );
    // Not addressed to the user: no answer.
    let other = b"From: alice@example.org\r\nTo: x@example.net\r\n\r\n";
    let out = run_with(
        "require \"vacation\"; vacation \"away\";",
        other,
        &TestHost::default(),
    )
    .unwrap();
    assert_eq!(out.actions, [keep()]);
}

#[test]
fn include_and_globals() {
    let host = TestHost {
        scripts: vec![
            (Location::Personal, "sub", "require [\"include\", \"variables\", \"fileinto\"]; global \"box\"; fileinto \"${box}\"; return; discard;"),
            (Location::Global, "self", "require \"include\"; include :global \"self\";"),
            (Location::Global, "bad", "frobnicate;"),
        ],
        ..Default::default()
    };
    let out = run_with(
        "require [\"include\", \"variables\"]; global \"box\"; set \"box\" \"Sub\"; include \"sub\"; include :once \"sub\"; include :optional \"none\";",
        MSG,
        &host,
    )
    .unwrap();
    assert_eq!(out.actions, [into("Sub")]);
    for (s, want) in [
        ("require \"include\"; include \"none\";", "does not exist"),
        (
            "require \"include\"; include :global \"self\";",
            "recursive",
        ),
        (
            "require \"include\"; include :global \"bad\";",
            "does not compile",
        ),
    ] {
        let e = run_with(s, MSG, &host).unwrap_err();
        assert!(e.to_string().contains(want), "{s}: {e}");
    }
    let s = compile("require \"include\"; include :global \"a\"; include \"b\"; include \"b\";")
        .unwrap();
    assert_eq!(
        s.includes(),
        [
            (Location::Global, "a".to_string()),
            (Location::Personal, "b".to_string())
        ]
    );
}

#[test]
fn duplicate() {
    let src = "require \"duplicate\"; if duplicate { discard; }";
    let out = run_with(src, MSG, &TestHost::default()).unwrap();
    assert_eq!(out.actions, [keep()]);
    assert_eq!(out.duplicates.len(), 1);
    let host = TestHost {
        seen: vec![out.duplicates[0].0.clone()],
        ..Default::default()
    };
    let out = run_with(src, MSG, &host).unwrap();
    assert_eq!(out.actions, []);
    assert!(out.duplicates.is_empty());
    let out = run_with(
        "require \"duplicate\"; if duplicate :last :seconds 60 { discard; }",
        MSG,
        &host,
    )
    .unwrap();
    assert_eq!(out.duplicates.len(), 1);
    assert_eq!(out.duplicates[0].1, 60);
    // A different handle tracks separately.
    let out = run_with(
        "require \"duplicate\"; if duplicate :handle \"x\" { discard; }",
        MSG,
        &host,
    )
    .unwrap();
    assert_eq!(out.actions, [keep()]);
    // The same id twice in one run: the second sees the first.
    assert_eq!(
        actions("require \"duplicate\"; if duplicate :uniqueid \"a\" { stop; } if duplicate :uniqueid \"a\" { discard; }"),
        []
    );
}

#[test]
fn spam_and_virus() {
    assert_eq!(
        actions("require [\"spamtest\", \"relational\", \"comparator-i;ascii-numeric\"]; if spamtest :value \"ge\" :comparator \"i;ascii-numeric\" \"5\" { discard; }"),
        []
    );
    assert_eq!(
        actions("require [\"spamtestplus\", \"relational\", \"comparator-i;ascii-numeric\"]; if spamtest :percent :value \"eq\" :comparator \"i;ascii-numeric\" \"66\" { discard; }"),
        []
    );
    assert_eq!(
        actions("require [\"virustest\", \"relational\", \"comparator-i;ascii-numeric\"]; if virustest :value \"gt\" :comparator \"i;ascii-numeric\" \"1\" { discard; }"),
        [keep()]
    );
}

#[test]
fn encoded_character() {
    assert_eq!(
        actions("require [\"encoded-character\", \"fileinto\"]; fileinto \"${hex:41 42}${unicode:43}\";"),
        [into("ABC")]
    );
    assert_eq!(
        actions("require \"fileinto\"; fileinto \"${hex:41}\";"),
        [into("${hex:41}")]
    );
}

#[test]
fn limits() {
    let s = "redirect \"a@x.org\"; redirect \"b@x.org\"; redirect \"c@x.org\"; redirect \"d@x.org\"; redirect \"e@x.org\";";
    let e = run_with(s, MSG, &TestHost::default()).unwrap_err();
    assert!(matches!(e, RuntimeError::TooManyRedirects(4)), "{e}");
    let heavy = "if anyof (".to_string() + &"false, ".repeat(30_000) + "true) { keep; }";
    let heavy = heavy.repeat(4);
    let e = run_with(&heavy, MSG, &TestHost::default()).unwrap_err();
    assert!(matches!(e, RuntimeError::TooManySteps(_)), "{e}");
    let many: String = (0..40).map(|i| format!("fileinto \"box{i}\";")).collect();
    let e = run_with(
        &format!("require \"fileinto\"; {many}"),
        MSG,
        &TestHost::default(),
    )
    .unwrap_err();
    assert!(matches!(e, RuntimeError::TooManyActions(32)), "{e}");
    // An include chain deeper than the limit.
    let host = TestHost {
        scripts: vec![
            (
                Location::Personal,
                "a",
                "require \"include\"; include \"b\";",
            ),
            (
                Location::Personal,
                "b",
                "require \"include\"; include \"c\";",
            ),
            (
                Location::Personal,
                "c",
                "require \"include\"; include \"d\";",
            ),
            (
                Location::Personal,
                "d",
                "require \"include\"; include \"e\";",
            ),
            (
                Location::Personal,
                "e",
                "require \"include\"; include \"f\";",
            ),
            (Location::Personal, "f", "keep;"),
        ],
        ..Default::default()
    };
    let e = run_with("require \"include\"; include \"a\";", MSG, &host).unwrap_err();
    assert!(matches!(e, RuntimeError::IncludeTooDeep(5)), "{e}");
}

#[test]
fn compile_errors() {
    for (src, line, column, what) in [
        ("fileinto \"x\";", 1, 1, "requires the \"fileinto\""),
        (
            "require \"nonesuch\";",
            1,
            9,
            "unsupported extension \"nonesuch\"",
        ),
        (
            "keep;\nrequire \"fileinto\";",
            2,
            1,
            "require must come before",
        ),
        ("if true {\n  frob;\n}", 2, 3, "unknown command 'frob'"),
        ("if header :is \"a\" {}", 1, 4, "expected a list of keys"),
        ("if header :bogus \"a\" \"b\" {}", 1, 11, "unknown tag"),
        (
            "require \"relational\";\nif header :value \"xx\" \"a\" \"b\" {}",
            2,
            18,
            "invalid relational",
        ),
        ("redirect \"not an address\";", 1, 10, "invalid address"),
        ("else { keep; }", 1, 1, "without a preceding if"),
        (
            "if header :comparator \"i;nope\" \"a\" \"b\" {}",
            1,
            23,
            "unknown comparator",
        ),
        (
            "require \"variables\"; set :lower :upper \"a\" \"b\";",
            1,
            33,
            "same precedence",
        ),
    ] {
        let e = compile(src).unwrap_err();
        assert_eq!((e.line, e.column), (line, column), "{src}: {e}");
        assert!(e.message.contains(what), "{src}: {e}");
    }
}

mod soup {
    use super::*;
    use proptest::prelude::*;

    const REQUIRE: &str = "require [\"fileinto\", \"reject\", \"envelope\", \"encoded-character\", \
        \"vacation-seconds\", \"imap4flags\", \"variables\", \"body\", \"relational\", \"subaddress\", \
        \"copy\", \"regex\", \"date\", \"index\", \"mailbox\", \"include\", \"duplicate\", \
        \"spamtestplus\", \"virustest\", \"comparator-i;ascii-numeric\"];\n";

    fn token() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "if",
            "elsif",
            "else",
            "stop",
            "keep",
            "discard",
            "redirect",
            "fileinto",
            "reject",
            "vacation",
            "setflag",
            "addflag",
            "removeflag",
            "hasflag",
            "set",
            "string",
            "include",
            "return",
            "global",
            "header",
            "address",
            "envelope",
            "exists",
            "size",
            "allof",
            "anyof",
            "not",
            "true",
            "false",
            "body",
            "date",
            "currentdate",
            "mailboxexists",
            "duplicate",
            "spamtest",
            "virustest",
            "{",
            "}",
            "(",
            ")",
            "[",
            "]",
            ",",
            ";",
            ":is",
            ":contains",
            ":matches",
            ":regex",
            ":count",
            ":value",
            ":comparator",
            ":index",
            ":last",
            ":over",
            ":under",
            ":days",
            ":seconds",
            ":flags",
            ":copy",
            ":create",
            ":lower",
            ":length",
            ":quotewildcard",
            ":raw",
            ":text",
            ":content",
            ":zone",
            ":originalzone",
            ":percent",
            ":uniqueid",
            ":handle",
            ":once",
            ":optional",
            ":global",
            ":localpart",
            ":domain",
            ":detail",
            "\"subject\"",
            "\"to\"",
            "\"from\"",
            "\"*\"",
            "\"${1}\"",
            "\"${a}\"",
            "\"a\"",
            "\"gt\"",
            "\"i;ascii-numeric\"",
            "\"a@b.c\"",
            "\"year\"",
            "\"+0100\"",
            "\"(x)*\"",
            "\"\\\\Seen\"",
            "1",
            "0",
            "10K",
            "\"${hex:41}\"",
            "text:\nx\n..y\n.\n",
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Random token soup: compile returns Ok or Err, and what compiles
        /// runs to an outcome or an error, never a panic.
        #[test]
        fn token_soup(tokens in prop::collection::vec(token(), 0..48)) {
            let src = REQUIRE.to_string() + &tokens.join(" ");
            if let Ok(script) = compile(&src) {
                let _ = run_with(&src, MSG, &TestHost::default());
                let _ = script.includes();
            }
        }

        #[test]
        fn arbitrary_text(s in "\\PC{0,300}") {
            let _ = compile(&s);
        }
    }
}

#[test]
fn script_is_send_and_sync() {
    fn check<T: Send + Sync + Clone>() {}
    check::<Script>();
    check::<Message>();
}

#[test]
fn dates_at_the_end_of_the_calendar() {
    let msg = b"Date: Fri, 31 Dec 9999 23:30:00 -0100\r\n\r\n";
    let out = run_with(
        "require [\"date\", \"fileinto\", \"variables\"]; if date :zone \"+1400\" :matches \"date\" \"date\" \"*\" { fileinto \"${1}\"; }",
        msg,
        &TestHost::default(),
    )
    .unwrap();
    assert_eq!(out.actions, [into("9999-12-31")]);
}
