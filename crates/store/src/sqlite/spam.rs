//! The spam classifier's models in the store: token counts per account
//! (account 0 is the global model), message totals per class, and the
//! training that moves into and out of Junk ask for. The store does not
//! tokenise: it counts what it is given.

use std::collections::HashMap;
use std::rc::Rc;

use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};

use crate::error::Result;
use crate::model::{AccountId, BlobId, MailboxId, SpamModel, SpamTraining, Uid};
use crate::owner::spam_owner_id;
use crate::spam_training::class_for_move;

fn special_use(c: &Connection, mailbox: MailboxId) -> Result<Option<String>> {
    Ok(c.query_row(
        "SELECT special_use FROM mailboxes WHERE id = ?1",
        [mailbox],
        |r| r.get(0),
    )
    .optional()?
    .flatten())
}

/// Queues training for messages copied or moved from `from` to `to`, as
/// the store's rule says (spam_training.rs).
pub(super) fn note_moves(
    c: &Connection,
    from: MailboxId,
    to: MailboxId,
    map: &[(Uid, Uid)],
) -> Result<()> {
    if map.is_empty() {
        return Ok(());
    }
    let from_use = special_use(c, from)?;
    let to_use = special_use(c, to)?;
    let Some(spam) = class_for_move(from_use.as_deref(), to_use.as_deref()) else {
        return Ok(());
    };
    let mut insert = c.prepare_cached(
        "INSERT INTO spam_training (account_id, blob_id, spam)
         SELECT mb.account_id, m.blob_id, ?3 FROM messages m
         JOIN mailboxes mb ON mb.id = m.mailbox_id
         WHERE m.mailbox_id = ?1 AND m.uid = ?2",
    )?;
    for (_, new_uid) in map {
        insert.execute(params![to, new_uid, spam])?;
    }
    Ok(())
}

pub(super) fn training_batch(c: &Connection, limit: usize) -> Result<Vec<SpamTraining>> {
    let items = c
        .prepare_cached(
            "SELECT id, account_id, blob_id, spam FROM spam_training ORDER BY id LIMIT ?1",
        )?
        .query_map([limit as i64], |r| {
            Ok(SpamTraining {
                id: r.get(0)?,
                account: r.get(1)?,
                blob: r.get(2)?,
                spam: r.get::<_, i64>(3)? != 0,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(items)
}

/// Trains a model with one message's tokens as `spam` or ham. With a
/// blob, what the message was trained as before is undone first, and a
/// message already trained as this class counts nothing (it moved back
/// and forth). `done` removes a queued training item.
pub(super) fn train(
    c: &Connection,
    account: Option<AccountId>,
    blob: Option<BlobId>,
    tokens: &[String],
    spam: bool,
    done: Option<i64>,
    now: i64,
) -> Result<bool> {
    if let Some(id) = done {
        c.execute("DELETE FROM spam_training WHERE id = ?1", [id])?;
    }
    let owner = spam_owner_id(account);
    let before: Option<bool> = match blob {
        Some(blob) => c
            .query_row(
                "SELECT spam FROM spam_trained WHERE account_id = ?1 AND blob_id = ?2",
                params![owner, blob],
                |r| r.get::<_, i64>(0).map(|v| v != 0),
            )
            .optional()?,
        None => None,
    };
    if before == Some(spam) {
        return Ok(false);
    }
    c.execute(
        "INSERT OR IGNORE INTO spam_totals (account_id) VALUES (?1)",
        [owner],
    )?;
    if let Some(was_spam) = before {
        count(c, owner, tokens, was_spam, -1, now)?;
    }
    count(c, owner, tokens, spam, 1, now)?;
    if let Some(blob) = blob {
        c.execute(
            "INSERT INTO spam_trained (account_id, blob_id, spam) VALUES (?1, ?2, ?3)
             ON CONFLICT (account_id, blob_id) DO UPDATE SET spam = ?3",
            params![owner, blob, spam],
        )?;
    }
    Ok(true)
}

/// Adds `delta` (±1, never below 0) to a class's counts of each token and
/// to its message total.
fn count(
    c: &Connection,
    owner: AccountId,
    tokens: &[String],
    spam: bool,
    delta: i64,
    now: i64,
) -> Result<()> {
    let column = if spam { "spam" } else { "ham" };
    c.execute(
        &format!("UPDATE spam_totals SET {column} = max(0, {column} + ?2) WHERE account_id = ?1"),
        params![owner, delta],
    )?;
    let mut upsert = c.prepare_cached(&format!(
        "INSERT INTO spam_tokens (account_id, token, {column}, seen) VALUES (?1, ?2, max(0, ?3), ?4)
         ON CONFLICT (account_id, token) DO UPDATE SET {column} = max(0, {column} + ?3), seen = ?4"
    ))?;
    for token in tokens {
        upsert.execute(params![owner, token, delta, now])?;
    }
    if delta < 0 {
        c.execute(
            "DELETE FROM spam_tokens WHERE account_id = ?1 AND spam = 0 AND ham = 0",
            [owner],
        )?;
    }
    Ok(())
}

pub(super) fn model(
    c: &Connection,
    account: Option<AccountId>,
    tokens: &[String],
) -> Result<SpamModel> {
    let owner = spam_owner_id(account);
    let (spam_messages, ham_messages) = c
        .query_row(
            "SELECT spam, ham FROM spam_totals WHERE account_id = ?1",
            [owner],
            |r| Ok((r.get::<_, i64>(0)? as u32, r.get::<_, i64>(1)? as u32)),
        )
        .optional()?
        .unwrap_or((0, 0));
    let mut counts = HashMap::new();
    if (spam_messages > 0 || ham_messages > 0) && !tokens.is_empty() {
        // One statement for all of a message's tokens (thousands of point
        // queries would cost more than the delivery itself).
        let list = Rc::new(
            tokens
                .iter()
                .map(|t| Value::Text(t.clone()))
                .collect::<Vec<_>>(),
        );
        let mut get = c.prepare_cached(
            "SELECT token, spam, ham FROM spam_tokens
             WHERE account_id = ?1 AND token IN rarray(?2)",
        )?;
        let rows = get.query_map(params![owner, list], |r| {
            Ok((
                r.get::<_, String>(0)?,
                (r.get::<_, i64>(1)? as u32, r.get::<_, i64>(2)? as u32),
            ))
        })?;
        for row in rows {
            let (token, found) = row?;
            counts.insert(token, found);
        }
    }
    Ok(SpamModel {
        spam_messages,
        ham_messages,
        counts,
    })
}

pub(super) fn token_rows(
    c: &Connection,
    account: Option<AccountId>,
) -> Result<Vec<(String, u32, u32, i64)>> {
    let rows = c
        .prepare("SELECT token, spam, ham, seen FROM spam_tokens WHERE account_id = ?1")?
        .query_map([spam_owner_id(account)], |r| {
            Ok((
                r.get(0)?,
                r.get::<_, i64>(1)? as u32,
                r.get::<_, i64>(2)? as u32,
                r.get(3)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

pub(super) fn token_count(c: &Connection, account: Option<AccountId>) -> Result<u64> {
    Ok(c.query_row(
        "SELECT count(*) FROM spam_tokens WHERE account_id = ?1",
        [spam_owner_id(account)],
        |r| r.get::<_, i64>(0),
    )? as u64)
}

pub(super) fn forget_tokens(
    c: &Connection,
    account: Option<AccountId>,
    tokens: &[String],
) -> Result<()> {
    let mut delete =
        c.prepare_cached("DELETE FROM spam_tokens WHERE account_id = ?1 AND token = ?2")?;
    for token in tokens {
        delete.execute(params![spam_owner_id(account), token])?;
    }
    Ok(())
}
