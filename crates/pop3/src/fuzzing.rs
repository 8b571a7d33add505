//! Entry points for the fuzz targets in `fuzz/`; not an API.

use base64::Engine;

use crate::session::plain_credentials;

/// A SASL PLAIN response from the network: no panic, and credentials read
/// from it encode back to a response that reads the same.
pub fn plain_response(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some((user, pass)) = plain_credentials(text) {
        assert!(!user.contains('\0') && !pass.contains('\0'));
        let again = base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{pass}"));
        assert_eq!(plain_credentials(&again), Some((user, pass)));
    }
}
