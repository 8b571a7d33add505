//! `sluice sieve ...`: the Sieve scripts of an account, or the global
//! ones, edited in the store. A script is compiled before it is stored, as
//! ManageSieve does; a running server delivers with the change within its
//! directory poll interval.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context as _};
use clap::Subcommand;
use store::{ScriptOwner, Store};

use crate::admin::{open, write_line};
use crate::config::Config;

#[derive(Subcommand)]
pub enum SieveAction {
    /// List scripts: name, size in bytes, and `active` for the active one.
    List {
        /// The global scripts instead of an account's.
        #[arg(long)]
        global: bool,
        /// The account (not with --global).
        address: Option<String>,
    },
    /// Print a script's source.
    Get {
        /// A global script instead of an account's.
        #[arg(long)]
        global: bool,
        /// ADDRESS NAME, or NAME with --global.
        #[arg(required = true, num_args = 1..=2, value_names = ["ADDRESS", "NAME"])]
        args: Vec<String>,
    },
    /// Compile a script and store it (replacing one of the same name); a
    /// script that does not compile is not stored.
    Put {
        /// A global script instead of an account's.
        #[arg(long)]
        global: bool,
        /// ADDRESS NAME FILE, or NAME FILE with --global; FILE `-` is
        /// standard input.
        #[arg(required = true, num_args = 2..=3, value_names = ["ADDRESS", "NAME", "FILE"])]
        args: Vec<String>,
    },
    /// Make a script the one delivery runs for the account.
    Activate { address: String, name: String },
    /// Run no script for the account.
    Deactivate { address: String },
    /// Delete a script (not the active one).
    Delete {
        /// A global script instead of an account's.
        #[arg(long)]
        global: bool,
        /// ADDRESS NAME, or NAME with --global.
        #[arg(required = true, num_args = 1..=2, value_names = ["ADDRESS", "NAME"])]
        args: Vec<String>,
    },
    /// Rename a script (an active one stays active).
    Rename {
        /// A global script instead of an account's.
        #[arg(long)]
        global: bool,
        /// ADDRESS OLD NEW, or OLD NEW with --global.
        #[arg(required = true, num_args = 2..=3, value_names = ["ADDRESS", "OLD", "NEW"])]
        args: Vec<String>,
    },
    /// Compile a script file (`-` for standard input) and say whether it
    /// is valid; nothing is stored.
    Check { file: PathBuf },
}

/// The Sieve language as the servers take it: scripts are compiled by the
/// interpreter, and its extensions are the SIEVE capability.
pub(crate) fn language() -> managesieve::Language {
    managesieve::Language {
        check: Arc::new(|source: &str| compile(source).map_err(|e| e.to_string())),
        extensions: sieve::EXTENSIONS.iter().map(|e| e.to_string()).collect(),
        max_redirects: u32::try_from(sieve::Limits::default().max_redirects).ok(),
    }
}

fn compile(source: &str) -> Result<(), sieve::CompileError> {
    sieve::compile(source).map(|_| ())
}

/// `args` with the address taken off the front unless `global`: the
/// owner and the remaining `n` arguments.
async fn owner_and<'a>(
    store: &dyn Store,
    global: bool,
    args: &'a [String],
    n: usize,
    usage: &str,
) -> anyhow::Result<(ScriptOwner, &'a [String])> {
    match (global, args.len()) {
        (true, len) if len == n => Ok((ScriptOwner::Global, args)),
        (false, len) if len == n + 1 => {
            let id = account_id(store, &args[0]).await?;
            Ok((ScriptOwner::Account(id), &args[1..]))
        }
        _ => bail!("usage: sluice sieve {usage}"),
    }
}

async fn account_id(store: &dyn Store, address: &str) -> anyhow::Result<store::AccountId> {
    let directory = store.load_directory().await?;
    match directory.account(address) {
        Some(a) => Ok(a.id),
        None => bail!("no account {address}"),
    }
}

/// A script's text from a file or standard input.
fn read_source(file: &Path) -> anyhow::Result<String> {
    let mut text = String::new();
    if file == Path::new("-") {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the script from standard input (is it UTF-8?)")?;
    } else {
        text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {} (is it UTF-8?)", file.display()))?;
    }
    Ok(text)
}

pub async fn sieve(config: &Config, action: SieveAction) -> anyhow::Result<()> {
    if let SieveAction::Check { file } = &action {
        let source = read_source(file)?;
        return match compile(&source) {
            Ok(()) => {
                println!("{}: valid", file.display());
                Ok(())
            }
            Err(e) => bail!("{}: {e}", file.display()),
        };
    }
    let store = open(config).await?;
    match action {
        SieveAction::List { global, address } => {
            let owner = match (global, address) {
                (true, None) => ScriptOwner::Global,
                (false, Some(address)) => {
                    ScriptOwner::Account(account_id(&*store, &address).await?)
                }
                _ => bail!("usage: sluice sieve list ADDRESS | --global"),
            };
            let mut out = std::io::stdout().lock();
            for s in store.sieve_scripts(owner).await? {
                let active = if s.active { "\tactive" } else { "" };
                if !write_line(&mut out, &format!("{}\t{}{active}", s.name, s.size)) {
                    break;
                }
            }
        }
        SieveAction::Get { global, args } => {
            let (owner, rest) = owner_and(&*store, global, &args, 1, "get ADDRESS NAME").await?;
            let name = &rest[0];
            match store.sieve_script(owner, name).await? {
                Some(source) => {
                    let mut out = std::io::stdout().lock();
                    // A closed pipe (| head) is not an error.
                    let _ = out.write_all(source.as_bytes());
                }
                None => bail!("no script {name:?}"),
            }
        }
        SieveAction::Put { global, args } => {
            let (owner, rest) =
                owner_and(&*store, global, &args, 2, "put ADDRESS NAME FILE").await?;
            let (name, file) = (&rest[0], Path::new(&rest[1]));
            let source = read_source(file)?;
            if let Err(e) = compile(&source) {
                bail!("{}: {e}; script not stored", file.display());
            }
            store.put_sieve_script(owner, name, &source).await?;
        }
        SieveAction::Activate { address, name } => {
            let id = account_id(&*store, &address).await?;
            store.activate_sieve_script(id, Some(&name)).await?;
        }
        SieveAction::Deactivate { address } => {
            let id = account_id(&*store, &address).await?;
            store.activate_sieve_script(id, None).await?;
        }
        SieveAction::Delete { global, args } => {
            let (owner, rest) = owner_and(&*store, global, &args, 1, "delete ADDRESS NAME").await?;
            store.delete_sieve_script(owner, &rest[0]).await?;
        }
        SieveAction::Rename { global, args } => {
            let (owner, rest) =
                owner_and(&*store, global, &args, 2, "rename ADDRESS OLD NEW").await?;
            store.rename_sieve_script(owner, &rest[0], &rest[1]).await?;
        }
        SieveAction::Check { .. } => unreachable!("handled above"),
    }
    Ok(())
}
