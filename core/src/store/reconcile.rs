//! The reconciler's state: its cursor and lease (one row), and the record of its runs.

use serde::Serialize;

use super::query::sql;
use super::{Claims, ReconcileRuns};
use crate::error::StoreError;
use crate::report::ReconcileReport;
use crate::webhook::Envelope;

/// One recorded run, as the overview and `claimcheck reconcile` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct ReconcileRunView {
    /// The run's number, as the dashboard names it ("run #12").
    pub id: i64,
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
                                already_claimed, claimed, error, run_key) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

/// A claim the run made names the run (its claim was written through the shared claim path,
/// which knows no runs).
const MARK_RECOVERED: &str = "\
    UPDATE processed_stripe_events SET source_run = $2 \
    WHERE event_id = $1 AND source = 'reconcile' AND source_run IS NULL";

const KNOWS: &str = "\
    SELECT COUNT(*) FROM processed_stripe_events \
    WHERE event_id = $1 OR (object_id = $3 AND event_type = $4 AND action_key = $2)";

/// A run's columns as [`ReconcileRunView`] reads them.
pub(super) const RUN_COLUMNS: &str = "id, started_at, finished_at, since, actor, dry_run, listed, \
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
        let taken = {
            let mut tx = self.pool.begin().await?;
            let taken: Option<Option<i64>> = tx
                .on()
                .optional_value(sql(TAKE_LEASE).bind(owner).bind(now).bind(lease_ms))
                .await?;
            tx.commit().await?;
            taken
        };
        Ok(taken)
    }

    /// Gives the lease back; with `new_cursor` (a run that succeeded) the cursor moves there
    /// (never backwards).
    pub async fn release_lease(
        self,
        owner: &str,
        new_cursor: Option<i64>,
    ) -> Result<(), StoreError> {
        self.pool
            .on()
            .execute(
                sql(RELEASE_LEASE)
                    .bind(owner)
                    .bind(new_cursor.unwrap_or(-1)),
            )
            .await
            .map(|_| ())?;
        Ok(())
    }

    /// Records a run that worked under `run_key` (its lease token, which its claims name).
    pub async fn record(
        self,
        run_key: &str,
        started_at: i64,
        finished_at: i64,
        actor: &str,
        report: &ReconcileReport,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.pool
            .on()
            .execute(
                sql(RECORD_RUN)
                    .bind(started_at)
                    .bind(finished_at)
                    .bind(report.since)
                    .bind(actor)
                    .bind(report.dry_run)
                    .bind(count(report.listed))
                    .bind(count(report.already_claimed))
                    .bind(count(report.claimed))
                    .bind(error)
                    .bind(run_key),
            )
            .await
            .map(|_| ())?;
        Ok(())
    }

    /// The latest runs, newest first; dry runs (which change nothing) only with
    /// `dry_runs`.
    pub async fn recent(
        self,
        limit: i64,
        dry_runs: bool,
    ) -> Result<Vec<ReconcileRunView>, StoreError> {
        let statement = format!(
            "SELECT {RUN_COLUMNS} FROM reconcile_runs WHERE $2 OR NOT dry_run \
             ORDER BY started_at DESC, id DESC LIMIT $1"
        );
        let runs = self
            .pool
            .on()
            .all(sql(&statement).bind(limit).bind(dry_runs))
            .await?;
        Ok(runs)
    }
}

impl ReconcileRuns<'_> {
    /// Names the run `run_key` on the claim of `event_id` it recovered.
    pub async fn mark_recovered(self, event_id: &str, run_key: &str) -> Result<(), StoreError> {
        self.pool
            .on()
            .execute(sql(MARK_RECOVERED).bind(event_id).bind(run_key))
            .await?;
        Ok(())
    }

    /// The run recorded under `run_key`.
    pub async fn by_key(self, run_key: &str) -> Result<Option<ReconcileRunView>, StoreError> {
        let statement = format!("SELECT {RUN_COLUMNS} FROM reconcile_runs WHERE run_key = $1");
        Ok(self
            .pool
            .on()
            .optional(sql(&statement).bind(run_key))
            .await?)
    }

    /// The key of run number `id`, if it has one.
    pub async fn key_of(self, id: i64) -> Result<Option<String>, StoreError> {
        const SQL: &str = "SELECT run_key FROM reconcile_runs WHERE id = $1";
        let key: Option<Option<String>> = self.pool.on().optional_value(sql(SQL).bind(id)).await?;
        Ok(key.flatten())
    }
}

impl Claims<'_> {
    /// Whether an event, or a twin of its action, is claimed already.
    pub async fn knows_event(self, envelope: &Envelope) -> Result<bool, StoreError> {
        let (Some(object_id), Some(action_key)) = (&envelope.object_id, &envelope.action_key)
        else {
            return Ok(false);
        };
        let n: i64 = self
            .pool
            .on()
            .value(
                sql(KNOWS)
                    .bind(envelope.id.as_str())
                    .bind(action_key.step())
                    .bind(object_id.as_str())
                    .bind(envelope.event_type.as_str()),
            )
            .await?;
        Ok(n > 0)
    }
}
