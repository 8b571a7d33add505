//! From syntax tree to `Script`: `require` checked, every command and test
//! known and its arguments the right kind and number.

use std::collections::HashSet;

use crate::address;
use crate::error::CompileError;
use crate::lexer::Pos;
use crate::matching::{Comparator, MatchType, Rel};
use crate::parser::{parse, Arg, CommandNode, TestNode};
use crate::script::*;
use crate::variables::{self, Modifier, Value, VarRef};
use crate::{Location, EXTENSIONS};

/// Compiles Sieve source into a script ready to run.
pub fn compile(source: &str) -> Result<Script, CompileError> {
    let nodes = parse(source)?;
    let mut c = Compiler {
        exts: HashSet::new(),
        uses_body: false,
        includes: Vec::new(),
    };
    let commands = c.block(&nodes, true)?;
    Ok(Script {
        commands,
        uses_body: c.uses_body,
        includes: c.includes,
    })
}

struct Compiler {
    exts: HashSet<&'static str>,
    uses_body: bool,
    includes: Vec<(Location, String)>,
}

/// The positional and tagged arguments of one command or test, read in order.
struct Args<'a> {
    args: &'a [Arg],
    at: usize,
    name: &'a str,
    pos: Pos,
}

impl<'a> Args<'a> {
    fn new(name: &'a str, pos: Pos, args: &'a [Arg]) -> Self {
        Args {
            args,
            at: 0,
            name,
            pos,
        }
    }

    /// The next argument if it is a tag.
    fn tag(&mut self) -> Option<(&'a str, Pos)> {
        match self.args.get(self.at) {
            Some(Arg::Tag(t, p)) => {
                self.at += 1;
                Some((t.as_str(), *p))
            }
            _ => None,
        }
    }

    fn here(&self) -> Pos {
        self.args.get(self.at).map_or(self.pos, Arg::pos)
    }

    fn missing(&self, what: &str) -> CompileError {
        let found = match self.args.get(self.at) {
            None => "nothing".to_string(),
            Some(Arg::Tag(t, _)) => format!("tag ':{t}'"),
            Some(Arg::Number(n, _)) => format!("number {n}"),
            Some(Arg::Strings(_, true, _)) => "a string list".into(),
            Some(Arg::Strings(_, false, _)) => "a string".into(),
        };
        self.here()
            .error(format!("{}: expected {what}, found {found}", self.name))
    }

    fn string(&mut self, what: &str) -> Result<(&'a str, Pos), CompileError> {
        match self.args.get(self.at) {
            Some(Arg::Strings(v, false, p)) => {
                self.at += 1;
                Ok((v[0].as_str(), *p))
            }
            _ => Err(self.missing(what)),
        }
    }

    fn strings(&mut self, what: &str) -> Result<(&'a [String], Pos), CompileError> {
        match self.args.get(self.at) {
            Some(Arg::Strings(v, _, p)) => {
                self.at += 1;
                Ok((v.as_slice(), *p))
            }
            _ => Err(self.missing(what)),
        }
    }

    fn number(&mut self, what: &str) -> Result<u64, CompileError> {
        match self.args.get(self.at) {
            Some(Arg::Number(n, _)) => {
                self.at += 1;
                Ok(*n)
            }
            _ => Err(self.missing(what)),
        }
    }

    fn has_more(&self) -> bool {
        self.at < self.args.len()
    }

    fn end(&self) -> Result<(), CompileError> {
        match self.args.get(self.at) {
            None => Ok(()),
            Some(Arg::Tag(t, p)) => Err(p.error(format!("{}: unknown tag ':{t}'", self.name))),
            Some(a) => Err(a.pos().error(format!("{}: too many arguments", self.name))),
        }
    }
}

/// Match type, comparator and address part as tags set them.
#[derive(Default)]
struct MatchOpts {
    kind: Option<(MatchType, Pos)>,
    cmp: Option<Comparator>,
    part: Option<AddrPart>,
    index: Option<u64>,
    last: bool,
}

fn dup(pos: Pos, name: &str, what: &str) -> CompileError {
    pos.error(format!("{name}: more than one {what}"))
}

impl Compiler {
    fn has(&self, ext: &str) -> bool {
        self.exts.contains(ext)
    }

    fn need(&self, ext: &str, pos: Pos, what: &str) -> Result<(), CompileError> {
        if self.has(ext) {
            Ok(())
        } else {
            Err(pos.error(format!(
                "{what} requires the \"{ext}\" extension (require \"{ext}\")"
            )))
        }
    }

    /// A string argument as it will be used: encoded characters decoded and
    /// variable references found, when those extensions are required.
    fn value(&self, s: &str, pos: Pos) -> Result<Value, CompileError> {
        let s = if self.has("encoded-character") {
            crate::encoded::decode(s).map_err(|e| pos.error(e))?
        } else {
            s.to_string()
        };
        if self.has("variables") {
            variables::compile(&s, self.has("include")).map_err(|e| pos.error(e))
        } else {
            Ok(Value::Const(s))
        }
    }

    fn values(&self, v: &[String], pos: Pos) -> Result<Vec<Value>, CompileError> {
        v.iter().map(|s| self.value(s, pos)).collect()
    }

    /// A string that must be known at compile time.
    fn constant(&self, s: &str, pos: Pos, what: &str) -> Result<String, CompileError> {
        match self.value(s, pos)? {
            Value::Const(c) => Ok(c),
            Value::Template(_) => Err(pos.error(format!("{what} must be a constant string"))),
        }
    }

    /// Handles a tag shared by the matching tests: match types, comparator,
    /// address parts (when `addr`) and `:index`/`:last` (when `index`).
    fn match_tag(
        &self,
        a: &mut Args,
        tag: &str,
        pos: Pos,
        o: &mut MatchOpts,
        addr: bool,
        index: bool,
    ) -> Result<bool, CompileError> {
        let name = a.name;
        let kind = match tag {
            "is" => Some(MatchType::Is),
            "contains" => Some(MatchType::Contains),
            "matches" => Some(MatchType::Matches),
            "regex" => {
                self.need("regex", pos, ":regex")?;
                Some(MatchType::Regex)
            }
            "count" | "value" => {
                self.need("relational", pos, &format!(":{tag}"))?;
                let (op, opos) = a.string("a relational operator")?;
                let rel = Rel::from_name(&self.constant(op, opos, "the relational operator")?)
                    .ok_or_else(|| {
                        opos.error(format!("{name}: invalid relational operator \"{op}\""))
                    })?;
                Some(if tag == "count" {
                    MatchType::Count(rel)
                } else {
                    MatchType::Value(rel)
                })
            }
            _ => None,
        };
        if let Some(k) = kind {
            if o.kind.is_some() {
                return Err(dup(pos, name, "match type"));
            }
            o.kind = Some((k, pos));
            return Ok(true);
        }
        if tag == "comparator" {
            if o.cmp.is_some() {
                return Err(dup(pos, name, "comparator"));
            }
            let (c, cpos) = a.string("a comparator name")?;
            let c = self.constant(c, cpos, "the comparator name")?;
            let cmp = Comparator::from_name(&c)
                .ok_or_else(|| cpos.error(format!("{name}: unknown comparator \"{c}\"")))?;
            if cmp == Comparator::AsciiNumeric {
                self.need(
                    "comparator-i;ascii-numeric",
                    cpos,
                    "comparator \"i;ascii-numeric\"",
                )?;
            }
            o.cmp = Some(cmp);
            return Ok(true);
        }
        if addr {
            let part = match tag {
                "all" => Some(AddrPart::All),
                "localpart" => Some(AddrPart::Local),
                "domain" => Some(AddrPart::Domain),
                "user" | "detail" => {
                    self.need("subaddress", pos, &format!(":{tag}"))?;
                    Some(if tag == "user" {
                        AddrPart::User
                    } else {
                        AddrPart::Detail
                    })
                }
                _ => None,
            };
            if let Some(p) = part {
                if o.part.is_some() {
                    return Err(dup(pos, name, "address part"));
                }
                o.part = Some(p);
                return Ok(true);
            }
        }
        if index {
            match tag {
                "index" => {
                    self.need("index", pos, ":index")?;
                    if o.index.is_some() {
                        return Err(dup(pos, name, ":index"));
                    }
                    let n = a.number("a field number")?;
                    if n == 0 {
                        return Err(pos.error(format!("{name}: :index counts from 1")));
                    }
                    o.index = Some(n);
                    return Ok(true);
                }
                "last" => {
                    self.need("index", pos, ":last")?;
                    o.last = true;
                    return Ok(true);
                }
                _ => {}
            }
        }
        Ok(false)
    }

    /// Builds the matcher once the keys are known.
    fn matcher(
        &self,
        o: &MatchOpts,
        keys: &[String],
        kpos: Pos,
        name: &str,
    ) -> Result<Matcher, CompileError> {
        let (kind, mpos) = o.kind.unwrap_or((MatchType::Is, kpos));
        let cmp = o.cmp.unwrap_or(Comparator::AsciiCasemap);
        if cmp == Comparator::AsciiNumeric
            && matches!(
                kind,
                MatchType::Contains | MatchType::Matches | MatchType::Regex
            )
        {
            return Err(mpos.error(format!(
                "{name}: comparator \"i;ascii-numeric\" cannot do this match type"
            )));
        }
        let keys = self.values(keys, kpos)?;
        let mut regexes = Vec::new();
        if kind == MatchType::Regex {
            for k in &keys {
                regexes.push(match k.as_const() {
                    Some(s) => Some(crate::matching::build_regex(s, cmp).map_err(|e| {
                        kpos.error(format!("{name}: invalid regular expression: {e}"))
                    })?),
                    None => None,
                });
            }
        }
        Ok(Matcher {
            kind,
            cmp,
            keys,
            regexes,
        })
    }

    fn index(o: &MatchOpts, pos: Pos, name: &str) -> Result<Option<Index>, CompileError> {
        match (o.index, o.last) {
            (Some(n), last) => Ok(Some(Index { n, last })),
            (None, true) => Err(pos.error(format!("{name}: :last needs :index"))),
            (None, false) => Ok(None),
        }
    }

    fn block(&mut self, nodes: &[CommandNode], top: bool) -> Result<Vec<Cmd>, CompileError> {
        let mut out = Vec::new();
        let mut requires_allowed = top;
        let mut i = 0;
        while i < nodes.len() {
            let n = &nodes[i];
            i += 1;
            if n.name == "require" {
                if !requires_allowed {
                    return Err(n.pos.error("require must come before any other command"));
                }
                self.require(n)?;
                continue;
            }
            requires_allowed = false;
            match n.name.as_str() {
                "if" => {
                    let mut branches = vec![(self.cond(n)?, self.body(n)?)];
                    let mut otherwise = None;
                    while let Some(next) = nodes.get(i) {
                        match next.name.as_str() {
                            "elsif" => branches.push((self.cond(next)?, self.body(next)?)),
                            "else" => {
                                no_args(next)?;
                                if !next.tests.is_empty() {
                                    return Err(next.pos.error("else takes no test"));
                                }
                                otherwise = Some(self.body(next)?);
                                i += 1;
                                break;
                            }
                            _ => break,
                        }
                        i += 1;
                    }
                    out.push(Cmd::If {
                        branches,
                        otherwise,
                    });
                }
                "elsif" | "else" => {
                    return Err(n.pos.error(format!("{} without a preceding if", n.name)))
                }
                _ => {
                    if n.block.is_some() {
                        return Err(n.pos.error(format!("{} takes no block", n.name)));
                    }
                    if !n.tests.is_empty() {
                        return Err(n.pos.error(format!("{} takes no test", n.name)));
                    }
                    out.push(self.command(n)?);
                }
            }
        }
        Ok(out)
    }

    fn cond(&mut self, n: &CommandNode) -> Result<Test, CompileError> {
        no_args(n)?;
        if n.tests.len() != 1 || n.test_list {
            return Err(n.pos.error(format!("{} needs exactly one test", n.name)));
        }
        self.test(&n.tests[0])
    }

    fn body(&mut self, n: &CommandNode) -> Result<Vec<Cmd>, CompileError> {
        match &n.block {
            Some(b) => self.block(b, false),
            None => Err(n.pos.error(format!("{} needs a block", n.name))),
        }
    }

    /// RFC 5228 §3.2.
    fn require(&mut self, n: &CommandNode) -> Result<(), CompileError> {
        let mut a = Args::new("require", n.pos, &n.args);
        let (names, pos) = a.strings("a list of extensions")?;
        a.end()?;
        if n.block.is_some() || !n.tests.is_empty() {
            return Err(n.pos.error("require takes only a list of extensions"));
        }
        for name in names {
            let lower = name.to_ascii_lowercase();
            let Some(ext) = EXTENSIONS.iter().find(|e| **e == lower) else {
                return Err(pos.error(format!("unsupported extension \"{name}\"")));
            };
            self.exts.insert(ext);
            // Extensions that bring others with them.
            match *ext {
                "vacation-seconds" => {
                    self.exts.insert("vacation");
                }
                "spamtestplus" => {
                    self.exts.insert("spamtest");
                }
                "ereject" => {}
                _ => {}
            }
        }
        Ok(())
    }

    fn command(&mut self, n: &CommandNode) -> Result<Cmd, CompileError> {
        let name = n.name.as_str();
        let mut a = Args::new(name, n.pos, &n.args);
        let cmd = match name {
            "stop" => Cmd::Stop,
            "discard" => Cmd::Discard,
            "keep" => {
                let mut flags = None;
                while let Some((t, p)) = a.tag() {
                    match t {
                        "flags" => {
                            self.need("imap4flags", p, ":flags")?;
                            let (v, vp) = a.strings("a list of flags")?;
                            flags = Some(self.values(v, vp)?);
                        }
                        _ => return Err(p.error(format!("keep: unknown tag ':{t}'"))),
                    }
                }
                Cmd::Keep { flags }
            }
            "fileinto" => {
                self.need("fileinto", n.pos, "fileinto")?;
                let (mut flags, mut copy, mut create) = (None, false, false);
                while let Some((t, p)) = a.tag() {
                    match t {
                        "flags" => {
                            self.need("imap4flags", p, ":flags")?;
                            let (v, vp) = a.strings("a list of flags")?;
                            flags = Some(self.values(v, vp)?);
                        }
                        "copy" => {
                            self.need("copy", p, ":copy")?;
                            copy = true;
                        }
                        "create" => {
                            self.need("mailbox", p, ":create")?;
                            create = true;
                        }
                        _ => return Err(p.error(format!("fileinto: unknown tag ':{t}'"))),
                    }
                }
                let (m, mp) = a.string("a mailbox name")?;
                let mailbox = self.value(m, mp)?;
                if mailbox.as_const() == Some("") {
                    return Err(mp.error("fileinto: empty mailbox name"));
                }
                Cmd::FileInto {
                    mailbox,
                    flags,
                    copy,
                    create,
                }
            }
            "redirect" => {
                let mut copy = false;
                while let Some((t, p)) = a.tag() {
                    match t {
                        "copy" => {
                            self.need("copy", p, ":copy")?;
                            copy = true;
                        }
                        _ => return Err(p.error(format!("redirect: unknown tag ':{t}'"))),
                    }
                }
                let (s, sp) = a.string("an address")?;
                let address = self.value(s, sp)?;
                // RFC 5228 §4.2: the address must be a valid RFC 5322 address.
                if let Some(c) = address.as_const() {
                    if address::parse_single(c).is_none() {
                        return Err(sp.error(format!("redirect: invalid address \"{c}\"")));
                    }
                }
                Cmd::Redirect { address, copy }
            }
            "reject" | "ereject" => {
                self.need(name, n.pos, name)?;
                let (s, sp) = a.string("a reason")?;
                Cmd::Reject {
                    reason: self.value(s, sp)?,
                    extended: name == "ereject",
                }
            }
            "vacation" => self.vacation(&mut a, n.pos)?,
            "setflag" | "addflag" | "removeflag" => {
                self.need("imap4flags", n.pos, name)?;
                let op = match name {
                    "setflag" => FlagOp::Set,
                    "addflag" => FlagOp::Add,
                    _ => FlagOp::Remove,
                };
                let (first, fp) = a.strings("a list of flags")?;
                let (var, flags) = if a.has_more() {
                    let (second, sp) = a.strings("a list of flags")?;
                    if first.len() != 1 {
                        return Err(fp.error(format!("{name}: the variable name must be a string")));
                    }
                    (
                        Some(self.var_name(&first[0], fp)?),
                        self.values(second, sp)?,
                    )
                } else {
                    (None, self.values(first, fp)?)
                };
                Cmd::Flag { op, var, flags }
            }
            "set" => {
                self.need("variables", n.pos, "set")?;
                let mut modifiers: Vec<Modifier> = Vec::new();
                while let Some((t, p)) = a.tag() {
                    let m = Modifier::from_tag(t)
                        .ok_or_else(|| p.error(format!("set: unknown modifier ':{t}'")))?;
                    if m == Modifier::QuoteRegex {
                        self.need("regex", p, ":quoteregex")?;
                    }
                    if modifiers.iter().any(|o| o.precedence() == m.precedence()) {
                        return Err(p.error(format!(
                            "set: ':{t}' cannot be combined with a modifier of the same precedence"
                        )));
                    }
                    modifiers.push(m);
                }
                modifiers.sort_by_key(|m| std::cmp::Reverse(m.precedence()));
                let (nm, np) = a.string("a variable name")?;
                let name = self.var_name(nm, np)?;
                let (v, vp) = a.string("a value")?;
                Cmd::Set {
                    name,
                    value: self.value(v, vp)?,
                    modifiers,
                }
            }
            "include" => {
                self.need("include", n.pos, "include")?;
                let (mut location, mut once, mut optional) = (None, false, false);
                while let Some((t, p)) = a.tag() {
                    match t {
                        "personal" | "global" => {
                            if location.is_some() {
                                return Err(dup(p, "include", "location"));
                            }
                            location = Some(if t == "personal" {
                                Location::Personal
                            } else {
                                Location::Global
                            });
                        }
                        "once" => once = true,
                        "optional" => optional = true,
                        _ => return Err(p.error(format!("include: unknown tag ':{t}'"))),
                    }
                }
                let (s, sp) = a.string("a script name")?;
                let script = self.constant(s, sp, "include: the script name")?;
                // RFC 6609 §3.2: a script name, not a path.
                if script.is_empty() || script.contains('/') || script.chars().any(char::is_control)
                {
                    return Err(sp.error(format!("include: invalid script name \"{script}\"")));
                }
                let location = location.unwrap_or(Location::Personal);
                if !self
                    .includes
                    .iter()
                    .any(|(l, s)| *l == location && *s == script)
                {
                    self.includes.push((location, script.clone()));
                }
                Cmd::Include {
                    location,
                    name: script,
                    once,
                    optional,
                }
            }
            "return" => {
                self.need("include", n.pos, "return")?;
                Cmd::Return
            }
            "global" => {
                self.need("include", n.pos, "global")?;
                self.need("variables", n.pos, "global")?;
                let (v, vp) = a.strings("a list of variable names")?;
                let mut names = Vec::new();
                for s in v {
                    match variables::parse_name(s, false) {
                        Ok(VarRef::Name(n)) => names.push(n),
                        _ => return Err(vp.error(format!("global: invalid variable name \"{s}\""))),
                    }
                }
                Cmd::Global(names)
            }
            _ => return Err(n.pos.error(format!("unknown command '{name}'"))),
        };
        a.end()?;
        Ok(cmd)
    }

    fn var_name(&self, s: &str, pos: Pos) -> Result<VarRef, CompileError> {
        variables::parse_name(s, self.has("include")).map_err(|e| pos.error(e))
    }

    /// RFC 5230 §4 and RFC 6131.
    fn vacation(&mut self, a: &mut Args, pos: Pos) -> Result<Cmd, CompileError> {
        self.need("vacation", pos, "vacation")?;
        let mut v = VacationCmd {
            period: None,
            subject: None,
            from: None,
            addresses: Vec::new(),
            mime: false,
            handle: None,
            reason: Value::Const(String::new()),
        };
        while let Some((t, p)) = a.tag() {
            match t {
                "days" | "seconds" => {
                    if t == "seconds" {
                        self.need("vacation-seconds", p, ":seconds")?;
                    }
                    if v.period.is_some() {
                        return Err(dup(p, "vacation", "period"));
                    }
                    let n = a.number("a number")?;
                    v.period = Some(if t == "days" {
                        Period::Days(n)
                    } else {
                        Period::Seconds(n)
                    });
                }
                "subject" => {
                    let (s, sp) = a.string("a subject")?;
                    v.subject = Some(self.value(s, sp)?);
                }
                "from" => {
                    let (s, sp) = a.string("an address")?;
                    let from = self.value(s, sp)?;
                    if let Some(c) = from.as_const() {
                        if address::parse_single(c).is_none() {
                            return Err(
                                sp.error(format!("vacation: invalid :from address \"{c}\""))
                            );
                        }
                    }
                    v.from = Some(from);
                }
                "addresses" => {
                    let (s, sp) = a.strings("a list of addresses")?;
                    v.addresses = self.values(s, sp)?;
                }
                "mime" => v.mime = true,
                "handle" => {
                    let (s, sp) = a.string("a handle")?;
                    v.handle = Some(self.value(s, sp)?);
                }
                _ => return Err(p.error(format!("vacation: unknown tag ':{t}'"))),
            }
        }
        let (r, rp) = a.string("a reason")?;
        v.reason = self.value(r, rp)?;
        Ok(Cmd::Vacation(Box::new(v)))
    }

    fn test(&mut self, n: &TestNode) -> Result<Test, CompileError> {
        let name = n.name.as_str();
        let takes_tests = matches!(name, "allof" | "anyof" | "not");
        if !takes_tests && !n.tests.is_empty() {
            return Err(n.pos.error(format!("{name} takes no test")));
        }
        let mut a = Args::new(name, n.pos, &n.args);
        let mut o = MatchOpts::default();
        let t = match name {
            "true" => Test::True,
            "false" => Test::False,
            "not" => {
                no_test_args(n)?;
                if n.tests.len() != 1 {
                    return Err(n.pos.error("not needs exactly one test"));
                }
                Test::Not(Box::new(self.test(&n.tests[0])?))
            }
            "allof" | "anyof" => {
                no_test_args(n)?;
                if !n.test_list {
                    return Err(n
                        .pos
                        .error(format!("{name} needs a test list in parentheses")));
                }
                let tests = n
                    .tests
                    .iter()
                    .map(|t| self.test(t))
                    .collect::<Result<_, _>>()?;
                if name == "allof" {
                    Test::AllOf(tests)
                } else {
                    Test::AnyOf(tests)
                }
            }
            "address" | "envelope" => {
                let env = name == "envelope";
                if env {
                    self.need("envelope", n.pos, "envelope")?;
                }
                while let Some((t, p)) = a.tag() {
                    if !self.match_tag(&mut a, t, p, &mut o, true, !env)? {
                        return Err(p.error(format!("{name}: unknown tag ':{t}'")));
                    }
                }
                let (h, hp) = a.strings("a list of header names")?;
                let (k, kp) = a.strings("a list of keys")?;
                let headers = self.values(h, hp)?;
                if env {
                    for f in &headers {
                        if let Some(c) = f.as_const() {
                            if !matches!(c.to_ascii_lowercase().as_str(), "from" | "to") {
                                return Err(
                                    hp.error(format!("envelope: unknown envelope part \"{c}\""))
                                );
                            }
                        }
                    }
                } else {
                    for f in &headers {
                        if let Some(c) = f.as_const() {
                            if !crate::message::is_field_name(c) {
                                return Err(
                                    hp.error(format!("address: invalid header name \"{c}\""))
                                );
                            }
                        }
                    }
                }
                let m = self.matcher(&o, k, kp, name)?;
                let part = o.part.unwrap_or(AddrPart::All);
                if env {
                    Test::Envelope {
                        part,
                        fields: headers,
                        m,
                    }
                } else {
                    Test::Address {
                        part,
                        index: Self::index(&o, n.pos, name)?,
                        headers,
                        m,
                    }
                }
            }
            "header" => {
                while let Some((t, p)) = a.tag() {
                    if !self.match_tag(&mut a, t, p, &mut o, false, true)? {
                        return Err(p.error(format!("header: unknown tag ':{t}'")));
                    }
                }
                let (h, hp) = a.strings("a list of header names")?;
                let (k, kp) = a.strings("a list of keys")?;
                Test::Header {
                    index: Self::index(&o, n.pos, name)?,
                    headers: self.values(h, hp)?,
                    m: self.matcher(&o, k, kp, name)?,
                }
            }
            "exists" => {
                let (h, hp) = a.strings("a list of header names")?;
                Test::Exists(self.values(h, hp)?)
            }
            "size" => {
                let over = match a.tag() {
                    Some(("over", _)) => true,
                    Some(("under", _)) => false,
                    Some((t, p)) => return Err(p.error(format!("size: unknown tag ':{t}'"))),
                    None => return Err(a.missing(":over or :under")),
                };
                let limit = a.number("a size")?;
                Test::Size { over, limit }
            }
            "body" => {
                self.need("body", n.pos, "body")?;
                self.uses_body = true;
                let mut transform = None;
                while let Some((t, p)) = a.tag() {
                    let tr = match t {
                        "raw" => Some(BodyTransform::Raw),
                        "text" => Some(BodyTransform::Text),
                        "content" => {
                            let (v, vp) = a.strings("a list of content types")?;
                            Some(BodyTransform::Content(self.values(v, vp)?))
                        }
                        _ => None,
                    };
                    if let Some(tr) = tr {
                        if transform.is_some() {
                            return Err(dup(p, name, "body transform"));
                        }
                        transform = Some(tr);
                    } else if !self.match_tag(&mut a, t, p, &mut o, false, false)? {
                        return Err(p.error(format!("body: unknown tag ':{t}'")));
                    }
                }
                let (k, kp) = a.strings("a list of keys")?;
                Test::Body {
                    transform: transform.unwrap_or(BodyTransform::Text),
                    m: self.matcher(&o, k, kp, name)?,
                }
            }
            "string" => {
                self.need("variables", n.pos, "string")?;
                while let Some((t, p)) = a.tag() {
                    if !self.match_tag(&mut a, t, p, &mut o, false, false)? {
                        return Err(p.error(format!("string: unknown tag ':{t}'")));
                    }
                }
                let (s, sp) = a.strings("a list of strings")?;
                let (k, kp) = a.strings("a list of keys")?;
                Test::String {
                    sources: self.values(s, sp)?,
                    m: self.matcher(&o, k, kp, name)?,
                }
            }
            "hasflag" => {
                self.need("imap4flags", n.pos, "hasflag")?;
                while let Some((t, p)) = a.tag() {
                    if !self.match_tag(&mut a, t, p, &mut o, false, false)? {
                        return Err(p.error(format!("hasflag: unknown tag ':{t}'")));
                    }
                }
                let (first, fp) = a.strings("a list of flags")?;
                let (vars, (k, kp)) = if a.has_more() {
                    let vars = first
                        .iter()
                        .map(|s| self.var_name(s, fp))
                        .collect::<Result<Vec<_>, _>>()?;
                    (Some(vars), a.strings("a list of flags")?)
                } else {
                    (None, (first, fp))
                };
                Test::HasFlag {
                    vars,
                    m: self.matcher(&o, k, kp, name)?,
                }
            }
            "date" | "currentdate" => {
                self.need("date", n.pos, name)?;
                let mut zone = None;
                while let Some((t, p)) = a.tag() {
                    match t {
                        "zone" | "originalzone" => {
                            if zone.is_some() {
                                return Err(dup(p, name, "zone"));
                            }
                            if t == "zone" {
                                let (z, zp) = a.string("a time zone offset")?;
                                let z = self.value(z, zp)?;
                                if let Some(c) = z.as_const() {
                                    if crate::date::parse_zone(c).is_none() {
                                        return Err(
                                            zp.error(format!("{name}: invalid zone \"{c}\""))
                                        );
                                    }
                                }
                                zone = Some(Zone::Fixed(z));
                            } else if name == "date" {
                                zone = Some(Zone::Original);
                            } else {
                                return Err(p.error("currentdate: unknown tag ':originalzone'"));
                            }
                        }
                        _ => {
                            if !self.match_tag(&mut a, t, p, &mut o, false, name == "date")? {
                                return Err(p.error(format!("{name}: unknown tag ':{t}'")));
                            }
                        }
                    }
                }
                let header = if name == "date" {
                    let (h, hp) = a.string("a header name")?;
                    Some(self.value(h, hp)?)
                } else {
                    None
                };
                let (dp, dpp) = a.string("a date part")?;
                let dps = self.constant(dp, dpp, "the date part")?;
                let part = crate::date::part_from_name(&dps)
                    .ok_or_else(|| dpp.error(format!("{name}: unknown date part \"{dps}\"")))?;
                let (k, kp) = a.strings("a list of keys")?;
                let m = self.matcher(&o, k, kp, name)?;
                let zone = zone.unwrap_or(Zone::Local);
                match header {
                    Some(header) => Test::Date {
                        zone,
                        index: Self::index(&o, n.pos, name)?,
                        header,
                        part,
                        m,
                    },
                    None => Test::CurrentDate { zone, part, m },
                }
            }
            "mailboxexists" => {
                self.need("mailbox", n.pos, "mailboxexists")?;
                let (v, vp) = a.strings("a list of mailbox names")?;
                Test::MailboxExists(self.values(v, vp)?)
            }
            "duplicate" => {
                self.need("duplicate", n.pos, "duplicate")?;
                let (mut handle, mut id, mut seconds, mut last) = (None, None, None, false);
                while let Some((t, p)) = a.tag() {
                    match t {
                        "handle" => {
                            let (s, sp) = a.string("a handle")?;
                            handle = Some(self.value(s, sp)?);
                        }
                        "header" | "uniqueid" => {
                            if id.is_some() {
                                return Err(
                                    p.error("duplicate: :header and :uniqueid exclude each other")
                                );
                            }
                            let (s, sp) = a.string("a string")?;
                            let v = self.value(s, sp)?;
                            id = Some(if t == "header" {
                                DupId::Header(v)
                            } else {
                                DupId::Unique(v)
                            });
                        }
                        "seconds" => seconds = Some(a.number("a number of seconds")?),
                        "last" => last = true,
                        _ => return Err(p.error(format!("duplicate: unknown tag ':{t}'"))),
                    }
                }
                Test::Duplicate {
                    handle,
                    id: id.unwrap_or(DupId::MessageId),
                    seconds,
                    last,
                }
            }
            "spamtest" | "virustest" => {
                self.need(name, n.pos, name)?;
                let mut percent = false;
                while let Some((t, p)) = a.tag() {
                    if t == "percent" && name == "spamtest" {
                        self.need("spamtestplus", p, ":percent")?;
                        percent = true;
                    } else if !self.match_tag(&mut a, t, p, &mut o, false, false)? {
                        return Err(p.error(format!("{name}: unknown tag ':{t}'")));
                    }
                }
                let (k, kp) = a.strings("a value")?;
                let m = self.matcher(&o, k, kp, name)?;
                if name == "spamtest" {
                    Test::Spam { percent, m }
                } else {
                    Test::Virus { m }
                }
            }
            _ => return Err(n.pos.error(format!("unknown test '{name}'"))),
        };
        a.end()?;
        Ok(t)
    }
}

fn no_args(n: &CommandNode) -> Result<(), CompileError> {
    match n.args.first() {
        Some(a) => Err(a.pos().error(format!("{} takes no arguments", n.name))),
        None => Ok(()),
    }
}

fn no_test_args(n: &TestNode) -> Result<(), CompileError> {
    match n.args.first() {
        Some(a) => Err(a.pos().error(format!("{} takes no arguments", n.name))),
        None => Ok(()),
    }
}
