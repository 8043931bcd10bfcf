//! The reconciler's state: its cursor and lease (one row), and the record of its runs.

use serde::Serialize;

use super::{BeginWrite, Claims, ReconcileRuns};
use crate::error::StoreError;
use crate::reconcile::ReconcileReport;
use crate::webhook::Envelope;

/// One recorded run, as the overview and `claimcheck reconcile` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct ReconcileRunView {
    pub started_at: i64,
    pub finished_at: i64,
    pub since: i64,
    pub actor: String,
    pub dry_run: bool,
    pub listed: i64,
    pub already_claimed: i64,
    pub claimed: i64,
    pub error: Option<String>,
}

/// The lease is free (or expired): take it. Yields the cursor.
const TAKE_LEASE: &str = "\
    UPDATE reconcile_state SET lease_owner = $1, lease_until = $2 + $3 \
    WHERE id = 1 AND (lease_until IS NULL OR lease_until <= $2) \
    RETURNING cursor";

/// The cursor only moves forward.
const RELEASE_LEASE: &str = "\
    UPDATE reconcile_state SET lease_owner = NULL, lease_until = NULL, \
        cursor = CASE WHEN $2 < 0 THEN cursor \
                      WHEN cursor IS NULL OR cursor < $2 THEN $2 ELSE cursor END \
    WHERE id = 1 AND lease_owner = $1";

const RECORD_RUN: &str = "\
    INSERT INTO reconcile_runs (started_at, finished_at, since, actor, dry_run, listed, \
                                already_claimed, claimed, error) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

const KNOWS: &str = "\
    SELECT COUNT(*) FROM processed_stripe_events \
    WHERE event_id = $1 OR (object_id = $3 AND event_type = $4 AND action_key = $2)";

const RUN_COLUMNS: &str = "started_at, finished_at, since, actor, dry_run, listed, \
    already_claimed, claimed, error";

impl ReconcileRuns<'_> {
    /// Takes the reconciler's lease until `now + lease_ms`; `None` while another run holds
    /// it, else the cursor (unix seconds; `None` before the first run).
    pub async fn take_lease(
        self,
        owner: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<Option<Option<i64>>, StoreError> {
        let taken = on_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let taken: Option<Option<i64>> = sqlx::query_scalar(TAKE_LEASE)
                .bind(owner)
                .bind(now)
                .bind(lease_ms)
                .fetch_optional(&mut *tx)
                .await?;
            tx.commit().await?;
            taken
        });
        Ok(taken)
    }

    /// Gives the lease back; with `new_cursor` (a run that succeeded) the cursor moves there
    /// (never backwards).
    pub async fn release_lease(
        self,
        owner: &str,
        new_cursor: Option<i64>,
    ) -> Result<(), StoreError> {
        on_pool!(self, pool => {
            sqlx::query(RELEASE_LEASE)
                .bind(owner)
                .bind(new_cursor.unwrap_or(-1))
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    pub async fn record(
        self,
        started_at: i64,
        finished_at: i64,
        actor: &str,
        report: &ReconcileReport,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        on_pool!(self, pool => {
            sqlx::query(RECORD_RUN)
                .bind(started_at)
                .bind(finished_at)
                .bind(report.since)
                .bind(actor)
                .bind(report.dry_run)
                .bind(count(report.listed))
                .bind(count(report.already_claimed))
                .bind(count(report.claimed))
                .bind(error)
                .execute(pool)
                .await
                .map(|_| ())
        })?;
        Ok(())
    }

    /// The latest runs, newest first.
    pub async fn recent(self, limit: i64) -> Result<Vec<ReconcileRunView>, StoreError> {
        let sql = format!(
            "SELECT {RUN_COLUMNS} FROM reconcile_runs ORDER BY started_at DESC, id DESC LIMIT $1"
        );
        let runs = on_pool!(self, pool => {
            sqlx::query_as(&sql).bind(limit).fetch_all(pool).await
        })?;
        Ok(runs)
    }
}

impl Claims<'_> {
    /// Whether an event, or a twin of its action, is claimed already.
    pub async fn knows_event(self, envelope: &Envelope) -> Result<bool, StoreError> {
        let (Some(object_id), Some(action_key)) = (&envelope.object_id, &envelope.action_key)
        else {
            return Ok(false);
        };
        let n: i64 = on_pool!(self, pool => {
            sqlx::query_scalar(KNOWS)
                .bind(envelope.id.as_str())
                .bind(action_key.step())
                .bind(object_id.as_str())
                .bind(envelope.event_type.as_str())
                .fetch_one(pool).await
        })?;
        Ok(n > 0)
    }
}
