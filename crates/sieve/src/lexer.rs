//! Sieve tokens (RFC 5228 §2 and the grammar in §8.1).

use crate::error::CompileError;

/// A place in the script source, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub line: u32,
    pub column: u32,
}

impl Pos {
    pub(crate) fn error(self, message: impl Into<String>) -> CompileError {
        CompileError {
            line: self.line,
            column: self.column,
            message: message.into(),
        }
    }
}

/// One token of the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    /// An identifier, lowercased (RFC 5228 §2.5: identifiers are case-insensitive).
    Ident(String),
    /// A tagged argument without its colon, lowercased.
    Tag(String),
    /// A number with its K/M/G quantifier applied (RFC 5228 §2.4.1).
    Number(u64),
    /// A quoted or multi-line string, escapes and dot-stuffing already removed.
    Str(String),
    LBracket,
    RBracket,
    LParen,
    RParen,
    LBrace,
    RBrace,
    Comma,
    Semicolon,
}

/// A token with where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    pub tok: Tok,
    pub pos: Pos,
}

struct Lexer<'a> {
    src: &'a [u8],
    at: usize,
    line: u32,
    column: u32,
}

/// Splits `source` into tokens.
pub(crate) fn tokens(source: &str) -> Result<Vec<Token>, CompileError> {
    let mut lx = Lexer {
        src: source.as_bytes(),
        at: 0,
        line: 1,
        column: 1,
    };
    let mut out = Vec::new();
    while let Some(t) = lx.next()? {
        out.push(t);
    }
    Ok(out)
}

impl Lexer<'_> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: self.column,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.src.get(self.at).copied()
    }

    fn peek_at(&self, n: usize) -> Option<u8> {
        self.src.get(self.at + n).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.at += 1;
        if c == b'\n' {
            self.line += 1;
            self.column = 1;
        } else if c & 0xC0 != 0x80 {
            // Columns count characters, not UTF-8 continuation bytes.
            self.column += 1;
        }
        Some(c)
    }

    fn next(&mut self) -> Result<Option<Token>, CompileError> {
        loop {
            match self.peek() {
                None => return Ok(None),
                Some(b' ' | b'\t' | b'\r' | b'\n') => {
                    self.bump();
                }
                // RFC 5228 §2.3: hash comments run to the end of the line.
                Some(b'#') => {
                    while let Some(c) = self.bump() {
                        if c == b'\n' {
                            break;
                        }
                    }
                }
                // RFC 5228 §2.3: bracketed comments do not nest.
                Some(b'/') if self.peek_at(1) == Some(b'*') => {
                    let start = self.pos();
                    self.bump();
                    self.bump();
                    loop {
                        match self.bump() {
                            None => return Err(start.error("unterminated comment")),
                            Some(b'*') if self.peek() == Some(b'/') => {
                                self.bump();
                                break;
                            }
                            Some(_) => {}
                        }
                    }
                }
                Some(_) => break,
            }
        }
        let pos = self.pos();
        let c = self.peek().unwrap_or(0);
        let tok = match c {
            b'[' => self.single(Tok::LBracket),
            b']' => self.single(Tok::RBracket),
            b'(' => self.single(Tok::LParen),
            b')' => self.single(Tok::RParen),
            b'{' => self.single(Tok::LBrace),
            b'}' => self.single(Tok::RBrace),
            b',' => self.single(Tok::Comma),
            b';' => self.single(Tok::Semicolon),
            b'"' => self.quoted(pos)?,
            b':' => {
                self.bump();
                match self.peek() {
                    Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                        Tok::Tag(self.identifier().to_ascii_lowercase())
                    }
                    _ => return Err(pos.error("expected a tag name after ':'")),
                }
            }
            b'0'..=b'9' => self.number(pos)?,
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let id = self.identifier();
                if id.eq_ignore_ascii_case("text") && self.peek() == Some(b':') {
                    self.bump();
                    self.multiline(pos)?
                } else {
                    Tok::Ident(id.to_ascii_lowercase())
                }
            }
            _ => {
                let ch = std::str::from_utf8(&self.src[self.at..])
                    .ok()
                    .and_then(|s| s.chars().next())
                    .unwrap_or('?');
                return Err(pos.error(format!("unexpected character {ch:?}")));
            }
        };
        Ok(Some(Token { tok, pos }))
    }

    fn single(&mut self, t: Tok) -> Tok {
        self.bump();
        t
    }

    fn identifier(&mut self) -> String {
        let start = self.at;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_') {
            self.bump();
        }
        String::from_utf8_lossy(&self.src[start..self.at]).into_owned()
    }

    /// RFC 5228 §2.4.1: a number, optionally followed by K, M or G.
    fn number(&mut self, pos: Pos) -> Result<Tok, CompileError> {
        let mut n: u64 = 0;
        while let Some(c @ b'0'..=b'9') = self.peek() {
            self.bump();
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(c - b'0')))
                .ok_or_else(|| pos.error("number too large"))?;
        }
        let mult: u64 = match self.peek() {
            Some(b'k' | b'K') => 1 << 10,
            Some(b'm' | b'M') => 1 << 20,
            Some(b'g' | b'G') => 1 << 30,
            _ => 1,
        };
        if mult != 1 {
            self.bump();
        }
        if matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_') {
            return Err(self.pos().error("unexpected character after number"));
        }
        let n = n
            .checked_mul(mult)
            .ok_or_else(|| pos.error("number too large"))?;
        Ok(Tok::Number(n))
    }

    /// RFC 5228 §2.4.2: a quoted string; a backslash quotes the next character.
    fn quoted(&mut self, pos: Pos) -> Result<Tok, CompileError> {
        self.bump();
        let mut out = Vec::new();
        loop {
            match self.bump() {
                None => return Err(pos.error("unterminated string")),
                Some(b'"') => break,
                Some(b'\\') => match self.bump() {
                    None => return Err(pos.error("unterminated string")),
                    Some(c) => out.push(c),
                },
                Some(c) => out.push(c),
            }
        }
        self.utf8(out, pos).map(Tok::Str)
    }

    /// RFC 5228 §2.4.2: `text:` up to a line holding a single dot; a line
    /// starting with a dot has it doubled.
    fn multiline(&mut self, pos: Pos) -> Result<Tok, CompileError> {
        // The rest of the `text:` line: whitespace and an optional hash comment.
        loop {
            match self.peek() {
                Some(b' ' | b'\t') => {
                    self.bump();
                }
                Some(b'#') => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.bump();
                    }
                }
                Some(b'\r') if self.peek_at(1) == Some(b'\n') => {
                    self.bump();
                }
                Some(b'\n') => {
                    self.bump();
                    break;
                }
                _ => return Err(self.pos().error("expected end of line after 'text:'")),
            }
        }
        let mut out = Vec::new();
        loop {
            if self.peek().is_none() {
                return Err(pos.error("unterminated multi-line string"));
            }
            let start = self.at;
            while !matches!(self.peek(), None | Some(b'\n')) {
                self.bump();
            }
            let mut line = &self.src[start..self.at];
            let had_newline = self.peek() == Some(b'\n');
            if had_newline {
                self.bump();
            }
            if let Some(l) = line.strip_suffix(b"\r") {
                line = l;
            }
            if line == b"." {
                break;
            }
            if !had_newline {
                return Err(pos.error("unterminated multi-line string"));
            }
            let line = line.strip_prefix(b".").unwrap_or(line);
            out.extend_from_slice(line);
            out.extend_from_slice(b"\r\n");
        }
        self.utf8(out, pos).map(Tok::Str)
    }

    fn utf8(&self, bytes: Vec<u8>, pos: Pos) -> Result<String, CompileError> {
        String::from_utf8(bytes).map_err(|_| pos.error("string is not valid UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokens(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn basic_tokens() {
        assert_eq!(
            toks("if Header :IS \"a\\\"b\" [\"x\", \"y\"] {keep;} # c\n/* d */ 10K"),
            vec![
                Tok::Ident("if".into()),
                Tok::Ident("header".into()),
                Tok::Tag("is".into()),
                Tok::Str("a\"b".into()),
                Tok::LBracket,
                Tok::Str("x".into()),
                Tok::Comma,
                Tok::Str("y".into()),
                Tok::RBracket,
                Tok::LBrace,
                Tok::Ident("keep".into()),
                Tok::Semicolon,
                Tok::RBrace,
                Tok::Number(10240),
            ]
        );
    }

    #[test]
    fn multiline_dot_stuffing() {
        assert_eq!(
            toks("text: # comment\r\nline 1\r\n..dot\r\n.\r\n;"),
            vec![Tok::Str("line 1\r\n.dot\r\n".into()), Tok::Semicolon]
        );
        assert_eq!(toks("text:\n.\n"), vec![Tok::Str(String::new())]);
    }

    #[test]
    fn numbers() {
        assert_eq!(
            toks("1M 2g 0"),
            vec![Tok::Number(1 << 20), Tok::Number(2 << 30), Tok::Number(0)]
        );
        assert_eq!(toks("3G"), vec![Tok::Number(3 << 30)]);
        assert!(tokens("99999999999G").is_err());
        assert!(tokens("99999999999999999999999").is_err());
    }

    #[test]
    fn error_positions() {
        let e = tokens("keep;\n  \"abc").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3));
        let e = tokens("keep;\nif true {\n  stop; @").unwrap_err();
        assert_eq!((e.line, e.column), (3, 9));
        let e = tokens("/* never closed").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
    }
}
