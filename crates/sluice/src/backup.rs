//! `sluice backup` and `sluice restore`: a consistent snapshot of the
//! store taken while the server runs, and putting one back while it does
//! not. The snapshot is one SQLite file holding every message, flag, UID,
//! account, alias and queued message; the configuration file and the
//! `tls/` directory are not in it (copy them as files).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use crate::config::Config;

/// File name of a snapshot inside a backup directory.
const SNAPSHOT: &str = "sluice.db";

/// Arguments of `sluice backup`.
#[derive(clap::Args)]
pub struct BackupArgs {
    /// Directory to write the snapshot into (created; must not already
    /// hold one), or `-` for standard output.
    pub target: PathBuf,
}

/// Arguments of `sluice restore`.
#[derive(clap::Args)]
pub struct RestoreArgs {
    /// A directory written by `sluice backup`, a snapshot file, or `-` for
    /// standard input.
    pub source: PathBuf,
    /// Replace a data directory that already holds mail.
    #[arg(long)]
    pub force: bool,
}

fn db_path(config: &Config) -> PathBuf {
    config.data_dir.join(SNAPSHOT)
}

/// A temporary file in the data directory, removed when dropped: the
/// snapshot for standard output is made on the same file system as the
/// database, never in memory.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub fn backup(config: &Config, args: BackupArgs) -> anyhow::Result<()> {
    let db = db_path(config);
    if !db.exists() {
        bail!("no store in {} to back up", config.data_dir.display());
    }
    let started = std::time::Instant::now();
    if args.target == Path::new("-") {
        let temp = TempFile(
            config
                .data_dir
                .join(format!(".backup-{}.db", std::process::id())),
        );
        let stats = store::backup_database(&db, &temp.0)?;
        let mut file = std::fs::File::open(&temp.0)?;
        let mut out = std::io::stdout().lock();
        std::io::copy(&mut file, &mut out).context("writing the snapshot to standard output")?;
        out.flush()?;
        eprintln!(
            "backup: {} messages, {} accounts, {} bytes in {:.1} s",
            stats.messages,
            stats.accounts,
            stats.bytes,
            started.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    std::fs::create_dir_all(&args.target)
        .with_context(|| format!("cannot create {}", args.target.display()))?;
    let dest = args.target.join(SNAPSHOT);
    if dest.exists() {
        bail!(
            "{} already holds a backup; give an empty directory",
            args.target.display()
        );
    }
    let stats = store::backup_database(&db, &dest)?;
    println!(
        "backup: {} messages ({} stored bodies), {} accounts, {} bytes in {:.1} s, to {}",
        stats.messages,
        stats.blobs,
        stats.accounts,
        stats.bytes,
        started.elapsed().as_secs_f64(),
        dest.display()
    );
    Ok(())
}

pub fn restore(config: &Config, args: RestoreArgs) -> anyhow::Result<()> {
    // The server's own lock: a restore under a running server would pull
    // its database away.
    let _lock = crate::serve::lock_data_dir(config).context("stop the server before restoring")?;
    let db = db_path(config);
    if db.exists() && !args.force {
        bail!(
            "{} already holds a store; add --force to replace it",
            config.data_dir.display()
        );
    }
    let _temp;
    let source = if args.source == Path::new("-") {
        let path = config
            .data_dir
            .join(format!(".restore-{}.db", std::process::id()));
        _temp = TempFile(path.clone());
        let mut file = std::fs::File::create(&path)?;
        let copied = std::io::copy(&mut std::io::stdin().lock(), &mut file)
            .context("reading the snapshot from standard input")?;
        if copied == 0 {
            bail!("standard input was empty: no snapshot to restore");
        }
        file.sync_all()?;
        path
    } else if args.source.is_dir() {
        args.source.join(SNAPSHOT)
    } else {
        args.source.clone()
    };
    if !source.exists() {
        bail!("no snapshot at {}", source.display());
    }
    let stats = store::restore_database(&source, &config.data_dir)?;
    println!(
        "restored: {} messages ({} stored bodies), {} accounts into {}",
        stats.messages,
        stats.blobs,
        stats.accounts,
        config.data_dir.display()
    );
    Ok(())
}
