//! DKIM keys of the local domains on PostgreSQL: every node of a site signs
//! with the same keys. Each change bumps the directory serial, as in the
//! SQLite back end, so the nodes reload them.

use tokio_postgres::Transaction;

use super::directory::{bump_serial, lock_domain};
use super::PgStore;
use crate::error::{Result, StoreError};
use crate::model::DkimKey;
use crate::names::{valid_domain, valid_selector};

/// The algorithms the signer knows (the SQLite back end's list).
fn valid_algorithm(algorithm: &str) -> Result<()> {
    if matches!(algorithm, "rsa-sha256" | "ed25519-sha256") {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "unknown DKIM algorithm {algorithm:?}"
        )))
    }
}

fn unknown_key(domain: &str, selector: &str) -> StoreError {
    StoreError::NotFound(format!("DKIM selector {selector} of {domain}"))
}

/// The domain's keys of `algorithm` stop signing (they stay published).
async fn stop_others(tx: &Transaction<'_>, domain: &str, algorithm: &str) -> Result<()> {
    tx.execute(
        "UPDATE dkim_keys SET signing = false WHERE domain = $1 AND algorithm = $2",
        &[&domain, &algorithm],
    )
    .await?;
    Ok(())
}

impl PgStore {
    pub(super) async fn dkim_keys(&self) -> Result<Vec<DkimKey>> {
        let c = self.conn().await?;
        let rows = c
            .query(
                "SELECT domain, selector, algorithm, private_der, public_key, created, signing
                 FROM dkim_keys ORDER BY domain COLLATE \"C\", selector COLLATE \"C\"",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| DkimKey {
                domain: r.get(0),
                selector: r.get(1),
                algorithm: r.get(2),
                private_der: r.get(3),
                public_key: r.get(4),
                created: r.get(5),
                signing: r.get(6),
            })
            .collect())
    }

    pub(super) async fn add_dkim_key(&self, key: DkimKey) -> Result<()> {
        let mut key = key;
        key.domain = valid_domain(&key.domain)?;
        valid_selector(&key.selector)?;
        valid_algorithm(&key.algorithm)?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        lock_domain(&tx, &key.domain).await?;
        let taken = tx
            .query_opt(
                "SELECT 1 FROM dkim_keys WHERE domain = $1 AND selector = $2",
                &[&key.domain, &key.selector],
            )
            .await?;
        if taken.is_some() {
            return Err(StoreError::Exists(format!(
                "DKIM selector {} of {}",
                key.selector, key.domain
            )));
        }
        if key.signing {
            stop_others(&tx, &key.domain, &key.algorithm).await?;
        }
        tx.execute(
            "INSERT INTO dkim_keys
                 (domain, selector, algorithm, private_der, public_key, created, signing)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &key.domain,
                &key.selector,
                &key.algorithm,
                &key.private_der,
                &key.public_key,
                &key.created,
                &key.signing,
            ],
        )
        .await
        .map_err(|e| taken_by_another(e, &key))?;
        bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn set_dkim_signing(
        &self,
        domain: &str,
        selector: &str,
        signing: bool,
    ) -> Result<()> {
        let domain = valid_domain(domain)?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let algorithm: String = tx
            .query_opt(
                "SELECT algorithm FROM dkim_keys WHERE domain = $1 AND selector = $2 FOR UPDATE",
                &[&domain, &selector],
            )
            .await?
            .map(|r| r.get(0))
            .ok_or_else(|| unknown_key(&domain, selector))?;
        if signing {
            stop_others(&tx, &domain, &algorithm).await?;
        }
        tx.execute(
            "UPDATE dkim_keys SET signing = $3 WHERE domain = $1 AND selector = $2",
            &[&domain, &selector, &signing],
        )
        .await?;
        bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn remove_dkim_key(&self, domain: &str, selector: &str) -> Result<()> {
        let domain = valid_domain(domain)?;
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        let removed = tx
            .execute(
                "DELETE FROM dkim_keys WHERE domain = $1 AND selector = $2",
                &[&domain, &selector],
            )
            .await?;
        if removed == 0 {
            return Err(unknown_key(&domain, selector));
        }
        bump_serial(&tx).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// A key added by another node between the check and the insert is
/// `Exists`, as if the check had seen it.
fn taken_by_another(e: tokio_postgres::Error, key: &DkimKey) -> StoreError {
    if e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) {
        StoreError::Exists(format!("DKIM selector {} of {}", key.selector, key.domain))
    } else {
        e.into()
    }
}
