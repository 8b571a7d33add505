//! SMTP replies: a code, an enhanced status (RFC 3463) and a text, written
//! in one place.

/// One reply line (or the last line of a multi-line reply).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub code: u16,
    pub status: &'static str,
    pub text: String,
}

impl Reply {
    pub fn new(code: u16, status: &'static str, text: impl Into<String>) -> Reply {
        Reply {
            code,
            status,
            text: text.into(),
        }
    }

    /// Whether this reply ends the connection (RFC 5321 §3.8: 421).
    pub fn closes(&self) -> bool {
        self.code == 421 || self.code == 221
    }

    /// Appends the reply to `out`. Enhanced status codes are sent only to
    /// clients that said EHLO (RFC 2034 §3).
    pub fn write(&self, out: &mut Vec<u8>, enhanced: bool) {
        let text = self.text.replace(['\r', '\n'], " ");
        if enhanced && !self.status.is_empty() {
            out.extend_from_slice(format!("{} {} {}\r\n", self.code, self.status, text).as_bytes());
        } else {
            out.extend_from_slice(format!("{} {}\r\n", self.code, text).as_bytes());
        }
    }

    pub fn is_error(&self) -> bool {
        self.code >= 400
    }
}

/// Writes a multi-line reply (RFC 5321 §4.2.1): every line but the last
/// has a hyphen after the code.
pub(crate) fn write_multiline(out: &mut Vec<u8>, code: u16, lines: &[String]) {
    for (i, line) in lines.iter().enumerate() {
        let sep = if i + 1 == lines.len() { ' ' } else { '-' };
        out.extend_from_slice(format!("{code}{sep}{line}\r\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enhanced_codes_only_after_ehlo() {
        let r = Reply::new(550, "5.1.1", "no such user");
        let mut a = Vec::new();
        r.write(&mut a, true);
        assert_eq!(a, b"550 5.1.1 no such user\r\n");
        let mut b = Vec::new();
        r.write(&mut b, false);
        assert_eq!(b, b"550 no such user\r\n");
    }

    #[test]
    fn multiline_marks_continuations() {
        let mut out = Vec::new();
        write_multiline(&mut out, 250, &["a".into(), "b".into(), "c".into()]);
        assert_eq!(out, b"250-a\r\n250-b\r\n250 c\r\n");
    }
}
