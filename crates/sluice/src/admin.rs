//! `sluice domain|user|alias ...`: directory edits straight in the store.
//! A running server on the same data sees them within its directory poll
//! interval.

use std::io::{BufRead, IsTerminal};

use anyhow::{bail, Context as _};
use clap::Subcommand;
use store::{SqliteOptions, SqliteStore, Store};

use crate::config::Config;

#[derive(Subcommand)]
pub enum DomainAction {
    /// Add a local domain.
    Add { name: String },
    /// List local domains.
    List,
    /// Remove a local domain (it must have no accounts).
    Remove { name: String },
}

#[derive(Subcommand)]
pub enum UserAction {
    /// Add an account; its domain must exist.
    Add {
        address: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
    /// List accounts.
    List,
    /// Remove an account and its mail.
    Remove { address: String },
    /// Change an account's password.
    Passwd {
        address: String,
        /// Read the password from the first line of standard input.
        #[arg(long)]
        password_stdin: bool,
    },
}

#[derive(Subcommand)]
pub enum AliasAction {
    /// Deliver mail for ADDRESS to each TARGET (local or remote).
    Add {
        address: String,
        #[arg(required = true)]
        targets: Vec<String>,
    },
    /// List aliases.
    List,
    /// Remove an alias, or only one of its targets.
    Remove {
        address: String,
        target: Option<String>,
    },
}

fn open(config: &Config) -> anyhow::Result<SqliteStore> {
    SqliteStore::open(
        &config.data_dir,
        SqliteOptions {
            group_commit: false,
            readers: 1,
        },
    )
    .with_context(|| format!("cannot open the store in {}", config.data_dir.display()))
}

fn read_password(from_stdin: bool) -> anyhow::Result<String> {
    let password = if from_stdin {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line.trim_end_matches(['\r', '\n']).to_string()
    } else if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password("Password: ")?;
        let again = rpassword::prompt_password("Again: ")?;
        if first != again {
            bail!("the passwords differ");
        }
        first
    } else {
        bail!("no terminal to ask for a password: use --password-stdin");
    };
    if password.is_empty() {
        bail!("the password is empty");
    }
    Ok(password)
}

pub async fn domain(config: &Config, action: DomainAction) -> anyhow::Result<()> {
    let store = open(config)?;
    match action {
        DomainAction::Add { name } => store.add_domain(&name).await?,
        DomainAction::Remove { name } => store.remove_domain(&name).await?,
        DomainAction::List => {
            for d in store.list_domains().await? {
                println!("{d}");
            }
        }
    }
    Ok(())
}

pub async fn user(config: &Config, action: UserAction) -> anyhow::Result<()> {
    match action {
        UserAction::Add {
            address,
            password_stdin,
        } => {
            let password = read_password(password_stdin)?;
            open(config)?.add_account(&address, &password).await?;
        }
        UserAction::Passwd {
            address,
            password_stdin,
        } => {
            let password = read_password(password_stdin)?;
            open(config)?.set_password(&address, &password).await?;
        }
        UserAction::Remove { address } => open(config)?.remove_account(&address).await?,
        UserAction::List => {
            for a in open(config)?.list_accounts().await? {
                println!("{a}");
            }
        }
    }
    Ok(())
}

pub async fn alias(config: &Config, action: AliasAction) -> anyhow::Result<()> {
    let store = open(config)?;
    match action {
        AliasAction::Add { address, targets } => store.add_alias(&address, &targets).await?,
        AliasAction::Remove { address, target } => {
            store.remove_alias(&address, target.as_deref()).await?
        }
        AliasAction::List => {
            for a in store.list_aliases().await? {
                println!("{} -> {}", a.address, a.targets.join(", "));
            }
        }
    }
    Ok(())
}
