//! The overview: claims by state, deliveries per hour, acknowledgement latency, credits today, the last reconcile run, what the server knows of its health, and the last 30 days in pictures.

use super::*;

/// The overview page's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// "sqlite" or "postgres".
    pub backend: String,
    /// When the server read these figures, as text in UTC.
    pub checked_at: String,
    /// Claims per state, in the order operators read them.
    pub claims: Vec<StateCount>,
    /// Deliveries per hour over the last 24 hours, oldest first.
    pub hours: Vec<HourCount>,
    /// Acknowledgement latency bounds (ms) since this server started, and over how many.
    pub ack_p50_ms: Option<f64>,
    pub ack_p99_ms: Option<f64>,
    pub acked: u64,
    /// Credits unlocked since midnight UTC.
    pub credits_today: i64,
    /// The reconciler's last run, if any.
    pub reconcile: Option<ReconcileSummary>,
    /// Deliveries refused for their signature since the last accepted one (this server).
    pub bad_signatures_in_a_row: u64,
    /// The operator may reconcile now (an admin, with STRIPE_API_KEY configured).
    pub can_reconcile: bool,
    /// Since when the database refuses this server's writes for lack of space (disk full),
    /// in the reader's time; `None` while writes go through.
    pub storage_full_since: Option<String>,
    /// The last [`DAYS`] UTC days, oldest first.
    pub days: Vec<DayRow>,
    /// The currency the days' money is in ("CHF"): the one most was paid in.
    pub currency: String,
}

/// How many days the overview's pictures show.
pub const DAYS: usize = 30;

/// One UTC day of the overview's pictures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayRow {
    /// The day the reader's way: `03.12.`, `3 Dec`.
    pub label: String,
    /// Credits unlocked, and taken back for refunds and disputes.
    pub credits: [i64; 2],
    /// Paid, refunded and disputed, in minor units of [`Overview::currency`], and the same
    /// written the reader's way.
    pub money: [i64; 3],
    pub money_text: [String; 3],
    /// The most failed and stale claims seen that day; `None` without a sample.
    pub backlog: Option<[i64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcileSummary {
    pub at: String,
    pub actor: String,
    pub dry_run: bool,
    pub listed: i64,
    pub claimed: i64,
    pub error: Option<String>,
}

/// What the dashboard knows of the webhook and the reconciler, from the server.
#[cfg(feature = "ssr")]
#[derive(Clone)]
pub struct ServerHealth {
    pub bad_signatures_in_a_row: std::sync::Arc<dyn Fn() -> u64 + Send + Sync>,
    pub stripe: Option<claimcheck_core::stripe::StripeApi>,
    pub reconcile: claimcheck_core::reconcile::ReconcileConfig,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HourCount {
    /// "14:00" (UTC), the start of the hour.
    pub label: String,
    /// Claimed (new events).
    pub claimed: i64,
    /// Duplicates and twins answered 200 without a new claim.
    pub duplicate: i64,
    /// Ignored types and refused payloads.
    pub other: i64,
}

/// Where the overview reads acknowledgement latencies: the server's own metrics.
#[cfg(feature = "ssr")]
#[derive(Clone)]
pub struct AckLatency(pub std::sync::Arc<dyn Fn(f64) -> Option<(f64, u64)> + Send + Sync>);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateCount {
    pub state: ClaimState,
    pub count: i64,
}

/// Claims per state and when they were counted.
#[server(prefix = "/dashboard/fn", endpoint = "overview")]
pub async fn get_overview() -> Result<Overview, ServerFnError> {
    use claimcheck_core::{ClaimState, DeliveryOutcome, now_ms};

    let (store, operator) = server::require(Role::Viewer).await?;
    let reader = crate::i18n::reader();
    let now = now_ms();
    let counts = store
        .claims()
        .counts(now)
        .await
        .map_err(server::unavailable)?;
    // 24 whole hours ending with the current one.
    let hour = 3_600_000;
    let since = (now / hour - 23) * hour;
    let mut hours: Vec<HourCount> = (0..24)
        .map(|i| HourCount {
            label: reader.hour(since + i * hour),
            claimed: 0,
            duplicate: 0,
            other: 0,
        })
        .collect();
    for (i, outcome, n) in store
        .claims()
        .deliveries_by_hour(since)
        .await
        .map_err(server::unavailable)?
    {
        if let Some(bucket) = usize::try_from(i).ok().and_then(|i| hours.get_mut(i)) {
            match outcome {
                DeliveryOutcome::Claimed => bucket.claimed += n,
                DeliveryOutcome::DuplicateEvent | DeliveryOutcome::DuplicateAction => {
                    bucket.duplicate += n
                }
                _ => bucket.other += n,
            }
        }
    }
    let midnight = now - now.rem_euclid(86_400_000);
    let credits_today = store
        .orders()
        .credits_unlocked_since(midnight)
        .await
        .map_err(server::unavailable)?;
    let days = day_rows(&store, reader, now).await?;
    let latency = use_context::<AckLatency>();
    let quantile = |q| latency.as_ref().and_then(|l| (l.0)(q));
    let health = use_context::<ServerHealth>();
    let reconcile = store
        .reconcile_runs()
        .recent(1, false)
        .await
        .map_err(server::unavailable)?
        .pop()
        .map(|run| ReconcileSummary {
            at: server::time(run.finished_at),
            actor: run.actor,
            dry_run: run.dry_run,
            listed: run.listed,
            claimed: run.claimed,
            error: run.error,
        });
    Ok(Overview {
        reconcile,
        bad_signatures_in_a_row: health
            .as_ref()
            .map(|h| (h.bad_signatures_in_a_row)())
            .unwrap_or(0),
        can_reconcile: operator.role.can_administer()
            && health.as_ref().is_some_and(|h| h.stripe.is_some()),
        storage_full_since: match store.write_health().writes() {
            claimcheck_core::Writes::RefusedFull { since } => Some(reader.time(since)),
            claimcheck_core::Writes::Accepted => None,
        },
        backend: store.backend().as_str().to_owned(),
        checked_at: reader.time_precise(now),
        claims: ClaimState::ALL
            .into_iter()
            .map(|state| StateCount {
                state,
                count: counts.get(state),
            })
            .collect(),
        hours,
        ack_p50_ms: quantile(0.5).map(|(ms, _)| ms),
        ack_p99_ms: quantile(0.99).map(|(ms, _)| ms),
        acked: quantile(0.5).map(|(_, n)| n).unwrap_or(0),
        credits_today,
        currency: days.0,
        days: days.1,
    })
}

/// The last [`DAYS`] days of credits, money and backlog, and the currency of the money.
#[cfg(feature = "ssr")]
async fn day_rows(
    store: &claimcheck_core::Store,
    reader: crate::i18n::Reader,
    now: i64,
) -> Result<(String, Vec<DayRow>), ServerFnError> {
    use claimcheck_core::History;

    let since = History::since(now, DAYS);
    let credits = store.orders().credits_by_day(since).await;
    let money = store.orders().money_by_day(since).await;
    let backlog = store.alerts().backlog_by_day(since).await;
    let history = History::assemble(
        now,
        DAYS,
        &credits.map_err(server::unavailable)?,
        &money.map_err(server::unavailable)?,
        &backlog.map_err(server::unavailable)?,
    );
    let currency = history.currency;
    let rows = history
        .days
        .into_iter()
        .map(|d| {
            let money = [d.revenue, d.refunds, d.chargebacks];
            DayRow {
                label: reader.utc_day(d.day),
                credits: [d.unlocked, d.revoked],
                money_text: money.map(|minor| reader.money(minor, &currency)),
                money,
                backlog: d.failed.zip(d.stale).map(|(failed, stale)| [failed, stale]),
            }
        })
        .collect();
    Ok((currency.to_uppercase(), rows))
}
