//! Sluice's DNSBL part: a prefix-aware DNSBL client and a DNSBL server.
//!
//! - [`Client`] checks a connecting address against several DNS blocklists at
//!   once, under one time budget, with a cache that honours TTLs and merges
//!   concurrent lookups. A zone in [`Mode::Bitmap`] asks one question per
//!   /25 and caches the answer for all 128 addresses (seed section 7).
//! - [`Server`] serves rbldnsd `ip4set` lists over UDP and TCP, answering
//!   classic A/TXT queries (RFC 5782) and the /25 bitmap AAAA query.
//!
//! The wire-level pieces ([`bitmap`], [`ip4set`], and the query names) have no I/O.
//!
//! # In an SMTP gate
//!
//! ```no_run
//! # async fn gate(peer: std::net::IpAddr) -> Result<(), dnsbl::Error> {
//! use dnsbl::{Client, ClientConfig, Zone};
//! let client = Client::new(ClientConfig::new(
//!     "127.0.0.1:5353".parse().unwrap(),
//!     vec![Zone::bitmap("bl.example.org", 1.0), Zone::classic("other.example", 0.5)],
//! ))?;
//! // at accept: start the lookups, send the greeting meanwhile
//! let pending = client.spawn_check(peer);
//! // ... greeting, EHLO, MAIL FROM ...
//! // before accepting the first RCPT:
//! let outcome = pending.outcome().await;
//! if outcome.listed {
//!     let reason = outcome.reason().unwrap_or("listed in a DNS blocklist");
//!     // reply 554 5.7.1 with `reason`
//! }
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod answer;
pub mod bitmap;
mod cache;
mod client;
mod clock;
mod error;
mod exchange;
#[doc(hidden)]
pub mod fuzzing;
pub mod ip4set;
mod qname;
mod server;

pub use client::{Client, ClientConfig, ClientStats, Hit, Mode, Outcome, PendingCheck, Zone};
pub use clock::Clock;
pub use error::Error;
pub use server::{serve, Server, ServerConfig, ServerStats};
