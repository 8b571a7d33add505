//! Command syntax imap-codec does not parse, handled before decoding:
//! - LIST-EXTENDED (RFC 5258, RFC 9051 §6.3.9): selection options,
//!   several patterns and `RETURN (...)` options, with LIST-STATUS
//!   (RFC 5819). Such a LIST is parsed here whole ([`take_list`]); a
//!   plain LIST is left to imap-codec.
//! - SEARCHRES (RFC 5182): `$`, the saved search result, as a sequence
//!   set. It is replaced by the set it stands for ([`substitute_saved`]),
//!   so imap-codec sees an ordinary command.
//!
//! - OBJECTID (RFC 8474 §4, §6): the FETCH items EMAILID and THREADID
//!   are taken out of the item list ([`take_fetch_objects`]) and
//!   answered beside imap-codec's items; the search keys EMAILID and
//!   THREADID are found ([`object_keys`]) and replaced by the UID sets
//!   they stand for ([`rewrite`]).
//!
//! All work on a command's tokens: atoms, quoted strings, literals and
//! parentheses, so nothing inside a string or a literal is touched.

use imap_codec::imap_types::status::StatusDataItemName;

/// One token of a command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Atom,
    Quoted,
    /// `{n}` / `{n+}` / `~{n}` CRLF and `n` bytes; the span covers it all.
    Literal,
    Open,
    Close,
}

#[derive(Debug, Clone, Copy)]
struct Token {
    kind: Kind,
    start: usize,
    end: usize,
}

/// The command's tokens, up to its final CRLF; `None` if it cannot be
/// split (an unterminated string, a literal longer than the command).
fn tokens(cmd: &[u8]) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < cmd.len() {
        let b = cmd[i];
        let start = i;
        match b {
            b' ' => {
                i += 1;
                continue;
            }
            b'\r' | b'\n' => break,
            b'(' | b')' => {
                i += 1;
                out.push(Token {
                    kind: if b == b'(' { Kind::Open } else { Kind::Close },
                    start,
                    end: i,
                });
                continue;
            }
            b'"' => {
                i += 1;
                loop {
                    match cmd.get(i)? {
                        b'\\' => i += 2,
                        b'"' => break,
                        b'\r' | b'\n' => return None,
                        _ => i += 1,
                    }
                }
                i += 1;
                out.push(Token {
                    kind: Kind::Quoted,
                    start,
                    end: i,
                });
                continue;
            }
            _ => {}
        }
        let brace = if b == b'{' {
            Some(i)
        } else if b == b'~' && cmd.get(i + 1) == Some(&b'{') {
            Some(i + 1)
        } else {
            None
        };
        if let Some(open) = brace {
            let close = open + cmd[open..].iter().position(|&c| c == b'}')?;
            let digits = &cmd[open + 1..close];
            let digits = digits.strip_suffix(b"+").unwrap_or(digits);
            let n: usize = std::str::from_utf8(digits).ok()?.parse().ok()?;
            let mut data = close + 1;
            if cmd.get(data) == Some(&b'\r') {
                data += 1;
            }
            if cmd.get(data) != Some(&b'\n') {
                return None;
            }
            i = data + 1 + n;
            if i > cmd.len() {
                return None;
            }
            out.push(Token {
                kind: Kind::Literal,
                start,
                end: i,
            });
            continue;
        }
        while i < cmd.len() && !matches!(cmd[i], b' ' | b'(' | b')' | b'"' | b'\r' | b'\n') {
            i += 1;
        }
        out.push(Token {
            kind: Kind::Atom,
            start,
            end: i,
        });
    }
    Some(out)
}

fn text<'a>(cmd: &'a [u8], t: &Token) -> &'a [u8] {
    &cmd[t.start..t.end]
}

fn is_atom(cmd: &[u8], t: Option<&Token>, word: &str) -> bool {
    t.is_some_and(|t| t.kind == Kind::Atom && text(cmd, t).eq_ignore_ascii_case(word.as_bytes()))
}

/// The value of an atom, a quoted string or a literal.
fn value(cmd: &[u8], t: &Token) -> Option<Vec<u8>> {
    let raw = text(cmd, t);
    match t.kind {
        Kind::Atom => Some(raw.to_vec()),
        Kind::Quoted => {
            let inner = &raw[1..raw.len() - 1];
            let mut out = Vec::with_capacity(inner.len());
            let mut escaped = false;
            for &b in inner {
                if escaped || b != b'\\' {
                    out.push(b);
                    escaped = false;
                } else {
                    escaped = true;
                }
            }
            Some(out)
        }
        Kind::Literal => {
            let nl = raw.iter().position(|&b| b == b'\n')?;
            Some(raw[nl + 1..].to_vec())
        }
        Kind::Open | Kind::Close => None,
    }
}

/// RFC 5258 §3 selection options.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Selection {
    pub subscribed: bool,
    pub special_use: bool,
    pub recursive_match: bool,
}

impl Selection {
    /// Whether any option narrows what is listed.
    pub(crate) fn narrows(&self) -> bool {
        self.subscribed || self.special_use
    }
}

/// RFC 5258 §3 return options, with RFC 5819 STATUS.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Returns {
    pub subscribed: bool,
    pub children: bool,
    pub special_use: bool,
    pub status: Option<Vec<StatusDataItemName>>,
    /// RFC 8474 §4.2: MAILBOXID among the STATUS items.
    pub mailbox_id: bool,
}

/// An extended LIST command.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ExtendedList {
    pub selection: Selection,
    pub reference: Vec<u8>,
    pub patterns: Vec<Vec<u8>>,
    pub returns: Returns,
}

fn status_item(word: &[u8]) -> Option<StatusDataItemName> {
    Some(match word.to_ascii_uppercase().as_slice() {
        b"MESSAGES" => StatusDataItemName::Messages,
        b"RECENT" => StatusDataItemName::Recent,
        b"UIDNEXT" => StatusDataItemName::UidNext,
        b"UIDVALIDITY" => StatusDataItemName::UidValidity,
        b"UNSEEN" => StatusDataItemName::Unseen,
        b"DELETED" => StatusDataItemName::Deleted,
        b"SIZE" => StatusDataItemName::Size,
        b"HIGHESTMODSEQ" => StatusDataItemName::HighestModSeq,
        _ => return None,
    })
}

/// Reads a parenthesised list of atoms from `toks[*at]` on.
fn atom_list<'a>(cmd: &'a [u8], toks: &[Token], at: &mut usize) -> Result<Vec<&'a [u8]>, String> {
    if toks.get(*at).map(|t| t.kind) != Some(Kind::Open) {
        return Err("Expected (".into());
    }
    *at += 1;
    let mut out = Vec::new();
    loop {
        match toks.get(*at) {
            Some(t) if t.kind == Kind::Close => {
                *at += 1;
                return Ok(out);
            }
            Some(t) if t.kind == Kind::Atom => {
                out.push(text(cmd, t));
                *at += 1;
            }
            _ => return Err("Expected an option or )".into()),
        }
    }
}

/// An extended LIST (RFC 5258 §6 grammar), parsed whole. `None` when the
/// command is not a LIST or is a plain one imap-codec reads; `Some(Err)`
/// with the reason when it is an extended LIST that is not valid.
pub(crate) fn take_list(cmd: &[u8]) -> Option<Result<ExtendedList, String>> {
    // Only a LIST is tokenized.
    let after_tag = cmd.iter().position(|&b| b == b' ')? + 1;
    let word = cmd.get(after_tag..after_tag + 5)?;
    if !word.eq_ignore_ascii_case(b"LIST ") {
        return None;
    }
    let toks = tokens(cmd)?;
    if toks.len() < 3 || !is_atom(cmd, toks.get(1), "LIST") {
        return None;
    }
    let extended = toks[2].kind == Kind::Open
        || toks.get(3).map(|t| t.kind) == Some(Kind::Open)
        || toks.len() > 4;
    if !extended {
        return None;
    }
    Some(parse_list(cmd, &toks))
}

fn parse_list(cmd: &[u8], toks: &[Token]) -> Result<ExtendedList, String> {
    let mut list = ExtendedList::default();
    let mut at = 2;
    if toks[at].kind == Kind::Open {
        for o in atom_list(cmd, toks, &mut at)? {
            match o.to_ascii_uppercase().as_slice() {
                b"SUBSCRIBED" => list.selection.subscribed = true,
                b"SPECIAL-USE" => list.selection.special_use = true,
                b"RECURSIVEMATCH" => list.selection.recursive_match = true,
                // No mailbox is remote: REMOTE changes nothing.
                b"REMOTE" => {}
                _ => {
                    return Err(format!(
                        "Unknown LIST selection option {}",
                        String::from_utf8_lossy(o)
                    ))
                }
            }
        }
        // RFC 5258 §3: RECURSIVEMATCH alone is an error.
        if list.selection.recursive_match && !list.selection.narrows() {
            return Err("RECURSIVEMATCH needs another selection option".into());
        }
    }
    let reference = toks.get(at).ok_or("Missing LIST reference")?;
    list.reference = value(cmd, reference).ok_or("Invalid LIST reference")?;
    at += 1;
    match toks.get(at) {
        Some(t) if t.kind == Kind::Open => {
            at += 1;
            loop {
                match toks.get(at) {
                    Some(t) if t.kind == Kind::Close => {
                        at += 1;
                        break;
                    }
                    Some(t) => {
                        list.patterns
                            .push(value(cmd, t).ok_or("Invalid LIST pattern")?);
                        at += 1;
                    }
                    None => return Err("Unterminated LIST patterns".into()),
                }
            }
            if list.patterns.is_empty() {
                return Err("Empty LIST patterns".into());
            }
        }
        Some(t) => {
            list.patterns
                .push(value(cmd, t).ok_or("Invalid LIST pattern")?);
            at += 1;
        }
        None => return Err("Missing LIST pattern".into()),
    }
    if at == toks.len() {
        return Ok(list);
    }
    if !is_atom(cmd, toks.get(at), "RETURN") {
        return Err("Unexpected LIST arguments".into());
    }
    at += 1;
    if toks.get(at).map(|t| t.kind) != Some(Kind::Open) {
        return Err("Expected ( after RETURN".into());
    }
    at += 1;
    loop {
        let Some(t) = toks.get(at) else {
            return Err("Unterminated RETURN options".into());
        };
        at += 1;
        if t.kind == Kind::Close {
            break;
        }
        if t.kind != Kind::Atom {
            return Err("Invalid RETURN option".into());
        }
        match text(cmd, t).to_ascii_uppercase().as_slice() {
            b"SUBSCRIBED" => list.returns.subscribed = true,
            b"CHILDREN" => list.returns.children = true,
            b"SPECIAL-USE" => list.returns.special_use = true,
            b"STATUS" => {
                let mut items = Vec::new();
                for word in atom_list(cmd, toks, &mut at)? {
                    if word.eq_ignore_ascii_case(b"MAILBOXID") {
                        list.returns.mailbox_id = true;
                        continue;
                    }
                    let item = status_item(word).ok_or_else(|| {
                        format!("Unknown STATUS item {}", String::from_utf8_lossy(word))
                    })?;
                    items.push(item);
                }
                if items.is_empty() && !list.returns.mailbox_id {
                    return Err("Empty STATUS items".into());
                }
                list.returns.status = Some(items);
            }
            other => {
                return Err(format!(
                    "Unknown LIST return option {}",
                    String::from_utf8_lossy(other)
                ))
            }
        }
    }
    if at != toks.len() {
        return Err("Unexpected data after RETURN options".into());
    }
    Ok(list)
}

/// What `$` became.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Saved {
    /// The command does not use `$`.
    Unused,
    /// The command with `$` replaced.
    Rewritten(Vec<u8>),
    /// `$` is the set of a FETCH, STORE, COPY, MOVE or UID EXPUNGE and
    /// the saved result is empty: the command has nothing to act on.
    Empty,
}

/// Search keys followed by that many arguments (RFC 3501 §6.4.4).
fn key_arguments(key: &[u8]) -> usize {
    match key.to_ascii_uppercase().as_slice() {
        b"BCC" | b"BODY" | b"CC" | b"FROM" | b"KEYWORD" | b"SUBJECT" | b"TEXT" | b"TO"
        | b"UNKEYWORD" | b"BEFORE" | b"ON" | b"SINCE" | b"SENTBEFORE" | b"SENTON"
        | b"SENTSINCE" | b"LARGER" | b"SMALLER" | b"UID" | b"EMAILID" | b"THREADID" => 1,
        b"HEADER" => 2,
        _ => 0,
    }
}

/// Replaces `$` (RFC 5182) where it is a sequence set: the set of FETCH,
/// STORE, COPY, MOVE and UID EXPUNGE (and their UID forms), and search
/// keys of SEARCH, SORT and THREAD (RFC 5182 §2.1). `saved(uid)` gives the saved result as UIDs or as
/// message sequence numbers (`None` when it is empty).
pub(crate) fn substitute_saved(cmd: &[u8], saved: impl Fn(bool) -> Option<String>) -> Saved {
    if !cmd.contains(&b'$') {
        return Saved::Unused;
    }
    let Some(toks) = tokens(cmd) else {
        return Saved::Unused;
    };
    let mut at = 1;
    let uid = is_atom(cmd, toks.get(at), "UID");
    if uid {
        at += 1;
    }
    let dollar = |t: Option<&Token>| is_atom(cmd, t, "$");
    // (span to replace, replacement)
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    let name = toks.get(at).map(|t| text(cmd, t).to_ascii_uppercase());
    match name.as_deref() {
        Some(b"FETCH" | b"STORE" | b"COPY" | b"MOVE" | b"EXPUNGE") => {
            let t = toks.get(at + 1);
            if !dollar(t) {
                return Saved::Unused;
            }
            let t = t.expect("checked");
            match saved(uid) {
                Some(set) => edits.push((t.start, t.end, set)),
                None => return Saved::Empty,
            }
        }
        Some(name @ (b"SEARCH" | b"SORT" | b"THREAD")) => {
            let mut i = at + 1;
            if name == b"SEARCH" {
                if is_atom(cmd, toks.get(i), "CHARSET") {
                    i += 2;
                }
            } else if name == b"SORT" {
                // RFC 5256 §3: the sort criteria list, then the charset.
                while toks.get(i).is_some_and(|t| t.kind != Kind::Close) {
                    i += 1;
                }
                i += 2;
            } else {
                // The algorithm, then the charset.
                i += 2;
            }
            while let Some(t) = toks.get(i) {
                i += 1;
                if t.kind != Kind::Atom {
                    continue;
                }
                let word = text(cmd, t);
                if word == b"$" {
                    let set = saved(false).unwrap_or_else(|| "(NOT ALL)".into());
                    edits.push((t.start, t.end, set));
                } else if word.eq_ignore_ascii_case(b"UID") && dollar(toks.get(i)) {
                    let d = toks[i];
                    match saved(true) {
                        Some(set) => edits.push((d.start, d.end, set)),
                        None => edits.push((t.start, d.end, "(NOT ALL)".into())),
                    }
                    i += 1;
                } else if word.eq_ignore_ascii_case(b"MODSEQ") {
                    // MODSEQ [entry-name entry-type-req] mod-sequence-valzer
                    i += if toks.get(i).map(|t| t.kind) == Some(Kind::Quoted) {
                        3
                    } else {
                        1
                    };
                } else {
                    i += key_arguments(word);
                }
            }
        }
        _ => return Saved::Unused,
    }
    if edits.is_empty() {
        return Saved::Unused;
    }
    let mut out = Vec::with_capacity(cmd.len() + 64);
    let mut last = 0;
    for (start, end, with) in edits {
        out.extend_from_slice(&cmd[last..start]);
        out.extend_from_slice(with.as_bytes());
        last = end;
    }
    out.extend_from_slice(&cmd[last..]);
    Saved::Rewritten(out)
}

/// FETCH items of RFC 8474 §6 a FETCH asked for.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ObjectItems {
    /// `EMAILID`.
    pub email_id: bool,
    /// `THREADID`.
    pub thread_id: bool,
    /// The list had nothing else: `UID` stands in for it, and is not
    /// answered unless the command is a UID FETCH.
    pub only: bool,
}

/// Takes the RFC 8474 §6 items (EMAILID, THREADID) out of a FETCH or UID
/// FETCH item list, which imap-codec does not know: `None` when the
/// command is no such FETCH or names none of them, else the command
/// without them and what was asked for (an error for a list that cannot
/// be read).
pub(crate) fn take_fetch_objects(cmd: &[u8]) -> Option<Result<(Vec<u8>, ObjectItems), String>> {
    let upper = cmd.to_ascii_uppercase();
    if !upper.windows(7).any(|w| w == b"EMAILID" || w == b"THREADI") {
        return None;
    }
    let toks = tokens(cmd)?;
    let mut at = 1;
    if is_atom(cmd, toks.get(at), "UID") {
        at += 1;
    }
    if !is_atom(cmd, toks.get(at), "FETCH") {
        return None;
    }
    let list = at + 2;
    let first = toks.get(list)?;
    let mut items = ObjectItems::default();
    let mut removed: Vec<(usize, usize)> = Vec::new();
    let object = |t: &Token| {
        if is_atom(cmd, Some(t), "EMAILID") {
            Some(true)
        } else if is_atom(cmd, Some(t), "THREADID") {
            Some(false)
        } else {
            None
        }
    };
    let note = |email: bool, items: &mut ObjectItems| {
        if email {
            items.email_id = true;
        } else {
            items.thread_id = true;
        }
    };
    let (open, close) = match first.kind {
        Kind::Atom => {
            let email = object(first)?;
            note(email, &mut items);
            items.only = true;
            let mut out = cmd[..first.start].to_vec();
            out.extend_from_slice(b"UID");
            out.extend_from_slice(&cmd[first.end..]);
            return Some(Ok((out, items)));
        }
        Kind::Open => {
            let mut depth = 0usize;
            let mut close = None;
            for (i, t) in toks.iter().enumerate().skip(list) {
                match t.kind {
                    Kind::Open => depth += 1,
                    Kind::Close => {
                        depth -= 1;
                        if depth == 0 {
                            close = Some(i);
                            break;
                        }
                    }
                    Kind::Atom if depth == 1 => {
                        if let Some(email) = object(t) {
                            note(email, &mut items);
                            removed.push((t.start, t.end));
                        }
                    }
                    _ => {}
                }
            }
            match close {
                Some(c) => (first.start, toks[c].start),
                None => return Some(Err("Unterminated FETCH item list".into())),
            }
        }
        _ => return None,
    };
    if removed.is_empty() {
        return None;
    }
    let mut inner: Vec<u8> = Vec::new();
    let mut last = open + 1;
    for (start, end) in removed {
        inner.extend_from_slice(&cmd[last..start]);
        last = end;
    }
    inner.extend_from_slice(&cmd[last..close]);
    let rest: Vec<u8> = inner
        .split(|&b| b == b' ')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(&b' ');
    let mut out = cmd[..open].to_vec();
    out.push(b'(');
    if rest.is_empty() {
        items.only = true;
        out.extend_from_slice(b"UID");
    } else {
        out.extend_from_slice(&rest);
    }
    out.extend_from_slice(&cmd[close..]);
    Some(Ok((out, items)))
}

/// Takes the RFC 8474 §4.2 item MAILBOXID out of a STATUS item list,
/// which imap-codec does not know: `None` when the command is no such
/// STATUS, else the command without it, and whether it was the only
/// item (then `MESSAGES` stands in for the list, and is not answered).
pub(crate) fn take_status_mailbox_id(cmd: &[u8]) -> Option<(Vec<u8>, bool)> {
    if !cmd
        .to_ascii_uppercase()
        .windows(9)
        .any(|w| w == b"MAILBOXID")
    {
        return None;
    }
    let toks = tokens(cmd)?;
    if !is_atom(cmd, toks.get(1), "STATUS") {
        return None;
    }
    let open = toks.get(3).filter(|t| t.kind == Kind::Open)?;
    let close_at = toks.iter().skip(4).position(|t| t.kind != Kind::Atom)? + 4;
    let close = toks.get(close_at).filter(|t| t.kind == Kind::Close)?;
    let words: Vec<&[u8]> = toks[4..close_at].iter().map(|t| text(cmd, t)).collect();
    if !words.iter().any(|w| w.eq_ignore_ascii_case(b"MAILBOXID")) {
        return None;
    }
    let rest: Vec<&[u8]> = words
        .into_iter()
        .filter(|w| !w.eq_ignore_ascii_case(b"MAILBOXID"))
        .collect();
    let only = rest.is_empty();
    let mut out = cmd[..open.end].to_vec();
    if only {
        out.extend_from_slice(b"MESSAGES");
    } else {
        out.extend_from_slice(&rest.join(&b' '));
    }
    out.extend_from_slice(&cmd[close.start..]);
    Some((out, only))
}

/// An RFC 8474 §6 search key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ObjectKey {
    /// `EMAILID objectid`.
    Email(String),
    /// `THREADID objectid`.
    Thread(String),
}

/// A search key's span in the command (start, end) and what it names.
pub(crate) type ObjectKeySpan = (usize, usize, ObjectKey);

/// RFC 8474 §7: `objectid = 1*255(ALPHA / DIGIT / "_" / "-")`.
fn is_object_id(word: &[u8]) -> bool {
    !word.is_empty()
        && word.len() <= 255
        && word
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The search keys EMAILID and THREADID (RFC 8474 §6) of a SEARCH, SORT
/// or THREAD (and their UID forms): each key's span in the command and
/// what it names. `None` when there is none; an error when one has no
/// valid object id.
pub(crate) fn object_keys(cmd: &[u8]) -> Option<Result<Vec<ObjectKeySpan>, String>> {
    let upper = cmd.to_ascii_uppercase();
    if !upper.windows(7).any(|w| w == b"EMAILID" || w == b"THREADI") {
        return None;
    }
    let toks = tokens(cmd)?;
    let mut at = 1;
    if is_atom(cmd, toks.get(at), "UID") {
        at += 1;
    }
    let name = toks.get(at).map(|t| text(cmd, t).to_ascii_uppercase())?;
    let mut i = at + 1;
    match name.as_slice() {
        b"SEARCH" => {
            if is_atom(cmd, toks.get(i), "CHARSET") {
                i += 2;
            }
        }
        b"SORT" => {
            while toks.get(i).is_some_and(|t| t.kind != Kind::Close) {
                i += 1;
            }
            i += 2;
        }
        b"THREAD" => i += 2,
        _ => return None,
    }
    let mut found = Vec::new();
    while let Some(t) = toks.get(i) {
        i += 1;
        if t.kind != Kind::Atom {
            continue;
        }
        let word = text(cmd, t);
        let email = word.eq_ignore_ascii_case(b"EMAILID");
        if email || word.eq_ignore_ascii_case(b"THREADID") {
            let arg = match toks.get(i) {
                Some(a) if a.kind == Kind::Atom && is_object_id(text(cmd, a)) => a,
                _ => return Some(Err("EMAILID and THREADID take an object id".into())),
            };
            let id = String::from_utf8_lossy(text(cmd, arg)).into_owned();
            let key = if email {
                ObjectKey::Email(id)
            } else {
                ObjectKey::Thread(id)
            };
            found.push((t.start, arg.end, key));
            i += 1;
        } else if word.eq_ignore_ascii_case(b"MODSEQ") {
            i += if toks.get(i).map(|t| t.kind) == Some(Kind::Quoted) {
                3
            } else {
                1
            };
        } else {
            i += key_arguments(word);
        }
    }
    if found.is_empty() {
        None
    } else {
        Some(Ok(found))
    }
}

/// The command with each span replaced (spans in order, not overlapping).
pub(crate) fn rewrite(cmd: &[u8], edits: &[(usize, usize, String)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(cmd.len() + 64);
    let mut last = 0;
    for (start, end, with) in edits {
        out.extend_from_slice(&cmd[last..*start]);
        out.extend_from_slice(with.as_bytes());
        last = *end;
    }
    out.extend_from_slice(&cmd[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetch_object_items() {
        let take = |c: &str| {
            take_fetch_objects(c.as_bytes())
                .map(|r| r.map(|(b, i)| (String::from_utf8(b).unwrap(), i)))
        };
        assert_eq!(take("a FETCH 1 (FLAGS)\r\n"), None);
        assert_eq!(take("a SEARCH SUBJECT EMAILID\r\n"), None);
        let (cmd, items) = take("a FETCH 1:* (FLAGS EMAILID THREADID)\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(cmd, "a FETCH 1:* (FLAGS)\r\n");
        assert!(items.email_id && items.thread_id && !items.only);
        let (cmd, items) = take("a UID FETCH 1 (emailid)\r\n").unwrap().unwrap();
        assert_eq!(cmd, "a UID FETCH 1 (UID)\r\n");
        assert!(items.email_id && !items.thread_id && items.only);
        let (cmd, items) = take("a FETCH 1 THREADID\r\n").unwrap().unwrap();
        assert_eq!(cmd, "a FETCH 1 UID\r\n");
        assert!(items.thread_id && items.only);
        let (cmd, _) = take("a FETCH 1 (BODY.PEEK[HEADER.FIELDS (EMAILID)] EMAILID)\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(cmd, "a FETCH 1 (BODY.PEEK[HEADER.FIELDS (EMAILID)])\r\n");
        assert!(take("a FETCH 1 (EMAILID\r\n").unwrap().is_err());
    }

    #[test]
    fn status_mailbox_id() {
        let take = |c: &str| {
            take_status_mailbox_id(c.as_bytes()).map(|(b, o)| (String::from_utf8(b).unwrap(), o))
        };
        assert_eq!(take("a STATUS INBOX (MESSAGES)\r\n"), None);
        assert_eq!(take("a STATUS MAILBOXID (MESSAGES)\r\n"), None);
        assert_eq!(
            take("a STATUS INBOX (MESSAGES mailboxid UIDNEXT)\r\n"),
            Some(("a STATUS INBOX (MESSAGES UIDNEXT)\r\n".into(), false))
        );
        assert_eq!(
            take("a STATUS \"a b\" (MAILBOXID)\r\n"),
            Some(("a STATUS \"a b\" (MESSAGES)\r\n".into(), true))
        );
    }

    #[test]
    fn object_search_keys() {
        let keys = |c: &str| object_keys(c.as_bytes());
        assert_eq!(keys("a SEARCH SUBJECT EMAILID\r\n"), None);
        assert_eq!(keys("a FETCH 1 EMAILID\r\n"), None);
        let cmd = "a UID SEARCH UNSEEN EMAILID E12 THREADID T1f\r\n";
        let found = keys(cmd).unwrap().unwrap();
        assert_eq!(
            found.iter().map(|(_, _, k)| k.clone()).collect::<Vec<_>>(),
            vec![
                ObjectKey::Email("E12".into()),
                ObjectKey::Thread("T1f".into())
            ]
        );
        let edits: Vec<(usize, usize, String)> = found
            .into_iter()
            .map(|(s, e, _)| (s, e, "UID 3".to_string()))
            .collect();
        assert_eq!(
            rewrite(cmd.as_bytes(), &edits),
            b"a UID SEARCH UNSEEN UID 3 UID 3\r\n"
        );
        assert!(keys("a SORT (DATE) UTF-8 EMAILID E1\r\n").unwrap().is_ok());
        for bad in [
            "a SEARCH EMAILID\r\n",
            "a SEARCH EMAILID \"E1\"\r\n",
            "a SEARCH THREADID T.1\r\n",
            "a SEARCH EMAILID (E1)\r\n",
        ] {
            assert!(keys(bad).unwrap().is_err(), "{bad}");
        }
    }
    use proptest::prelude::*;

    fn list(cmd: &str) -> Option<Result<ExtendedList, String>> {
        take_list(cmd.as_bytes())
    }

    #[test]
    fn plain_lists_are_left_to_imap_codec() {
        assert_eq!(list("a LIST \"\" *\r\n"), None);
        assert_eq!(list("a LIST \"\" {1}\r\n*\r\n"), None);
        assert_eq!(list("a LSUB (x) *\r\n"), None);
        assert_eq!(list("a SELECT INBOX\r\n"), None);
    }

    #[test]
    fn extended_lists() {
        let l = list(
            "a LIST (SUBSCRIBED RECURSIVEMATCH) \"\" (\"INBOX\" Work/% {3}\r\nA B) RETURN (CHILDREN SPECIAL-USE STATUS (MESSAGES UNSEEN))\r\n",
        )
        .unwrap()
        .unwrap();
        assert!(l.selection.subscribed && l.selection.recursive_match && !l.selection.special_use);
        assert_eq!(l.reference, b"");
        assert_eq!(
            l.patterns,
            vec![b"INBOX".to_vec(), b"Work/%".to_vec(), b"A B".to_vec()]
        );
        assert!(l.returns.children && l.returns.special_use && !l.returns.subscribed);
        assert_eq!(
            l.returns.status,
            Some(vec![
                StatusDataItemName::Messages,
                StatusDataItemName::Unseen
            ])
        );
        let l = list("a list \"\" \"*\" return ()\r\n").unwrap().unwrap();
        assert_eq!(l.returns, Returns::default());
        assert_eq!(l.patterns, vec![b"*".to_vec()]);
        let l = list("a LIST () \"a\\\"b\" %\r\n").unwrap().unwrap();
        assert_eq!(l.reference, b"a\"b");
        assert_eq!(l.selection, Selection::default());
    }

    #[test]
    fn invalid_extended_lists() {
        for bad in [
            "a LIST (RECURSIVEMATCH) \"\" *\r\n",
            "a LIST (FROB) \"\" *\r\n",
            "a LIST \"\" () \r\n",
            "a LIST \"\" * RETURN (FROB)\r\n",
            "a LIST \"\" * RETURN (STATUS (MESSAGES FROB))\r\n",
            "a LIST \"\" * RETURN (STATUS ())\r\n",
            "a LIST \"\" * RETURN CHILDREN\r\n",
            "a LIST \"\" * FOO (CHILDREN)\r\n",
            "a LIST \"\" (* RETURN (CHILDREN)\r\n",
            "a LIST \"\" * RETURN (CHILDREN) x\r\n",
        ] {
            assert!(matches!(list(bad), Some(Err(_))), "{bad}");
        }
    }

    fn saved(uid: bool) -> Option<String> {
        Some(if uid { "10:12,20" } else { "1:3,5" }.into())
    }

    fn subst(cmd: &str) -> Saved {
        substitute_saved(cmd.as_bytes(), saved)
    }

    fn rewritten(s: &str) -> Saved {
        Saved::Rewritten(s.as_bytes().to_vec())
    }

    #[test]
    fn saved_results() {
        assert_eq!(
            subst("a FETCH $ FLAGS\r\n"),
            rewritten("a FETCH 1:3,5 FLAGS\r\n")
        );
        assert_eq!(
            subst("a UID FETCH $ (UID)\r\n"),
            rewritten("a UID FETCH 10:12,20 (UID)\r\n")
        );
        assert_eq!(
            subst("a uid move $ Trash\r\n"),
            rewritten("a uid move 10:12,20 Trash\r\n")
        );
        assert_eq!(
            subst("a UID EXPUNGE $\r\n"),
            rewritten("a UID EXPUNGE 10:12,20\r\n")
        );
        assert_eq!(
            subst("a STORE $ +FLAGS ($Junk)\r\n"),
            rewritten("a STORE 1:3,5 +FLAGS ($Junk)\r\n")
        );
        assert_eq!(
            subst("a SEARCH $ SUBJECT $ OR UID $ HEADER $ $ NOT $\r\n"),
            rewritten("a SEARCH 1:3,5 SUBJECT $ OR UID 10:12,20 HEADER $ $ NOT 1:3,5\r\n")
        );
        assert_eq!(
            subst("a UID SEARCH CHARSET UTF-8 FROM {1}\r\n$ $\r\n"),
            rewritten("a UID SEARCH CHARSET UTF-8 FROM {1}\r\n$ 1:3,5\r\n")
        );
        assert_eq!(
            subst("a UID SORT (REVERSE DATE) UTF-8 $ SUBJECT $\r\n"),
            rewritten("a UID SORT (REVERSE DATE) UTF-8 1:3,5 SUBJECT $\r\n")
        );
        assert_eq!(
            subst("a THREAD REFERENCES UTF-8 OR $ UID $\r\n"),
            rewritten("a THREAD REFERENCES UTF-8 OR 1:3,5 UID 10:12,20\r\n")
        );
        assert_eq!(subst("a SORT ($) UTF-8 ALL\r\n"), Saved::Unused);
        assert_eq!(subst("a SEARCH SUBJECT \"$ x\"\r\n"), Saved::Unused);
        assert_eq!(subst("a COPY 1 $\r\n"), Saved::Unused);
        assert_eq!(subst("a CREATE $\r\n"), Saved::Unused);
        assert_eq!(subst("a FETCH 1 FLAGS\r\n"), Saved::Unused);
    }

    #[test]
    fn empty_saved_results() {
        let none = |_| None;
        assert_eq!(substitute_saved(b"a FETCH $ FLAGS\r\n", none), Saved::Empty);
        assert_eq!(
            substitute_saved(b"a SEARCH $ OR UID $ ALL\r\n", none),
            Saved::Rewritten(b"a SEARCH (NOT ALL) OR (NOT ALL) ALL\r\n".to_vec())
        );
    }

    proptest! {
        /// Whatever arrives, parsing ends without a panic.
        #[test]
        fn arbitrary_input_never_panics(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let _ = take_list(&bytes);
            let _ = substitute_saved(&bytes, saved);
        }

        /// Inputs shaped like LIST commands, too.
        #[test]
        fn list_shaped_input_never_panics(
            words in proptest::collection::vec(
                prop_oneof![
                    Just("(".to_string()), Just(")".to_string()), Just("RETURN".to_string()),
                    Just("STATUS".to_string()), Just("\"".to_string()), Just("{3}\r\n".to_string()),
                    Just("~{2+}\r\n".to_string()), Just("$".to_string()), "[a-zA-Z%*]{1,8}",
                ],
                0..20,
            ),
        ) {
            let cmd = format!("a LIST {}\r\n", words.join(" "));
            let _ = take_list(cmd.as_bytes());
            let cmd = format!("a UID SEARCH {}\r\n", words.join(" "));
            let _ = substitute_saved(cmd.as_bytes(), saved);
        }
    }
}
