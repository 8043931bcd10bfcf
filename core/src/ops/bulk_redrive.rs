//! Bulk re-drive, written once: preview what a filter selects, start a batch confirmed by its
//! count, run it claim by claim through re-drive's compare-and-set (each claim audited under
//! the batch id), cancel it between two claims, resume it after its process died. The CLI
//! and the dashboard are thin adapters over these functions.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde::Serialize;
use tokio::sync::watch;

use super::Actor;
use crate::audit::{AuditAction, AuditRecord};
use crate::bulk::{BatchState, BulkFilter, FilterError, ItemOutcome};
use crate::clock::now_ms;
use crate::error::StoreError;
use crate::fulfilment::{OrderRef, order_ref, plan};
use crate::ids::BatchId;
use crate::observe::Observer;
use crate::store::{BatchView, CancelMark, ClaimView, Store};
use crate::worker::{Attempt, RedriveRefused, Worker, WorkerConfig, describe};

/// The most claims one batch takes; a wider filter is refused (narrow it, or run several).
pub const MAX_BATCH: i64 = 10_000;
/// Claims the preview lists one by one.
pub const PREVIEW_ROWS: usize = 10;
/// How long a runner's heartbeat holds without news; it is renewed after every claim, so a
/// batch whose process died shows as interrupted within this.
pub const HEARTBEAT_MS: i64 = 30_000;

/// What a bulk re-drive over a filter would do. Field names are a contract for scripts
/// (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BulkPreview {
    /// The filter as it will be applied (trimmed, times absolute).
    pub filter: BulkFilter,
    /// Claims selected: what the operator types to confirm.
    pub claims: i64,
    /// Distinct orders those claims touch.
    pub orders: i64,
    /// Of those, orders that already have their credits: a re-drive does not grant them
    /// again (the ledger holds one unlock per order).
    pub orders_credited: i64,
    /// Claims whose order is not known yet (a refund or dispute before its order's session).
    pub without_order: i64,
    /// Claims that cannot be fulfilled as they stand (the plan fails): they will fail again.
    pub unplannable: i64,
    /// The first claims, oldest first.
    pub first: Vec<PreviewRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreviewRow {
    #[serde(flatten)]
    pub claim: ClaimView,
    pub order_id: Option<String>,
    /// The order already has its credits.
    pub credited: bool,
}

/// A batch this process holds, ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub batch_id: BatchId,
    pub total: i64,
    /// The runner's name: the batch's heartbeat and every claim's lease owner start with it.
    pub runner: String,
    /// Why the batch runs, in its starter's words: every claim's audit entry carries it.
    pub reason: String,
}

/// Why a bulk re-drive did not start, stop or resume. The text is for the operator.
#[derive(Debug, thiserror::Error)]
pub enum BulkError {
    #[error(transparent)]
    Reason(#[from] crate::audit::ReasonError),
    #[error(transparent)]
    Filter(#[from] FilterError),
    #[error("no pending, stale or failed claim matches the filter")]
    NothingSelected,
    #[error("the filter selects more than {max} claims; narrow it")]
    TooMany { max: i64 },
    #[error(
        "the selection changed since the preview: {now} claims match now, not {confirmed}; \
         check the preview again"
    )]
    CountChanged { confirmed: i64, now: i64 },
    #[error("no batch {0}")]
    NoBatch(String),
    #[error("the batch is {0} already")]
    Over(BatchState),
    #[error("the batch is still running; it can be resumed once its heartbeat lapses")]
    StillRunning,
    #[error("no randomness for a batch id: {0}")]
    Random(String),
    #[error("the database is unavailable")]
    Store(#[from] StoreError),
}

/// What the claims `filter` selects at `now` would come to, as the worker configured by
/// `config` would plan them.
pub async fn preview(
    store: &Store,
    config: &WorkerConfig,
    filter: BulkFilter,
    now: i64,
) -> Result<BulkPreview, BulkError> {
    let filter = filter.normalized()?;
    let selected = store
        .bulk_redrives()
        .select(&filter, now, MAX_BATCH + 1)
        .await?;
    if selected.len() as i64 > MAX_BATCH {
        return Err(BulkError::TooMany { max: MAX_BATCH });
    }
    // Which order each claim touches (the rule search and the event page follow), and
    // whether fulfilment could run it as it stands (by the plan the worker makes).
    enum Touches {
        Order(String),
        PaidBy(String),
        /// Plannable, and about no order (a subscription's state).
        NoOrder,
        Unplannable,
    }
    let touches: Vec<Touches> = selected
        .iter()
        .map(|s| {
            let plannable = plan(
                &s.claim.event_type,
                &s.payload,
                &config.packages,
                &config.plans,
            )
            .is_ok();
            match order_ref(&s.claim.event_type, &s.payload) {
                _ if !plannable => Touches::Unplannable,
                Some(OrderRef::Order(order_id)) => Touches::Order(order_id.to_string()),
                Some(OrderRef::PaidBy(payment_intent)) => Touches::PaidBy(payment_intent),
                None => Touches::NoOrder,
            }
        })
        .collect();
    let intents: Vec<String> = touches
        .iter()
        .filter_map(|t| match t {
            Touches::PaidBy(pi) => Some(pi.clone()),
            _ => None,
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let paid_by: HashMap<String, String> = store
        .bulk_redrives()
        .orders_paid_by(&intents)
        .await?
        .into_iter()
        .collect();
    let order_of: Vec<Option<String>> = touches
        .iter()
        .map(|t| match t {
            Touches::Order(order) => Some(order.clone()),
            Touches::PaidBy(pi) => paid_by.get(pi).cloned(),
            Touches::NoOrder | Touches::Unplannable => None,
        })
        .collect();
    let orders: Vec<String> = order_of
        .iter()
        .flatten()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let credited: BTreeSet<String> = store
        .bulk_redrives()
        .unlocked_orders(&orders)
        .await?
        .into_iter()
        .collect();
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let without_order = touches
        .iter()
        .zip(&order_of)
        .filter(|(t, o)| matches!(t, Touches::PaidBy(_)) && o.is_none())
        .count();
    let unplannable = touches
        .iter()
        .filter(|t| matches!(t, Touches::Unplannable))
        .count();
    let first = selected
        .iter()
        .zip(&order_of)
        .take(PREVIEW_ROWS)
        .map(|(s, order)| PreviewRow {
            claim: s.claim.clone(),
            credited: order.as_ref().is_some_and(|o| credited.contains(o)),
            order_id: order.clone(),
        })
        .collect();
    Ok(BulkPreview {
        claims: count(selected.len()),
        orders: count(orders.len()),
        orders_credited: count(credited.len()),
        without_order: count(without_order),
        unplannable: count(unplannable),
        first,
        filter,
    })
}

/// Starts a batch over the claims `filter` selects now, if they are as many as the operator
/// `confirmed` (what the preview showed and they typed); audited with their reason. The
/// batch is held by the returned runner: hand it to [`run`].
pub async fn start(
    store: &Store,
    actor: &Actor,
    filter: BulkFilter,
    reason: &str,
    confirmed: i64,
) -> Result<Started, BulkError> {
    let reason = crate::audit::reason(reason)?;
    let filter = filter.normalized()?;
    let now = now_ms();
    let selected = store
        .bulk_redrives()
        .select(&filter, now, MAX_BATCH + 1)
        .await?;
    let total = i64::try_from(selected.len()).unwrap_or(i64::MAX);
    if total > MAX_BATCH {
        return Err(BulkError::TooMany { max: MAX_BATCH });
    }
    if total == 0 {
        return Err(BulkError::NothingSelected);
    }
    if total != confirmed {
        return Err(BulkError::CountChanged {
            confirmed,
            now: total,
        });
    }
    let batch_id = new_batch_id()?;
    let runner = runner_name(&batch_id)?;
    let event_ids: Vec<String> = selected.into_iter().map(|s| s.claim.event_id).collect();
    let outcome = format!("started: {total} claims ({})", describe_filter(&filter));
    store
        .bulk_redrives()
        .create(
            &batch_id,
            &filter,
            &event_ids,
            &runner,
            now + HEARTBEAT_MS,
            &AuditRecord {
                actor,
                action: AuditAction::BulkRedrive,
                target: batch_id.as_str(),
                reason,
                outcome: &outcome,
            },
            now,
        )
        .await?;
    tracing::info!(batch_id = %batch_id, total, actor = ?actor.to_string(), "bulk re-drive started");
    Ok(Started {
        batch_id,
        total,
        runner,
        reason: reason.to_owned(),
    })
}

/// Takes over a batch whose runner died (its heartbeat lapsed) and returns it ready to
/// [`run`]: the claims it had not reached run now; the ones it had stay as they were.
pub async fn resume(
    store: &Store,
    actor: &Actor,
    batch_id: &BatchId,
    reason: &str,
) -> Result<Started, BulkError> {
    let reason = crate::audit::reason(reason)?;
    let now = now_ms();
    let batch = store
        .bulk_redrives()
        .get(batch_id, now)
        .await?
        .ok_or_else(|| BulkError::NoBatch(batch_id.to_string()))?;
    match batch.state {
        BatchState::Interrupted => {}
        BatchState::Running => return Err(BulkError::StillRunning),
        over => return Err(BulkError::Over(over)),
    }
    let runner = runner_name(batch_id)?;
    if !store
        .bulk_redrives()
        .take_over(batch_id, &runner, now, now + HEARTBEAT_MS)
        .await?
    {
        // Someone resumed or cancelled it in between.
        return Err(BulkError::StillRunning);
    }
    let outcome = format!(
        "resumed: {} of {} claims left",
        batch.remaining(),
        batch.total
    );
    store
        .audit()
        .record_in_batch(
            &AuditRecord {
                actor,
                action: AuditAction::BulkRedriveResume,
                target: batch_id.as_str(),
                reason,
                outcome: &outcome,
            },
            batch_id.as_str(),
            now,
        )
        .await?;
    Ok(Started {
        batch_id: batch_id.clone(),
        total: batch.total,
        runner,
        reason: batch.reason,
    })
}

/// Works the batch `started` holds, claim by claim in order, until every claim is worked,
/// an operator cancels it (checked between two claims), or `stop` turns true (the process
/// shuts down: the batch is left interrupted, its remaining claims untouched). Each claim is
/// re-driven as a single re-drive is, on behalf of `actor` with the batch's reason, and
/// audited under the batch id. A claim that another batch or a worker holds or has
/// processed is skipped.
pub async fn run(
    store: &Store,
    config: &WorkerConfig,
    observer: Arc<dyn Observer>,
    started: &Started,
    actor: &Actor,
    mut stop: watch::Receiver<bool>,
) -> Result<BatchView, BulkError> {
    let Started {
        batch_id,
        runner,
        reason,
        ..
    } = started;
    let worker = Worker::new(store.clone(), runner.clone(), config.clone()).with_observer(observer);
    let mut after = 0;
    let mut ended: Option<(BatchState, Option<String>)> = None;
    // Still ours (a runner that lost the batch writes nothing), and not cancelled before
    // its first claim.
    match store
        .bulk_redrives()
        .heartbeat(batch_id, runner, now_ms() + HEARTBEAT_MS)
        .await?
    {
        None => return current(store, batch_id).await,
        Some(Some(by)) => ended = Some((BatchState::Cancelled, Some(by))),
        Some(None) => {}
    }
    'claims: while ended.is_none() {
        let items = store
            .bulk_redrives()
            .pending_items(batch_id, after, 200)
            .await?;
        if items.is_empty() {
            ended = Some((BatchState::Finished, None));
            break;
        }
        for (seq, event_id) in items {
            after = seq;
            if *stop.borrow_and_update() {
                store
                    .bulk_redrives()
                    .release(batch_id, runner, now_ms())
                    .await?;
                tracing::warn!(batch_id = %batch_id, "bulk re-drive interrupted by shutdown");
                return current(store, batch_id).await;
            }
            let result = worker
                .take_and_work(&event_id, format!("{runner}:{seq}"))
                .await?;
            let (outcome, detail) = item_outcome(&result);
            let said = describe(&result);
            let recorded = store
                .bulk_redrives()
                .record_item(
                    batch_id,
                    runner,
                    seq,
                    outcome,
                    detail.as_deref(),
                    &AuditRecord {
                        actor,
                        action: AuditAction::Redrive,
                        target: event_id.as_str(),
                        reason,
                        outcome: &said,
                    },
                    now_ms(),
                    now_ms() + HEARTBEAT_MS,
                )
                .await?;
            if recorded.lost {
                tracing::warn!(batch_id = %batch_id, "another runner took the batch over; stopping");
                return current(store, batch_id).await;
            }
            if let Some(by) = recorded.cancel_requested_by {
                ended = Some((BatchState::Cancelled, Some(by)));
                break 'claims;
            }
        }
    }
    let now = now_ms();
    let batch = current(store, batch_id).await?;
    if let Some((state, cancelled_by)) = ended {
        let outcome = match (&state, &cancelled_by) {
            (BatchState::Cancelled, Some(by)) => format!(
                "cancelled by {by} after {} of {}: {}; {} claims left untouched",
                batch.done(),
                batch.total,
                counts(&batch),
                batch.remaining()
            ),
            _ => format!("finished: {}", counts(&batch)),
        };
        store
            .bulk_redrives()
            .finish(
                batch_id,
                runner,
                state,
                &AuditRecord {
                    actor,
                    action: AuditAction::BulkRedrive,
                    target: batch_id.as_str(),
                    reason,
                    outcome: &outcome,
                },
                now,
            )
            .await?;
        tracing::info!(batch_id = %batch_id, %outcome, "bulk re-drive ended");
    }
    current(store, batch_id).await
}

/// Asks a batch to stop. A running batch stops before its next claim (its runner records
/// how many ran); an interrupted one is cancelled at once. Audited.
pub async fn cancel(
    store: &Store,
    actor: &Actor,
    batch_id: &BatchId,
) -> Result<BatchView, BulkError> {
    let now = now_ms();
    let mark = store
        .bulk_redrives()
        .request_cancel(
            batch_id,
            &AuditRecord {
                actor,
                action: AuditAction::BulkRedriveCancel,
                target: batch_id.as_str(),
                reason: "",
                outcome: "asked to stop before its next claim",
            },
            now,
        )
        .await?;
    match mark {
        CancelMark::Requested | CancelMark::CancelledNow => current(store, batch_id).await,
        CancelMark::AlreadyOver(state) => Err(BulkError::Over(state)),
        CancelMark::NotFound => Err(BulkError::NoBatch(batch_id.to_string())),
    }
}

async fn current(store: &Store, batch_id: &BatchId) -> Result<BatchView, BulkError> {
    store
        .bulk_redrives()
        .get(batch_id, now_ms())
        .await?
        .ok_or_else(|| BulkError::NoBatch(batch_id.to_string()))
}

/// How a re-drive counts in a batch. A claim someone else holds or has done is skipped: two
/// batches over the same claims run each claim once, and the second counts the rest as
/// skipped, not failed.
fn item_outcome(result: &Result<Attempt, RedriveRefused>) -> (ItemOutcome, Option<String>) {
    match result {
        Ok(Attempt::Processed { .. }) => (ItemOutcome::Processed, None),
        Ok(Attempt::Failed { error, .. }) => (ItemOutcome::Failed, Some(error.clone())),
        Ok(Attempt::Deferred { .. }) => (
            ItemOutcome::Failed,
            Some("the database was unavailable; it will run again by itself".into()),
        ),
        Ok(Attempt::LeaseLost { .. }) => (
            ItemOutcome::Skipped,
            Some("another worker took it over while it ran".into()),
        ),
        Err(refused) => (ItemOutcome::Skipped, Some(refused.to_string())),
    }
}

fn counts(batch: &BatchView) -> String {
    format!(
        "{} processed, {} failed, {} skipped",
        batch.processed, batch.failed, batch.skipped
    )
}

/// The filter in words, for the audit log and the pages.
pub fn describe_filter(filter: &BulkFilter) -> String {
    let time = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
            .unwrap_or_default()
    };
    let mut parts = vec![match filter.state {
        Some(state) => format!("state {state}"),
        None => "state pending, stale or failed".to_owned(),
    }];
    if let Some(t) = &filter.event_type {
        parts.push(format!("type {t}"));
    }
    if let Some(ms) = filter.received_after {
        parts.push(format!("received from {}", time(ms)));
    }
    if let Some(ms) = filter.received_before {
        parts.push(format!("received before {}", time(ms)));
    }
    if let Some(e) = &filter.error_contains {
        parts.push(format!("last error contains '{e}'"));
    }
    if let Some(q) = &filter.search {
        parts.push(format!("matching '{q}'"));
    }
    if !filter.event_ids.is_empty() {
        parts.push(format!("the {} selected", filter.event_ids.len()));
    }
    parts.join(", ")
}

fn new_batch_id() -> Result<BatchId, BulkError> {
    let id = crate::token::random_id("bulk").map_err(|e| BulkError::Random(e.to_string()))?;
    BatchId::parse(id).map_err(|e| BulkError::Random(e.to_string()))
}

/// Unique per start and resume: a runner that lost the batch can never write as its
/// successor.
fn runner_name(batch_id: &BatchId) -> Result<String, BulkError> {
    let nonce = crate::token::random_id("r").map_err(|e| BulkError::Random(e.to_string()))?;
    Ok(format!("{batch_id}/{nonce}"))
}
