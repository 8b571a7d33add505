//! The directory on PostgreSQL: local domains, accounts (with the mailboxes
//! every account starts with), aliases, quotas.
//!
//! Every edit of what the directory snapshot holds bumps
//! `meta.directory_serial` in the transaction that makes it, so the nodes
//! sharing the database see that a reload is due. Edits that depend
//! on a domain take its row lock (`FOR SHARE`), and removing a domain takes
//! it exclusively, so a domain cannot go while an account, alias or key is
//! being added under it on another node.
//!
//! Listings sort with `COLLATE "C"`: byte order, as SQLite sorts text,
//! whatever the database's own collation.

use tokio_postgres::{GenericClient, IsolationLevel, Transaction};

use super::PgStore;
use crate::clock::now;
use crate::directory::{AccountEntry, Directory};
use crate::error::{Result, StoreError};
use crate::mailbox_names::DEFAULT_MAILBOXES;
use crate::model::{AccountId, AliasEntry, MailboxId};
use crate::names::{valid_address, valid_domain};
use crate::password::hash_password;

/// Counts a directory edit; call inside the edit's transaction.
pub(super) async fn bump_serial(tx: &Transaction<'_>) -> Result<()> {
    tx.execute(
        "UPDATE meta SET value = value + 1 WHERE key = 'directory_serial'",
        &[],
    )
    .await?;
    Ok(())
}

/// The id of a local domain, its row locked against removal until the
/// transaction ends; `NotFound` (with a hint) when the domain is not local.
pub(super) async fn lock_domain(tx: &Transaction<'_>, domain: &str) -> Result<i64> {
    tx.query_opt(
        "SELECT id FROM domains WHERE name = $1 FOR SHARE",
        &[&domain],
    )
    .await?
    .map(|r| r.get(0))
    .ok_or_else(|| StoreError::NotFound(format!("domain {domain} (add it first)")))
}

/// The domain part of a normalised address.
fn domain_of(address: &str) -> &str {
    address.rsplit_once('@').map_or("", |(_, domain)| domain)
}

/// Hashes a password on a blocking thread: argon2 is deliberately slow,
/// and no transaction should wait for it.
async fn hash_off_thread(password: &str) -> Result<String> {
    let password = password.to_string();
    tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|_| StoreError::Closed)?
}

/// The directory's change counter.
async fn serial(c: &impl GenericClient) -> Result<i64> {
    Ok(
        c.query_one("SELECT value FROM meta WHERE key = 'directory_serial'", &[])
            .await?
            .get(0),
    )
}

/// The accounts with their INBOX, as the directory holds them.
async fn account_entries(c: &impl GenericClient) -> Result<Vec<AccountEntry>> {
    let rows = c
        .query(
            "SELECT a.id, a.address, m.id, a.password_hash, a.spam_threshold FROM accounts a
             JOIN mailboxes m ON m.account_id = a.id AND m.name = 'INBOX'",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| AccountEntry {
            id: r.get(0),
            address: r.get(1),
            inbox: r.get(2),
            password_hash: r.get(3),
            spam_threshold: r.get(4),
        })
        .collect())
}

/// The Sieve scripts delivery runs: each account's active one and the
/// global ones (account 0).
async fn directory_scripts(
    c: &impl GenericClient,
) -> Result<Vec<(AccountId, String, String, bool)>> {
    let rows = c
        .query(
            "SELECT account_id, name, source, active FROM sieve_scripts
             WHERE active OR account_id = 0",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect())
}

/// Creates the mailboxes every account starts with, subscribed, so that
/// clients showing only subscribed mailboxes show them.
async fn create_default_mailboxes(tx: &Transaction<'_>, account: AccountId) -> Result<()> {
    for (name, special_use) in DEFAULT_MAILBOXES {
        let validity = i64::from(super::mailboxes::fresh_uid_validity(tx, account).await?);
        let modseq = super::account_view::next_account_modseq(tx, account).await?;
        tx.execute(
            "INSERT INTO mailboxes (account_id, name, special_use, uid_validity, subscribed,
                                    highest_modseq, created_modseq, meta_modseq)
             VALUES ($1, $2, $3, $4, true, $5, $5, $5)",
            &[&account, name, special_use, &validity, &modseq],
        )
        .await?;
    }
    Ok(())
}

/// Deletes everything an account holds but its own row. Messages go
/// explicitly (not by cascade) so the reference-count triggers see each
/// one; the tombstones go with their mailboxes.
async fn delete_account_data(tx: &Transaction<'_>, account: AccountId) -> Result<()> {
    tx.execute(
        "DELETE FROM messages WHERE mailbox_id IN (SELECT id FROM mailboxes WHERE account_id = $1)",
        &[&account],
    )
    .await?;
    for table in [
        "mailboxes",
        "lost_subscriptions",
        "sieve_scripts",
        "sieve_memory",
        "uploads",
        "emails",
        "emails_gone",
        "mailboxes_gone",
        "web_sessions",
        "web_settings",
        "account_records",
        // Unlike SQLite's (whose account ids can come back), a removed
        // account's spam model is dropped too: nothing could use it.
        "spam_tokens",
        "spam_totals",
        "spam_trained",
        "spam_training",
    ] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE account_id = $1"),
            &[&account],
        )
        .await?;
    }
    Ok(())
}

/// Folds (address, target) rows, sorted by address, into one entry per
/// alias.
fn group_aliases(rows: impl IntoIterator<Item = (String, String)>) -> Vec<AliasEntry> {
    let mut out: Vec<AliasEntry> = Vec::new();
    for (address, target) in rows {
        match out.last_mut() {
            Some(last) if last.address == address => last.targets.push(target),
            _ => out.push(AliasEntry {
                address,
                targets: vec![target],
            }),
        }
    }
    out
}

impl PgStore {
    pub(super) async fn load_directory(&self) -> Result<Directory> {
        let mut c = self.conn().await?;
        // One snapshot, so the serial matches what is read with it.
        let tx = c
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let serial = serial(&*tx).await?;
        let domains = tx
            .query("SELECT name FROM domains", &[])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect::<Vec<String>>();
        let accounts = account_entries(&*tx).await?;
        let aliases = tx
            .query(
                "SELECT address, target FROM aliases ORDER BY address COLLATE \"C\", target COLLATE \"C\"",
                &[],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect::<Vec<(String, String)>>();
        let scripts = directory_scripts(&*tx).await?;
        tx.commit().await?;
        Ok(Directory::new(serial, domains, accounts, aliases).with_sieve(scripts))
    }

    pub(super) async fn directory_serial(&self) -> Result<i64> {
        let c = self.conn().await?;
        serial(&**c).await
    }

    pub(super) async fn add_domain(&self, name: &str) -> Result<()> {
        let name = valid_domain(name)?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let added = tx
            .execute(
                "INSERT INTO domains (name) VALUES ($1) ON CONFLICT (name) DO NOTHING",
                &[&name],
            )
            .await?;
        if added == 0 {
            return Err(StoreError::Exists(format!("domain {name}")));
        }
        bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn remove_domain(&self, name: &str) -> Result<()> {
        let name = valid_domain(name)?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        // Locked first, so no account can be added under it meanwhile.
        let id: i64 = tx
            .query_opt(
                "SELECT id FROM domains WHERE name = $1 FOR UPDATE",
                &[&name],
            )
            .await?
            .map(|r| r.get(0))
            .ok_or_else(|| StoreError::NotFound(format!("domain {name}")))?;
        let accounts: i64 = tx
            .query_one("SELECT count(*) FROM accounts WHERE domain_id = $1", &[&id])
            .await?
            .get(0);
        if accounts > 0 {
            return Err(StoreError::Invalid(format!(
                "domain {name} still has {accounts} account(s); remove them first"
            )));
        }
        tx.execute("DELETE FROM domains WHERE id = $1", &[&id])
            .await?;
        tx.execute("DELETE FROM dkim_keys WHERE domain = $1", &[&name])
            .await?;
        bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn list_domains(&self) -> Result<Vec<String>> {
        let c = self.conn().await?;
        let rows = c
            .query("SELECT name FROM domains ORDER BY name COLLATE \"C\"", &[])
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    pub(super) async fn set_password(&self, address: &str, password: &str) -> Result<()> {
        let address = valid_address(address)?;
        let hash = hash_off_thread(password).await?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let changed = tx
            .execute(
                "UPDATE accounts SET password_hash = $1 WHERE address = $2",
                &[&hash, &address],
            )
            .await?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!("account {address}")));
        }
        bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn list_accounts(&self) -> Result<Vec<String>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                "SELECT address FROM accounts ORDER BY address COLLATE \"C\"",
                &[],
            )
            .await?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    pub(super) async fn add_alias(&self, address: &str, targets: &[String]) -> Result<()> {
        let address = valid_address(address)?;
        let targets = targets
            .iter()
            .map(|t| valid_address(t))
            .collect::<Result<Vec<_>>>()?;
        if targets.is_empty() {
            return Err(StoreError::Invalid(
                "an alias needs at least one target".into(),
            ));
        }
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        lock_domain(&tx, domain_of(&address)).await?;
        for target in &targets {
            // A target the alias already has is no error (as in SQLite).
            tx.execute(
                "INSERT INTO aliases (address, target) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&address, target],
            )
            .await?;
        }
        bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn remove_alias(&self, address: &str, target: Option<&str>) -> Result<()> {
        let address = valid_address(address)?;
        let target = target.map(valid_address).transpose()?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let removed = match &target {
            Some(target) => {
                tx.execute(
                    "DELETE FROM aliases WHERE address = $1 AND target = $2",
                    &[&address, target],
                )
                .await?
            }
            None => {
                tx.execute("DELETE FROM aliases WHERE address = $1", &[&address])
                    .await?
            }
        };
        if removed == 0 {
            return Err(StoreError::NotFound(format!("alias {address}")));
        }
        bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn list_aliases(&self) -> Result<Vec<AliasEntry>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                "SELECT address, target FROM aliases
                 ORDER BY address COLLATE \"C\", target COLLATE \"C\"",
                &[],
            )
            .await?;
        Ok(group_aliases(rows.iter().map(|r| (r.get(0), r.get(1)))))
    }

    pub(super) async fn set_quota(&self, address: &str, limit_bytes: Option<u64>) -> Result<()> {
        let address = valid_address(address)?;
        let limit = limit_bytes
            .map(i64::try_from)
            .transpose()
            .map_err(|_| StoreError::Invalid("quota too large".into()))?;
        let c = self.conn().await?;
        // Quotas are not in the directory snapshot: no serial bump, as in
        // SQLite.
        let changed = c
            .execute(
                "UPDATE accounts SET quota_bytes = $2 WHERE address = $1",
                &[&address, &limit],
            )
            .await?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!("account {address}")));
        }
        Ok(())
    }

    pub(super) async fn add_account(&self, address: &str, password: &str) -> Result<AccountId> {
        let address = valid_address(address)?;
        let hash = hash_off_thread(password).await?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let domain_id = lock_domain(&tx, domain_of(&address)).await?;
        let id: AccountId = tx
            .query_opt(
                "INSERT INTO accounts (address, domain_id, password_hash, created)
                 VALUES ($1, $2, $3, $4) ON CONFLICT (address) DO NOTHING RETURNING id",
                &[&address, &domain_id, &hash, &now()],
            )
            .await?
            .map(|r| r.get(0))
            .ok_or_else(|| StoreError::Exists(format!("account {address}")))?;
        create_default_mailboxes(&tx, id).await?;
        bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(id)
    }

    pub(super) async fn remove_account(&self, address: &str) -> Result<()> {
        let address = valid_address(address)?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        // The row lock keeps concurrent writers to the account (settings,
        // new mailboxes) from adding to what is being deleted.
        let id: AccountId = tx
            .query_opt(
                "SELECT id FROM accounts WHERE address = $1 FOR UPDATE",
                &[&address],
            )
            .await?
            .map(|r| r.get(0))
            .ok_or_else(|| StoreError::NotFound(format!("account {address}")))?;
        let gone: Vec<MailboxId> = tx
            .query("SELECT id FROM mailboxes WHERE account_id = $1", &[&id])
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        delete_account_data(&tx, id).await?;
        tx.execute("DELETE FROM accounts WHERE id = $1", &[&id])
            .await?;
        bump_serial(&tx).await?;
        tx.commit().await?;
        self.notify(gone);
        Ok(())
    }
}
