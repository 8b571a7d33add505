//! Sluice's ManageSieve server (RFC 5804): a client lists, uploads,
//! checks, activates, renames and deletes the Sieve scripts of its
//! account, kept in the store. Scripts are compiled before they are
//! stored; the compiler is handed in ([`Language`]), so this crate does
//! not depend on the interpreter.
#![forbid(unsafe_code)]

mod config;
#[doc(hidden)]
pub mod fuzzing;
pub mod proto;
mod server;
mod session;

pub use config::ManageSieveConfig;
pub use server::{serve, Check, Context, Language};
