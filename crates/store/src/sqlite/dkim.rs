//! DKIM keys of the local domains: kept in the store, so a backup holds
//! them and every node of a site signs with the same keys.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{Result, StoreError};
use crate::model::DkimKey;
use crate::names::valid_selector;

pub(super) fn list(c: &Connection) -> Result<Vec<DkimKey>> {
    let keys = c
        .prepare_cached(
            "SELECT domain, selector, algorithm, private_der, public_key, created, signing
             FROM dkim_keys ORDER BY domain, selector",
        )?
        .query_map([], |r| {
            Ok(DkimKey {
                domain: r.get(0)?,
                selector: r.get(1)?,
                algorithm: r.get(2)?,
                private_der: r.get(3)?,
                public_key: r.get(4)?,
                created: r.get(5)?,
                signing: r.get::<_, i64>(6)? != 0,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(keys)
}

pub(super) fn add(c: &Connection, key: &DkimKey) -> Result<()> {
    valid_selector(&key.selector)?;
    if !matches!(key.algorithm.as_str(), "rsa-sha256" | "ed25519-sha256") {
        return Err(StoreError::Invalid(format!(
            "unknown DKIM algorithm {:?}",
            key.algorithm
        )));
    }
    let local: Option<i64> = c
        .query_row(
            "SELECT id FROM domains WHERE name = ?1",
            [&key.domain],
            |r| r.get(0),
        )
        .optional()?;
    if local.is_none() {
        return Err(StoreError::NotFound(format!(
            "domain {} (add it first)",
            key.domain
        )));
    }
    let taken: Option<i64> = c
        .query_row(
            "SELECT 1 FROM dkim_keys WHERE domain = ?1 AND selector = ?2",
            params![key.domain, key.selector],
            |r| r.get(0),
        )
        .optional()?;
    if taken.is_some() {
        return Err(StoreError::Exists(format!(
            "DKIM selector {} of {}",
            key.selector, key.domain
        )));
    }
    if key.signing {
        stop_others(c, &key.domain, &key.algorithm)?;
    }
    c.execute(
        "INSERT INTO dkim_keys (domain, selector, algorithm, private_der, public_key, created, signing)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            key.domain,
            key.selector,
            key.algorithm,
            key.private_der,
            key.public_key,
            key.created,
            key.signing as i64
        ],
    )?;
    Ok(())
}

fn stop_others(c: &Connection, domain: &str, algorithm: &str) -> Result<()> {
    c.execute(
        "UPDATE dkim_keys SET signing = 0 WHERE domain = ?1 AND algorithm = ?2",
        params![domain, algorithm],
    )?;
    Ok(())
}

pub(super) fn set_signing(
    c: &Connection,
    domain: &str,
    selector: &str,
    signing: bool,
) -> Result<()> {
    let algorithm: Option<String> = c
        .query_row(
            "SELECT algorithm FROM dkim_keys WHERE domain = ?1 AND selector = ?2",
            params![domain, selector],
            |r| r.get(0),
        )
        .optional()?;
    let Some(algorithm) = algorithm else {
        return Err(StoreError::NotFound(format!(
            "DKIM selector {selector} of {domain}"
        )));
    };
    if signing {
        stop_others(c, domain, &algorithm)?;
    }
    c.execute(
        "UPDATE dkim_keys SET signing = ?3 WHERE domain = ?1 AND selector = ?2",
        params![domain, selector, signing as i64],
    )?;
    Ok(())
}

pub(super) fn remove(c: &Connection, domain: &str, selector: &str) -> Result<()> {
    let n = c.execute(
        "DELETE FROM dkim_keys WHERE domain = ?1 AND selector = ?2",
        params![domain, selector],
    )?;
    if n == 0 {
        return Err(StoreError::NotFound(format!(
            "DKIM selector {selector} of {domain}"
        )));
    }
    Ok(())
}
