//! The Sieve grammar (RFC 5228 §8.2) into a syntax tree with positions;
//! what the commands mean is checked later, in `compile`.

use crate::error::CompileError;
use crate::lexer::{tokens, Pos, Tok, Token};

/// How deep blocks and test lists may nest: deeper scripts are refused
/// rather than risking the stack.
const MAX_NESTING: usize = 64;

/// An argument of a command or test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Arg {
    Tag(String, Pos),
    Number(u64, Pos),
    /// A single string or a bracketed list; `bool` says whether it was a list.
    Strings(Vec<String>, bool, Pos),
}

impl Arg {
    pub(crate) fn pos(&self) -> Pos {
        match self {
            Arg::Tag(_, p) | Arg::Number(_, p) | Arg::Strings(_, _, p) => *p,
        }
    }
}

/// A test: `identifier arguments`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TestNode {
    pub name: String,
    pub pos: Pos,
    pub args: Vec<Arg>,
    pub tests: Vec<TestNode>,
    /// Whether the tests were written as a parenthesised test list.
    pub test_list: bool,
}

/// A command: `identifier arguments (";" / block)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommandNode {
    pub name: String,
    pub pos: Pos,
    pub args: Vec<Arg>,
    pub tests: Vec<TestNode>,
    pub test_list: bool,
    pub block: Option<Vec<CommandNode>>,
}

struct Parser {
    toks: Vec<Token>,
    at: usize,
    end: Pos,
}

/// Parses a whole script into its commands.
pub(crate) fn parse(source: &str) -> Result<Vec<CommandNode>, CompileError> {
    let toks = tokens(source)?;
    let end = end_pos(source);
    let mut p = Parser { toks, at: 0, end };
    let cmds = p.commands(0)?;
    if let Some(t) = p.toks.get(p.at) {
        return Err(t.pos.error("unexpected '}'"));
    }
    Ok(cmds)
}

fn end_pos(source: &str) -> Pos {
    let line = 1 + source.matches('\n').count() as u32;
    let column = 1 + source.rsplit('\n').next().unwrap_or("").chars().count() as u32;
    Pos { line, column }
}

fn describe(t: Option<&Token>) -> String {
    match t.map(|t| &t.tok) {
        None => "end of script".into(),
        Some(Tok::Ident(i)) => format!("identifier '{i}'"),
        Some(Tok::Tag(t)) => format!("tag ':{t}'"),
        Some(Tok::Number(n)) => format!("number {n}"),
        Some(Tok::Str(_)) => "string".into(),
        Some(Tok::LBracket) => "'['".into(),
        Some(Tok::RBracket) => "']'".into(),
        Some(Tok::LParen) => "'('".into(),
        Some(Tok::RParen) => "')'".into(),
        Some(Tok::LBrace) => "'{'".into(),
        Some(Tok::RBrace) => "'}'".into(),
        Some(Tok::Comma) => "','".into(),
        Some(Tok::Semicolon) => "';'".into(),
    }
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|t| &t.tok)
    }

    fn here(&self) -> Pos {
        self.toks.get(self.at).map_or(self.end, |t| t.pos)
    }

    fn unexpected(&self, wanted: &str) -> CompileError {
        self.here().error(format!(
            "expected {wanted}, found {}",
            describe(self.toks.get(self.at))
        ))
    }

    fn commands(&mut self, depth: usize) -> Result<Vec<CommandNode>, CompileError> {
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None | Some(Tok::RBrace) => return Ok(out),
                Some(Tok::Ident(_)) => out.push(self.command(depth)?),
                _ => return Err(self.unexpected("a command")),
            }
        }
    }

    fn command(&mut self, depth: usize) -> Result<CommandNode, CompileError> {
        if depth > MAX_NESTING {
            return Err(self.here().error("blocks nested too deeply"));
        }
        let pos = self.here();
        let Some(Tok::Ident(name)) = self.peek().cloned() else {
            return Err(self.unexpected("a command"));
        };
        self.at += 1;
        let args = self.arguments()?;
        let (tests, test_list) = self.tests_opt(depth)?;
        let block = match self.peek() {
            Some(Tok::Semicolon) => {
                self.at += 1;
                None
            }
            Some(Tok::LBrace) => {
                self.at += 1;
                let cmds = self.commands(depth + 1)?;
                if self.peek() != Some(&Tok::RBrace) {
                    return Err(self.unexpected("'}'"));
                }
                self.at += 1;
                Some(cmds)
            }
            _ => return Err(self.unexpected("';' or '{'")),
        };
        Ok(CommandNode {
            name,
            pos,
            args,
            tests,
            test_list,
            block,
        })
    }

    fn arguments(&mut self) -> Result<Vec<Arg>, CompileError> {
        let mut args = Vec::new();
        loop {
            let pos = self.here();
            match self.peek().cloned() {
                Some(Tok::Tag(t)) => {
                    self.at += 1;
                    args.push(Arg::Tag(t, pos));
                }
                Some(Tok::Number(n)) => {
                    self.at += 1;
                    args.push(Arg::Number(n, pos));
                }
                Some(Tok::Str(s)) => {
                    self.at += 1;
                    args.push(Arg::Strings(vec![s], false, pos));
                }
                Some(Tok::LBracket) => {
                    self.at += 1;
                    let mut list = Vec::new();
                    loop {
                        match self.peek().cloned() {
                            Some(Tok::Str(s)) => {
                                self.at += 1;
                                list.push(s);
                            }
                            _ => return Err(self.unexpected("a string")),
                        }
                        match self.peek() {
                            Some(Tok::Comma) => self.at += 1,
                            Some(Tok::RBracket) => {
                                self.at += 1;
                                break;
                            }
                            _ => return Err(self.unexpected("',' or ']'")),
                        }
                    }
                    args.push(Arg::Strings(list, true, pos));
                }
                _ => return Ok(args),
            }
        }
    }

    fn tests_opt(&mut self, depth: usize) -> Result<(Vec<TestNode>, bool), CompileError> {
        match self.peek() {
            Some(Tok::Ident(_)) => Ok((vec![self.test(depth + 1)?], false)),
            Some(Tok::LParen) => {
                self.at += 1;
                let mut list = Vec::new();
                loop {
                    list.push(self.test(depth + 1)?);
                    match self.peek() {
                        Some(Tok::Comma) => self.at += 1,
                        Some(Tok::RParen) => {
                            self.at += 1;
                            break;
                        }
                        _ => return Err(self.unexpected("',' or ')'")),
                    }
                }
                Ok((list, true))
            }
            _ => Ok((Vec::new(), false)),
        }
    }

    fn test(&mut self, depth: usize) -> Result<TestNode, CompileError> {
        if depth > MAX_NESTING {
            return Err(self.here().error("tests nested too deeply"));
        }
        let pos = self.here();
        let Some(Tok::Ident(name)) = self.peek().cloned() else {
            return Err(self.unexpected("a test"));
        };
        self.at += 1;
        let args = self.arguments()?;
        let (tests, test_list) = self.tests_opt(depth)?;
        Ok(TestNode {
            name,
            pos,
            args,
            tests,
            test_list,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_nested() {
        let cmds = parse(
            "require [\"fileinto\"];\nif anyof (header :is \"a\" \"b\", not exists \"c\") {\n fileinto \"x\";\n} else { keep; }",
        )
        .unwrap();
        assert_eq!(cmds.len(), 3);
        assert_eq!(cmds[1].name, "if");
        assert_eq!(cmds[1].tests[0].tests.len(), 2);
        assert!(cmds[1].tests[0].test_list);
        assert_eq!(cmds[2].name, "else");
        assert_eq!(cmds[1].pos, Pos { line: 2, column: 1 });
    }

    #[test]
    fn error_positions() {
        let e = parse("keep;\nif true {\n  stop\n}").unwrap_err();
        assert_eq!((e.line, e.column), (4, 1), "{e}");
        let e = parse("if header :is [\"a\" \"b\"] {}").unwrap_err();
        assert_eq!((e.line, e.column), (1, 20), "{e}");
        let e = parse("keep").unwrap_err();
        assert_eq!((e.line, e.column), (1, 5), "{e}");
        let e = parse("}").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1), "{e}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let s = "if not ".repeat(5000) + "true {}";
        assert!(parse(&s).is_err());
        let s = "if true {".repeat(5000) + &"}".repeat(5000);
        assert!(parse(&s).is_err());
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,300}") {
            let _ = parse(&s);
        }
    }
}
