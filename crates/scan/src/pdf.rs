//! PDF documents: every stream object is decoded and scanned as a file of its
//! own, so that a zip, an executable or a script hidden in a compressed stream is
//! found; the PDF's own bytes are matched as they are (with the target-type-10
//! signatures) by the file around this reader.
//!
//! The document is read as it streams, front to back, by a small tokenizer that
//! keeps nothing but the current name or keyword (at most [`MAX_TOKEN`] bytes)
//! and the `/Filter` of the dictionary being read. A `stream` keyword right after
//! a dictionary's `>>` starts the stream's data after its line end (PDF 1.7
//! §7.3.8.1); the data runs to the next `endstream`, the line end before it not
//! included. The `/Length` is not used: it is often an indirect reference to an
//! object further on, and a wrong one must not make a stream's end be missed.
//!
//! Decoded: `/FlateDecode` (`/Fl`, zlib), `/ASCIIHexDecode` (`/AHx`) and
//! `/ASCII85Decode` (`/A85`), alone or chained in an array, names with `#xx`
//! escapes too; a stream without a filter is scanned as it is. The first filter
//! of another kind (LZW, run-length, images, encryption) ends the decoding and
//! what came out so far is scanned instead. Inflated bytes count against the
//! unpacked-bytes and ratio limits of [`crate::Limits`], each stream against the
//! archive entries.
//!
//! Memory per PDF: the token, one 8 KiB output buffer per Flate filter of the
//! current stream (at most [`MAX_FILTERS`]), and [`HOLD`] bytes of data that may
//! be the start of `endstream`. Nothing is sized from the file.
//!
//! What ClamAV's `pdf.c` does differently: it finds objects by their `obj` and
//! `endobj` keywords, trusts a `/Length` that agrees with the file, and decodes
//! more (LZW, run-length, PNG predictors, the standard security handler's RC4 and
//! AES with an empty user password); it also writes the JavaScript of `/JS`
//! entries out and raises its PDF heuristics (`Heuristics.PDF.ObfuscatedNameObject`
//! for a name with `#xx` escapes, even in a clean PDF). Here an encrypted PDF's
//! streams are scanned as ciphertext, predictors are not undone, and there are
//! no PDF heuristics. Neither decodes a Flate stream without its zlib header.

use crate::pipeline::{Ctx, FileNode};
use crate::unpack::{charge, Acct};
use crate::verdict::LimitKind;

/// Longest name or keyword kept (longer ones are cut; no filter name is this long).
const MAX_TOKEN: usize = 64;
/// Filters applied to one stream at most; those past it are not applied.
const MAX_FILTERS: usize = 4;
/// Output buffer of an inflater, and the pieces stream data is handled in.
const BLOCK: usize = 8 * 1024;
/// The keyword that ends a stream's data.
const END: &[u8] = b"endstream";
/// Data bytes held back at the end of a piece: a line end and all of `endstream`
/// but its last byte, which may continue in the next piece.
const HOLD: usize = 2 + END.len() - 1;

/// A stream filter (PDF 1.7 §7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Filter {
    Flate,
    Hex,
    A85,
    /// Any other: decoding stops before it.
    Other,
}

impl Filter {
    fn named(name: &[u8]) -> Filter {
        match name {
            b"FlateDecode" | b"Fl" => Filter::Flate,
            b"ASCIIHexDecode" | b"AHx" => Filter::Hex,
            b"ASCII85Decode" | b"A85" => Filter::A85,
            _ => Filter::Other,
        }
    }
}

/// PDF 1.7 §7.2.2: white-space characters.
fn white(b: u8) -> bool {
    matches!(b, 0 | b'\t' | b'\n' | 0x0c | b'\r' | b' ')
}

/// PDF 1.7 §7.2.2: regular characters (neither white space nor delimiters).
fn regular(b: u8) -> bool {
    !white(b)
        && !matches!(
            b,
            b'(' | b')' | b'<' | b'>' | b'[' | b']' | b'{' | b'}' | b'/' | b'%'
        )
}

/// A name's text with its `#xx` escapes decoded (PDF 1.7 §7.3.5).
fn decode_name(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let hex = |j: usize| raw.get(j).and_then(|&c| (c as char).to_digit(16));
        match (raw[i], hex(i + 1), hex(i + 2)) {
            (b'#', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// Where the tokenizer is between streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    Normal,
    Name,
    Word,
    /// After a `<`: a dictionary's `<<` or a hexadecimal string.
    Lt,
    /// After a `>`: a dictionary's `>>` or a stray one.
    Gt,
    HexString,
}

/// What the tokenizer saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Name,
    Open,
    Close,
    DictEnd,
    Word,
    Other,
}

/// Where the `/Filter` value of the dictionary being read stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Nothing,
    Value,
    Array,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Between streams.
    Lex(Lex),
    /// After the `stream` keyword, before its line end.
    Keyword,
    /// After a carriage return ending the `stream` line.
    Cr,
    /// In a stream's data.
    Data,
    /// Nothing more is read (a limit, or a detection).
    Done,
}

/// One decoding step of a stream.
enum Stage {
    Flate {
        z: Box<flate2::Decompress>,
        buf: Box<[u8]>,
        done: bool,
    },
    Hex(HexDecoder),
    A85(A85Decoder),
}

/// The scan must stop: a limit was hit or a signature matched.
struct Halt;

/// Streaming `/ASCIIHexDecode` (PDF 1.7 §7.4.2): pairs of hexadecimal digits,
/// white space ignored, `>` the end; an odd last digit is followed by a 0.
#[derive(Debug, Default)]
struct HexDecoder {
    high: Option<u8>,
    done: bool,
}

impl HexDecoder {
    fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &c in input {
            if self.done {
                return;
            }
            let v = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                b'>' => {
                    self.done = true;
                    continue;
                }
                // White space, and anything else, as ClamAV skips it.
                _ => continue,
            };
            match self.high.take() {
                Some(h) => out.push(h << 4 | v),
                None => self.high = Some(v),
            }
        }
    }

    fn flush(&mut self, out: &mut Vec<u8>) {
        if let Some(h) = self.high.take() {
            out.push(h << 4);
        }
    }
}

/// Streaming `/ASCII85Decode` (PDF 1.7 §7.4.3): groups of five characters `!`
/// to `u` for four bytes, `z` for four zeros, `~>` the end, a short last group
/// padded with `u`.
#[derive(Debug, Default)]
struct A85Decoder {
    group: [u8; 5],
    n: usize,
    done: bool,
}

impl A85Decoder {
    fn value(group: &[u8; 5]) -> [u8; 4] {
        let v = group
            .iter()
            .fold(0u64, |v, &d| v * 85 + u64::from(d - b'!'));
        // A group above 2^32 - 1 is invalid; its low bytes are taken.
        (v as u32).to_be_bytes()
    }

    fn decode(&mut self, input: &[u8], out: &mut Vec<u8>) {
        for &c in input {
            if self.done {
                return;
            }
            match c {
                b'!'..=b'u' => {
                    self.group[self.n] = c;
                    self.n += 1;
                    if self.n == 5 {
                        out.extend_from_slice(&Self::value(&self.group));
                        self.n = 0;
                    }
                }
                b'z' if self.n == 0 => out.extend_from_slice(&[0; 4]),
                b'~' => {
                    self.done = true;
                    self.flush(out);
                }
                _ => {}
            }
        }
    }

    fn flush(&mut self, out: &mut Vec<u8>) {
        if self.n > 1 {
            let mut g = [b'u'; 5];
            g[..self.n].copy_from_slice(&self.group[..self.n]);
            out.extend_from_slice(&Self::value(&g)[..self.n - 1]);
        }
        self.n = 0;
    }
}

impl Stage {
    fn new(f: Filter) -> Option<Stage> {
        Some(match f {
            Filter::Flate => Stage::Flate {
                z: Box::new(flate2::Decompress::new(true)),
                buf: vec![0; BLOCK].into_boxed_slice(),
                done: false,
            },
            Filter::Hex => Stage::Hex(HexDecoder::default()),
            Filter::A85 => Stage::A85(A85Decoder::default()),
            Filter::Other => return None,
        })
    }
}

/// Passes `input` through `stages` into `child`.
fn run(
    stages: &mut [Stage],
    input: &[u8],
    child: &mut FileNode,
    acct: &mut Acct,
    ctx: &mut Ctx<'_>,
) -> Result<(), Halt> {
    let Some((first, rest)) = stages.split_first_mut() else {
        child.feed(input, ctx);
        return match ctx.found.infected {
            Some(_) => Err(Halt),
            None => Ok(()),
        };
    };
    match first {
        Stage::Flate { z, buf, done } => {
            let mut off = 0;
            while !*done {
                let (i0, o0) = (z.total_in(), z.total_out());
                let status = z.decompress(&input[off..], buf, flate2::FlushDecompress::None);
                let (c, p) = ((z.total_in() - i0) as usize, (z.total_out() - o0) as usize);
                off += c;
                if p > 0 {
                    if !charge(p as u64, acct, ctx) {
                        return Err(Halt);
                    }
                    run(rest, &buf[..p], child, acct, ctx)?;
                }
                match status {
                    Ok(flate2::Status::StreamEnd) => *done = true,
                    Ok(_) if c == 0 && p == 0 => break,
                    Ok(_) => {}
                    Err(_) => {
                        // Corrupt: what came out is scanned all the same.
                        ctx.found.stats.malformed_archives += 1;
                        *done = true;
                    }
                }
            }
            Ok(())
        }
        Stage::Hex(h) => {
            let mut out = Vec::new();
            for piece in input.chunks(BLOCK) {
                out.clear();
                h.decode(piece, &mut out);
                run(rest, &out, child, acct, ctx)?;
            }
            Ok(())
        }
        Stage::A85(a) => {
            let mut out = Vec::new();
            for piece in input.chunks(BLOCK) {
                out.clear();
                a.decode(piece, &mut out);
                run(rest, &out, child, acct, ctx)?;
            }
            Ok(())
        }
    }
}

/// Ends the stages: what a text filter still holds goes through the ones after it.
fn flush(
    stages: &mut [Stage],
    child: &mut FileNode,
    acct: &mut Acct,
    ctx: &mut Ctx<'_>,
) -> Result<(), Halt> {
    for k in 0..stages.len() {
        let (head, rest) = stages.split_at_mut(k + 1);
        let mut out = Vec::new();
        match &mut head[k] {
            Stage::Hex(h) => h.flush(&mut out),
            Stage::A85(a) => a.flush(&mut out),
            Stage::Flate { .. } => {}
        }
        if !out.is_empty() {
            run(rest, &out, child, acct, ctx)?;
        }
    }
    Ok(())
}

/// A PDF document being read for its streams.
pub(crate) struct PdfReader {
    depth: usize,
    mode: Mode,
    /// The name or keyword being read.
    token: Vec<u8>,
    /// The last token was a dictionary's `>>`.
    after_dict: bool,
    expect: Expect,
    /// The filters of the dictionary being read.
    filters: Vec<Filter>,
    /// The current stream: its file, its decoding steps, its bytes in and out.
    child: Option<Box<FileNode>>,
    stages: Vec<Stage>,
    acct: Acct,
    /// Data bytes that may begin `endstream`, and the piece being searched.
    hold: Vec<u8>,
    work: Vec<u8>,
}

impl PdfReader {
    pub fn new(depth: usize) -> Self {
        Self {
            depth,
            mode: Mode::Lex(Lex::Normal),
            token: Vec::with_capacity(MAX_TOKEN),
            after_dict: false,
            expect: Expect::Nothing,
            filters: Vec::new(),
            child: None,
            stages: Vec::new(),
            acct: Acct::default(),
            hold: Vec::with_capacity(HOLD),
            work: Vec::new(),
        }
    }

    pub fn feed(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        let mut i = 0;
        while i < data.len() {
            match self.mode {
                Mode::Done => return,
                Mode::Data => i += self.data(&data[i..], ctx),
                _ => {
                    if self.byte(data[i], ctx) {
                        i += 1;
                    }
                }
            }
        }
    }

    pub fn finish(mut self, ctx: &mut Ctx<'_>) {
        match self.mode {
            Mode::Data => {
                // No `endstream`: what the stream had is scanned.
                ctx.found.stats.malformed_archives += 1;
                let hold = std::mem::take(&mut self.hold);
                self.stream_bytes(&hold, ctx);
                self.end_stream(ctx);
            }
            Mode::Keyword | Mode::Cr => self.end_stream(ctx),
            _ => {}
        }
    }

    /// Takes one byte outside a stream's data; false when it is to be taken again
    /// (it ended a token, or starts the data).
    fn byte(&mut self, b: u8, ctx: &mut Ctx<'_>) -> bool {
        let lex = match self.mode {
            Mode::Lex(lex) => lex,
            Mode::Keyword => {
                match b {
                    b' ' | b'\t' => {}
                    b'\r' => self.mode = Mode::Cr,
                    b'\n' => self.mode = Mode::Data,
                    _ => {
                        self.mode = Mode::Data;
                        return false;
                    }
                }
                return true;
            }
            Mode::Cr => {
                self.mode = Mode::Data;
                return b == b'\n';
            }
            Mode::Data | Mode::Done => return false,
        };
        match lex {
            Lex::Normal => {
                if white(b) {
                    return true;
                }
                match b {
                    b'/' => {
                        self.token.clear();
                        self.mode = Mode::Lex(Lex::Name);
                    }
                    b'<' => self.mode = Mode::Lex(Lex::Lt),
                    b'>' => self.mode = Mode::Lex(Lex::Gt),
                    b'[' => self.token(Tok::Open, ctx),
                    b']' => self.token(Tok::Close, ctx),
                    _ if regular(b) => {
                        self.token.clear();
                        self.token.push(b);
                        self.mode = Mode::Lex(Lex::Word);
                    }
                    _ => self.token(Tok::Other, ctx),
                }
                true
            }
            Lex::Name | Lex::Word => {
                if regular(b) {
                    if self.token.len() < MAX_TOKEN {
                        self.token.push(b);
                    }
                    return true;
                }
                self.mode = Mode::Lex(Lex::Normal);
                let t = if lex == Lex::Name {
                    Tok::Name
                } else {
                    Tok::Word
                };
                self.token(t, ctx);
                false
            }
            Lex::Lt => {
                if b == b'<' {
                    self.mode = Mode::Lex(Lex::Normal);
                    self.token(Tok::Other, ctx);
                    true
                } else {
                    self.mode = Mode::Lex(Lex::HexString);
                    false
                }
            }
            Lex::Gt => {
                self.mode = Mode::Lex(Lex::Normal);
                if b == b'>' {
                    self.token(Tok::DictEnd, ctx);
                    true
                } else {
                    self.token(Tok::Other, ctx);
                    false
                }
            }
            Lex::HexString => {
                if b == b'>' {
                    self.mode = Mode::Lex(Lex::Normal);
                    self.token(Tok::Other, ctx);
                }
                true
            }
        }
    }

    /// Follows the `/Filter` entry and the keywords.
    fn token(&mut self, t: Tok, ctx: &mut Ctx<'_>) {
        let after_dict = std::mem::replace(&mut self.after_dict, t == Tok::DictEnd);
        if t == Tok::Word {
            match self.token.as_slice() {
                b"stream" if after_dict => {
                    self.start_stream(ctx);
                    return;
                }
                b"obj" | b"endobj" => {
                    self.filters.clear();
                    self.expect = Expect::Nothing;
                    return;
                }
                _ => {}
            }
        }
        match (self.expect, t) {
            (Expect::Value, Tok::Name) => {
                self.filters = vec![Filter::named(&decode_name(&self.token))];
                self.expect = Expect::Nothing;
            }
            (Expect::Value, Tok::Open) => self.expect = Expect::Array,
            (Expect::Value, _) => {
                // An indirect reference, or not a filter at all.
                self.filters = vec![Filter::Other];
                self.expect = Expect::Nothing;
            }
            (Expect::Array, Tok::Close) => self.expect = Expect::Nothing,
            (Expect::Array, _) if self.filters.len() < MAX_FILTERS => {
                let f = match t {
                    Tok::Name => Filter::named(&decode_name(&self.token)),
                    _ => Filter::Other,
                };
                self.filters.push(f);
            }
            (Expect::Nothing, Tok::Name) if decode_name(&self.token) == b"Filter" => {
                self.filters.clear();
                self.expect = Expect::Value;
            }
            _ => {}
        }
    }

    fn start_stream(&mut self, ctx: &mut Ctx<'_>) {
        let stats = &mut ctx.found.stats;
        stats.entries += 1;
        if stats.entries > ctx.limits.max_entries {
            ctx.found.limit(LimitKind::Entries);
            self.mode = Mode::Done;
            return;
        }
        stats.files += 1;
        self.child = Some(Box::new(FileNode::new(self.depth + 1, ctx.db)));
        self.stages = self.filters.iter().map_while(|&f| Stage::new(f)).collect();
        self.filters.clear();
        self.expect = Expect::Nothing;
        self.acct = Acct::default();
        self.hold.clear();
        self.mode = Mode::Keyword;
    }

    /// Takes stream data up to `endstream`, a piece at a time; returns how much
    /// of `data` was used.
    fn data(&mut self, data: &[u8], ctx: &mut Ctx<'_>) -> usize {
        let piece = &data[..data.len().min(BLOCK)];
        let mut work = std::mem::take(&mut self.work);
        work.clear();
        work.extend_from_slice(&self.hold);
        work.extend_from_slice(piece);
        let held = self.hold.len();
        self.hold.clear();
        let used = match memchr::memmem::find(&work, END) {
            Some(at) => {
                // The line end before `endstream` is not part of the data.
                let mut body = &work[..at];
                body = body.strip_suffix(b"\n").unwrap_or(body);
                body = body.strip_suffix(b"\r").unwrap_or(body);
                self.stream_bytes(body, ctx);
                self.end_stream(ctx);
                // Everything `endstream` could start in was searched before.
                at + END.len() - held
            }
            None => {
                let keep = work.len().min(HOLD);
                let (body, tail) = work.split_at(work.len() - keep);
                self.hold.extend_from_slice(tail);
                self.stream_bytes(body, ctx);
                piece.len()
            }
        };
        self.work = work;
        used
    }

    fn stream_bytes(&mut self, data: &[u8], ctx: &mut Ctx<'_>) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        self.acct.input += data.len() as u64;
        if run(&mut self.stages, data, child, &mut self.acct, ctx).is_err() {
            self.halt();
        }
    }

    fn end_stream(&mut self, ctx: &mut Ctx<'_>) {
        if self.mode == Mode::Done {
            return;
        }
        self.mode = Mode::Lex(Lex::Normal);
        let Some(mut child) = self.child.take() else {
            return;
        };
        if flush(&mut self.stages, &mut child, &mut self.acct, ctx).is_err() {
            self.halt();
            return;
        }
        self.stages.clear();
        child.finish(ctx);
    }

    /// A limit was hit or a signature matched: nothing more is read.
    fn halt(&mut self) {
        self.child = None;
        self.stages.clear();
        self.mode = Mode::Done;
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Arc;

    use super::*;
    use crate::{DatabaseBuilder, Limits, Scanner, Verdict};

    fn zlib(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// A PDF with one object per (dictionary entries, stream data).
    fn pdf(objects: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
        for (n, (dict, data)) in objects.iter().enumerate() {
            write!(
                out,
                "{} 0 obj\n<< {dict} /Length {} >>\nstream\r\n",
                n + 1,
                data.len()
            )
            .unwrap();
            out.extend_from_slice(data);
            out.extend_from_slice(b"\r\nendstream\nendobj\n");
        }
        out.extend_from_slice(b"trailer\n<< /Root 1 0 R >>\n%%EOF\n");
        out
    }

    const MARK: &[u8] = b"inside a pdf stream";

    fn scanner(limits: Limits) -> Scanner {
        let hex: String = MARK.iter().map(|b| format!("{b:02x}")).collect();
        let mut b = DatabaseBuilder::new();
        b.add_ndb(&format!("Pdf.Test.Mark:0:*:{hex}\n"));
        Scanner::new(Arc::new(b.build().unwrap().0), limits)
    }

    /// The verdict on `file` whole, checked to be the same fed a byte at a time.
    fn verdict(s: &Scanner, file: &[u8]) -> Verdict {
        let whole = s.scan_file(file);
        let mut session = s.file_session();
        for b in file {
            session.feed(std::slice::from_ref(b));
        }
        assert_eq!(session.finish(), whole, "fed a byte at a time");
        whole
    }

    fn found() -> Verdict {
        Verdict::Infected {
            name: "Pdf.Test.Mark".into(),
        }
    }

    fn payload() -> Vec<u8> {
        // Repeated text first, so that deflate does not store the bytes as they are.
        let mut p = b"some text before ".repeat(20);
        p.extend_from_slice(MARK);
        p.extend_from_slice(b" and after");
        p
    }

    #[test]
    fn flate_streams_are_inflated_whatever_the_filter_is_written_as() {
        let s = scanner(Limits::default());
        let z = zlib(&payload());
        assert!(memchr::memmem::find(&z, MARK).is_none());
        for dict in [
            "/Filter /FlateDecode",
            "/Filter/Fl",
            "/Filter [/FlateDecode]",
            "/Filter [ /Fl ]",
            "/Filter /Fl#61teDecode",
            "/F#69lter /FlateDecode",
            "/Type /XObject /Filter /FlateDecode /DecodeParms << /K 1 >>",
        ] {
            assert_eq!(
                verdict(&s, &pdf(&[("", b"x"), (dict, &z)])),
                found(),
                "{dict}"
            );
        }
        // Not decoded, the mark is not there.
        assert_eq!(
            verdict(&s, &pdf(&[("/Filter /LZWDecode", &z)])),
            Verdict::Clean
        );
        assert_eq!(verdict(&s, &pdf(&[("", &z)])), Verdict::Clean);
        assert_eq!(verdict(&s, &pdf(&[("/Filter 7 0 R", &z)])), Verdict::Clean);
    }

    #[test]
    fn unfiltered_hex_and_ascii85_streams() {
        let s = scanner(Limits::default());
        let p = payload();
        let hex: String = p.iter().map(|b| format!("{b:02X} ")).collect();
        let a85 = ascii85(&p);
        let hex_z: String = zlib(&p).iter().map(|b| format!("{b:02x}")).collect();
        for (dict, data) in [
            ("", p.clone()),
            ("/Filter /ASCIIHexDecode", format!("{hex}>").into_bytes()),
            ("/Filter /AHx", hex.clone().into_bytes()),
            ("/Filter /ASCII85Decode", a85.clone()),
            (
                "/Filter [/AHx /FlateDecode]",
                format!("{hex_z}>").into_bytes(),
            ),
        ] {
            assert_eq!(verdict(&s, &pdf(&[(dict, &data)])), found(), "{dict}");
        }
    }

    fn ascii85(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in data.chunks(4) {
            let mut g = [0u8; 4];
            g[..c.len()].copy_from_slice(c);
            let mut v = u32::from_be_bytes(g);
            let mut d = [0u8; 5];
            for k in (0..5).rev() {
                d[k] = (v % 85) as u8 + b'!';
                v /= 85;
            }
            out.extend_from_slice(&d[..c.len() + 1]);
            out.push(b'\n');
        }
        out.extend_from_slice(b"~>");
        out
    }

    #[test]
    fn decoders() {
        let mut out = Vec::new();
        let mut h = HexDecoder::default();
        h.decode(b"48 65\n6c6C6", &mut out);
        h.flush(&mut out);
        assert_eq!(out, b"Hell`");
        out.clear();
        let mut a = A85Decoder::default();
        a.decode(&ascii85(b"Hello, world"), &mut out);
        assert_eq!(out, b"Hello, world");
        out.clear();
        let mut a = A85Decoder::default();
        a.decode(b"z87cURD]i,\"Ebo80~>", &mut out);
        assert_eq!(out, b"\0\0\0\0Hello World!");
        assert_eq!(decode_name(b"A#42#4"), b"AB#4");
    }

    #[test]
    fn the_stream_ends_at_endstream_whatever_the_length_says() {
        let s = scanner(Limits::default());
        let mut file = b"%PDF-1.7\n1 0 obj <</Length 3 0 R/Filter/FlateDecode>>stream\n".to_vec();
        file.extend_from_slice(&zlib(&payload()));
        file.extend_from_slice(b"endstream endobj\n");
        assert_eq!(verdict(&s, &file), found());
        // Without endstream (truncated), what came is scanned.
        let mut cut = b"%PDF-1.7\n1 0 obj <</Filter/FlateDecode>>\nstream\r\n".to_vec();
        cut.extend_from_slice(&zlib(&payload()));
        assert_eq!(verdict(&s, &cut), found());
        // The word outside a dictionary's end starts nothing.
        let mut loose = b"%PDF-1.7\n(a stream\n".to_vec();
        loose.extend_from_slice(MARK);
        assert_eq!(verdict(&s, &loose), found());
    }

    #[test]
    fn an_eicar_or_a_zip_in_a_stream_is_found() {
        let s = Scanner::new(Arc::new(crate::Database::builtin()), Limits::default());
        // Padded so that deflate codes it: its bytes are not in the PDF as they are.
        let padded = [crate::EICAR, &[b' '; 300][..]].concat();
        let eicar = pdf(&[("/Filter /FlateDecode", &zlib(&padded))]);
        assert!(!eicar.windows(20).any(|w| w == &crate::EICAR[..20]));
        assert_eq!(
            verdict(&s, &eicar),
            Verdict::Infected {
                name: crate::EICAR_NAME.into()
            }
        );
        let gz = {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(&padded).unwrap();
            e.finish().unwrap()
        };
        assert!(!verdict(&s, &pdf(&[("/Filter /Fl", &zlib(&gz))])).is_clean());
        assert_eq!(
            verdict(&s, &pdf(&[("/Filter /Fl", &zlib(b"hello"))])),
            Verdict::Clean
        );
    }

    #[test]
    fn streams_count_as_entries_and_inflation_is_bounded() {
        let limits = Limits {
            max_entries: 3,
            ..Limits::default()
        };
        let s = scanner(limits);
        let four: Vec<(&str, &[u8])> = vec![("", b"a"); 4];
        assert_eq!(
            verdict(&s, &pdf(&four)),
            Verdict::LimitExceeded(LimitKind::Entries)
        );
        assert_eq!(verdict(&s, &pdf(&four[..3])), Verdict::Clean);
        let bomb = zlib(&vec![0u8; 8 << 20]);
        let s = scanner(Limits {
            max_unpacked_bytes: 4 << 20,
            max_ratio: 1 << 20,
            ..Limits::default()
        });
        assert_eq!(
            verdict(&s, &pdf(&[("/Filter /FlateDecode", &bomb)])),
            Verdict::LimitExceeded(LimitKind::UnpackedBytes)
        );
        let s = scanner(Limits::default());
        assert_eq!(
            verdict(&s, &pdf(&[("/Filter /FlateDecode", &bomb)])),
            Verdict::LimitExceeded(LimitKind::Ratio)
        );
    }

    #[test]
    fn garbage_never_panics() {
        let s = scanner(Limits::default());
        let mut junk = b"%PDF-1.3\n".to_vec();
        for i in 0..5000u32 {
            junk.push((i.wrapping_mul(2_654_435_761) >> 13) as u8);
            if i % 97 == 0 {
                junk.extend_from_slice(b">> stream\n");
            }
            if i % 211 == 0 {
                junk.extend_from_slice(b"<</Filter[/AHx/A85/Fl/Fl/Fl/Fl]>>stream\rx\x9c");
            }
        }
        let _ = verdict(&s, &junk);
    }
}
