//! JMAP ids (RFC 8620 §1.2) for the store's rows: the store's
//! [`store::ids`], which IMAP's OBJECTID (RFC 8474) shares.

pub use store::ids::*;
