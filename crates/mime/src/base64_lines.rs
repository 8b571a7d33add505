//! Base64 for MIME bodies (RFC 2045 §6.8), streaming, in lines of 76.

/// Characters per line (RFC 2045 §6.8: at most 76).
pub const LINE: usize = 76;

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 in lines of [`LINE`] characters, fed piece by piece (two
/// bytes carried at most); a line end is written only before the next
/// line begins, so the caller decides what ends the last one.
#[derive(Debug, Default)]
pub struct Base64Lines {
    carry: [u8; 3],
    carried: usize,
    column: usize,
}

impl Base64Lines {
    /// Encodes `bytes`, appending to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        while !bytes.is_empty() {
            let take = (3 - self.carried).min(bytes.len());
            self.carry[self.carried..self.carried + take].copy_from_slice(&bytes[..take]);
            self.carried += take;
            bytes = &bytes[take..];
            if self.carried == 3 {
                self.emit(3, out);
            }
        }
    }

    /// Writes the last group, padded, with no line end after it.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if self.carried > 0 {
            self.carry[self.carried..].fill(0);
            self.emit(self.carried, out);
        }
    }

    /// [`Base64Lines::finish`], then a line end after the last line, if
    /// there is one (a whole base64 body, as RFC 2045 §6.8 writes it).
    pub fn finish_line(&mut self, out: &mut Vec<u8>) {
        self.finish(out);
        if self.column > 0 {
            out.extend_from_slice(b"\r\n");
            self.column = 0;
        }
    }

    fn emit(&mut self, n: usize, out: &mut Vec<u8>) {
        if self.column == LINE {
            out.extend_from_slice(b"\r\n");
            self.column = 0;
        }
        let [a, b, c] = self.carry;
        let group = [
            ALPHABET[(a >> 2) as usize],
            ALPHABET[(((a & 0x03) << 4) | (b >> 4)) as usize],
            if n > 1 {
                ALPHABET[(((b & 0x0f) << 2) | (c >> 6)) as usize]
            } else {
                b'='
            },
            if n > 2 {
                ALPHABET[(c & 0x3f) as usize]
            } else {
                b'='
            },
        ];
        out.extend_from_slice(&group);
        self.column += 4;
        self.carried = 0;
    }
}
