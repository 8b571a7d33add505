//! The ManageSieve wire format (RFC 5804 §4), with no I/O: command lines
//! made of atoms, quoted strings and literals, and the responses the
//! server sends.
//!
//! A command may span several lines: a literal's announcement (`{n+}`,
//! or `{n}` which older clients send and which is taken the same way,
//! with no continuation) ends a line and its `n` bytes follow. The
//! session reads line by line and parses the whole buffer again after
//! each piece; [`parse_command`] says when it needs a literal's bytes.

/// One element of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// A bare word: the command name, a number.
    Atom(String),
    /// A quoted string or a literal, as bytes.
    Str(Vec<u8>),
}

/// Why a buffer is not a command (yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// The buffer ends with a literal's announcement and its line break:
    /// the caller reads `size` bytes, appends them and the next line, and
    /// parses again. `marker` is where the announcement starts, so an
    /// oversized literal can be dropped and replaced.
    NeedLiteral {
        /// The literal's length in bytes.
        size: u64,
        /// Offset of its `{` in the buffer.
        marker: usize,
    },
    /// Not a well-formed command.
    Syntax(&'static str),
}

/// Most elements in one command (the longest, NOOP with a tag or
/// RENAMESCRIPT, has three).
pub const MAX_TOKENS: usize = 16;

/// Longest literal length the announcement may carry (digits).
const MAX_DIGITS: usize = 18;

/// Where the line ends if it ends at `pos` (CRLF, or a bare LF, which
/// some clients send).
fn line_end(buf: &[u8], pos: usize) -> Option<usize> {
    match buf.get(pos..) {
        Some([b'\r', b'\n', ..]) => Some(pos + 2),
        Some([b'\n', ..]) => Some(pos + 1),
        _ => None,
    }
}

/// Parses one whole command from `buf` (lines and literal bytes as
/// received). The buffer must end where the command ends.
pub fn parse_command(buf: &[u8]) -> Result<Vec<Token>, ParseError> {
    let mut tokens = Vec::new();
    let mut pos = 0;
    loop {
        if !tokens.is_empty() && line_end(buf, pos).is_none() {
            if buf.get(pos) != Some(&b' ') {
                return Err(ParseError::Syntax("expected a space between arguments"));
            }
            // One space between arguments; more are forgiven.
            while buf.get(pos) == Some(&b' ') {
                pos += 1;
            }
        }
        if let Some(end) = line_end(buf, pos) {
            return match (end == buf.len(), tokens.is_empty()) {
                (true, false) => Ok(tokens),
                (true, true) => Err(ParseError::Syntax("empty command")),
                (false, _) => Err(ParseError::Syntax("text after the end of the command")),
            };
        }
        if tokens.len() == MAX_TOKENS {
            return Err(ParseError::Syntax("too many arguments"));
        }
        match buf.get(pos) {
            None => return Err(ParseError::Syntax("no line break at the end")),
            Some(b'"') => {
                let (s, next) = quoted(buf, pos + 1)?;
                tokens.push(Token::Str(s));
                pos = next;
            }
            Some(b'{') => {
                let (size, after) = literal_marker(buf, pos)?;
                if after == buf.len() {
                    return Err(ParseError::NeedLiteral { size, marker: pos });
                }
                let available = (buf.len() - after) as u64;
                if available < size {
                    return Err(ParseError::Syntax("literal cut short"));
                }
                let end = after + size as usize;
                tokens.push(Token::Str(buf[after..end].to_vec()));
                pos = end;
            }
            Some(_) => {
                let len = buf[pos..]
                    .iter()
                    .position(|&b| matches!(b, b' ' | b'\r' | b'\n'))
                    .unwrap_or(buf.len() - pos);
                let word = &buf[pos..pos + len];
                // Empty: a leading space or a lone CR.
                if word.is_empty() || !word.iter().all(|&b| atom_char(b)) {
                    return Err(ParseError::Syntax("invalid characters in a word"));
                }
                tokens.push(Token::Atom(
                    String::from_utf8(word.to_vec()).expect("atom characters are ASCII"),
                ));
                pos += len;
            }
        }
    }
}

/// RFC 5804 §4 ATOM-CHAR, less strictly: printable ASCII that does not
/// start or end another element.
fn atom_char(b: u8) -> bool {
    b.is_ascii_graphic() && !matches!(b, b'"' | b'{' | b'}' | b'(' | b')' | b'\\')
}

/// A quoted string's content from `start` (just after its opening
/// quote): RFC 5804 §4 QUOTED-CHAR, with `\"` and `\\` the only escapes.
/// Returns the content and the offset after the closing quote.
fn quoted(buf: &[u8], start: usize) -> Result<(Vec<u8>, usize), ParseError> {
    let mut out = Vec::new();
    let mut i = start;
    loop {
        match buf.get(i) {
            None | Some(b'\r' | b'\n' | 0) => {
                return Err(ParseError::Syntax("unterminated quoted string"))
            }
            Some(b'"') => return Ok((out, i + 1)),
            Some(b'\\') => match buf.get(i + 1) {
                Some(&c @ (b'"' | b'\\')) => {
                    out.push(c);
                    i += 2;
                }
                _ => return Err(ParseError::Syntax("invalid escape in a quoted string")),
            },
            Some(&c) => {
                out.push(c);
                i += 1;
            }
        }
    }
}

/// A literal's announcement at `start` (`{n}` or `{n+}` and a line
/// break): its length and the offset of its first byte.
fn literal_marker(buf: &[u8], start: usize) -> Result<(u64, usize), ParseError> {
    let digits = buf[start + 1..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > MAX_DIGITS {
        return Err(ParseError::Syntax("invalid literal length"));
    }
    let number = &buf[start + 1..start + 1 + digits];
    let size: u64 = std::str::from_utf8(number)
        .expect("digits")
        .parse()
        .map_err(|_| ParseError::Syntax("invalid literal length"))?;
    let mut i = start + 1 + digits;
    if buf.get(i) == Some(&b'+') {
        i += 1;
    }
    if buf.get(i) != Some(&b'}') {
        return Err(ParseError::Syntax("invalid literal announcement"));
    }
    match line_end(buf, i + 1) {
        Some(after) => Ok((size, after)),
        None => Err(ParseError::Syntax(
            "a literal's announcement must end its line",
        )),
    }
}

/// The length of the literal announced at the end of `line`, if it ends
/// with one (`{n}` or `{n+}` and its line break): after a line refused as
/// malformed, its literal must still be skipped.
pub fn trailing_literal(line: &[u8]) -> Option<u64> {
    let body = line.strip_suffix(b"\n")?;
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    let body = body.strip_suffix(b"}")?;
    let body = body.strip_suffix(b"+").unwrap_or(body);
    let digits = body.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > MAX_DIGITS || body.len() == digits {
        return None;
    }
    if body[body.len() - digits - 1] != b'{' {
        return None;
    }
    std::str::from_utf8(&body[body.len() - digits..])
        .ok()?
        .parse()
        .ok()
}

/// Whether `s` can be sent as a quoted string: short, UTF-8, no line
/// breaks or NUL (RFC 5804 §4 SAFE-UTF8-CHAR).
fn quotable(s: &[u8]) -> bool {
    s.len() <= 1024
        && std::str::from_utf8(s).is_ok()
        && !s.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0))
}

/// Appends `s` as a quoted string when it can be one, else as a literal:
/// `{n}` as the server sends it (`literal-s2c`), or `{n+}` as a client
/// does (`literal-c2s`).
pub fn write_string(out: &mut Vec<u8>, s: &[u8], from_client: bool) {
    if quotable(s) {
        out.push(b'"');
        for &b in s {
            if b == b'"' || b == b'\\' {
                out.push(b'\\');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        let plus = if from_client { "+" } else { "" };
        out.extend_from_slice(format!("{{{}{plus}}}\r\n", s.len()).as_bytes());
        out.extend_from_slice(s);
    }
}

/// A command as a client sends it (for tests and the fuzz target's round
/// trip).
pub fn write_command(tokens: &[Token]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        match t {
            Token::Atom(a) => out.extend_from_slice(a.as_bytes()),
            Token::Str(s) => write_string(&mut out, s, true),
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// The three kinds of response (RFC 5804 §1.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Success.
    Ok,
    /// Failure; the session goes on.
    No,
    /// The server closes the connection.
    Bye,
}

/// Response codes (RFC 5804 §1.3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// The mechanism is too weak for this user (not used with PLAIN).
    AuthTooWeak,
    /// A password may not be sent over this connection: STARTTLS first.
    EncryptNeeded,
    /// One more script would pass the account's limit.
    QuotaMaxScripts,
    /// The script is bigger than the limit.
    QuotaMaxSize,
    /// A temporary failure: try again later.
    TryLater,
    /// The script is active and cannot be deleted.
    Active,
    /// No script of that name.
    Nonexistent,
    /// A script of that name exists already.
    AlreadyExists,
    /// NOOP's tag, echoed (RFC 5804 §2.11).
    Tag(Vec<u8>),
}

/// Appends a response line: `OK (CODE) "text"`.
pub fn write_response(out: &mut Vec<u8>, status: Status, code: Option<&Code>, text: &str) {
    out.extend_from_slice(match status {
        Status::Ok => b"OK",
        Status::No => b"NO",
        Status::Bye => b"BYE",
    });
    if let Some(code) = code {
        let name = match code {
            Code::AuthTooWeak => "AUTH-TOO-WEAK",
            Code::EncryptNeeded => "ENCRYPT-NEEDED",
            Code::QuotaMaxScripts => "QUOTA/MAXSCRIPTS",
            Code::QuotaMaxSize => "QUOTA/MAXSIZE",
            Code::TryLater => "TRYLATER",
            Code::Active => "ACTIVE",
            Code::Nonexistent => "NONEXISTENT",
            Code::AlreadyExists => "ALREADYEXISTS",
            Code::Tag(_) => "TAG",
        };
        out.extend_from_slice(b" (");
        out.extend_from_slice(name.as_bytes());
        if let Code::Tag(tag) = code {
            out.push(b' ');
            write_string(out, tag, false);
        }
        out.push(b')');
    }
    if !text.is_empty() {
        out.push(b' ');
        write_string(out, text.as_bytes(), false);
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: &str) -> Token {
        Token::Str(v.as_bytes().to_vec())
    }

    fn atom(v: &str) -> Token {
        Token::Atom(v.into())
    }

    #[test]
    fn quoted_strings_and_atoms() {
        assert_eq!(
            parse_command(b"HAVESPACE \"my \\\"script\\\\\" 1234\r\n"),
            Ok(vec![atom("HAVESPACE"), s("my \"script\\"), atom("1234")])
        );
        assert_eq!(parse_command(b"logout\n"), Ok(vec![atom("logout")]));
        assert_eq!(
            parse_command(b"NOOP  \"t\"  \r\n"),
            Ok(vec![atom("NOOP"), s("t")])
        );
    }

    #[test]
    fn literals_are_asked_for_then_read() {
        let line = b"PUTSCRIPT \"a\" {5+}\r\n";
        assert_eq!(
            parse_command(line),
            Err(ParseError::NeedLiteral {
                size: 5,
                marker: 14
            })
        );
        let mut buf = line.to_vec();
        buf.extend_from_slice(b"keep;\r\n");
        assert_eq!(
            parse_command(&buf),
            Ok(vec![atom("PUTSCRIPT"), s("a"), s("keep;")])
        );
        // The synchronizing form is read the same way; a literal may hold
        // line breaks and quotes.
        assert_eq!(
            parse_command(b"CHECKSCRIPT {4}\r\na\r\n\"\r\n"),
            Ok(vec![atom("CHECKSCRIPT"), s("a\r\n\"")])
        );
        // An empty literal still needs the rest of the command.
        assert_eq!(
            parse_command(b"PUTSCRIPT {0+}\r\n"),
            Err(ParseError::NeedLiteral {
                size: 0,
                marker: 10
            })
        );
        assert_eq!(
            parse_command(b"PUTSCRIPT {0+}\r\n \"x\"\r\n"),
            Ok(vec![atom("PUTSCRIPT"), s(""), s("x")])
        );
    }

    #[test]
    fn malformed_commands_are_refused() {
        for bad in [
            &b"\r\n"[..],
            b"NOOP",
            b"NOOP \"open\r\n",
            b"NOOP \"bad \\n escape\"\r\n",
            b"NOOP {x}\r\n",
            b"NOOP {5+} trailing\r\n",
            b"NOOP {99999999999999999999}\r\n",
            b"NOOP \"a\"\"b\"\r\n",
            b"NOOP a(b\r\n",
            b"NOOP\r\nNOOP\r\n",
            b" \n",
            b" NOOP\r\n",
            b"NOOP\r \r\n",
        ] {
            assert!(
                matches!(parse_command(bad), Err(ParseError::Syntax(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn literals_at_the_end_of_refused_lines_are_found() {
        assert_eq!(trailing_literal(b"BAD\"x {12+}\r\n"), Some(12));
        assert_eq!(trailing_literal(b"X {3}\n"), Some(3));
        assert_eq!(trailing_literal(b"X {}\r\n"), None);
        assert_eq!(trailing_literal(b"X 3}\r\n"), None);
        assert_eq!(trailing_literal(b"X {3}"), None);
    }

    #[test]
    fn responses() {
        let mut out = Vec::new();
        write_response(&mut out, Status::No, Some(&Code::QuotaMaxSize), "Too big");
        write_response(&mut out, Status::Ok, Some(&Code::Tag(b"t1".to_vec())), "");
        write_response(&mut out, Status::No, None, "line 1\nline 2 \"x\"");
        write_response(&mut out, Status::Ok, None, "say \"hi\"");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "NO (QUOTA/MAXSIZE) \"Too big\"\r\nOK (TAG \"t1\")\r\nNO {17}\r\nline 1\nline 2 \"x\"\r\nOK \"say \\\"hi\\\"\"\r\n"
        );
    }

    fn token() -> impl Strategy<Value = Token> {
        prop_oneof![
            "[A-Za-z0-9/.:_-]{1,12}".prop_map(Token::Atom),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Token::Str),
            "\\PC{0,20}".prop_map(|t| Token::Str(t.into_bytes())),
        ]
    }

    /// Feeds `wire` to the parser the way the session does: line by line,
    /// with literal bytes read whole when asked for.
    fn parse_as_session(wire: &[u8]) -> Result<Vec<Token>, ParseError> {
        let mut buf = Vec::new();
        let mut rest = wire;
        let take_line = |buf: &mut Vec<u8>, rest: &mut &[u8]| {
            let n = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |p| p + 1);
            buf.extend_from_slice(&rest[..n]);
            *rest = &rest[n..];
        };
        take_line(&mut buf, &mut rest);
        loop {
            match parse_command(&buf) {
                Err(ParseError::NeedLiteral { size, .. }) => {
                    let n = (size as usize).min(rest.len());
                    buf.extend_from_slice(&rest[..n]);
                    rest = &rest[n..];
                    take_line(&mut buf, &mut rest);
                }
                other => return other,
            }
        }
    }

    proptest! {
        #[test]
        fn commands_round_trip(first in "[A-Za-z]{1,12}", rest in proptest::collection::vec(token(), 0..6)) {
            let mut tokens = vec![Token::Atom(first)];
            tokens.extend(rest);
            let wire = write_command(&tokens);
            prop_assert_eq!(parse_as_session(&wire), Ok(tokens));
        }

        #[test]
        fn strings_as_the_server_writes_them_read_back(text in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let mut wire = b"X ".to_vec();
            write_string(&mut wire, &text, false);
            wire.extend_from_slice(b"\r\n");
            prop_assert_eq!(parse_as_session(&wire), Ok(vec![atom("X"), Token::Str(text)]));
        }

        #[test]
        fn the_parser_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_command(&data);
            let _ = parse_as_session(&data);
        }

        #[test]
        fn what_parses_writes_back_the_same(data in "[ -~\r\n{}+\"\\\\0-9]{0,80}") {
            if let Ok(tokens) = parse_as_session(data.as_bytes()) {
                prop_assert!(tokens.iter().all(|t| t != &Token::Atom(String::new())));
                prop_assert_eq!(parse_command(&write_command(&tokens)), Ok(tokens));
            }
        }
    }
}
