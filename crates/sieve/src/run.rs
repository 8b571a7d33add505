//! Running a compiled script against one message: tests evaluated, actions
//! collected, limits enforced.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use sha2::{Digest, Sha256};

use crate::action::{Action, Actions, Outcome};
use crate::address;
use crate::compile::compile;
use crate::date;
use crate::error::RuntimeError;
use crate::matching::{self, Captures, MatchType};
use crate::message::BodyPart;
use crate::script::*;
use crate::vacation;
use crate::variables::{expand, truncate, Scope, Value, VarRef};
use crate::{Context, Host, Limits, Location};

/// RFC 7352 §3.3: the period `duplicate` remembers ids for when the script
/// gives none (Pigeonhole's default, 12 hours).
const DUPLICATE_DEFAULT_SECS: u64 = 12 * 3600;

/// Runs `script` for the message and envelope in `ctx`.
pub fn run(
    script: &Script,
    ctx: &Context,
    host: &dyn Host,
    limits: &Limits,
) -> Result<Outcome, RuntimeError> {
    let mut r = Run {
        ctx,
        host,
        limits,
        steps: 0,
        actions: Actions::new(limits.max_actions, limits.max_redirects),
        implicit_keep: true,
        flags: Vec::new(),
        globals: HashMap::new(),
        once: HashSet::new(),
        stack: Vec::new(),
        compiled: HashMap::new(),
        duplicates: Vec::new(),
        body: None,
    };
    r.script(&script.commands)?;
    if r.implicit_keep {
        let flags = r.flags.clone();
        r.actions.implicit_keep(flags)?;
    }
    Ok(Outcome {
        actions: r.actions.list,
        duplicates: r.duplicates,
    })
}

enum Flow {
    Next,
    /// `stop`: end the whole run.
    Stop,
    /// `return`: end the current (included) script.
    Return,
}

/// What one script (the main one, or an included one) sees.
#[derive(Default)]
struct Frame {
    vars: HashMap<String, String>,
    /// Names declared `global` so far (RFC 6609 §3.4).
    global_names: HashSet<String>,
    /// The match variables of the last successful :matches/:regex (RFC 5229 §3.2).
    matched: Captures,
}

struct View<'a> {
    frame: &'a Frame,
    globals: &'a HashMap<String, String>,
}

impl Scope for View<'_> {
    fn var(&self, r: &VarRef) -> Option<&str> {
        match r {
            VarRef::Global(n) => self.globals.get(n),
            VarRef::Name(n) if self.frame.global_names.contains(n) => self.globals.get(n),
            VarRef::Name(n) => self.frame.vars.get(n),
        }
        .map(String::as_str)
    }

    fn matched(&self, n: usize) -> Option<&str> {
        self.frame.matched.get(n).map(String::as_str)
    }
}

struct Run<'a> {
    ctx: &'a Context<'a>,
    host: &'a dyn Host,
    limits: &'a Limits,
    steps: u64,
    actions: Actions,
    implicit_keep: bool,
    /// The internal imap4flags variable (RFC 5232 §3).
    flags: Vec<String>,
    globals: HashMap<String, String>,
    /// Scripts already included (RFC 6609 §3.2 `:once`).
    once: HashSet<(Location, String)>,
    /// The includes being run, outermost first.
    stack: Vec<(Location, String)>,
    compiled: HashMap<(Location, String), Rc<Script>>,
    duplicates: Vec<(String, u64)>,
    body: Option<Vec<BodyPart>>,
}

/// Splits flag strings into single flags (RFC 5232 §3: a string may hold
/// several, separated by spaces), without repeats (case-insensitive).
fn flag_list<'s>(strings: impl IntoIterator<Item = &'s str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in strings {
        for f in s.split_whitespace() {
            if !out.iter().any(|g| g.eq_ignore_ascii_case(f)) {
                out.push(f.to_string());
            }
        }
    }
    out
}

/// RFC 5260 §6: which occurrences `:index` selects.
fn pick<T>(mut v: Vec<T>, index: Option<Index>) -> Vec<T> {
    match index {
        None => v,
        Some(Index { n, last }) => {
            let n = n as usize;
            if n == 0 || n > v.len() {
                return Vec::new();
            }
            let i = if last { v.len() - n } else { n - 1 };
            vec![v.swap_remove(i)]
        }
    }
}

impl Run<'_> {
    fn step(&mut self) -> Result<(), RuntimeError> {
        self.steps += 1;
        if self.steps > self.limits.max_steps {
            return Err(RuntimeError::TooManySteps(self.limits.max_steps));
        }
        Ok(())
    }

    fn x(&self, f: &Frame, v: &Value) -> String {
        match v {
            Value::Const(s) => s.clone(),
            _ => expand(
                v,
                &View {
                    frame: f,
                    globals: &self.globals,
                },
            ),
        }
    }

    fn xs(&self, f: &Frame, v: &[Value]) -> Vec<String> {
        v.iter().map(|v| self.x(f, v)).collect()
    }

    fn script(&mut self, cmds: &[Cmd]) -> Result<Flow, RuntimeError> {
        let mut frame = Frame::default();
        self.block(&mut frame, cmds)
    }

    fn block(&mut self, f: &mut Frame, cmds: &[Cmd]) -> Result<Flow, RuntimeError> {
        for c in cmds {
            match self.command(f, c)? {
                Flow::Next => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Next)
    }

    fn var_get(&self, f: &Frame, r: &VarRef) -> String {
        View {
            frame: f,
            globals: &self.globals,
        }
        .var(r)
        .unwrap_or("")
        .to_string()
    }

    fn var_set(&mut self, f: &mut Frame, r: &VarRef, mut value: String) {
        truncate(&mut value);
        match r {
            VarRef::Global(n) => {
                self.globals.insert(n.clone(), value);
            }
            VarRef::Name(n) if f.global_names.contains(n) => {
                self.globals.insert(n.clone(), value);
            }
            VarRef::Name(n) => {
                f.vars.insert(n.clone(), value);
            }
        }
    }

    fn flags_of(&self, f: &Frame, given: &Option<Vec<Value>>) -> Vec<String> {
        match given {
            Some(list) => flag_list(self.xs(f, list).iter().map(String::as_str)),
            None => self.flags.clone(),
        }
    }

    fn command(&mut self, f: &mut Frame, c: &Cmd) -> Result<Flow, RuntimeError> {
        self.step()?;
        match c {
            Cmd::If {
                branches,
                otherwise,
            } => {
                for (t, body) in branches {
                    if self.test(f, t)? {
                        return self.block(f, body);
                    }
                }
                if let Some(body) = otherwise {
                    return self.block(f, body);
                }
            }
            Cmd::Stop => return Ok(Flow::Stop),
            Cmd::Return => return Ok(Flow::Return),
            Cmd::Keep { flags } => {
                let flags = self.flags_of(f, flags);
                self.actions.keep(flags)?;
                self.implicit_keep = false;
            }
            Cmd::Discard => self.implicit_keep = false,
            Cmd::Redirect { address, copy } => {
                let given = self.x(f, address);
                let addr = address::parse_single(&given).ok_or_else(|| {
                    RuntimeError::Invalid(format!("redirect: invalid address {given:?}"))
                })?;
                self.actions.redirect(addr)?;
                if !copy {
                    self.implicit_keep = false;
                }
            }
            Cmd::FileInto {
                mailbox,
                flags,
                copy,
                create,
            } => {
                let mailbox = self.x(f, mailbox);
                if mailbox.is_empty() {
                    return Err(RuntimeError::Invalid("fileinto: empty mailbox name".into()));
                }
                let flags = self.flags_of(f, flags);
                self.actions.fileinto(mailbox, flags, *create)?;
                if !copy {
                    self.implicit_keep = false;
                }
            }
            Cmd::Reject { reason, extended } => {
                let reason = self.x(f, reason);
                self.actions.reject(reason, *extended)?;
                self.implicit_keep = false;
            }
            Cmd::Vacation(v) => self.vacation(f, v)?,
            Cmd::Flag { op, var, flags } => {
                let given = flag_list(self.xs(f, flags).iter().map(String::as_str));
                let current = match var {
                    Some(r) => flag_list([self.var_get(f, r).as_str()]),
                    None => self.flags.clone(),
                };
                let new = match op {
                    FlagOp::Set => given,
                    FlagOp::Add => {
                        let mut cur = current;
                        for g in given {
                            if !cur.iter().any(|c| c.eq_ignore_ascii_case(&g)) {
                                cur.push(g);
                            }
                        }
                        cur
                    }
                    FlagOp::Remove => current
                        .into_iter()
                        .filter(|c| !given.iter().any(|g| g.eq_ignore_ascii_case(c)))
                        .collect(),
                };
                match var {
                    Some(r) => self.var_set(f, r, new.join(" ")),
                    None => self.flags = new,
                }
            }
            Cmd::Set {
                name,
                value,
                modifiers,
            } => {
                let mut v = self.x(f, value);
                for m in modifiers {
                    v = m.apply(v);
                }
                self.var_set(f, name, v);
            }
            Cmd::Global(names) => {
                for n in names {
                    f.global_names.insert(n.clone());
                }
            }
            Cmd::Include {
                location,
                name,
                once,
                optional,
            } => return self.include(*location, name, *once, *optional),
        }
        Ok(Flow::Next)
    }

    /// RFC 6609 §3.2.
    fn include(
        &mut self,
        location: Location,
        name: &str,
        once: bool,
        optional: bool,
    ) -> Result<Flow, RuntimeError> {
        let key = (location, name.to_string());
        if once && self.once.contains(&key) {
            return Ok(Flow::Next);
        }
        if self.stack.contains(&key) {
            return Err(RuntimeError::IncludeRecursive {
                location,
                name: name.into(),
            });
        }
        if self.stack.len() >= self.limits.max_include_depth {
            return Err(RuntimeError::IncludeTooDeep(self.limits.max_include_depth));
        }
        let script = match self.compiled.get(&key) {
            Some(s) => s.clone(),
            None => {
                let Some(source) = self.host.script_source(location, name) else {
                    if optional {
                        return Ok(Flow::Next);
                    }
                    return Err(RuntimeError::IncludeMissing {
                        location,
                        name: name.into(),
                    });
                };
                let s =
                    Rc::new(
                        compile(&source).map_err(|error| RuntimeError::IncludeInvalid {
                            location,
                            name: name.into(),
                            error,
                        })?,
                    );
                self.compiled.insert(key.clone(), s.clone());
                s
            }
        };
        self.once.insert(key.clone());
        self.stack.push(key);
        let flow = self.script(&script.commands)?;
        self.stack.pop();
        Ok(match flow {
            Flow::Stop => Flow::Stop,
            _ => Flow::Next,
        })
    }

    /// RFC 5230 §4.
    fn vacation(&mut self, f: &Frame, v: &VacationCmd) -> Result<(), RuntimeError> {
        let ctx = self.ctx;
        let mut own: Vec<String> = ctx.addresses.to_vec();
        if !ctx.envelope.to.is_empty() {
            own.push(ctx.envelope.to.clone());
        }
        own.extend(
            self.xs(f, &v.addresses)
                .iter()
                .flat_map(|a| address::parse_list(a)),
        );
        let req = vacation::Request {
            message: ctx.message,
            sender: &ctx.envelope.from,
            own,
        };
        if vacation::suppressed(&req).is_some() {
            return self.actions.vacation(None);
        }
        let reason = self.x(f, &v.reason);
        let subject = v.subject.as_ref().map(|s| self.x(f, s));
        let from = v.from.as_ref().map(|s| self.x(f, s));
        let handle = match &v.handle {
            Some(h) => self.x(f, h),
            None => vacation::default_handle(&reason, subject.as_deref(), from.as_deref(), v.mime),
        };
        // RFC 5230 §4.1: at least a day; RFC 6131 §2: any number of seconds.
        let period_secs = match v.period {
            None => vacation::DEFAULT_DAYS * 86_400,
            Some(Period::Days(d)) => d.max(1) * 86_400,
            Some(Period::Seconds(s)) => s,
        };
        self.actions.vacation(Some(Action::Vacation {
            to: ctx.envelope.from.clone(),
            from,
            subject: subject.unwrap_or_else(|| vacation::default_subject(ctx.message)),
            reason,
            mime: v.mime,
            handle,
            period_secs,
        }))
    }

    fn test(&mut self, f: &mut Frame, t: &Test) -> Result<bool, RuntimeError> {
        self.step()?;
        let ctx = self.ctx;
        let msg = ctx.message;
        Ok(match t {
            Test::True => true,
            Test::False => false,
            Test::Not(t) => !self.test(f, t)?,
            Test::AllOf(ts) => {
                for t in ts {
                    if !self.test(f, t)? {
                        return Ok(false);
                    }
                }
                true
            }
            Test::AnyOf(ts) => {
                for t in ts {
                    if self.test(f, t)? {
                        return Ok(true);
                    }
                }
                false
            }
            Test::Header { index, headers, m } => {
                let mut values = Vec::new();
                for h in self.xs(f, headers) {
                    values.extend(pick(msg.values(&h), *index).into_iter().map(str::to_string));
                }
                self.matches(f, m, &values)
            }
            Test::Address {
                part,
                index,
                headers,
                m,
            } => {
                let mut values = Vec::new();
                for h in self.xs(f, headers) {
                    for v in pick(msg.raw_values(&h), *index) {
                        values.extend(
                            address::parse_list(v)
                                .iter()
                                .filter_map(|a| address::part(a, *part)),
                        );
                    }
                }
                self.matches(f, m, &values)
            }
            Test::Envelope { part, fields, m } => {
                let mut values = Vec::new();
                for field in self.xs(f, fields) {
                    let given = match field.to_ascii_lowercase().as_str() {
                        "from" => &ctx.envelope.from,
                        "to" => &ctx.envelope.to,
                        _ => continue,
                    };
                    let bare = given.trim().trim_start_matches('<').trim_end_matches('>');
                    // RFC 5228 §5.4: the null reverse-path is "" whatever
                    // the address part.
                    if bare.is_empty() {
                        values.push(String::new());
                    } else if let Some(p) = address::part(bare, *part) {
                        values.push(p);
                    }
                }
                self.matches(f, m, &values)
            }
            Test::Exists(names) => self.xs(f, names).iter().all(|n| msg.has(n)),
            Test::Size { over, limit } => {
                if *over {
                    msg.size() > *limit
                } else {
                    msg.size() < *limit
                }
            }
            Test::Body { transform, m } => {
                let values = self.body_values(f, transform);
                self.matches(f, m, &values)
            }
            Test::String { sources, m } => {
                let mut values = self.xs(f, sources);
                // RFC 5229 §5: with :count, empty strings are not counted.
                if matches!(m.kind, MatchType::Count(_)) {
                    values.retain(|v| !v.is_empty());
                }
                self.matches(f, m, &values)
            }
            Test::HasFlag { vars, m } => {
                let values = match vars {
                    Some(vars) => {
                        let vals: Vec<String> = vars.iter().map(|r| self.var_get(f, r)).collect();
                        flag_list(vals.iter().map(String::as_str))
                    }
                    None => self.flags.clone(),
                };
                self.matches(f, m, &values)
            }
            Test::Date {
                zone,
                index,
                header,
                part,
                m,
            } => {
                let header = self.x(f, header);
                let zone = self.zone(f, zone);
                let received = header.eq_ignore_ascii_case("received");
                let values: Vec<String> = pick(msg.values(&header), *index)
                    .into_iter()
                    // RFC 5260 §4: in Received the date follows the last ';'.
                    .map(|v| match v.rsplit_once(';') {
                        Some((_, d)) if received => d,
                        _ => v,
                    })
                    .filter_map(date::parse_datetime)
                    .map(|d| {
                        // Near the ends of the calendar a zone change may not fit: keep the date as written.
                        let shown = zone.and_then(|z| d.checked_to_offset(z)).unwrap_or(d);
                        date::format_part(shown, *part)
                    })
                    .collect();
                self.matches(f, m, &values)
            }
            Test::CurrentDate { zone, part, m } => {
                let now = match self.zone(f, zone) {
                    Some(z) => ctx.now.checked_to_offset(z).unwrap_or(ctx.now),
                    None => ctx.now,
                };
                let values = vec![date::format_part(now, *part)];
                self.matches(f, m, &values)
            }
            Test::MailboxExists(names) => {
                let names = self.xs(f, names);
                names.iter().all(|n| self.host.mailbox_exists(n))
            }
            Test::Duplicate {
                handle,
                id,
                seconds,
                last,
            } => self.duplicate(f, handle, id, *seconds, *last),
            Test::Spam { percent, m } => {
                let value = match (ctx.spam, percent) {
                    (None, _) => 0,
                    (Some(s), false) => s.score.min(10),
                    (Some(s), true) => match s.percent {
                        Some(p) => p.min(100),
                        // RFC 5235 §3.2: scale the 1..10 score when no
                        // percentage is known.
                        None if s.score == 0 => 0,
                        None => ((u16::from(s.score.clamp(1, 10)) - 1) * 100 / 9) as u8,
                    },
                };
                self.matches(f, m, &[value.to_string()])
            }
            Test::Virus { m } => {
                let value = ctx.virus.unwrap_or(0).min(5);
                self.matches(f, m, &[value.to_string()])
            }
        })
    }

    /// The zone a date shows in: None = as written (`:originalzone`).
    fn zone(&self, f: &Frame, z: &Zone) -> Option<time::UtcOffset> {
        match z {
            Zone::Local => Some(self.ctx.now.offset()),
            Zone::Original => None,
            // An invalid zone from a variable leaves the date as written.
            Zone::Fixed(v) => date::parse_zone(&self.x(f, v)),
        }
    }

    /// RFC 5173 §5.
    fn body_values(&mut self, f: &Frame, t: &BodyTransform) -> Vec<String> {
        let msg = self.ctx.message;
        let types: Option<Vec<String>> = match t {
            BodyTransform::Raw => return vec![msg.raw_body()],
            BodyTransform::Text => None,
            BodyTransform::Content(types) => Some(
                self.xs(f, types)
                    .into_iter()
                    .map(|t| t.to_ascii_lowercase())
                    .collect(),
            ),
        };
        let parts = self.body.get_or_insert_with(|| msg.body_parts());
        match types {
            // §5.2 :text: the text parts, HTML turned into text.
            None => parts
                .iter()
                .filter(|p| p.content_type.starts_with("text/"))
                .map(|p| {
                    if p.content_type == "text/html" {
                        mail_parser::decoders::html::html_to_text(&p.text)
                    } else {
                        p.text.clone()
                    }
                })
                .collect(),
            // §5.2 :content: "" is every part, "type" any subtype of it.
            Some(types) => parts
                .iter()
                .filter(|p| {
                    types.iter().any(|want| {
                        want.is_empty()
                            || *want == p.content_type
                            || (!want.contains('/')
                                && p.content_type.split('/').next() == Some(want.as_str()))
                    })
                })
                .map(|p| p.text.clone())
                .collect(),
        }
    }

    /// RFC 7352 §3.
    fn duplicate(
        &mut self,
        f: &Frame,
        handle: &Option<Value>,
        id: &DupId,
        seconds: Option<u64>,
        last: bool,
    ) -> bool {
        let msg = self.ctx.message;
        let raw_id = match id {
            DupId::MessageId => msg
                .values("message-id")
                .first()
                .map(|s| s.trim().to_string()),
            DupId::Header(h) => {
                let h = self.x(f, h);
                msg.values(&h).first().map(|s| s.trim().to_string())
            }
            DupId::Unique(u) => Some(self.x(f, u)),
        };
        // §3.1: without the header field there is nothing to track.
        let Some(raw_id) = raw_id else {
            return false;
        };
        let handle = handle.as_ref().map(|h| self.x(f, h)).unwrap_or_default();
        let mut h = Sha256::new();
        h.update(handle.as_bytes());
        h.update([0]);
        h.update(raw_id.as_bytes());
        let key = hex::encode(h.finalize());
        let period = seconds.unwrap_or(DUPLICATE_DEFAULT_SECS);
        // §3: a second test of the same id in one run sees the first.
        if self.duplicates.iter().any(|(k, _)| *k == key) {
            return true;
        }
        let seen = self.host.duplicate_seen(&key, period);
        // §3.3: without :last the period counts from the first sighting,
        // so a seen id is not recorded again.
        if !seen || last {
            self.duplicates.push((key, period));
        }
        seen
    }

    /// Whether any value matches any key; sets the match variables on a
    /// :matches or :regex success.
    fn matches(&mut self, f: &mut Frame, m: &Matcher, values: &[String]) -> bool {
        let keys = self.xs(f, &m.keys);
        match m.kind {
            MatchType::Count(rel) => keys
                .iter()
                .any(|k| matching::count(rel, m.cmp, values.len(), k)),
            MatchType::Regex => {
                for (i, k) in keys.iter().enumerate() {
                    let built;
                    let re = match m.regexes.get(i) {
                        Some(Some(re)) => re,
                        _ => match matching::build_regex(k, m.cmp) {
                            Ok(re) => {
                                built = re;
                                &built
                            }
                            Err(_) => continue,
                        },
                    };
                    for v in values {
                        if let Some(caps) = matching::regex_match(re, v) {
                            f.matched = caps;
                            return true;
                        }
                    }
                }
                false
            }
            kind => {
                for v in values {
                    for k in &keys {
                        if let Some(caps) = matching::compare(kind, m.cmp, v, k) {
                            if kind == MatchType::Matches {
                                f.matched = caps;
                            }
                            return true;
                        }
                    }
                }
                false
            }
        }
    }
}

#[cfg(test)]
#[path = "run_tests.rs"]
mod tests;
