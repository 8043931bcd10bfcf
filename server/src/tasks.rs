//! The background tasks `serve` runs beside the workers: the reconciler, the alert checks and
//! their sender, and upkeep. Each reports to the metrics; the alerting and the metrics do not
//! know each other.

use std::sync::Arc;
use std::time::Duration;

use claimcheck_core::Store;
use claimcheck_core::stripe::StripeApi;
use tokio::sync::{Notify, watch};

use crate::alerts::{AlertRuntime, deliver_due};
use crate::config::ReconcileSchedule;
use crate::metrics::Metrics;

/// Runs the reconciler every `schedule.interval`, the first time shortly after start. A run
/// another instance holds is skipped; a failed run is logged and changes nothing. The run
/// reports itself to the client's observer (the metrics).
/// Claims the deliveries an earlier version recorded as ignored whose type this one acts on
/// (at start-up and before each reconcile run); a failure is logged and tried again then.
pub(crate) async fn adopt_ignored(store: &Store) {
    match claimcheck_core::adoption::adopt_ignored(store, claimcheck_core::now_ms()).await {
        Ok(adopted) if adopted.claimed + adopted.twins > 0 => tracing::warn!(
            claimed = adopted.claimed,
            twins = adopted.twins,
            "adopted deliveries an earlier version recorded as ignored"
        ),
        Ok(_) => {}
        Err(error) => tracing::warn!(
            error = &error as &dyn std::error::Error,
            "cannot adopt ignored deliveries; trying again at the next reconcile run or start"
        ),
    }
}

pub(crate) async fn reconcile_periodically(
    store: Store,
    api: StripeApi,
    schedule: ReconcileSchedule,
    mut stop: watch::Receiver<bool>,
) {
    let mut wait = Duration::from_secs(5).min(schedule.interval);
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        wait = schedule.interval;
        adopt_ignored(&store).await;
        let outcome = claimcheck_core::reconcile::run(
            &store,
            &api,
            &schedule.config,
            "reconciler",
            None,
            false,
        )
        .await;
        match outcome {
            Ok(report) if report.claimed > 0 => tracing::warn!(
                claimed = report.claimed,
                listed = report.listed,
                "reconcile: events Stripe never delivered were claimed"
            ),
            Ok(report) => tracing::debug!(listed = report.listed, "reconcile: nothing missing"),
            Err(claimcheck_core::reconcile::ReconcileError::Busy) => {
                tracing::debug!("reconcile: another instance is running it")
            }
            Err(error) => tracing::error!(
                error = &error as &dyn std::error::Error,
                "reconcile run failed; the cursor stays where it was"
            ),
        }
    }
}

/// Background upkeep every few minutes: claims written without their search terms (before
/// the terms existed, or by an older version during a rolling deploy) are indexed, the
/// backlog is sampled for the overview, expired dashboard sessions are deleted (a session
/// nobody uses again would otherwise stay in the table), and with a retention period the
/// old delivery logs and payloads are pruned in small batches, after their terms were read.
pub(crate) async fn housekeeping(
    store: Store,
    retention: Option<Duration>,
    mut stop: watch::Receiver<bool>,
) {
    const EVERY: Duration = Duration::from_secs(5 * 60);
    while !*stop.borrow() {
        index_search_terms(&store, &stop).await;
        // The overview's backlog over time: the first sample of each hour stands.
        if let Err(error) = sample_backlog(&store, claimcheck_core::now_ms()).await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "cannot sample the backlog; trying again later"
            );
        }
        if let Some(retention) = retention {
            let before = claimcheck_core::now_ms()
                - i64::try_from(retention.as_millis()).unwrap_or(i64::MAX / 2);
            match store.prune(before, 500).await {
                Ok((0, 0)) => {}
                Ok((deliveries, payloads)) => {
                    tracing::info!(deliveries, payloads, "pruned past the retention period")
                }
                Err(error) => tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "pruning failed; trying again later"
                ),
            }
        }
        // An ignored delivery's payload waits this long for a version that acts on its type.
        let adopt_within =
            i64::try_from(claimcheck_core::adoption::ADOPT_WITHIN.as_millis()).unwrap_or(0);
        if let Err(error) = store
            .claims()
            .forget_ignored_payloads(claimcheck_core::now_ms() - adopt_within, 1000)
            .await
        {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "cannot forget old ignored payloads; trying again later"
            );
        }
        match store
            .sessions()
            .delete_expired(claimcheck_core::now_ms())
            .await
        {
            Ok(0) => {}
            Ok(deleted) => tracing::debug!(deleted, "expired dashboard sessions deleted"),
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "deleting expired sessions failed; trying again later"
            ),
        }
        tokio::select! {
            () = tokio::time::sleep(EVERY) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Every `every` (30 seconds by default): holds past their expiry are released and lots past theirs expire (each
/// once, whatever the number of instances), and the answers kept under Idempotency-Keys
/// longer than they must be are forgotten. A request reads its customer's holds and lots up
/// to date itself; this makes them so for everyone else (the dashboard, the metrics).
pub(crate) async fn expire_credits_periodically(
    store: Store,
    packages: Arc<claimcheck_core::fulfilment::Packages>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        let now = claimcheck_core::now_ms();
        match store.credits().expire_due(&packages, now, 500).await {
            Ok((0, 0)) => {}
            Ok((holds, lots)) => tracing::info!(holds, lots, "expired holds and lots"),
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "expiring holds and lots failed; trying again later"
            ),
        }
        let before = now - claimcheck_core::spending::KEYS_KEPT_MS;
        if let Err(error) = store.credits().prune_keys(before).await {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "forgetting old Idempotency-Keys failed; trying again later"
            );
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Indexes every claim still without its search terms, in small transactions so that
/// ingestion is never held up for long.
async fn index_search_terms(store: &Store, stop: &watch::Receiver<bool>) {
    let mut indexed = 0;
    while !*stop.borrow() {
        match store.claims().index_unindexed(200).await {
            Ok(0) => break,
            Ok(n) => indexed += n,
            Err(error) => {
                tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "indexing claims for the search failed; trying again later"
                );
                break;
            }
        }
        tokio::task::yield_now().await;
    }
    if indexed > 0 {
        tracing::info!(indexed, "claims indexed for the search");
    }
}

/// Checks the conditions every `check_interval` (the first time right away), after adding the
/// signature failures this process refused since the last check to the shared count. Wakes
/// the sender when a check queued messages.
pub(crate) async fn check_alerts_periodically(
    store: Store,
    runtime: AlertRuntime,
    metrics: Arc<Metrics>,
    queued: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let mut counted = 0;
    while !*stop.borrow() {
        let now = claimcheck_core::now_ms();
        let refused = metrics.bad_signatures_total();
        if refused > counted {
            match store
                .alerts()
                .record_signature_failures(refused - counted, now)
                .await
            {
                Ok(()) => counted = refused,
                Err(error) => tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "cannot count signature failures; trying again at the next check"
                ),
            }
        }
        match claimcheck_core::alert_check::check(&store, &runtime.policy, now).await {
            Ok(changes) => {
                metrics.observe_alert_changes(&changes);
                for change in &changes {
                    tracing::warn!(condition = %change.condition, kind = change.kind.as_str(), "alert");
                }
                if !changes.is_empty() {
                    queued.notify_one();
                }
            }
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "alert check failed; trying again at the next one"
            ),
        }
        tokio::select! {
            () = tokio::time::sleep(runtime.check_interval) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Remembers how many claims are failed and stale now, for the overview's backlog picture.
async fn sample_backlog(store: &Store, now: i64) -> Result<(), claimcheck_core::StoreError> {
    let counts = store.claims().counts(now).await?;
    store
        .alerts()
        .record_backlog(
            now,
            counts.get(claimcheck_core::ClaimState::Failed),
            counts.get(claimcheck_core::ClaimState::Stale),
        )
        .await
}

/// Sends what is due whenever a check queued something, and every few seconds for retries.
pub(crate) async fn send_alerts_periodically(
    store: Store,
    runtime: AlertRuntime,
    metrics: Arc<Metrics>,
    queued: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let every = runtime.check_interval.min(Duration::from_secs(5));
    while !*stop.borrow() {
        if !runtime.channels.configured().is_empty() {
            let now = claimcheck_core::now_ms();
            match deliver_due(&store, &runtime.channels, &runtime.retry, now).await {
                Ok(report) => metrics.observe_alert_messages(&report),
                Err((report, error)) => {
                    metrics.observe_alert_messages(&report);
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "sending alert messages failed; trying again shortly"
                    );
                }
            }
        }
        tokio::select! {
            () = queued.notified() => {}
            () = tokio::time::sleep(every) => {}
            _ = stop.changed() => {}
        }
    }
}
