//! The `bench` crate: Sluice's load generator, the code behind
//! `sluice bench`. It is a client only and works against any mail server:
//!
//! - `smtp`: postal-like SMTP load with the spam-aware knobs of the seeds
//!   (bounce ratio, unfinished sessions, recipients per message, source
//!   addresses across 127.0.0.0/8 with /24 locality), closed or open model;
//! - `pop3`: rabid-like POP3 load (login, STAT/LIST, RETR, DELE, QUIT);
//! - `imap`: the seven timed requests of the database-driven mail server
//!   study, and a concurrent-clients mix;
//! - `web`: the webmail transactions (login, inbox, read, send);
//! - `corpus`: a deterministic, realistic message corpus with marker words
//!   at exact rates.
//!
//! The command line lives here ([`Command`]); the `sluice` binary mounts it
//! under `sluice bench` and calls [`run`].
#![forbid(unsafe_code)]

mod corpus;
mod distribution;
mod error;
mod imap;
mod imap_frame;
mod latency;
mod plot;
mod pop3;
mod progress;
mod report;
mod smtp;
mod source;
mod tls;
mod users;
mod web;
mod web_http;
mod wire;

pub use corpus::{Corpus, CorpusArgs, CorpusMessage, CorpusSpec, Marker};
pub use distribution::{RecipientDist, SizeDist};
pub use error::BenchError;
pub use imap::{ImapArgs, ImapReport};
pub use latency::{Histogram, Percentiles};
pub use pop3::{Pop3Args, Pop3Report};
pub use smtp::{SmtpArgs, SmtpReport};
pub use source::SourcePlan;
pub use web::{WebArgs, WebReport, WebStep, WebTarget};

/// The `sluice bench` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// SMTP load (postal-like): messages over many connections, with bounce
    /// and unfinished-session ratios and spread source addresses.
    Smtp(Box<SmtpArgs>),
    /// POP3 load (rabid-like): clients loop login, STAT/LIST, RETR, DELE, QUIT.
    Pop3(Pop3Args),
    /// IMAP: load a mailbox, then time the seven requests; or a concurrent mix.
    Imap(ImapArgs),
    /// Webmail: login page, login, inbox, read, compose and send, timed per
    /// request with virtual users (closed loop or a fixed rate each).
    Web(WebArgs),
    /// Write a deterministic, realistic message corpus.
    Corpus(CorpusArgs),
}

/// Runs one subcommand and returns its report as JSON instead of printing
/// it: for tests and harnesses that check the figures.
pub async fn report(cmd: Command) -> anyhow::Result<serde_json::Value> {
    Ok(match cmd {
        Command::Smtp(args) => {
            let report = smtp::execute(*args.clone()).await?;
            if let Some(path) = &args.plot {
                smtp::plot_report(&report, path)?;
            }
            serde_json::to_value(report)?
        }
        Command::Pop3(args) => serde_json::to_value(pop3::execute(args).await?)?,
        Command::Imap(args) => serde_json::to_value(imap::execute(args).await?)?,
        Command::Web(args) => serde_json::to_value(web::execute(args).await?)?,
        Command::Corpus(args) => serde_json::to_value(corpus::summarize(args).await?)?,
    })
}

/// Runs one `sluice bench` subcommand to completion, printing its report.
pub async fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Smtp(args) => smtp::run(*args).await,
        Command::Pop3(args) => pop3::run(args).await,
        Command::Imap(args) => imap::run(args).await,
        Command::Web(args) => web::run(args).await,
        Command::Corpus(args) => corpus::run(args).await,
    }
}
