//! A reconcile run an operator asks for, audited with its reason and what it found.

use super::Actor;
use crate::audit::{AuditAction, AuditRecord};
use crate::clock::now_ms;
use crate::reconcile::{ReconcileConfig, ReconcileError, ReconcileReport, run};
use crate::store::Store;
use crate::stripe::StripeApi;

/// One reconcile run now, through the same path as the periodic reconciler. Unless it is a
/// dry run, the audit log gets who asked, why, and the outcome (a failed or refused run
/// too); an audit entry that cannot be written fails the call like the run would.
pub async fn reconcile_now(
    store: &Store,
    api: &StripeApi,
    config: &ReconcileConfig,
    actor: &Actor,
    reason: &str,
    since: Option<i64>,
    dry_run: bool,
) -> Result<ReconcileReport, ReconcileError> {
    if dry_run {
        return run(store, api, config, &actor.to_string(), since, dry_run).await;
    }
    let reason = crate::audit::reason(reason)?;
    let outcome = run(store, api, config, &actor.to_string(), since, dry_run).await;
    let what = match &outcome {
        Ok(report) => format!(
            "{} events listed, {} claimed that Stripe never delivered",
            report.listed, report.claimed
        ),
        Err(error) => format!("failed: {error}"),
    };
    store
        .audit()
        .record(
            &AuditRecord {
                actor,
                action: AuditAction::Reconcile,
                target: "stripe-events",
                reason,
                outcome: &what,
            },
            now_ms(),
        )
        .await?;
    outcome
}
