//! The Filters page's rules, and the Sieve script they are saved as.
//!
//! A rule is one test on one header and one action. The script is named
//! [`SCRIPT_NAME`]; it opens with a comment block that holds the rules as
//! JSON, one per line, so the page reads back exactly what it wrote (the
//! Sieve below the block is never parsed). A script whose Sieve is not
//! what its rules generate was edited by hand, and the page says so.
//!
//! What the generated Sieve does, in this order:
//! 1. every "mark as read" and "flag" rule (they only set the IMAP flags
//!    the message is stored with, RFC 5232, so they apply wherever the
//!    message goes, whatever their place in the list);
//! 2. the other rules in the user's order: every matching rule acts;
//!    discard and reject end the filtering (`stop`);
//! 3. the vacation answer, if on (never for discarded or rejected mail:
//!    RFC 5429 §2.1 makes reject and vacation incompatible).

use serde::{Deserialize, Serialize};

/// The name of the script the rule editor writes.
pub const SCRIPT_NAME: &str = "webmail";
/// The first line of a script the rule editor wrote.
const MAGIC: &str = "# sluice-rules v1";
const RULE_LINE: &str = "# rule ";
const VACATION_LINE: &str = "# vacation ";
/// Longest match value, folder, address or header name, in characters.
const MAX_SHORT: usize = 1000;
/// Longest rejection or vacation text, in characters.
const MAX_TEXT: usize = 10_000;
/// RFC 5230 §4.1 allows any positive number of days; a year is plenty.
pub const MAX_DAYS: u32 = 365;

/// Which part of the message a rule looks at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    From,
    To,
    Subject,
    /// Any header field, by name.
    Header(String),
}

/// How a rule compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    Contains,
    Is,
    /// Wildcards: `*` any run of characters, `?` one (RFC 5228 §2.7.1).
    Matches,
    NotContains,
}

/// What a matching rule does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Action {
    /// File into a mailbox, creating it if missing when `create`.
    Move {
        folder: String,
        create: bool,
    },
    MarkRead,
    Flag,
    /// Redirect, keeping a copy in the mailbox when `keep`.
    Forward {
        address: String,
        keep: bool,
    },
    Discard,
    /// Refuse the message with this text (RFC 5429).
    Reject {
        text: String,
    },
}

/// One rule: if `field` `test` `value` then `action`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub field: Field,
    pub test: Test,
    pub value: String,
    pub action: Action,
}

/// The automatic answer (RFC 5230). Kept while off, so turning it on again
/// brings the text back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vacation {
    pub enabled: bool,
    /// Empty: the interpreter's default ("Auto: " and the subject).
    pub subject: String,
    pub text: String,
    /// Answer the same sender at most once in this many days.
    pub days: u32,
}

impl Default for Vacation {
    fn default() -> Self {
        Vacation {
            enabled: false,
            subject: String::new(),
            text: String::new(),
            days: 7,
        }
    }
}

/// Everything the rule editor saves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    pub vacation: Vacation,
}

/// What a stored `webmail` script turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadBack {
    /// Written by the rule editor and unchanged since.
    Rules(RuleSet),
    /// The rule block is there but the Sieve was changed by hand: saving
    /// rules would replace the change.
    Edited(RuleSet),
    /// Not written by the rule editor (or its block is damaged).
    Foreign,
}

/// A rule or vacation setting that cannot be saved, said for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

fn invalid(s: impl Into<String>) -> Invalid {
    Invalid(s.into())
}

/// One line of text: no control characters, not blank, bounded.
fn check_line(what: &str, s: &str) -> Result<(), Invalid> {
    if s.trim().is_empty() {
        return Err(invalid(format!("the {what} is empty")));
    }
    if s.chars().any(char::is_control) {
        return Err(invalid(format!("the {what} has control characters")));
    }
    if s.chars().count() > MAX_SHORT {
        return Err(invalid(format!(
            "the {what} is longer than {MAX_SHORT} characters"
        )));
    }
    Ok(())
}

/// Text of several lines: line breaks are `\n` (the form's CRLF is made
/// so before it gets here), other control characters but tab refused.
fn check_text(what: &str, s: &str, required: bool) -> Result<(), Invalid> {
    if required && s.trim().is_empty() {
        return Err(invalid(format!("the {what} is empty")));
    }
    if s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(invalid(format!("the {what} has control characters")));
    }
    if s.chars().count() > MAX_TEXT {
        return Err(invalid(format!(
            "the {what} is longer than {MAX_TEXT} characters"
        )));
    }
    Ok(())
}

/// RFC 5322 §3.6.8: a field name is printable ASCII without a colon.
pub fn is_field_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 100 && s.bytes().all(|b| (33..=126).contains(&b) && b != b':')
}

/// A bare `local@domain` address, as `redirect` needs (RFC 5228 §4.2):
/// no display name, no quoting, no comments, a plausible domain.
pub fn is_plain_address(s: &str) -> bool {
    let Some((local, domain)) = s.rsplit_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && local.len() <= 64
        && local
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~.".contains(&b))
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..");
    let domain_ok = domain.len() <= 253
        && domain.split('.').count() >= 2
        && domain.split('.').all(|p| {
            !p.is_empty()
                && p.len() <= 63
                && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !p.starts_with('-')
                && !p.ends_with('-')
        });
    local_ok && domain_ok
}

impl Rule {
    /// Whether the rule can be saved; the error says what is wrong.
    pub fn check(&self) -> Result<(), Invalid> {
        if let Field::Header(name) = &self.field {
            if !is_field_name(name) {
                return Err(invalid(
                    "a header name is printable ASCII without spaces or a colon (up to 100 characters)",
                ));
            }
        }
        check_line("value to compare with", &self.value)?;
        match &self.action {
            Action::Move { folder, .. } => check_line("folder name", folder),
            Action::Forward { address, .. } => {
                if is_plain_address(address) {
                    Ok(())
                } else {
                    Err(invalid(format!(
                        "\"{address}\" is not an address to forward to (like name@example.org)"
                    )))
                }
            }
            Action::Reject { text } => check_text("rejection text", text, true),
            Action::MarkRead | Action::Flag | Action::Discard => Ok(()),
        }
    }

    /// Whether the action only sets flags (see the module's order).
    fn sets_flags(&self) -> bool {
        matches!(self.action, Action::MarkRead | Action::Flag)
    }
}

impl Vacation {
    /// Whether the settings can be saved (the text only matters when on).
    pub fn check(&self) -> Result<(), Invalid> {
        if !(1..=MAX_DAYS).contains(&self.days) {
            return Err(invalid(format!(
                "the days between answers must be from 1 to {MAX_DAYS}"
            )));
        }
        if !self.subject.is_empty() {
            check_line("vacation subject", &self.subject)?;
        }
        check_text("vacation text", &self.text, self.enabled)
    }
}

impl RuleSet {
    /// Checks every rule and the vacation settings.
    pub fn check(&self) -> Result<(), Invalid> {
        for (i, r) in self.rules.iter().enumerate() {
            r.check()
                .map_err(|e| invalid(format!("rule {}: {e}", i + 1)))?;
        }
        self.vacation.check()
    }
}

/// A Sieve quoted string (RFC 5228 §2.4.2): `"` and `\` escaped, line
/// breaks written as CRLF (the only line break a quoted string may hold).
/// No extension that reads `${...}` inside strings (variables,
/// encoded-character) is ever required, so the text is taken literally.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\r\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The Sieve test of a rule. From and To compare the address itself for
/// "is" and "matches" (so `boss@example.net` or `*@example.net` match
/// `Boss <boss@example.net>`), and the whole field, display name included,
/// for "contains".
fn test_of(rule: &Rule) -> String {
    let (name, address_field) = match &rule.field {
        Field::From => ("from", true),
        Field::To => ("to", true),
        Field::Subject => ("subject", false),
        Field::Header(h) => (h.as_str(), false),
    };
    let (negate, kind) = match rule.test {
        Test::Contains => ("", ":contains"),
        Test::NotContains => ("not ", ":contains"),
        Test::Is => ("", ":is"),
        Test::Matches => ("", ":matches"),
    };
    let test = if address_field && kind != ":contains" {
        "address :all"
    } else {
        "header"
    };
    format!(
        "{negate}{test} {kind} :comparator \"i;ascii-casemap\" {} {}",
        quote(name),
        quote(&rule.value)
    )
}

/// The Sieve commands of a rule's action.
fn commands_of(action: &Action) -> Vec<String> {
    match action {
        Action::Move { folder, create } => vec![format!(
            "fileinto {}{};",
            if *create { ":create " } else { "" },
            quote(folder)
        )],
        Action::MarkRead => vec![format!("addflag {};", quote("\\Seen"))],
        Action::Flag => vec![format!("addflag {};", quote("\\Flagged"))],
        Action::Forward { address, keep } => vec![format!(
            "redirect {}{};",
            if *keep { ":copy " } else { "" },
            quote(address)
        )],
        Action::Discard => vec!["discard;".into(), "stop;".into()],
        Action::Reject { text } => vec![format!("reject {};", quote(text)), "stop;".into()],
    }
}

/// The extensions the rules use, in a fixed order.
fn requires(set: &RuleSet) -> Vec<&'static str> {
    let uses = |f: &dyn Fn(&Action) -> bool| set.rules.iter().any(|r| f(&r.action));
    let mut out = Vec::new();
    if uses(&|a| matches!(a, Action::Move { .. })) {
        out.push("fileinto");
    }
    if uses(&|a| matches!(a, Action::Move { create: true, .. })) {
        out.push("mailbox");
    }
    if uses(&|a| matches!(a, Action::MarkRead | Action::Flag)) {
        out.push("imap4flags");
    }
    if uses(&|a| matches!(a, Action::Forward { keep: true, .. })) {
        out.push("copy");
    }
    if uses(&|a| matches!(a, Action::Reject { .. })) {
        out.push("reject");
    }
    if set.vacation.enabled {
        out.push("vacation");
    }
    out
}

/// JSON of a value the comment block holds: one line (serde_json escapes
/// every control character inside strings).
fn json_line<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The script the rule editor stores. Lines end in CRLF, as the grammar
/// has them (RFC 5228 §8.1).
pub fn to_sieve(set: &RuleSet) -> String {
    let mut lines: Vec<String> = vec![
        MAGIC.into(),
        "# Written by the webmail's Filters page, which reads the lines below back.".into(),
    ];
    for r in &set.rules {
        lines.push(format!("{RULE_LINE}{}", json_line(r)));
    }
    lines.push(format!("{VACATION_LINE}{}", json_line(&set.vacation)));
    lines.push("# end of rules".into());
    let req = requires(set);
    if !req.is_empty() {
        let names: Vec<String> = req.iter().map(|r| quote(r)).collect();
        lines.push(format!("require [{}];", names.join(", ")));
    }
    let flags_first = set.rules.iter().filter(|r| r.sets_flags());
    let the_rest = set.rules.iter().filter(|r| !r.sets_flags());
    for r in flags_first.chain(the_rest) {
        lines.push(format!("if {} {{", test_of(r)));
        for c in commands_of(&r.action) {
            lines.push(format!("    {c}"));
        }
        lines.push("}".into());
    }
    let v = &set.vacation;
    if v.enabled {
        let subject = if v.subject.is_empty() {
            String::new()
        } else {
            format!(":subject {} ", quote(&v.subject))
        };
        lines.push(format!(
            "vacation :days {} {subject}{};",
            v.days,
            quote(&v.text)
        ));
    }
    let mut out = lines.join("\r\n");
    out.push_str("\r\n");
    out
}

/// Reads the rules back from a stored `webmail` script.
pub fn from_sieve(source: &str) -> ReadBack {
    let mut lines = source
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l));
    if lines.next() != Some(MAGIC) {
        return ReadBack::Foreign;
    }
    let mut set = RuleSet::default();
    let mut vacation = None;
    for line in lines {
        if let Some(json) = line.strip_prefix(RULE_LINE) {
            match serde_json::from_str::<Rule>(json) {
                Ok(r) => set.rules.push(r),
                Err(_) => return ReadBack::Foreign,
            }
        } else if let Some(json) = line.strip_prefix(VACATION_LINE) {
            match serde_json::from_str::<Vacation>(json) {
                Ok(v) => vacation = Some(v),
                Err(_) => return ReadBack::Foreign,
            }
        } else if !line.starts_with('#') {
            break;
        }
    }
    let Some(vacation) = vacation else {
        return ReadBack::Foreign;
    };
    set.vacation = vacation;
    if to_sieve(&set) == source {
        ReadBack::Rules(set)
    } else {
        ReadBack::Edited(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rule(field: Field, test: Test, value: &str, action: Action) -> Rule {
        Rule {
            field,
            test,
            value: value.into(),
            action,
        }
    }

    fn set(rules: Vec<Rule>) -> RuleSet {
        RuleSet {
            rules,
            vacation: Vacation::default(),
        }
    }

    /// The Sieve part of a generated script (the comment block dropped).
    fn body(script: &str) -> String {
        script
            .split("\r\n")
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    }

    struct NoHost;
    impl sieve::Host for NoHost {
        fn mailbox_exists(&self, _: &str) -> bool {
            true
        }
        fn script_source(&self, _: sieve::Location, _: &str) -> Option<String> {
            None
        }
        fn duplicate_seen(&self, _: &str, _: u64) -> bool {
            false
        }
    }

    /// Runs a generated script on a message; the actions it decides.
    fn run(set: &RuleSet, message: &str) -> Vec<sieve::Action> {
        let script = sieve::compile(&to_sieve(set)).expect("compiles");
        let message = sieve::Message::parse(message.as_bytes());
        let envelope = sieve::Envelope {
            from: "sender@example.net".into(),
            to: "me@example.org".into(),
            auth: None,
        };
        let addresses = ["me@example.org".to_string()];
        let ctx = sieve::Context {
            message: &message,
            envelope: &envelope,
            addresses: &addresses,
            spam: None,
            virus: None,
            now: time::OffsetDateTime::UNIX_EPOCH,
        };
        sieve::run(&script, &ctx, &NoHost, &sieve::Limits::default())
            .expect("runs")
            .actions
    }

    #[test]
    fn strings_are_quoted() {
        assert_eq!(quote(r#"a "b" \c"#), r#""a \"b\" \\c""#);
        assert_eq!(quote("one\ntwo"), "\"one\r\ntwo\"");
        assert_eq!(quote("${hex:41}"), "\"${hex:41}\"");
    }

    #[test]
    fn each_action_is_written_with_only_its_extensions() {
        let cases: Vec<(Action, &str, &str)> = vec![
            (
                Action::Move {
                    folder: "Lists".into(),
                    create: true,
                },
                r#"require ["fileinto", "mailbox"];"#,
                r#"    fileinto :create "Lists";"#,
            ),
            (
                Action::Move {
                    folder: "Old".into(),
                    create: false,
                },
                r#"require ["fileinto"];"#,
                r#"    fileinto "Old";"#,
            ),
            (
                Action::MarkRead,
                r#"require ["imap4flags"];"#,
                r#"    addflag "\\Seen";"#,
            ),
            (
                Action::Flag,
                r#"require ["imap4flags"];"#,
                r#"    addflag "\\Flagged";"#,
            ),
            (
                Action::Forward {
                    address: "bob@example.net".into(),
                    keep: true,
                },
                r#"require ["copy"];"#,
                r#"    redirect :copy "bob@example.net";"#,
            ),
            (
                Action::Reject {
                    text: "No \"thanks\".".into(),
                },
                r#"require ["reject"];"#,
                r#"    reject "No \"thanks\".";"#,
            ),
        ];
        for (action, require, command) in cases {
            let s = to_sieve(&set(vec![rule(Field::Subject, Test::Is, "x", action)]));
            let lines: Vec<&str> = s.split("\r\n").collect();
            assert!(lines.contains(&require), "{s}");
            assert!(lines.contains(&command), "{s}");
            sieve::compile(&s).expect("compiles");
        }
        // Forwarding without a copy and discarding need no extension.
        for action in [
            Action::Forward {
                address: "bob@example.net".into(),
                keep: false,
            },
            Action::Discard,
        ] {
            let s = to_sieve(&set(vec![rule(Field::Subject, Test::Is, "x", action)]));
            assert!(!s.contains("require"), "{s}");
            sieve::compile(&s).expect("compiles");
        }
    }

    #[test]
    fn tests_compare_case_insensitively_on_the_right_part() {
        let s = to_sieve(&set(vec![
            rule(Field::From, Test::Is, "boss@example.net", Action::Flag),
            rule(Field::To, Test::Matches, "*@example.org", Action::Discard),
            rule(Field::From, Test::Contains, "Boss", Action::MarkRead),
            rule(
                Field::Header("X-Mailer".into()),
                Test::NotContains,
                "Outlook",
                Action::Discard,
            ),
        ]));
        let b = body(&s);
        assert_eq!(
            b,
            [
                r#"require ["imap4flags"];"#,
                r#"if address :all :is :comparator "i;ascii-casemap" "from" "boss@example.net" {"#,
                r#"    addflag "\\Flagged";"#,
                "}",
                r#"if header :contains :comparator "i;ascii-casemap" "from" "Boss" {"#,
                r#"    addflag "\\Seen";"#,
                "}",
                r#"if address :all :matches :comparator "i;ascii-casemap" "to" "*@example.org" {"#,
                "    discard;",
                "    stop;",
                "}",
                r#"if not header :contains :comparator "i;ascii-casemap" "X-Mailer" "Outlook" {"#,
                "    discard;",
                "    stop;",
                "}",
                "",
            ]
            .join("\n")
        );
    }

    #[test]
    fn vacation_is_last_and_only_when_on() {
        let mut s = set(vec![rule(
            Field::Subject,
            Test::Contains,
            "spam",
            Action::Discard,
        )]);
        s.vacation = Vacation {
            enabled: false,
            subject: "Away".into(),
            text: "Back on \"Monday\".\nRegards".into(),
            days: 3,
        };
        let off = to_sieve(&s);
        assert!(!body(&off).contains("vacation"), "{off}");
        assert_eq!(from_sieve(&off), ReadBack::Rules(s.clone()));
        s.vacation.enabled = true;
        let on = to_sieve(&s);
        assert!(
            on.ends_with(
                "}\r\nvacation :days 3 :subject \"Away\" \"Back on \\\"Monday\\\".\r\nRegards\";\r\n"
            ),
            "{on}"
        );
        assert!(on.contains("require [\"vacation\"];"), "{on}");
        sieve::compile(&on).expect("compiles");
        assert_eq!(from_sieve(&on), ReadBack::Rules(s.clone()));
        s.vacation.subject.clear();
        assert!(to_sieve(&s).contains("vacation :days 3 \"Back on"));
    }

    #[test]
    fn rules_do_what_they_say() {
        let rules = set(vec![
            rule(
                Field::Subject,
                Test::Contains,
                "[list]",
                Action::Move {
                    folder: "Lists".into(),
                    create: true,
                },
            ),
            rule(Field::From, Test::Is, "BOSS@example.net", Action::Flag),
            rule(
                Field::Header("X-Note".into()),
                Test::Is,
                r#"say "hi" \o/"#,
                Action::Reject {
                    text: "nope".into(),
                },
            ),
        ]);
        let got = run(
            &rules,
            "From: Boss <boss@example.net>\r\nSubject: weekly [LIST] news\r\n\r\nhi\r\n",
        );
        assert_eq!(
            got,
            [sieve::Action::FileInto {
                mailbox: "Lists".into(),
                flags: vec!["\\Flagged".into()],
                create: true,
            }]
        );
        let got = run(
            &rules,
            "From: a@example.net\r\nSubject: hello\r\n\r\nhi\r\n",
        );
        assert_eq!(got, [sieve::Action::Keep { flags: vec![] }]);
        // The quotes and the backslash reach the comparison literally.
        let got = run(
            &rules,
            "From: a@example.net\r\nX-Note: say \"hi\" \\o/\r\n\r\nhi\r\n",
        );
        assert!(
            matches!(&got[..], [sieve::Action::Reject { reason, .. }] if reason == "nope"),
            "{got:?}"
        );
    }

    #[test]
    fn hand_edits_and_other_scripts_are_told_apart() {
        let s = set(vec![rule(Field::Subject, Test::Is, "x", Action::Discard)]);
        let script = to_sieve(&s);
        assert_eq!(from_sieve(&script), ReadBack::Rules(s.clone()));
        let edited = script.replace("discard;", "keep;");
        assert_eq!(from_sieve(&edited), ReadBack::Edited(s));
        assert_eq!(from_sieve("keep;\r\n"), ReadBack::Foreign);
        assert_eq!(
            from_sieve("# sluice-rules v1\r\n# rule {broken\r\nkeep;\r\n"),
            ReadBack::Foreign
        );
        assert_eq!(from_sieve(&to_sieve(&RuleSet::default())), {
            ReadBack::Rules(RuleSet::default())
        });
    }

    #[test]
    fn bad_values_are_refused() {
        let bad = [
            rule(Field::Subject, Test::Is, "  ", Action::Discard),
            rule(Field::Subject, Test::Is, "a\nb", Action::Discard),
            rule(Field::Header("X Y".into()), Test::Is, "a", Action::Discard),
            rule(Field::Header("X:".into()), Test::Is, "a", Action::Discard),
            rule(
                Field::Subject,
                Test::Is,
                "a",
                Action::Forward {
                    address: "Bob <bob@example.net>".into(),
                    keep: false,
                },
            ),
            rule(
                Field::Subject,
                Test::Is,
                "a",
                Action::Move {
                    folder: "".into(),
                    create: true,
                },
            ),
            rule(
                Field::Subject,
                Test::Is,
                "a",
                Action::Reject { text: " ".into() },
            ),
        ];
        for r in bad {
            assert!(r.check().is_err(), "{r:?}");
        }
        let mut v = Vacation {
            enabled: true,
            ..Vacation::default()
        };
        assert!(v.check().is_err(), "no text");
        v.text = "away".into();
        assert!(v.check().is_ok());
        v.days = 0;
        assert!(v.check().is_err());
        assert!(is_plain_address("a.b+c@mail.example.org"));
        assert!(!is_plain_address("a@localhost"));
        assert!(!is_plain_address("a b@example.org"));
    }

    fn line() -> impl Strategy<Value = String> {
        "[^\\p{Cc}]{0,30}[^\\p{Cc}\\s][^\\p{Cc}]{0,30}"
    }

    fn text() -> impl Strategy<Value = String> {
        "[^\\p{Cc}]{0,20}(\n[^\\p{Cc}]{0,20}){0,3}[a-z\"\\\\]"
    }

    fn address() -> impl Strategy<Value = String> {
        "[a-z0-9]{1,6}([._+-][a-z0-9]{1,6}){0,2}@[a-z0-9]{1,10}(-[a-z0-9]{1,4})?\\.[a-z]{2,6}"
    }

    fn field() -> impl Strategy<Value = Field> {
        prop_oneof![
            Just(Field::From),
            Just(Field::To),
            Just(Field::Subject),
            "[!-9;-~]{1,30}".prop_map(Field::Header),
        ]
    }

    fn test_kind() -> impl Strategy<Value = Test> {
        prop_oneof![
            Just(Test::Contains),
            Just(Test::Is),
            Just(Test::Matches),
            Just(Test::NotContains),
        ]
    }

    fn action() -> impl Strategy<Value = Action> {
        prop_oneof![
            (line(), any::<bool>()).prop_map(|(folder, create)| Action::Move { folder, create }),
            Just(Action::MarkRead),
            Just(Action::Flag),
            (address(), any::<bool>())
                .prop_map(|(address, keep)| Action::Forward { address, keep }),
            Just(Action::Discard),
            text().prop_map(|text| Action::Reject { text }),
        ]
    }

    fn rule_set() -> impl Strategy<Value = RuleSet> {
        let rule =
            (field(), test_kind(), line(), action()).prop_map(|(field, test, value, action)| {
                Rule {
                    field,
                    test,
                    value,
                    action,
                }
            });
        let vacation = (
            any::<bool>(),
            prop_oneof![Just(String::new()), line()],
            text(),
            1..=MAX_DAYS,
        )
            .prop_map(|(enabled, subject, text, days)| Vacation {
                enabled,
                subject,
                text,
                days,
            });
        (prop::collection::vec(rule, 0..6), vacation)
            .prop_map(|(rules, vacation)| RuleSet { rules, vacation })
    }

    proptest! {
        #[test]
        fn any_rules_compile_and_read_back(set in rule_set()) {
            prop_assert!(set.check().is_ok(), "{:?}", set.check());
            let script = to_sieve(&set);
            if let Err(e) = sieve::compile(&script) {
                return Err(TestCaseError::fail(format!("{e}\n{script}")));
            }
            prop_assert_eq!(from_sieve(&script), ReadBack::Rules(set));
        }
    }
}
