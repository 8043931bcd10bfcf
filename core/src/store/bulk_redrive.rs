//! Bulk re-drive batches: the claims a filter selects, the batch row its progress page reads
//! (from any instance), the per-claim outcomes, and the runner's heartbeat.
//!
//! The claims themselves are only ever taken through re-drive's compare-and-set
//! (`Claims::take_for_redrive`); this file records what a batch did, never a claim's state.

use serde::Serialize;

use super::query::{Arg, On, sql};
use super::views::{CLAIM_COLUMNS, filter_conditions};
use super::{BulkRedrives, Pool, audit};
use crate::audit::AuditRecord;
use crate::bulk::{BatchState, BulkFilter, ItemOutcome};
use crate::error::StoreError;
use crate::ids::{BatchId, EventId};
use crate::store::{ClaimView, EventFilter};

/// A claim a filter selected, with its payload (to tell which order it touches).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SelectedClaim {
    #[sqlx(flatten)]
    pub claim: ClaimView,
    pub payload: String,
}

/// A batch as its progress page and `claimcheck claims batch` show it. Field names are a
/// contract for scripts (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchView {
    pub batch_id: String,
    pub actor: String,
    pub reason: String,
    pub filter: BulkFilter,
    /// Derived at the instant it was read: a running batch whose heartbeat lapsed is
    /// interrupted.
    pub state: BatchState,
    pub total: i64,
    pub processed: i64,
    pub failed: i64,
    pub skipped: i64,
    /// Who asked it to stop, while it still runs (it stops before its next claim) or after.
    pub cancel_requested_by: Option<String>,
    pub runner: Option<String>,
    pub lease_until: Option<i64>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

impl BatchView {
    /// Claims worked so far, whatever came of them.
    pub fn done(&self) -> i64 {
        self.processed + self.failed + self.skipped
    }

    /// Claims not reached (yet, or ever, once it is over).
    pub fn remaining(&self) -> i64 {
        (self.total - self.done()).max(0)
    }
}

#[derive(sqlx::FromRow)]
struct BatchRow {
    batch_id: String,
    actor: String,
    reason: String,
    filter: String,
    state: String,
    total: i64,
    processed: i64,
    failed: i64,
    skipped: i64,
    cancel_requested_by: Option<String>,
    runner: Option<String>,
    lease_until: Option<i64>,
    created_at: i64,
    finished_at: Option<i64>,
}

impl BatchRow {
    fn view(self, now: i64) -> Result<BatchView, StoreError> {
        let stored: BatchState = self.state.parse().map_err(StoreError::UnknownValue)?;
        let state = match stored {
            BatchState::Running if self.lease_until.is_none_or(|until| until <= now) => {
                BatchState::Interrupted
            }
            other => other,
        };
        Ok(BatchView {
            filter: serde_json::from_str(&self.filter).map_err(|e| StoreError::BadStoredJson {
                what: "a batch filter",
                message: e.to_string(),
            })?,
            batch_id: self.batch_id,
            actor: self.actor,
            reason: self.reason,
            state,
            total: self.total,
            processed: self.processed,
            failed: self.failed,
            skipped: self.skipped,
            cancel_requested_by: self.cancel_requested_by,
            runner: self.runner,
            lease_until: self.lease_until,
            created_at: self.created_at,
            finished_at: self.finished_at,
        })
    }
}

/// One claim of a batch and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchItemView {
    pub seq: i64,
    pub event_id: String,
    /// `None` until its turn.
    pub outcome: Option<ItemOutcome>,
    pub detail: Option<String>,
}

/// What the runner learns after recording a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Someone asked the batch to stop.
    pub cancel_requested_by: Option<String>,
    /// Another runner took the batch over (this one's heartbeat had lapsed): stop.
    pub lost: bool,
}

/// What asking a batch to stop did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelMark {
    /// Its runner stops before its next claim.
    Requested,
    /// Nobody ran it (interrupted): it is cancelled now.
    CancelledNow,
    /// It was over already.
    AlreadyOver(BatchState),
    NotFound,
}

const BATCH_COLUMNS: &str = "batch_id, actor, reason, filter, state, total, processed, failed, \
    skipped, cancel_requested_by, runner, lease_until, created_at, finished_at";

const INSERT_BATCH: &str = "\
    INSERT INTO bulk_redrives (batch_id, actor, reason, filter, total, state, runner, \
                               lease_until, created_at) \
    VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8)";

const INSERT_ITEMS_POSTGRES: &str = "\
    INSERT INTO bulk_redrive_items (batch_id, seq, event_id) \
    SELECT $1, u.seq, u.event_id FROM UNNEST($2::text[]) WITH ORDINALITY AS u(event_id, seq)";

const INSERT_ITEMS_SQLITE: &str = "\
    INSERT INTO bulk_redrive_items (batch_id, seq, event_id) \
    SELECT $1, key + 1, value FROM json_each($2)";

/// A batch's row, as it is created.
struct NewBatch<'a> {
    batch_id: &'a str,
    actor: String,
    reason: String,
    filter: String,
    total: i64,
    runner: String,
    lease_until: i64,
    now: i64,
}

impl NewBatch<'_> {
    async fn insert(&self, on: On<'_>) -> Result<(), sqlx::Error> {
        on.execute(
            sql(INSERT_BATCH)
                .bind(self.batch_id)
                .bind(self.actor.as_str())
                .bind(self.reason.as_str())
                .bind(self.filter.as_str())
                .bind(self.total)
                .bind(self.runner.as_str())
                .bind(self.lease_until)
                .bind(self.now),
        )
        .await
        .map(|_| ())
    }
}

/// The item's outcome, written once: a claim recorded by a runner that took over is not
/// counted twice.
const RECORD_ITEM: &str = "\
    UPDATE bulk_redrive_items SET outcome = $3, detail = $4 \
    WHERE batch_id = $1 AND seq = $2 AND outcome IS NULL";

/// Counts the claim and, while `$2` still runs the batch, moves its heartbeat forward.
const COUNT_ITEM: &str = "\
    UPDATE bulk_redrives SET \
        processed = processed + $3, failed = failed + $4, skipped = skipped + $5, \
        lease_until = CASE WHEN runner = $2 THEN $6 ELSE lease_until END \
    WHERE batch_id = $1 \
    RETURNING runner, cancel_requested_by";

const HEARTBEAT: &str = "\
    UPDATE bulk_redrives SET lease_until = $3 \
    WHERE batch_id = $1 AND runner = $2 AND state = 'running' \
    RETURNING cancel_requested_by";

const FINISH: &str = "\
    UPDATE bulk_redrives SET state = $3, finished_at = $4, lease_until = NULL \
    WHERE batch_id = $1 AND runner = $2 AND state = 'running'";

/// A graceful stop: the heartbeat ends now, so the batch shows as interrupted at once.
const RELEASE: &str = "\
    UPDATE bulk_redrives SET lease_until = $3 \
    WHERE batch_id = $1 AND runner = $2 AND state = 'running'";

/// Resuming is a compare-and-set on the lapsed heartbeat: two operators cannot both resume.
const TAKE_OVER: &str = "\
    UPDATE bulk_redrives SET runner = $2, lease_until = $4 \
    WHERE batch_id = $1 AND state = 'running' AND cancel_requested_by IS NULL \
      AND (lease_until IS NULL OR lease_until <= $3)";

const MARK_CANCEL: &str = "\
    UPDATE bulk_redrives SET cancel_requested_by = COALESCE(cancel_requested_by, $2) \
    WHERE batch_id = $1 AND state = 'running' AND lease_until > $3";

const CANCEL_NOW: &str = "\
    UPDATE bulk_redrives SET state = 'cancelled', cancel_requested_by = $2, finished_at = $3, \
        lease_until = NULL \
    WHERE batch_id = $1 AND state = 'running' AND (lease_until IS NULL OR lease_until <= $3)";

impl BulkRedrives<'_> {
    /// The claims `filter` selects at `now`, oldest first (a session before its refund), at
    /// most `limit`. Only re-drivable claims, whatever the filter says.
    pub async fn select(
        self,
        filter: &BulkFilter,
        now: i64,
        limit: i64,
    ) -> Result<Vec<SelectedClaim>, StoreError> {
        let events = EventFilter {
            state: filter.state,
            event_type: filter.event_type.clone(),
            from: filter.received_after,
            to: filter.received_before,
            search: filter.search.clone(),
            error_contains: filter.error_contains.clone(),
            event_ids: filter.event_ids.clone(),
            ..EventFilter::default()
        };
        let mut args = vec![Arg::Int(now)];
        let (cte, mut conditions) = filter_conditions(&events, &mut args);
        conditions.push(super::claim_state::redrivable_sql!("$1").to_owned());
        args.push(Arg::Int(limit));
        let statement = format!(
            "{cte}SELECT {CLAIM_COLUMNS}, payload FROM processed_stripe_events \
             WHERE {} ORDER BY received_at, event_id LIMIT ${}",
            conditions.join(" AND "),
            args.len()
        );
        let rows = self.pool.on().all(sql(&statement).bind_all(args)).await?;
        Ok(rows)
    }

    /// Of `order_ids`, those with an unlock in the ledger (a re-drive grants them nothing).
    pub async fn unlocked_orders(self, order_ids: &[String]) -> Result<Vec<String>, StoreError> {
        if order_ids.is_empty() {
            return Ok(Vec::new());
        }
        let statement = format!(
            "SELECT DISTINCT order_id FROM credit_ledger WHERE kind = 'unlock' AND {}",
            self.pool.in_list("order_id", "$1")
        );
        let rows = self
            .pool
            .on()
            .column(sql(statement).bind(Arg::list(order_ids)))
            .await?;
        Ok(rows)
    }

    /// The orders paid by `payment_intents`, as (payment intent, order id).
    pub async fn orders_paid_by(
        self,
        payment_intents: &[String],
    ) -> Result<Vec<(String, String)>, StoreError> {
        if payment_intents.is_empty() {
            return Ok(Vec::new());
        }
        let statement = format!(
            "SELECT payment_intent_id, order_id FROM orders WHERE {}",
            self.pool.in_list("payment_intent_id", "$1")
        );
        let rows = self
            .pool
            .on()
            .all(sql(statement).bind(Arg::list(payment_intents)))
            .await?;
        Ok(rows)
    }

    /// Creates a running batch over `event_ids` (in that order) held by `runner` until
    /// `lease_until`, with its first audit entry, in one transaction.
    #[allow(clippy::too_many_arguments)]
    pub async fn create(
        self,
        batch_id: &BatchId,
        filter: &BulkFilter,
        event_ids: &[String],
        runner: &str,
        lease_until: i64,
        audit: &AuditRecord<'_>,
        now: i64,
    ) -> Result<(), StoreError> {
        let filter = serde_json::to_string(filter).map_err(|e| StoreError::Encode {
            what: "a batch filter",
            message: e.to_string(),
        })?;
        let total = i64::try_from(event_ids.len()).unwrap_or(i64::MAX);
        let actor = audit.actor.to_string();
        let batch = NewBatch {
            batch_id: batch_id.as_str(),
            actor,
            reason: audit.reason.to_owned(),
            filter,
            total,
            runner: runner.to_owned(),
            lease_until,
            now,
        };
        // The claims' list is an array on PostgreSQL, JSON on SQLite.
        let items = match self.pool {
            Pool::Postgres(_) => INSERT_ITEMS_POSTGRES,
            Pool::Sqlite(_) => INSERT_ITEMS_SQLITE,
        };
        let mut tx = self.pool.begin().await?;
        batch.insert(tx.on()).await?;
        tx.on()
            .execute(
                sql(items)
                    .bind(batch_id.as_str())
                    .bind(Arg::list(event_ids)),
            )
            .await?;
        audit::insert(tx.on(), audit, Some(batch_id.as_str()), now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The batch's claims not worked yet, after `after_seq`, in order; at most `limit`.
    pub async fn pending_items(
        self,
        batch_id: &BatchId,
        after_seq: i64,
        limit: i64,
    ) -> Result<Vec<(i64, EventId)>, StoreError> {
        const SQL: &str = "SELECT seq, event_id FROM bulk_redrive_items \
            WHERE batch_id = $1 AND seq > $2 AND outcome IS NULL ORDER BY seq LIMIT $3";
        let rows: Vec<(i64, String)> = self
            .pool
            .on()
            .all(sql(SQL).bind(batch_id.as_str()).bind(after_seq).bind(limit))
            .await?;
        rows.into_iter()
            .map(|(seq, id)| {
                Ok((
                    seq,
                    EventId::parse(id).map_err(|source| StoreError::BadStoredId {
                        what: "event id",
                        source,
                    })?,
                ))
            })
            .collect()
    }

    /// Records what came of one claim (with its audit entry) and counts it, in one
    /// transaction; the heartbeat moves to `lease_until` while `runner` still runs the batch.
    #[allow(clippy::too_many_arguments)]
    pub async fn record_item(
        self,
        batch_id: &BatchId,
        runner: &str,
        seq: i64,
        outcome: ItemOutcome,
        detail: Option<&str>,
        audit: &AuditRecord<'_>,
        now: i64,
        lease_until: i64,
    ) -> Result<Recorded, StoreError> {
        let one = |o: ItemOutcome| i64::from(outcome == o);
        {
            let mut tx = self.pool.begin().await?;
            let first = tx
                .on()
                .execute(
                    sql(RECORD_ITEM)
                        .bind(batch_id.as_str())
                        .bind(seq)
                        .bind(outcome.as_str())
                        .bind(detail),
                )
                .await?
                == 1;
            let counted = if first { 1 } else { 0 };
            let row: Option<(Option<String>, Option<String>)> = tx
                .on()
                .optional(
                    sql(COUNT_ITEM)
                        .bind(batch_id.as_str())
                        .bind(runner)
                        .bind(one(ItemOutcome::Processed) * counted)
                        .bind(one(ItemOutcome::Failed) * counted)
                        .bind(one(ItemOutcome::Skipped) * counted)
                        .bind(lease_until),
                )
                .await?;
            audit::insert(tx.on(), audit, Some(batch_id.as_str()), now).await?;
            tx.commit().await?;
            Ok(match row {
                Some((holder, cancel_requested_by)) => Recorded {
                    lost: holder.as_deref() != Some(runner),
                    cancel_requested_by,
                },
                None => Recorded {
                    cancel_requested_by: None,
                    lost: true,
                },
            })
        }
    }

    /// Moves the heartbeat forward without recording a claim. `None` if `runner` no longer
    /// runs the batch; otherwise who asked it to stop, if anyone.
    pub async fn heartbeat(
        self,
        batch_id: &BatchId,
        runner: &str,
        lease_until: i64,
    ) -> Result<Option<Option<String>>, StoreError> {
        let row: Option<Option<String>> = self
            .pool
            .on()
            .optional_value(
                sql(HEARTBEAT)
                    .bind(batch_id.as_str())
                    .bind(runner)
                    .bind(lease_until),
            )
            .await?;
        Ok(row)
    }

    /// Ends the batch as `state` (finished or cancelled) with its closing audit entry, if
    /// `runner` still runs it. Returns whether it did.
    pub async fn finish(
        self,
        batch_id: &BatchId,
        runner: &str,
        state: BatchState,
        audit: &AuditRecord<'_>,
        now: i64,
    ) -> Result<bool, StoreError> {
        {
            let mut tx = self.pool.begin().await?;
            let ended = tx
                .on()
                .execute(
                    sql(FINISH)
                        .bind(batch_id.as_str())
                        .bind(runner)
                        .bind(state.as_str())
                        .bind(now),
                )
                .await?
                == 1;
            if ended {
                audit::insert(tx.on(), audit, Some(batch_id.as_str()), now).await?;
                tx.commit().await?;
            }
            Ok(ended)
        }
    }

    /// Lets the heartbeat lapse now (a graceful stop): the batch shows as interrupted.
    pub async fn release(
        self,
        batch_id: &BatchId,
        runner: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        self.pool
            .on()
            .execute(sql(RELEASE).bind(batch_id.as_str()).bind(runner).bind(now))
            .await
            .map(|_| ())?;
        Ok(())
    }

    /// Takes an interrupted batch over for `runner` until `lease_until`; false if it runs,
    /// is over, or is asked to stop.
    pub async fn take_over(
        self,
        batch_id: &BatchId,
        runner: &str,
        now: i64,
        lease_until: i64,
    ) -> Result<bool, StoreError> {
        let taken = {
            let mut tx = self.pool.begin().await?;
            let n = tx
                .on()
                .execute(
                    sql(TAKE_OVER)
                        .bind(batch_id.as_str())
                        .bind(runner)
                        .bind(now)
                        .bind(lease_until),
                )
                .await?;
            tx.commit().await?;
            n
        };
        Ok(taken == 1)
    }

    /// Asks a batch to stop: a running one stops before its next claim; an interrupted one
    /// (nobody runs it) is cancelled at once. The audit entry is written in the same
    /// transaction when something changed.
    pub async fn request_cancel(
        self,
        batch_id: &BatchId,
        audit: &AuditRecord<'_>,
        now: i64,
    ) -> Result<CancelMark, StoreError> {
        let actor = audit.actor.to_string();
        {
            let mut tx = self.pool.begin().await?;
            let mark = if tx
                .on()
                .execute(
                    sql(MARK_CANCEL)
                        .bind(batch_id.as_str())
                        .bind(&actor)
                        .bind(now),
                )
                .await?
                == 1
            {
                CancelMark::Requested
            } else if tx
                .on()
                .execute(
                    sql(CANCEL_NOW)
                        .bind(batch_id.as_str())
                        .bind(&actor)
                        .bind(now),
                )
                .await?
                == 1
            {
                CancelMark::CancelledNow
            } else {
                let state: Option<String> = tx
                    .on()
                    .optional_value(
                        sql("SELECT state FROM bulk_redrives WHERE batch_id = $1")
                            .bind(batch_id.as_str()),
                    )
                    .await?;
                match state {
                    None => CancelMark::NotFound,
                    Some(state) => {
                        CancelMark::AlreadyOver(state.parse().map_err(StoreError::UnknownValue)?)
                    }
                }
            };
            if matches!(mark, CancelMark::Requested | CancelMark::CancelledNow) {
                audit::insert(tx.on(), audit, Some(batch_id.as_str()), now).await?;
            }
            tx.commit().await?;
            Ok(mark)
        }
    }

    pub async fn get(self, batch_id: &BatchId, now: i64) -> Result<Option<BatchView>, StoreError> {
        let statement = format!("SELECT {BATCH_COLUMNS} FROM bulk_redrives WHERE batch_id = $1");
        let row: Option<BatchRow> = self
            .pool
            .on()
            .optional(sql(&statement).bind(batch_id.as_str()))
            .await?;
        row.map(|r| r.view(now)).transpose()
    }

    /// The latest batches, newest first.
    pub async fn recent(self, now: i64, limit: i64) -> Result<Vec<BatchView>, StoreError> {
        let statement = format!(
            "SELECT {BATCH_COLUMNS} FROM bulk_redrives \
             ORDER BY created_at DESC, batch_id DESC LIMIT $1"
        );
        let rows: Vec<BatchRow> = self.pool.on().all(sql(&statement).bind(limit)).await?;
        rows.into_iter().map(|r| r.view(now)).collect()
    }

    /// The batch's claims that ended as `outcome` (or all when `None`), in order; at most
    /// `limit`.
    pub async fn items(
        self,
        batch_id: &BatchId,
        outcome: Option<ItemOutcome>,
        limit: i64,
    ) -> Result<Vec<BatchItemView>, StoreError> {
        const SQL: &str = "SELECT seq, event_id, COALESCE(outcome, '') AS outcome, detail \
            FROM bulk_redrive_items WHERE batch_id = $1 AND ($2 = '' OR outcome = $2) \
            ORDER BY seq LIMIT $3";
        #[derive(sqlx::FromRow)]
        struct Row {
            seq: i64,
            event_id: String,
            outcome: String,
            detail: Option<String>,
        }
        let rows: Vec<Row> = self
            .pool
            .on()
            .all(
                sql(SQL)
                    .bind(batch_id.as_str())
                    .bind(outcome.map(ItemOutcome::as_str).unwrap_or(""))
                    .bind(limit),
            )
            .await?;
        rows.into_iter()
            .map(|r| {
                let outcome = if r.outcome.is_empty() {
                    None
                } else {
                    Some(r.outcome.parse().map_err(StoreError::UnknownValue)?)
                };
                Ok(BatchItemView {
                    seq: r.seq,
                    event_id: r.event_id,
                    outcome,
                    detail: r.detail,
                })
            })
            .collect()
    }
}
