//! Outbound mail: what Sluice sends to other servers.
//!
//! The queue manager takes messages the store holds for remote recipients
//! and delivers them: it looks up each destination's mail exchangers, opens
//! an SMTP connection under the destination's TLS policy (opportunistic
//! STARTTLS, MTA-STS, DANE), retries temporary failures with growing
//! back-off, and reports failures and long delays to the sender (DSN).
#![forbid(unsafe_code)]

pub mod client;
pub mod concurrency;
pub mod config;
pub mod dkim;
pub mod dsn;
pub mod message;
pub mod queue;
pub mod route;
pub mod tls_policy;

pub use config::OutboundConfig;
pub use dkim::{DkimConfig, Signer};
pub use queue::QueueManager;
pub use route::Router;
