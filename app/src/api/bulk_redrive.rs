//! Bulk re-drive: the preview, one batch and its progress, the recent batches.
// A server function's arguments are the fields of its page's filter form, one each.
#![allow(clippy::too_many_arguments)]

use super::*;

/// What a bulk re-drive over a filter would do (support and admin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkPreviewView {
    /// The filter as the start will apply it (times absolute): the confirmation form
    /// carries it back unchanged.
    pub filter: claimcheck_core::bulk::BulkFilter,
    /// The filter in words.
    pub described: String,
    pub claims: i64,
    pub orders: i64,
    pub orders_credited: i64,
    pub without_order: i64,
    pub unplannable: i64,
    pub rows: Vec<BulkPreviewRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkPreviewRow {
    pub claim: ClaimRow,
    pub order_id: Option<String>,
    pub credited: bool,
}

/// A bulk re-drive, as its progress page shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchDetail {
    pub batch_id: String,
    /// Flattened: the detail's JSON carries the counts beside the rest, as the progress has them.
    #[serde(flatten)]
    pub progress: BatchProgress,
    pub remaining: i64,
    pub actor: String,
    pub reason: String,
    pub described: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    /// Who asked it to stop (it may still be finishing its current claim).
    pub cancel_requested_by: Option<String>,
    /// The claims that failed again, and why (the first 100).
    pub failures: Vec<BatchItemRow>,
    /// The claims left alone because someone else held or had done them (the first 100).
    pub skips: Vec<BatchItemRow>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchItemRow {
    pub event_id: String,
    pub detail: String,
}

/// What a bulk re-drive over the filter would do. Times: `from` and `to` are dates
/// (YYYY-MM-DD, UTC), `older_than` an age (10m, 2h, 3d).
#[server(prefix = "/dashboard/fn", endpoint = "bulk_preview")]
pub async fn bulk_preview(
    status: String,
    event_type: String,
    from: String,
    to: String,
    older_than: String,
    error_contains: String,
    search: String,
    /// The ticked claims' event ids, separated by spaces (an id has none); absent: none.
    event_ids: Option<String>,
) -> Result<BulkPreviewView, ServerFnError> {
    use claimcheck_core::bulk::{BulkFilter, parse_age};
    use claimcheck_core::now_ms;
    use claimcheck_core::ops::bulk_redrive::{BulkError, preview};

    let (store, _) = server::require(Role::Support).await?;
    let worker = use_context::<std::sync::Arc<claimcheck_core::worker::WorkerConfig>>()
        .ok_or_else(|| {
            server::error(td_string!(server::locale(), messages.not_connected_server))
        })?;
    let now = now_ms();
    let nonempty = |s: String| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    let state = match nonempty(status) {
        None => None,
        Some(s) => Some(server::claim_state(&s)?),
    };
    let older = match nonempty(older_than) {
        None => None,
        Some(age) => Some(
            now - parse_age(&age).map_err(|_| {
                server::bad_input(td_string!(server::locale(), messages.not_an_age, age))
            })?,
        ),
    };
    let to = server::day(&to, true)?;
    let received_before = match (older, to) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let filter = BulkFilter {
        state,
        event_type: nonempty(event_type),
        received_after: server::day(&from, false)?,
        received_before,
        error_contains: nonempty(error_contains),
        search: nonempty(search),
        event_ids: event_ids
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    };
    let preview = preview(&store, &worker, filter, now)
        .await
        .map_err(|error| match error {
            BulkError::Store(error) => server::unavailable(error),
            other => server::error(crate::i18n::explain::bulk(server::locale(), &other)),
        })?;
    Ok(BulkPreviewView {
        described: crate::i18n::describe_filter(&preview.filter),
        filter: preview.filter,
        claims: preview.claims,
        orders: preview.orders,
        orders_credited: preview.orders_credited,
        without_order: preview.without_order,
        unplannable: preview.unplannable,
        rows: preview
            .first
            .into_iter()
            .map(|r| BulkPreviewRow {
                claim: server::claim_row(r.claim),
                order_id: r.order_id,
                credited: r.credited,
            })
            .collect(),
    })
}

/// One bulk re-drive, for its progress page; `None` if there is no such batch.
#[server(prefix = "/dashboard/fn", endpoint = "bulk_batch")]
pub async fn bulk_batch(batch_id: String) -> Result<Option<BatchDetail>, ServerFnError> {
    use claimcheck_core::bulk::ItemOutcome;
    use claimcheck_core::{BatchId, now_ms};

    let (store, _) = server::require(Role::Viewer).await?;
    let Ok(id) = BatchId::parse(batch_id.trim()) else {
        return Ok(None);
    };
    let Some(batch) = store
        .bulk_redrives()
        .get(&id, now_ms())
        .await
        .map_err(server::unavailable)?
    else {
        return Ok(None);
    };
    let items = |outcome| {
        let store = store.clone();
        let id = id.clone();
        async move {
            store
                .bulk_redrives()
                .items(&id, Some(outcome), 100)
                .await
                .map_err(server::unavailable)
                .map(|items| {
                    items
                        .into_iter()
                        .map(|i| BatchItemRow {
                            event_id: i.event_id,
                            detail: i.detail.unwrap_or_default(),
                        })
                        .collect::<Vec<_>>()
                })
        }
    };
    let failures = if batch.failed > 0 {
        items(ItemOutcome::Failed).await?
    } else {
        Vec::new()
    };
    let skips = if batch.skipped > 0 {
        items(ItemOutcome::Skipped).await?
    } else {
        Vec::new()
    };
    Ok(Some(BatchDetail {
        progress: BatchProgress::of(&batch),
        remaining: batch.remaining(),
        described: crate::i18n::describe_filter(&batch.filter),
        started_at: server::time(batch.created_at),
        finished_at: batch.finished_at.map(server::time),
        batch_id: batch.batch_id,
        actor: batch.actor,
        reason: batch.reason,
        cancel_requested_by: batch.cancel_requested_by,
        failures,
        skips,
    }))
}

/// A bulk re-drive in the list of recent ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchSummary {
    pub batch_id: String,
    pub state: claimcheck_core::bulk::BatchState,
    pub total: i64,
    pub done: i64,
    pub failed: i64,
    pub skipped: i64,
    pub actor: String,
    pub reason: String,
    pub started_at: String,
}

/// How far a batch has come: what its page follows while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchProgress {
    pub state: claimcheck_core::bulk::BatchState,
    pub total: i64,
    pub done: i64,
    pub processed: i64,
    pub failed: i64,
    pub skipped: i64,
}

#[cfg(feature = "ssr")]
impl BatchProgress {
    fn of(batch: &claimcheck_core::BatchView) -> BatchProgress {
        BatchProgress {
            state: batch.state,
            total: batch.total,
            done: batch.done(),
            processed: batch.processed,
            failed: batch.failed,
            skipped: batch.skipped,
        }
    }
}

/// One bulk re-drive's progress alone, for its page to follow; `None` if there is no such
/// batch.
#[server(prefix = "/dashboard/fn", endpoint = "bulk_batch_progress")]
pub async fn bulk_batch_progress(batch_id: String) -> Result<Option<BatchProgress>, ServerFnError> {
    use claimcheck_core::{BatchId, now_ms};

    let (store, _) = server::require(Role::Viewer).await?;
    let Ok(id) = BatchId::parse(batch_id.trim()) else {
        return Ok(None);
    };
    let batch = store
        .bulk_redrives()
        .get(&id, now_ms())
        .await
        .map_err(server::unavailable)?;
    Ok(batch.as_ref().map(BatchProgress::of))
}

/// The latest bulk re-drives, newest first.
#[server(prefix = "/dashboard/fn", endpoint = "bulk_batches")]
pub async fn bulk_batches() -> Result<Vec<BatchSummary>, ServerFnError> {
    use claimcheck_core::now_ms;

    let (store, _) = server::require(Role::Viewer).await?;
    let batches = store
        .bulk_redrives()
        .recent(now_ms(), 20)
        .await
        .map_err(server::unavailable)?;
    Ok(batches
        .into_iter()
        .map(|b| BatchSummary {
            done: b.done(),
            started_at: server::time(b.created_at),
            batch_id: b.batch_id,
            state: b.state,
            total: b.total,
            failed: b.failed,
            skipped: b.skipped,
            actor: b.actor,
            reason: b.reason,
        })
        .collect())
}
