//! (PostgreSQL) JMAP uploads (RFC 8620 §6.1): which blobs an account may
//! read. The upload rows themselves are written by the delivery that
//! completes their blob (message.rs).

use super::PgStore;
use crate::error::Result;
use crate::model::{AccountBlob, AccountId, BlobId};

impl PgStore {
    pub(super) async fn account_blob(
        &self,
        account: AccountId,
        blob: BlobId,
    ) -> Result<Option<AccountBlob>> {
        let c = self.conn().await?;
        let upload = c
            .query_opt(
                "SELECT b.size, u.content_type FROM uploads u JOIN blobs b ON b.id = u.blob_id
                 WHERE u.blob_id = $1 AND u.account_id = $2 AND u.expires > $3 AND b.complete",
                &[&blob, &account, &crate::clock::now()],
            )
            .await?;
        if let Some(r) = upload {
            return Ok(Some(AccountBlob {
                size: r.get::<_, i64>(0) as u64,
                content_type: Some(r.get(1)),
            }));
        }
        let message = c
            .query_opt(
                "SELECT m.size FROM messages m JOIN mailboxes x ON x.id = m.mailbox_id
                 WHERE m.blob_id = $1 AND x.account_id = $2 LIMIT 1",
                &[&blob, &account],
            )
            .await?;
        Ok(message.map(|r| AccountBlob {
            size: r.get::<_, i64>(0) as u64,
            content_type: None,
        }))
    }
}
