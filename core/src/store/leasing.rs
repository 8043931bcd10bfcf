//! Taking claims with a lease: the worker's due claims (pending past their backoff, or
//! stale when rescue is on), a re-drive's compare-and-set, and what ends a lease without
//! fulfilment (a failed attempt, a claim given back uncounted, attempts used up).

use super::claim_state::{known_types, redrivable_sql};
use super::query::sql;
use super::{Claims, Pool};
use crate::error::StoreError;
use crate::ids::EventId;

/// A claim this worker holds the lease on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedClaim {
    pub event_id: EventId,
    pub event_type: String,
    pub payload: String,
    /// Attempts so far, this one included.
    pub attempts: i64,
    /// When the claim was made (unix ms): its delivery received, or its reconcile run.
    pub received_at: i64,
}

/// A claim as a lease returns it.
#[derive(sqlx::FromRow)]
struct LeaseRow {
    event_id: String,
    event_type: String,
    payload: String,
    attempts: i64,
    received_at: i64,
}

impl LeaseRow {
    fn claim(self) -> Result<LeasedClaim, StoreError> {
        Ok(LeasedClaim {
            event_id: EventId::parse(self.event_id).map_err(|source| StoreError::BadStoredId {
                what: "event id",
                source,
            })?,
            event_type: self.event_type,
            payload: self.payload,
            attempts: self.attempts,
            received_at: self.received_at,
        })
    }
}

/// Leases up to `$6` due claims: stale ones with attempts left when rescue (`$4`) is on (their
/// worker died; they come first), then pending ones past their backoff, oldest first. `$lock`
/// is the row-locking clause, if any; `$pending` and `$stale` name the index each part reads.
///
/// Each part reads its own partial index in the order it wants (`…_pending`, `…_leased`) and
/// stops after `$6` rows, so a lease costs the same with a backlog of ten claims or of a
/// hundred thousand; one query with both conditions OR-ed would read and sort the backlog.
/// SQLite is told the index (`INDEXED BY`): without statistics its planner picks the status
/// index and sorts.
macro_rules! lease_sql {
    ($pending:literal, $stale:literal, $lock:literal) => {
        concat!(
            "WITH pending AS (",
            " SELECT event_id FROM processed_stripe_events",
            $pending,
            " WHERE status = 'processing' AND lease_expires_at IS NULL AND next_attempt_at <= $3",
            known_types!(),
            " ORDER BY next_attempt_at, received_at LIMIT $6 ",
            $lock,
            "), stale AS (",
            " SELECT event_id FROM processed_stripe_events",
            $stale,
            " WHERE $4 AND status = 'processing' AND lease_expires_at <= $3 AND attempts < $5",
            known_types!(),
            " ORDER BY lease_expires_at LIMIT $6 ",
            $lock,
            ") ",
            "UPDATE processed_stripe_events ",
            "SET lease_owner = $1, lease_expires_at = $2, attempts = attempts + 1 ",
            "WHERE event_id IN (SELECT event_id FROM stale UNION ALL SELECT event_id FROM pending LIMIT $6) ",
            "RETURNING event_id, event_type, payload, attempts, received_at"
        )
    };
}

const LEASE_SQLITE: &str = lease_sql!(
    " INDEXED BY processed_stripe_events_pending",
    " INDEXED BY processed_stripe_events_leased",
    ""
);

/// Concurrent workers on other instances skip the rows another one is taking.
const LEASE_POSTGRES: &str = lease_sql!("", "", "FOR UPDATE SKIP LOCKED");

/// A claim whose lease ran out on its last allowed attempt (its worker crashed or overran the
/// lease every time) is not rescued again: it is failed and waits for an operator.
const FAIL_EXHAUSTED_STALE: &str = concat!(
    "UPDATE processed_stripe_events \
     SET status = 'failed', lease_owner = NULL, lease_expires_at = NULL, \
         last_error = 'the lease expired on the last allowed attempt (worker crashed or ran out of time)' \
     WHERE status = 'processing' AND lease_expires_at <= $1 AND attempts >= $2",
    known_types!()
);

const RECORD_FAILURE: &str = "\
    UPDATE processed_stripe_events \
    SET lease_owner = NULL, lease_expires_at = NULL, last_error = $3, next_attempt_at = $4, \
        status = CASE WHEN attempts >= $5 THEN 'failed' ELSE 'processing' END \
    WHERE event_id = $1 AND lease_owner = $2 AND status = 'processing' \
    RETURNING status";

/// Gives a claim back after the database was unavailable for its whole lease: the attempt
/// taken with the lease is handed back.
const RELEASE_UNCOUNTED: &str = "\
    UPDATE processed_stripe_events \
    SET lease_owner = NULL, lease_expires_at = NULL, attempts = attempts - 1, \
        next_attempt_at = $3, last_error = $4 \
    WHERE event_id = $1 AND lease_owner = $2 AND status = 'processing' AND attempts > 0";

/// Re-drive's compare-and-set: the lease is taken only if nobody holds a live one and the
/// claim is not processed; two operators (or an operator and a worker) cannot both win.
const TAKE_FOR_REDRIVE: &str = concat!(
    "UPDATE processed_stripe_events \
     SET lease_owner = $2, lease_expires_at = $3, attempts = attempts + 1, \
         status = 'processing', next_attempt_at = $4 \
     WHERE event_id = $1 AND ",
    redrivable_sql!("$4"),
    known_types!(),
    " RETURNING event_id, event_type, payload, attempts, received_at"
);

impl Claims<'_> {
    /// Leases the next due claim to `owner` (see [`Claims::lease_due`]).
    pub async fn lease_next(
        self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        rescue_stale: bool,
        max_attempts: i64,
    ) -> Result<Option<LeasedClaim>, StoreError> {
        let mut claims = self
            .lease_due(owner, now, lease_ms, rescue_stale, max_attempts, 1)
            .await?;
        Ok(claims.pop())
    }

    /// Leases up to `limit` due claims to `owner` until `now + lease_ms`, oldest first. With
    /// `rescue_stale`, claims whose lease expired (their worker died) are due too, while they
    /// have attempts left (`max_attempts`).
    pub async fn lease_due(
        self,
        owner: &str,
        now: i64,
        lease_ms: i64,
        rescue_stale: bool,
        max_attempts: i64,
        limit: i64,
    ) -> Result<Vec<LeasedClaim>, StoreError> {
        // The locking (and SQLite's index hints) differ; the rest is the same statement.
        let statement = match self.pool {
            Pool::Sqlite(_) => LEASE_SQLITE,
            Pool::Postgres(_) => LEASE_POSTGRES,
        };
        let mut tx = self.pool.begin().await?;
        let mut rows: Vec<LeaseRow> = tx
            .on()
            .all(
                sql(statement)
                    .bind(owner)
                    .bind(now + lease_ms)
                    .bind(now)
                    .bind(rescue_stale)
                    .bind(max_attempts)
                    .bind(limit),
            )
            .await?;
        tx.commit().await?;
        // RETURNING follows no order: work the oldest first (a session before its refund).
        rows.sort_by_key(|row| row.received_at);
        rows.into_iter().map(LeaseRow::claim).collect()
    }

    /// Fails stale claims that have used up their attempts; returns how many.
    pub async fn fail_exhausted_stale(
        self,
        now: i64,
        max_attempts: i64,
    ) -> Result<u64, StoreError> {
        let failed = self
            .pool
            .on()
            .execute(sql(FAIL_EXHAUSTED_STALE).bind(now).bind(max_attempts))
            .await?;
        Ok(failed)
    }

    /// Takes the lease on `event_id` for a re-drive, if it is pending, stale or failed.
    pub async fn take_for_redrive(
        self,
        event_id: &EventId,
        owner: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<Option<LeasedClaim>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let row: Option<LeaseRow> = tx
            .on()
            .optional(
                sql(TAKE_FOR_REDRIVE)
                    .bind(event_id.as_str())
                    .bind(owner)
                    .bind(now + lease_ms)
                    .bind(now),
            )
            .await?;
        tx.commit().await?;
        row.map(LeaseRow::claim).transpose()
    }

    /// Gives a leased claim back without counting its attempt (the database, not the claim,
    /// was the problem).
    pub async fn release_uncounted(
        self,
        event_id: &EventId,
        owner: &str,
        next_attempt_at: i64,
        why: &str,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await?;
        tx.on()
            .execute(
                sql(RELEASE_UNCOUNTED)
                    .bind(event_id.as_str())
                    .bind(owner)
                    .bind(next_attempt_at)
                    .bind(why),
            )
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Records a failed attempt: the lease is released and the claim retried at
    /// `next_attempt_at`, or marked `failed` once it has had `max_attempts`. Returns whether
    /// it is now failed; `None` if `owner` no longer held the lease.
    pub async fn record_failure(
        self,
        event_id: &EventId,
        owner: &str,
        error: &str,
        next_attempt_at: i64,
        max_attempts: i64,
    ) -> Result<Option<bool>, StoreError> {
        let mut tx = self.pool.begin().await?;
        let status: Option<String> = tx
            .on()
            .optional_value(
                sql(RECORD_FAILURE)
                    .bind(event_id.as_str())
                    .bind(owner)
                    .bind(error)
                    .bind(next_attempt_at)
                    .bind(max_attempts),
            )
            .await?;
        tx.commit().await?;
        Ok(status.map(|s| s == "failed"))
    }
}
