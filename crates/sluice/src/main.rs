//! `sluice`: the command line. `serve` runs the mail server; the other
//! commands manage domains, users and aliases in the same data directory,
//! also while a server runs there.
#![forbid(unsafe_code)]

mod acme;
mod admin;
mod arc_keys;
mod backup;
mod config;
mod dkim_admin;
mod dnsbl_server;
mod domain_records;
mod import;
mod import_imap;
mod load_stats;
mod metrics_http;
mod privileges;
mod proxy;
mod scan_files;
mod serve;
mod sieve_admin;
mod spam_admin;
mod spam_trainer;
mod store_backend;
mod tls;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc rather than the system allocator: thousands of long-lived
/// sessions interleave small allocations with the large transient ones of
/// queries and message pieces, and glibc's malloc then keeps freed pages
/// pinned. Measured with `bench/probes/imap_idle_memory.py`: 1,000 idle
/// IMAP sessions cost 28.9 KiB each with glibc, 1.8 KiB with mimalloc.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A mail server in one program.
#[derive(Parser)]
#[command(name = "sluice", version, about)]
struct Cli {
    /// Configuration file (TOML); without it, the local trial defaults.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Data directory; overrides `data_dir` of the configuration.
    #[arg(long, global = true)]
    data: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the mail server.
    Serve,
    /// Run only the scanning SMTP/POP3 proxies of the `[[proxy]]` entries,
    /// in front of another mail server.
    Proxy,
    /// Manage local domains.
    Domain {
        #[command(subcommand)]
        action: admin::DomainAction,
    },
    /// Manage accounts.
    User {
        #[command(subcommand)]
        action: admin::UserAction,
    },
    /// Manage aliases (an address delivered to other local or remote ones).
    Alias {
        #[command(subcommand)]
        action: admin::AliasAction,
    },
    /// The outbound queue: list, show, retry, flush, remove.
    Queue {
        #[command(subcommand)]
        action: admin::QueueAction,
    },
    /// DKIM keys: keygen, import, list, record, activate, deactivate,
    /// remove.
    Dkim {
        #[command(subcommand)]
        action: dkim_admin::DkimAction,
    },
    /// The spam classifier: train a model from files, show what it knows.
    Spam {
        #[command(subcommand)]
        action: spam_admin::SpamAction,
    },
    /// Sieve scripts of an account or global ones: list, get, put,
    /// activate, deactivate, delete, rename, check.
    Sieve {
        #[command(subcommand)]
        action: sieve_admin::SieveAction,
    },
    /// Bring mail into an account from an mbox file or a Maildir (streamed,
    /// resumable, flags and dates kept).
    Import(import::ImportArgs),
    /// Write an account's mail out as an mbox file or a Maildir.
    Export(import::ExportArgs),
    /// Disk use of the store: files, tables and indexes, bytes per message.
    Stats,
    /// Write a consistent snapshot of the store (every message, flag, UID,
    /// account), also while the server runs.
    Backup(backup::BackupArgs),
    /// Put a snapshot made by `backup` in place of the store (the server
    /// must be stopped).
    Restore(backup::RestoreArgs),
    /// Copy the whole SQLite store into an empty PostgreSQL database, UIDs
    /// and flags kept (the server must be stopped)
    Migrate(store_backend::MigrateArgs),
    /// Scan files or mail messages for viruses (exit 0 clean, 1 found, 2 error).
    Scan(scan_files::ScanArgs),
    /// DNS blocklist tools.
    Dnsbl {
        #[command(subcommand)]
        command: dnsbl_server::DnsblCommand,
    },
    /// Load tests against any mail server (this one or another).
    Bench {
        #[command(subcommand)]
        command: Box<bench::Command>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Bench { command } = cli.command {
        // A client of any server: it takes no Sluice config.
        let result = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(bench::run(*command)));
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sluice bench: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    if let Command::Scan(args) = cli.command {
        // Limits come from the config's [scan] section when one is given.
        return match config::load(cli.config.as_deref(), cli.data.as_deref()) {
            Ok(config) => ExitCode::from(scan_files::run(args, config.scan.limits())),
            Err(e) => {
                eprintln!("sluice: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let result = config::load(cli.config.as_deref(), cli.data.as_deref()).and_then(|config| {
        // Backup and restore are file work: no runtime.
        if matches!(
            cli.command,
            Command::Backup(_) | Command::Restore(_) | Command::Stats
        ) {
            store_backend::only_on_sqlite(&config)?;
        }
        match cli.command {
            Command::Backup(args) => return backup::backup(&config, args),
            Command::Restore(args) => return backup::restore(&config, args),
            Command::Stats => return admin::stats(&config),
            _ => {}
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            match cli.command {
                Command::Serve => serve::run(config).await,
                Command::Proxy => proxy::run(config).await,
                Command::Domain { action } => admin::domain(&config, action).await,
                Command::User { action } => admin::user(&config, action).await,
                Command::Alias { action } => admin::alias(&config, action).await,
                Command::Queue { action } => admin::queue(&config, action).await,
                Command::Dkim { action } => dkim_admin::dkim(&config, action).await,
                Command::Spam { action } => spam_admin::spam(&config, action).await,
                Command::Sieve { action } => sieve_admin::sieve(&config, action).await,
                Command::Import(args) => import::import(&config, args).await,
                Command::Migrate(args) => store_backend::migrate(&config, args).await,
                Command::Export(args) => import::export(&config, args).await,
                Command::Dnsbl { command } => dnsbl_server::run(command).await,
                Command::Scan(_)
                | Command::Bench { .. }
                | Command::Backup(_)
                | Command::Restore(_)
                | Command::Stats => unreachable!("handled above"),
            }
        })
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e:#}");
            ExitCode::FAILURE
        }
    }
}
