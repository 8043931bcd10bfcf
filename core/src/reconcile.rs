//! Reconciliation: Stripe stops delivering an event after three days of failures (a server
//! down over a weekend, a firewall, a signing secret rotated at Stripe only). Stripe keeps
//! events listable for 30 days; the reconciler lists the acting types since its cursor
//! (minus an overlap), and claims every event it has not seen through the same claim path
//! as a delivery (same uniqueness, twin rules, worker), marked `reconcile`.
//!
//! It trusts only what it fetched itself over the authenticated API. A run lists every page
//! first and claims after, so a run that fails while listing changes nothing (the cursor
//! included). Several instances take turns through a lease row.

use std::time::Duration;

use crate::backoff::{self, Backoff};
use crate::error::StoreError;
use crate::event_kind::EventKind;
pub use crate::report::{ReconcileReport, TypeCounts};
use crate::store::{ClaimOutcome, ClaimSource, Store, WriteOp, WriteResult};
use crate::stripe::{ListError, StripeApi};
use crate::webhook::{Envelope, StripeMode};

/// Stripe keeps events for this long.
pub const MAX_LOOKBACK: Duration = Duration::from_secs(30 * 86_400);

#[derive(Debug, Clone)]
pub struct ReconcileConfig {
    /// Listed again behind the cursor, for events whose `created` lies before a delivery
    /// that was still being retried.
    pub overlap: Duration,
    /// How far back the first run looks (at most 30 days).
    pub first_lookback: Duration,
    /// How long a run may hold the lease.
    pub lease: Duration,
    /// 429 answers waited out before the run gives up.
    pub max_backoffs: u32,
    pub base_backoff: Duration,
    pub page_size: u8,
    pub mode: StripeMode,
}

impl Default for ReconcileConfig {
    fn default() -> Self {
        ReconcileConfig {
            overlap: Duration::from_secs(3600),
            first_lookback: Duration::from_secs(3 * 86_400),
            lease: Duration::from_secs(10 * 60),
            max_backoffs: 5,
            base_backoff: Duration::from_secs(1),
            page_size: 100,
            mode: StripeMode::Test,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("another reconcile run is under way (until its lease ends)")]
    Busy,
    #[error(transparent)]
    Reason(#[from] crate::audit::ReasonError),
    #[error(transparent)]
    List(#[from] ListError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where a run starts: the time given, else the cursor minus the overlap, else the first
/// lookback; never more than Stripe's 30 days back.
fn start(since: Option<i64>, cursor: Option<i64>, config: &ReconcileConfig, now_secs: i64) -> i64 {
    let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 2);
    let from = since.unwrap_or_else(|| match cursor {
        Some(cursor) => cursor - secs(config.overlap),
        None => now_secs - secs(config.first_lookback),
    });
    from.max(now_secs - secs(MAX_LOOKBACK))
}

/// One run, on behalf of `actor`. `since` (unix seconds) overrides the cursor; a dry run
/// lists and counts but claims nothing and keeps the cursor. Every run but a dry one and one
/// that found another under way is reported to the client's observer, a failed one too
/// (the database away before the run could start included).
pub async fn run(
    store: &Store,
    api: &StripeApi,
    config: &ReconcileConfig,
    actor: &str,
    since: Option<i64>,
    dry_run: bool,
) -> Result<ReconcileReport, ReconcileError> {
    let outcome = run_recorded(store, api, config, actor, since, dry_run).await;
    if !dry_run && !matches!(outcome, Err(ReconcileError::Busy)) {
        api.observer().reconcile_ended(
            outcome
                .as_ref()
                .map_err(|error| error as &dyn std::error::Error),
        );
    }
    outcome
}

/// The run under its lease, recorded in `reconcile_runs`.
async fn run_recorded(
    store: &Store,
    api: &StripeApi,
    config: &ReconcileConfig,
    actor: &str,
    since: Option<i64>,
    dry_run: bool,
) -> Result<ReconcileReport, ReconcileError> {
    let started = crate::clock::now_ms();
    let owner =
        crate::token::random_id("reconcile").map_err(|e| StoreError::Random(e.to_string()))?;
    let lease_ms = i64::try_from(config.lease.as_millis()).unwrap_or(i64::MAX / 2);
    let Some(cursor) = store
        .reconcile_runs()
        .take_lease(&owner, started, lease_ms)
        .await?
    else {
        return Err(ReconcileError::Busy);
    };
    let run = LeasedRun {
        since,
        cursor,
        dry_run,
        started,
        key: &owner,
    };
    let outcome = run_leased(store, api, config, &run).await;
    let finished = crate::clock::now_ms();
    let failed = ReconcileReport {
        since: start(since, cursor, config, started / 1000),
        dry_run,
        ..ReconcileReport::default()
    };
    let (report, error) = match &outcome {
        Ok(report) => (report, None),
        Err(error) => (&failed, Some(error.to_string())),
    };
    let recorded = store
        .reconcile_runs()
        .record(&owner, started, finished, actor, report, error.as_deref())
        .await;
    let new_cursor = (outcome.is_ok() && !dry_run).then_some(started / 1000);
    let released = store
        .reconcile_runs()
        .release_lease(&owner, new_cursor)
        .await;
    // The run's own outcome, unless it could not be recorded or its lease released.
    recorded
        .and(released)
        .map_err(ReconcileError::from)
        .and(outcome)
}

/// One run under its lease: where it starts, whether it writes, and the key its claims name.
struct LeasedRun<'a> {
    since: Option<i64>,
    cursor: Option<i64>,
    dry_run: bool,
    started: i64,
    key: &'a str,
}

async fn run_leased(
    store: &Store,
    api: &StripeApi,
    config: &ReconcileConfig,
    run: &LeasedRun<'_>,
) -> Result<ReconcileReport, ReconcileError> {
    let LeasedRun {
        since,
        cursor,
        dry_run,
        started,
        key: run_key,
    } = *run;
    let from = start(since, cursor, config, started / 1000);
    let mut report = ReconcileReport {
        since: from,
        dry_run,
        ..ReconcileReport::default()
    };
    // Every page first: a failure here leaves the database as it was.
    let mut events = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = list_with_backoff(api, config, from, after.as_deref()).await?;
        report.pages += 1;
        after = page
            .events
            .last()
            .and_then(|e| e["id"].as_str())
            .map(str::to_owned);
        let done = !page.has_more || after.is_none();
        events.extend(page.events);
        if done {
            break;
        }
    }
    // Oldest first, as Stripe created them: a session before its refund.
    events.reverse();
    for event in events {
        let body = event.to_string();
        let envelope = match Envelope::parse(body.as_bytes()) {
            Ok(envelope) if envelope.livemode == (config.mode == StripeMode::Live) => envelope,
            Ok(_) | Err(_) => {
                report.skipped += 1;
                continue;
            }
        };
        let (Some(object_id), Some(action_key)) =
            (envelope.object_id.clone(), envelope.action_key.clone())
        else {
            report.skipped += 1;
            continue;
        };
        report.listed += 1;
        let counts = report
            .per_type
            .entry(envelope.event_type.clone())
            .or_default();
        counts.listed += 1;
        if dry_run {
            if store.claims().knows_event(&envelope).await? {
                report.already_claimed += 1;
                counts.already_claimed += 1;
            } else {
                report.claimed += 1;
                counts.claimed += 1;
            }
            continue;
        }
        let event_id = envelope.id.clone();
        let op = WriteOp::Claim {
            envelope,
            object_id,
            action_key,
            payload: body,
            received_at: crate::clock::now_ms(),
            source: ClaimSource::Reconcile,
        };
        match store.claims().apply_writes(&[&op]).await?.pop() {
            Some(WriteResult::Claim(ClaimOutcome::Claimed)) => {
                store
                    .reconcile_runs()
                    .mark_recovered(event_id.as_str(), run_key)
                    .await?;
                report.claimed += 1;
                counts.claimed += 1;
            }
            _ => {
                report.already_claimed += 1;
                counts.already_claimed += 1;
            }
        }
    }
    Ok(report)
}

async fn list_with_backoff(
    api: &StripeApi,
    config: &ReconcileConfig,
    from: i64,
    after: Option<&str>,
) -> Result<crate::stripe::EventPage, ReconcileError> {
    let acting: Vec<&str> = EventKind::acting().map(EventKind::as_str).collect();
    let backoff = Backoff::new(config.base_backoff, Duration::from_secs(30));
    let mut backoffs = 0;
    loop {
        match api
            .list_events(&acting, from, after, config.page_size)
            .await
        {
            Err(ListError::RateLimited) if backoffs < config.max_backoffs => {
                let wait = backoff.delay(backoffs);
                backoffs += 1;
                tracing::warn!(
                    wait_ms = backoff::millis(wait),
                    "Stripe rate limits the event listing; waiting"
                );
                tokio::time::sleep(wait).await;
            }
            other => return Ok(other?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_starts_at_the_cursor_minus_the_overlap_within_thirty_days() {
        let config = ReconcileConfig::default();
        let now = 100 * 86_400;
        assert_eq!(start(None, None, &config, now), now - 3 * 86_400);
        assert_eq!(start(None, Some(now - 600), &config, now), now - 600 - 3600);
        assert_eq!(
            start(Some(now - 60), Some(now - 600), &config, now),
            now - 60
        );
        assert_eq!(start(Some(0), None, &config, now), now - 30 * 86_400);
    }
}
