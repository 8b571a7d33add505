//! `sluice dkim ...`: the DKIM keys of the local domains, edited in the
//! store. A running server on the same data signs with the change from its
//! next message on (keys are directory edits).
//!
//! Rotation with two selectors: `keygen` a new key (it is only published
//! while the domain has a signing key of its algorithm), put its record in
//! DNS, `activate` it once DNS has it, and `remove` the old key a few days
//! later, when no mail it signed is still on its way.

use anyhow::Context as _;
use clap::Subcommand;
use sluice_outbound::dkim;
use store::Store;

use crate::admin::{open, unix_now, write_line};
use crate::config::Config;

#[derive(Subcommand)]
pub enum DkimAction {
    /// Make a key for a local domain and print the TXT record to publish.
    /// It signs at once if the domain has no signing key of its algorithm;
    /// otherwise it waits for `activate`.
    Keygen {
        domain: String,
        /// Selector (default: year, month and r or e, e.g. 202611r).
        #[arg(long)]
        selector: Option<String>,
        /// `rsa` (2048 bits, rsa-sha256) or `ed25519` (ed25519-sha256).
        #[arg(long, default_value = "rsa")]
        algorithm: String,
    },
    /// Take over a key another signer used (PEM: PKCS#1 or PKCS#8 RSA,
    /// PKCS#8 Ed25519), keeping its published record. Same signing rule
    /// as keygen.
    Import {
        domain: String,
        selector: String,
        /// PEM file, or `-` for standard input.
        file: std::path::PathBuf,
    },
    /// List keys: domain, selector, algorithm, signing or published only.
    List,
    /// Print the TXT record of a key.
    Record { domain: String, selector: String },
    /// Sign with this key from now on, instead of the domain's other key
    /// of the same algorithm (which stays published).
    Activate { domain: String, selector: String },
    /// Stop signing with this key (it stays, for its record).
    Deactivate { domain: String, selector: String },
    /// Remove a key.
    Remove { domain: String, selector: String },
}

fn default_selector(algorithm: &str) -> String {
    let now = time::OffsetDateTime::now_utc();
    let kind = if algorithm.starts_with("ed") {
        'e'
    } else {
        'r'
    };
    format!("{}{:02}{kind}", now.year(), u8::from(now.month()))
}

pub async fn dkim(config: &Config, action: DkimAction) -> anyhow::Result<()> {
    let store = open(config).await?;
    match action {
        DkimAction::Keygen {
            domain,
            selector,
            algorithm,
        } => {
            let selector = selector.unwrap_or_else(|| default_selector(&algorithm));
            let key = dkim::generate(
                &domain.to_ascii_lowercase(),
                &selector,
                &algorithm,
                unix_now(),
            )?;
            add(&*store, key).await?;
        }
        DkimAction::Import {
            domain,
            selector,
            file,
        } => {
            let pem = if file.as_os_str() == "-" {
                let mut text = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut text)?;
                text
            } else {
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?
            };
            let key = dkim::import(&domain.to_ascii_lowercase(), &selector, &pem, unix_now())?;
            add(&*store, key).await?;
        }
        DkimAction::List => {
            let mut out = std::io::stdout().lock();
            for k in store.dkim_keys().await? {
                let state = if k.signing { "signing" } else { "published" };
                let line = format!("{}\t{}\t{}\t{state}", k.domain, k.selector, k.algorithm);
                if !write_line(&mut out, &line) {
                    break;
                }
            }
        }
        DkimAction::Record { domain, selector } => {
            let key = find(&*store, &domain, &selector).await?;
            println!("{}", dkim::txt_record(&key));
        }
        DkimAction::Activate { domain, selector } => {
            store.set_dkim_signing(&domain, &selector, true).await?
        }
        DkimAction::Deactivate { domain, selector } => {
            store.set_dkim_signing(&domain, &selector, false).await?
        }
        DkimAction::Remove { domain, selector } => {
            store.remove_dkim_key(&domain, &selector).await?
        }
    }
    Ok(())
}

/// Stores a new key, signing unless the domain already signs with its
/// algorithm, and prints its record and what to do next.
async fn add(store: &dyn Store, mut key: store::DkimKey) -> anyhow::Result<()> {
    key.signing = !store
        .dkim_keys()
        .await?
        .iter()
        .any(|k| k.domain == key.domain && k.algorithm == key.algorithm && k.signing);
    store.add_dkim_key(key.clone()).await?;
    println!("{}", dkim::txt_record(&key));
    if key.signing {
        eprintln!(
            "sluice: {} signs mail of {} from now on; publish the record above.",
            key.selector, key.domain
        );
    } else {
        eprintln!(
            "sluice: publish the record above, then `sluice dkim activate {} {}` to sign with it.",
            key.domain, key.selector
        );
    }
    Ok(())
}

async fn find(store: &dyn Store, domain: &str, selector: &str) -> anyhow::Result<store::DkimKey> {
    let domain = domain.trim_end_matches('.').to_ascii_lowercase();
    store
        .dkim_keys()
        .await?
        .into_iter()
        .find(|k| k.domain == domain && k.selector == selector)
        .with_context(|| format!("no DKIM selector {selector} of {domain}"))
}
