//! The reconcile page: the runs so far (the periodic reconciler's, the CLI's, the
//! dashboard's, dry runs too). Opening it asks Stripe nothing; a dry run and a real run are
//! form posts (`/dashboard/actions/reconcile/preview`, `/dashboard/actions/reconcile`).

use super::*;

/// One reconcile run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileRunRow {
    pub started_at: String,
    /// Stripe's events were listed from here on.
    pub since: String,
    pub actor: String,
    pub dry_run: bool,
    pub listed: i64,
    pub already_claimed: i64,
    /// Claimed (or, for a dry run, would have been claimed).
    pub claimed: i64,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileHistory {
    /// False without STRIPE_API_KEY: nothing can be listed.
    pub configured: bool,
    /// The reader may run it (admins).
    pub can_run: bool,
    pub runs: Vec<ReconcileRunRow>,
}

#[server(prefix = "/dashboard/fn", endpoint = "reconcile_history")]
pub async fn get_reconcile_history() -> Result<ReconcileHistory, ServerFnError> {
    /// Runs shown at most.
    const RUNS_SHOWN: i64 = 50;

    let (store, operator) = server::require(Role::Viewer).await?;
    let configured = use_context::<ServerHealth>().is_some_and(|h| h.stripe.is_some());
    let runs = store
        .reconcile_runs()
        .recent(RUNS_SHOWN, true)
        .await
        .map_err(server::unavailable)?
        .into_iter()
        .map(|run| ReconcileRunRow {
            started_at: server::time(run.started_at),
            since: server::time(run.since * 1000),
            actor: run.actor,
            dry_run: run.dry_run,
            listed: run.listed,
            already_claimed: run.already_claimed,
            claimed: run.claimed,
            error: run.error,
        })
        .collect();
    Ok(ReconcileHistory {
        configured,
        can_run: operator.role >= Role::Admin,
        runs,
    })
}
