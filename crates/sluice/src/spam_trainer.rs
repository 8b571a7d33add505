//! Training the spam models from what users do. Moving a message into
//! Junk (IMAP MOVE or COPY, the webmail's "spam" button) queues it as
//! spam, moving it out of Junk as ham; the store records the wish in the
//! same transaction as the move. This task works the queue off: reads the
//! head of each message, tokenises it, and trains the user's model and the
//! global one (which users who have not trained enough are scored with).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use store::{AccountId, BlobId, Store};

/// How often the queue is looked at: training is not urgent, and a user
/// moving a message sees nothing of it.
const INTERVAL: Duration = Duration::from_secs(2);

/// Queue items worked per round.
const BATCH: usize = 200;

/// Works the training queue until the process ends.
pub async fn run(store: Arc<dyn Store>, max_tokens: usize) {
    let mut tick = tokio::time::interval(INTERVAL);
    loop {
        tick.tick().await;
        loop {
            match drain(&store, max_tokens).await {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e) => {
                    tracing::error!(error = %e, "spam training failed; trying again later");
                    break;
                }
            }
        }
    }
}

/// One round: trains up to [`BATCH`] queued messages; returns how many.
pub async fn drain(store: &Arc<dyn Store>, max_tokens: usize) -> store::Result<usize> {
    let batch = store.spam_training_batch(BATCH).await?;
    let mut touched: HashSet<Option<AccountId>> = HashSet::new();
    for item in &batch {
        let Some(head) = read_head(store.as_ref(), item.blob).await? else {
            // Expunged before its turn: nothing to learn from.
            store.drop_spam_training(item.id).await?;
            continue;
        };
        let words = tokens_of(head).await;
        let changed = store
            .train_spam(
                Some(item.account),
                Some(item.blob),
                words.clone(),
                item.spam,
                Some(item.id),
            )
            .await?;
        if changed {
            store
                .train_spam(None, Some(item.blob), words, item.spam, None)
                .await?;
            touched.insert(Some(item.account));
            touched.insert(None);
            tracing::info!(
                account = item.account,
                blob = item.blob,
                spam = item.spam,
                "spam model trained"
            );
        }
    }
    for owner in touched {
        prune(store.as_ref(), owner, max_tokens).await?;
    }
    Ok(batch.len())
}

/// The start of a stored message: as much as the tokeniser reads.
pub async fn read_head(store: &dyn Store, blob: BlobId) -> store::Result<Option<Vec<u8>>> {
    let limit = 2 * spam::MAX_TEXT;
    let mut head = Vec::new();
    let mut seq = 0;
    while head.len() < limit {
        match store.read_chunk(blob, seq).await? {
            Some(chunk) if !chunk.is_empty() => head.extend_from_slice(&chunk),
            Some(_) | None if seq == 0 => return Ok(None),
            _ => break,
        }
        seq += 1;
    }
    head.truncate(limit);
    Ok(Some(head))
}

/// A message's tokens, worked out away from the runtime's threads.
pub async fn tokens_of(message: Vec<u8>) -> Vec<String> {
    tokio::task::spawn_blocking(move || {
        spam::tokenize(&message)
            .iter()
            .map(str::to_string)
            .collect()
    })
    .await
    .unwrap_or_default()
}

/// Keeps a model within `max_tokens` (the policy is `spam::prune`'s).
pub async fn prune(
    store: &dyn Store,
    owner: Option<AccountId>,
    max_tokens: usize,
) -> store::Result<()> {
    if store.spam_token_count(owner).await? as usize <= max_tokens {
        return Ok(());
    }
    let rows: Vec<(String, spam::Counts, i64)> = store
        .spam_token_rows(owner)
        .await?
        .into_iter()
        .map(|(token, spam, ham, seen)| (token, spam::Counts { spam, ham }, seen))
        .collect();
    let gone = spam::prune(&rows, max_tokens);
    tracing::info!(account = ?owner, tokens = rows.len(), pruned = gone.len(), "spam model pruned");
    store.forget_spam_tokens(owner, gone).await
}
