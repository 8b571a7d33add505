//! Sluice's POP3 server (RFC 1939) with CAPA (RFC 2449), AUTH PLAIN
//! (RFC 5034), STLS (RFC 2595) and implicit TLS, reading the store.
#![forbid(unsafe_code)]

mod config;
#[doc(hidden)]
pub mod fuzzing;
mod lock;
mod server;
mod session;
mod stuffing;

pub use config::Pop3Config;
pub use lock::MailboxLocks;
pub use server::{serve, Context};
