//! `sluice spam ...`: train a spam model from files (a message, an mbox,
//! a Maildir or a directory of messages) and show what models know. A
//! running server on the same data scores with the change at once (models
//! are read per message).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use store::{AccountId, Store};

use crate::admin::open;
use crate::config::Config;

#[derive(Subcommand)]
pub enum SpamAction {
    /// Train a model with messages known to be spam or good.
    Train(TrainArgs),
    /// An account's spam threshold: show it, set it (points), or
    /// `default` for the site's `[spam] threshold`.
    Threshold {
        address: String,
        /// Points at or above which mail goes to Junk, or `default`.
        value: Option<String>,
    },
    /// How much a model has learnt: messages per class and tokens.
    Stats {
        /// The account; without it, the global model.
        address: Option<String>,
    },
}

#[derive(Args)]
pub struct TrainArgs {
    /// The messages are spam.
    #[arg(long, conflicts_with = "ham", required_unless_present = "ham")]
    spam: bool,
    /// The messages are good mail.
    #[arg(long)]
    ham: bool,
    /// Train the global model (used for accounts that have not trained
    /// enough); then every argument is a path.
    #[arg(long)]
    global: bool,
    /// The account whose model learns (unless --global), then message
    /// files, mbox files, Maildirs or directories of messages.
    #[arg(required = true, value_name = "ADDRESS PATH")]
    args: Vec<String>,
}

pub async fn spam(config: &Config, action: SpamAction) -> anyhow::Result<()> {
    let store = open(config).await?;
    match action {
        SpamAction::Train(args) => train(config, &*store, args).await,
        SpamAction::Threshold { address, value } => {
            let Some(value) = value else {
                let directory = store.load_directory().await?;
                let Some(account) = directory.account(&address) else {
                    bail!("no account {address}");
                };
                match account.spam_threshold {
                    Some(t) => println!("{t} (the account's own)"),
                    None => println!("{} (the site's)", config.spam.threshold),
                }
                return Ok(());
            };
            let threshold = if value == "default" {
                None
            } else {
                let t: f32 = value
                    .parse()
                    .ok()
                    .filter(|t: &f32| t.is_finite())
                    .with_context(|| format!("not a number of points: {value:?}"))?;
                Some(t)
            };
            store.set_spam_threshold(&address, threshold).await?;
            Ok(())
        }
        SpamAction::Stats { address } => {
            let owner = match address {
                Some(a) => Some(account_of(&*store, &a).await?),
                None => None,
            };
            let model = store.spam_model(owner, Vec::new()).await?;
            let tokens = store.spam_token_count(owner).await?;
            println!(
                "spam messages: {}\nham messages: {}\ntokens: {tokens}\nin use: {}",
                model.spam_messages,
                model.ham_messages,
                if model.spam_messages >= spam::MIN_TRAINED
                    && model.ham_messages >= spam::MIN_TRAINED
                {
                    "yes"
                } else {
                    "no (each class needs more messages)"
                }
            );
            Ok(())
        }
    }
}

async fn account_of(store: &dyn Store, address: &str) -> anyhow::Result<AccountId> {
    match store.load_directory().await?.account(address) {
        Some(a) => Ok(a.id),
        None => bail!("no account {address}"),
    }
}

async fn train(config: &Config, store: &dyn Store, args: TrainArgs) -> anyhow::Result<()> {
    let (owner, paths) = if args.global {
        (None, &args.args[..])
    } else {
        let address = &args.args[0];
        (Some(account_of(store, address).await?), &args.args[1..])
    };
    if paths.is_empty() {
        bail!("no messages to train with: give files, mbox files or Maildirs");
    }
    let mut trained = 0u64;
    for path in paths {
        for message in messages_in(Path::new(path))? {
            let words = crate::spam_trainer::tokens_of(message).await;
            store
                .train_spam(owner, None, words, args.spam, None)
                .await?;
            trained += 1;
        }
    }
    crate::spam_trainer::prune(store, owner, config.spam.max_tokens).await?;
    let class = if args.spam { "spam" } else { "ham" };
    println!("trained {trained} messages as {class}");
    Ok(())
}

/// The messages a path holds: a Maildir's `cur` and `new`, every file of
/// another directory, the messages of an mbox (a file starting with a
/// `From ` line), or one message.
fn messages_in(path: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    if path.is_dir() {
        let maildir = path.join("cur").is_dir() || path.join("new").is_dir();
        let dirs = if maildir {
            vec![path.join("cur"), path.join("new")]
        } else {
            vec![path.to_path_buf()]
        };
        let mut out = Vec::new();
        for dir in dirs.iter().filter(|d| d.is_dir()) {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
                .with_context(|| dir.display().to_string())?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            for file in files {
                out.push(std::fs::read(&file).with_context(|| file.display().to_string())?);
            }
        }
        return Ok(out);
    }
    let bytes = std::fs::read(path).with_context(|| path.display().to_string())?;
    if bytes.starts_with(b"From ") {
        Ok(split_mbox(&bytes))
    } else {
        Ok(vec![bytes])
    }
}

/// The messages of an mbox: each starts after a `From ` line at the start
/// of the file or after a blank line; `>From ` quoting is undone.
fn split_mbox(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut current: Option<Vec<u8>> = None;
    let mut blank_before = true;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        if blank_before && line.starts_with(b"From ") {
            out.extend(current.take());
            current = Some(Vec::new());
        } else if let Some(message) = current.as_mut() {
            let quotes = line.iter().take_while(|b| **b == b'>').count();
            let unquoted = if quotes > 0 && line[quotes..].starts_with(b"From ") {
                &line[1..]
            } else {
                line
            };
            message.extend_from_slice(unquoted);
        }
        blank_before = line == b"\n" || line == b"\r\n";
    }
    out.extend(current);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mbox_messages_are_split_and_unquoted() {
        let mbox = b"From a@b Mon Jan  1 00:00:00 2024\nSubject: one\n\n>From here\n\nFrom c@d Mon Jan  1 00:00:00 2024\nSubject: two\n\nbody\n";
        let messages = split_mbox(mbox);
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0], b"Subject: one\n\nFrom here\n\n");
        assert_eq!(messages[1], b"Subject: two\n\nbody\n");
    }
}
