//! POP3 maildrop locks across nodes: PostgreSQL advisory locks, held by
//! one connection of this node's own. A node that dies loses its
//! connection, and PostgreSQL releases its locks with it: no lease to
//! expire, no lock left behind by a crash.
//!
//! If that connection drops while the node lives, the locks are gone
//! server-side; the next lock request connects again and takes this
//! node's held locks again first. One taken meanwhile by another node is
//! logged: for that moment two sessions may share a maildrop, which
//! RFC 1939 only asks servers to avoid.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_postgres::Client;

use super::tls::Connector;
use crate::error::{Result, StoreError};
use crate::model::AccountId;
use crate::MaildropLock;

/// The first key of our advisory locks ("POP3"): the second is the account.
const NAMESPACE: i32 = 0x504f_5033;

pub(super) struct MaildropLocks {
    config: tokio_postgres::Config,
    connector: Connector,
    client: tokio::sync::Mutex<Option<Client>>,
    /// Locks this node holds, by key, with how many times: PostgreSQL's
    /// advisory locks stack within one connection, so a new session's lock
    /// is granted while the last one's release is still on its way, and
    /// each release undoes one.
    held: Mutex<HashMap<i32, usize>>,
}

/// Releases one account's lock when dropped.
struct Held {
    locks: Arc<MaildropLocks>,
    key: i32,
}

impl MaildropLocks {
    pub(super) fn new(config: tokio_postgres::Config, connector: Connector) -> Arc<MaildropLocks> {
        Arc::new(MaildropLocks {
            config,
            connector,
            client: tokio::sync::Mutex::new(None),
            held: Mutex::new(HashMap::new()),
        })
    }

    /// Takes `account`'s lock, or `None` when another node holds it.
    pub(super) async fn take(self: &Arc<Self>, account: AccountId) -> Result<Option<MaildropLock>> {
        let key = i32::try_from(account)
            .map_err(|_| StoreError::Invalid(format!("account id {account} out of range")))?;
        let mut client = self.client.lock().await;
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            *client = Some(self.connect().await?);
        }
        let c = client.as_ref().expect("connected above");
        let row = c
            .query_one("SELECT pg_try_advisory_lock($1, $2)", &[&NAMESPACE, &key])
            .await?;
        if !row.get::<_, bool>(0) {
            return Ok(None);
        }
        *self
            .held
            .lock()
            .expect("held locks")
            .entry(key)
            .or_default() += 1;
        Ok(Some(MaildropLock::holding(Held {
            locks: Arc::clone(self),
            key,
        })))
    }

    /// A new connection for the locks, holding again what this node held.
    async fn connect(&self) -> Result<Client> {
        let (client, driver) = self
            .connector
            .connect(&self.config, None)
            .await
            .map_err(|e| StoreError::Unavailable(super::describe(&e)))?;
        tokio::spawn(driver);
        let held: Vec<i32> = self
            .held
            .lock()
            .expect("held locks")
            .iter()
            .flat_map(|(&key, &n)| std::iter::repeat_n(key, n))
            .collect();
        for key in held {
            let row = client
                .query_one("SELECT pg_try_advisory_lock($1, $2)", &[&NAMESPACE, &key])
                .await?;
            if !row.get::<_, bool>(0) {
                tracing::warn!(
                    account = key,
                    "a POP3 maildrop lock was lost while the database connection was down"
                );
            }
        }
        Ok(client)
    }

    /// Counts one hold of `key` off; whether it was held.
    fn forget(&self, key: i32) -> bool {
        let mut held = self.held.lock().expect("held locks");
        match held.get_mut(&key) {
            Some(n) if *n > 1 => *n -= 1,
            Some(_) => {
                held.remove(&key);
            }
            None => return false,
        }
        true
    }

    async fn release(&self, key: i32) {
        if !self.forget(key) {
            return;
        }
        if let Some(c) = self.client.lock().await.as_ref() {
            if let Err(e) = c
                .execute("SELECT pg_advisory_unlock($1, $2)", &[&NAMESPACE, &key])
                .await
            {
                // A closed connection released it already.
                tracing::debug!(error = %e, "maildrop lock release");
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let (locks, key) = (Arc::clone(&self.locks), self.key);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { locks.release(key).await });
            }
            // No runtime: the process is ending, and its connection with it.
            Err(_) => {
                locks.forget(key);
            }
        }
    }
}
