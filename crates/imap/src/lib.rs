//! The IMAP server over the store.
