//! Webmail sessions and settings on PostgreSQL: a session opened through
//! one node is good on every node sharing the database.

use super::PgStore;
use crate::error::{Result, StoreError};
use crate::model::{AccountId, WebSession, WebSettings};
use crate::web_settings::check_settings;

/// The stored sender list, one address per line, read back.
fn remote_ok_from_lines(lines: &str) -> Vec<String> {
    lines
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

impl PgStore {
    pub(super) async fn create_web_session(&self, session: &WebSession) -> Result<()> {
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        tx.execute(
            "DELETE FROM web_sessions WHERE expires <= $1",
            &[&session.created],
        )
        .await?;
        let added = tx
            .execute(
                "INSERT INTO web_sessions (id_hash, account_id, csrf, created, expires)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id_hash) DO NOTHING",
                &[
                    &session.id_hash,
                    &session.account,
                    &session.csrf,
                    &session.created,
                    &session.expires,
                ],
            )
            .await?;
        if added == 0 {
            return Err(StoreError::Exists("web session".into()));
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn web_session(&self, id_hash: &str, now: i64) -> Result<Option<WebSession>> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT s.id_hash, s.account_id, s.csrf, s.created, s.expires, a.address
                 FROM web_sessions s JOIN accounts a ON a.id = s.account_id
                 WHERE s.id_hash = $1 AND s.expires > $2",
                &[&id_hash, &now],
            )
            .await?;
        Ok(row.map(|r| WebSession {
            id_hash: r.get(0),
            account: r.get(1),
            csrf: r.get(2),
            created: r.get(3),
            expires: r.get(4),
            address: r.get(5),
        }))
    }

    pub(super) async fn delete_web_session(&self, id_hash: &str) -> Result<()> {
        let c = self.conn().await?;
        c.execute("DELETE FROM web_sessions WHERE id_hash = $1", &[&id_hash])
            .await?;
        Ok(())
    }

    pub(super) async fn web_settings(&self, account: AccountId) -> Result<WebSettings> {
        let c = self.conn().await?;
        let row = c
            .query_opt(
                "SELECT display_name, signature, page_size, remote_ok
                 FROM web_settings WHERE account_id = $1",
                &[&account],
            )
            .await?;
        let Some(r) = row else {
            return Ok(WebSettings::default());
        };
        Ok(WebSettings {
            display_name: r.get(0),
            signature: r.get(1),
            // Stored only after check_settings: between 1 and 500.
            page_size: r.get::<_, i32>(2).max(0) as u32,
            remote_ok: remote_ok_from_lines(r.get(3)),
        })
    }

    pub(super) async fn set_web_settings(
        &self,
        account: AccountId,
        settings: &WebSettings,
    ) -> Result<()> {
        check_settings(settings)?;
        let page_size = settings.page_size as i32; // at most web_settings::MAX_PAGE_SIZE
        let mut c = self.conn().await?;
        let tx = c.transaction().await?;
        // Locked so that a concurrent removal of the account cannot leave
        // these settings behind it.
        let exists = tx
            .query_opt(
                "SELECT 1 FROM accounts WHERE id = $1 FOR SHARE",
                &[&account],
            )
            .await?
            .is_some();
        if !exists {
            return Err(StoreError::NotFound(format!("account {account}")));
        }
        tx.execute(
            "INSERT INTO web_settings (account_id, display_name, signature, page_size, remote_ok)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (account_id) DO UPDATE SET display_name = excluded.display_name,
                 signature = excluded.signature, page_size = excluded.page_size,
                 remote_ok = excluded.remote_ok",
            &[
                &account,
                &settings.display_name,
                &settings.signature,
                &page_size,
                &settings.remote_ok.join("\n"),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }
}
