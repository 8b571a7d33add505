//! Entry points for the fuzz targets in `fuzz/`; not an API.

use crate::proto::{parse_command, write_command, ParseError};
use crate::session::plain_credentials;

/// Bytes a client sends as a command: the parser never panics, asks
/// only for literals announced at the end of the buffer, and a command
/// it reads, written again, reads the same.
pub fn command(data: &[u8]) {
    match parse_command(data) {
        Ok(tokens) => {
            assert!(!tokens.is_empty() && tokens.len() <= crate::proto::MAX_TOKENS);
            assert_eq!(parse_command(&write_command(&tokens)).ok(), Some(tokens));
        }
        Err(ParseError::NeedLiteral { size, marker }) => {
            assert!(marker < data.len());
            assert_eq!(crate::proto::trailing_literal(data), Some(size));
        }
        Err(ParseError::Syntax(_)) => {}
    }
}

/// A SASL PLAIN response after `AUTHENTICATE "PLAIN"`: no panic, and
/// credentials read from it encode back to a response that reads the
/// same.
pub fn plain_response(data: &[u8]) {
    use base64::Engine;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok((user, pass)) = plain_credentials(text) {
        assert!(!user.contains('\0') && !pass.contains('\0'));
        let again = base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{pass}"));
        assert_eq!(plain_credentials(&again), Ok((user, pass)));
    }
}
