//! The background tasks `serve` runs beside the workers: the reconciler and upkeep.

use std::time::Duration;

use claimcheck_core::Store;
use claimcheck_core::stripe::StripeApi;
use tokio::sync::watch;

use crate::config::ReconcileSchedule;

/// Runs the reconciler every `schedule.interval`, the first time shortly after start. A run
/// another instance holds is skipped; a failed run is logged and changes nothing. The run
/// reports itself to the client's observer (the metrics).
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

/// Background upkeep every few minutes: expired dashboard sessions are deleted (a session
/// nobody uses again would otherwise stay in the table), and with a retention period the
/// old delivery logs and payloads are pruned in small batches.
pub(crate) async fn housekeeping(
    store: Store,
    retention: Option<Duration>,
    mut stop: watch::Receiver<bool>,
) {
    const EVERY: Duration = Duration::from_secs(5 * 60);
    while !*stop.borrow() {
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
