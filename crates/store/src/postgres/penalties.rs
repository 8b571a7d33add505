//! The penalty book in the database, so every node counts failed logins
//! in one place (`auth_penalties`, one row per client or account key).
//!
//! The rules are the memory book's (crate::penalties), each call one
//! statement: the rows it reads are locked for it, so attempts on several
//! nodes at once take their turns one after the other, as they do under
//! the memory book's mutex. Keys are locked in byte order (the column's
//! collation, and the order they are sent in), so two statements over the
//! same client and account wait on each other rather than deadlock. The
//! delays come from the caller's [`Schedule`], computed where the memory
//! book computes them.
//!
//! Times are the node's clock in milliseconds since the epoch: nodes
//! whose clocks disagree by a second shift each other's turns by as much,
//! which the schedule (seconds apart) absorbs. The sweeper forgets rows
//! that no longer count (sweep.rs).

use std::sync::Arc;

use async_trait::async_trait;

use super::PgStore;
use crate::error::Result;
use crate::penalties::{PenaltyBook, PenaltyKey, Schedule, Turn, MAX_WAIT_MS, WINDOW_MS};

/// Reserves the next turn of each key with recent failures ($1 keys,
/// $2 now, $3 window, $4 delays, $5 longest wait): the turn is the latest
/// of theirs, or now; each key's next is its delay past it, unless the
/// turn is too far away. Answers the turn and the keys that counted.
const TAKE_TURN: &str = "
WITH live AS (
    SELECT key, failures, next_slot FROM auth_penalties
    WHERE key = ANY($1::text[]) AND last_failure > $2::bigint - $3::bigint
    ORDER BY key FOR UPDATE
), turn AS (
    SELECT greatest($2::bigint, max(next_slot)) AS at FROM live
), taken AS (
    UPDATE auth_penalties p
    SET next_slot = turn.at + ($4::bigint[])[least(live.failures, cardinality($4::bigint[]))]
    FROM live, turn
    WHERE p.key = live.key AND turn.at - $2::bigint <= $5::bigint
    RETURNING p.key
)
SELECT turn.at, ARRAY(SELECT key FROM live) FROM turn";

/// Counts $5 failures against each key ($1 keys, $2 now, $3 delays, $4
/// window): a count older than the window starts again; the next turn is
/// at least the count's delay past now. The last failure never goes back
/// in time, whichever node's clock is behind.
const RECORD_FAILURE: &str = "
INSERT INTO auth_penalties AS p (key, failures, last_failure, next_slot)
SELECT k, $5::bigint, $2::bigint,
       $2::bigint + ($3::bigint[])[least($5::bigint, cardinality($3::bigint[]))]
FROM unnest($1::text[]) AS k
ON CONFLICT (key) DO UPDATE SET
    failures = CASE WHEN p.last_failure > $2::bigint - $4::bigint THEN p.failures + $5::bigint ELSE $5::bigint END,
    last_failure = greatest(p.last_failure, $2::bigint),
    next_slot = greatest(p.next_slot, $2::bigint + ($3::bigint[])[least(
        CASE WHEN p.last_failure > $2::bigint - $4::bigint THEN p.failures + $5::bigint ELSE $5::bigint END,
        cardinality($3::bigint[]))])
RETURNING key, failures";

/// Rows deleted per statement by [`PgStore::forget_old_penalties`].
const BATCH: i64 = 1000;

/// The book of a [`PgStore`].
struct PgPenalties {
    store: PgStore,
}

/// Keys as stored, sorted and without repeats: the order rows are locked.
fn texts(keys: &[PenaltyKey]) -> Vec<String> {
    let mut texts: Vec<String> = keys.iter().map(PenaltyKey::to_text).collect();
    texts.sort_unstable();
    texts.dedup();
    texts
}

/// A count as the book answers it.
fn count(failures: i64) -> u32 {
    u32::try_from(failures.max(0)).unwrap_or(u32::MAX)
}

#[async_trait]
impl PenaltyBook for PgPenalties {
    fn now(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }

    fn local(&self) -> bool {
        false
    }

    async fn take_turn(&self, keys: &[PenaltyKey], now: i64, schedule: &Schedule) -> Result<Turn> {
        let c = self.store.conn().await?;
        let row = c
            .query_one(
                TAKE_TURN,
                &[
                    &texts(keys),
                    &now,
                    &WINDOW_MS,
                    &schedule.delays(),
                    &MAX_WAIT_MS,
                ],
            )
            .await?;
        let at: i64 = row.get(0);
        if at - now > MAX_WAIT_MS {
            return Ok(Turn::Refused);
        }
        let live: Vec<String> = row.get(1);
        Ok(Turn::Granted {
            wait: at - now,
            penalised: keys
                .iter()
                .filter(|k| live.contains(&k.to_text()))
                .cloned()
                .collect(),
        })
    }

    async fn record_failure(
        &self,
        keys: &[PenaltyKey],
        now: i64,
        schedule: &Schedule,
    ) -> Result<Vec<u32>> {
        let c = self.store.conn().await?;
        let rows = c
            .query(
                RECORD_FAILURE,
                &[&texts(keys), &now, &schedule.delays(), &WINDOW_MS, &1i64],
            )
            .await?;
        let counted: Vec<(String, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        Ok(keys
            .iter()
            .map(|k| {
                let text = k.to_text();
                counted
                    .iter()
                    .find(|(key, _)| *key == text)
                    .map_or(0, |(_, n)| count(*n))
            })
            .collect())
    }

    async fn record_failures(
        &self,
        key: &PenaltyKey,
        n: u32,
        now: i64,
        schedule: &Schedule,
    ) -> Result<u32> {
        let c = self.store.conn().await?;
        let row = c
            .query_one(
                RECORD_FAILURE,
                &[
                    &vec![key.to_text()],
                    &now,
                    &schedule.delays(),
                    &WINDOW_MS,
                    &i64::from(n),
                ],
            )
            .await?;
        Ok(count(row.get(1)))
    }

    async fn clear(&self, key: &PenaltyKey) -> Result<()> {
        let c = self.store.conn().await?;
        c.execute(
            "DELETE FROM auth_penalties WHERE key = $1",
            &[&key.to_text()],
        )
        .await?;
        Ok(())
    }

    async fn recent_failures(&self, key: &PenaltyKey, now: i64) -> Result<u32> {
        let c = self.store.conn().await?;
        let row = c
            .query_opt(
                "SELECT failures FROM auth_penalties WHERE key = $1 AND last_failure > $2::bigint - $3::bigint",
                &[&key.to_text(), &now, &WINDOW_MS],
            )
            .await?;
        Ok(row.map_or(0, |r| count(r.get(0))))
    }
}

impl PgStore {
    /// The penalty book of every node on this database.
    pub fn penalties(&self) -> Arc<dyn PenaltyBook> {
        Arc::new(PgPenalties {
            store: self.clone(),
        })
    }

    /// Deletes the failed-login rows that no longer count at `now` (ms
    /// since the epoch) and hold no turn ahead, a batch at a time; how
    /// many went. Such a row changes nothing: a new failure starts its
    /// count again either way. The sweeper calls this now and then.
    pub async fn forget_old_penalties(&self, now: i64) -> Result<usize> {
        let c = self.conn().await?;
        let mut total = 0;
        loop {
            let gone = c
                .execute(
                    "DELETE FROM auth_penalties WHERE key IN (
                         SELECT key FROM auth_penalties
                         WHERE last_failure <= $1::bigint - $2::bigint AND next_slot <= $1
                         LIMIT $3 FOR UPDATE SKIP LOCKED)",
                    &[&now, &WINDOW_MS, &BATCH],
                )
                .await? as usize;
            total += gone;
            if gone < BATCH as usize {
                return Ok(total);
            }
        }
    }
}
