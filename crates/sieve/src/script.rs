//! The compiled form of a script: commands and tests with their arguments
//! checked and typed, ready to run.

use crate::matching::{Comparator, MatchType};
use crate::variables::{Modifier, Value, VarRef};
use crate::Location;

/// A compiled script. Compile it once (at upload) and run it per message.
#[derive(Debug, Clone)]
pub struct Script {
    pub(crate) commands: Vec<Cmd>,
    pub(crate) uses_body: bool,
    pub(crate) includes: Vec<(Location, String)>,
}

impl Script {
    /// Whether a `body` test appears (RFC 5173); the caller then keeps the
    /// body text for `Message::parse`.
    pub fn uses_body(&self) -> bool {
        self.uses_body
    }

    /// The scripts this one names in `include` commands (RFC 6609), in
    /// order of appearance, without repeats.
    pub fn includes(&self) -> Vec<(Location, String)> {
        self.includes.clone()
    }
}

/// How keys are compared: match type, comparator and the keys.
#[derive(Debug, Clone)]
pub(crate) struct Matcher {
    pub kind: MatchType,
    pub cmp: Comparator,
    pub keys: Vec<Value>,
    /// For `:regex`, the keys that are constants, compiled once.
    pub regexes: Vec<Option<regex::Regex>>,
}

/// Which part of an address a test looks at (RFC 5228 §2.7.4, RFC 5233).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AddrPart {
    All,
    Local,
    Domain,
    User,
    Detail,
}

/// RFC 5260 §6: which header field occurrence a test looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Index {
    pub n: u64,
    pub last: bool,
}

/// RFC 5173 §5: what `body` matches against.
#[derive(Debug, Clone)]
pub(crate) enum BodyTransform {
    Raw,
    Content(Vec<Value>),
    Text,
}

/// RFC 5260 §4.1: the zone dates are shown in.
#[derive(Debug, Clone)]
pub(crate) enum Zone {
    /// The local zone (that of `Context::now`).
    Local,
    /// The zone the header field was written in (`:originalzone`).
    Original,
    /// An explicit `+hhmm`/`-hhmm` (`:zone`).
    Fixed(Value),
}

/// RFC 5260 §4.2: a date part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DatePart {
    Year,
    Month,
    Day,
    Date,
    Julian,
    Hour,
    Minute,
    Second,
    Time,
    Iso8601,
    Std11,
    Zone,
    Weekday,
}

/// RFC 7352 §3: what identifies a message for `duplicate`.
#[derive(Debug, Clone)]
pub(crate) enum DupId {
    MessageId,
    Header(Value),
    Unique(Value),
}

/// A test.
#[derive(Debug, Clone)]
pub(crate) enum Test {
    True,
    False,
    Not(Box<Test>),
    AllOf(Vec<Test>),
    AnyOf(Vec<Test>),
    Address {
        part: AddrPart,
        index: Option<Index>,
        headers: Vec<Value>,
        m: Matcher,
    },
    Envelope {
        part: AddrPart,
        fields: Vec<Value>,
        m: Matcher,
    },
    Header {
        index: Option<Index>,
        headers: Vec<Value>,
        m: Matcher,
    },
    Exists(Vec<Value>),
    Size {
        over: bool,
        limit: u64,
    },
    Body {
        transform: BodyTransform,
        m: Matcher,
    },
    String {
        sources: Vec<Value>,
        m: Matcher,
    },
    HasFlag {
        vars: Option<Vec<VarRef>>,
        m: Matcher,
    },
    Date {
        zone: Zone,
        index: Option<Index>,
        header: Value,
        part: DatePart,
        m: Matcher,
    },
    CurrentDate {
        zone: Zone,
        part: DatePart,
        m: Matcher,
    },
    MailboxExists(Vec<Value>),
    Duplicate {
        handle: Option<Value>,
        id: DupId,
        seconds: Option<u64>,
        last: bool,
    },
    Spam {
        percent: bool,
        m: Matcher,
    },
    Virus {
        m: Matcher,
    },
}

/// RFC 5232 §3: the flag commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlagOp {
    Set,
    Add,
    Remove,
}

/// RFC 5230 §4.1 / RFC 6131: the response period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Period {
    Days(u64),
    Seconds(u64),
}

/// The arguments of `vacation` (RFC 5230 §4).
#[derive(Debug, Clone)]
pub(crate) struct VacationCmd {
    pub period: Option<Period>,
    pub subject: Option<Value>,
    pub from: Option<Value>,
    pub addresses: Vec<Value>,
    pub mime: bool,
    pub handle: Option<Value>,
    pub reason: Value,
}

/// A command.
#[derive(Debug, Clone)]
pub(crate) enum Cmd {
    If {
        branches: Vec<(Test, Vec<Cmd>)>,
        otherwise: Option<Vec<Cmd>>,
    },
    Stop,
    Keep {
        flags: Option<Vec<Value>>,
    },
    Discard,
    Redirect {
        address: Value,
        copy: bool,
    },
    FileInto {
        mailbox: Value,
        flags: Option<Vec<Value>>,
        copy: bool,
        create: bool,
    },
    Reject {
        reason: Value,
        extended: bool,
    },
    Vacation(Box<VacationCmd>),
    Flag {
        op: FlagOp,
        var: Option<VarRef>,
        flags: Vec<Value>,
    },
    Set {
        name: VarRef,
        value: Value,
        modifiers: Vec<Modifier>,
    },
    Include {
        location: Location,
        name: String,
        once: bool,
        optional: bool,
    },
    Return,
    Global(Vec<String>),
}
