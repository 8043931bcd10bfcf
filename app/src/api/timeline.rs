//! One order's timeline: every delivery of its events, what its claims came to, its ledger,
//! its Stripe requests and what operators did to it, in time order. The server gathers the
//! facts; the page puts them in the reader's words.

use claimcheck_core::outgoing::RequestStatus;
use claimcheck_core::{ClaimState, DeliveryOutcome};

use super::*;

/// What happened, as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimelineWhat {
    /// Stripe delivered an event (or the reconciler fetched it: `recovered_by` names the
    /// run), and what became of the delivery; `detail` is why it was refused or, for a failed
    /// payment, Stripe's reason.
    Delivery {
        event_id: Option<String>,
        event_type: String,
        outcome: DeliveryOutcome,
        detail: Option<String>,
        recovered_by: Option<i64>,
    },
    /// A claim's attempts so far and the last error, while it is not done.
    Attempts {
        event_id: String,
        event_type: String,
        state: ClaimState,
        attempts: i64,
        last_error: Option<String>,
    },
    /// A claim was fulfilled.
    Processed {
        event_id: String,
        event_type: String,
    },
    /// An admin resolved a claim without re-driving it.
    Resolved {
        event_id: String,
        event_type: String,
        by: String,
        reason: String,
    },
    /// A credit ledger entry, with the money behind it in words.
    Ledger {
        kind: LedgerKind,
        delta: i64,
        money: String,
    },
    /// An outgoing Stripe request under its Idempotency-Key, as it last stood.
    Request {
        idempotency_key: String,
        operation: String,
        status: RequestStatus,
        error: Option<String>,
    },
    /// An operator's audited action on the order or one of its events.
    Audit {
        actor: String,
        action: String,
        reason: String,
        outcome: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineItem {
    pub at: String,
    pub at_ms: i64,
    pub what: TimelineWhat,
}

/// The timeline of `order`, oldest first, and the run numbers its recovered claims name.
#[cfg(feature = "ssr")]
pub async fn order_timeline(
    store: &claimcheck_core::Store,
    order: &claimcheck_core::OrderView,
    history: &claimcheck_core::OrderHistory,
    ledger: &[LedgerRow],
) -> Result<Vec<TimelineItem>, claimcheck_core::StoreError> {
    use std::collections::HashMap;

    let reader = crate::i18n::reader();
    let mut items = Vec::new();
    let mut runs: HashMap<String, Option<i64>> = HashMap::new();
    for claim in &history.claims {
        if let Some(key) = &claim.source_run
            && !runs.contains_key(key)
        {
            let run = store.reconcile_runs().by_key(key).await?.map(|r| r.id);
            runs.insert(key.clone(), run);
        }
    }
    let recovered: HashMap<&str, i64> = history
        .claims
        .iter()
        .filter_map(|c| {
            let run = runs.get(c.source_run.as_deref()?).copied().flatten()?;
            Some((c.event_id.as_str(), run))
        })
        .collect();
    for d in &history.deliveries {
        let recovered_by = match (d.outcome, d.event_id.as_deref()) {
            (DeliveryOutcome::Claimed, Some(id)) => recovered.get(id).copied(),
            _ => None,
        };
        items.push(TimelineItem {
            at: reader.time(d.received_at),
            at_ms: d.received_at,
            what: TimelineWhat::Delivery {
                event_id: d.event_id.clone(),
                event_type: d.event_type.clone().unwrap_or_default(),
                outcome: d.outcome,
                detail: d.detail.clone(),
                recovered_by,
            },
        });
    }
    for c in &history.claims {
        let (event_id, event_type) = (c.event_id.clone(), c.event_type.clone());
        match (c.processed_at, c.resolved_at) {
            (Some(at), _) => items.push(TimelineItem {
                at: reader.time(at),
                at_ms: at,
                what: TimelineWhat::Processed {
                    event_id,
                    event_type,
                },
            }),
            (None, Some(at)) => items.push(TimelineItem {
                at: reader.time(at),
                at_ms: at,
                what: TimelineWhat::Resolved {
                    event_id,
                    event_type,
                    by: c.resolved_by.clone().unwrap_or_default(),
                    reason: c.resolution.clone().unwrap_or_default(),
                },
            }),
            (None, None) if c.attempts > 0 || c.status != ClaimState::Pending => {
                // Still open: where it stands, as of its last attempt (or its receipt).
                let at = c.next_attempt_at.max(c.received_at);
                items.push(TimelineItem {
                    at: reader.time(at),
                    at_ms: at,
                    what: TimelineWhat::Attempts {
                        event_id,
                        event_type,
                        state: c.status,
                        attempts: c.attempts,
                        last_error: c.last_error.clone(),
                    },
                });
            }
            (None, None) => {}
        }
    }
    for e in ledger {
        items.push(TimelineItem {
            at: e.at.clone(),
            at_ms: e.at_ms,
            what: TimelineWhat::Ledger {
                kind: e.kind,
                delta: e.delta,
                money: e.money.clone(),
            },
        });
    }
    for r in &order.stripe_requests {
        items.push(TimelineItem {
            at: reader.time(r.created_at),
            at_ms: r.created_at,
            what: TimelineWhat::Request {
                idempotency_key: r.idempotency_key.clone(),
                operation: r.operation.clone(),
                status: r.status,
                error: r.error.clone(),
            },
        });
    }
    let mut targets = vec![order.order_id.clone()];
    targets.extend(history.claims.iter().map(|c| c.event_id.clone()));
    for target in targets {
        for entry in store.audit().about(&target).await? {
            items.push(TimelineItem {
                at: reader.time(entry.at),
                at_ms: entry.at,
                what: TimelineWhat::Audit {
                    actor: entry.actor,
                    action: entry.action,
                    reason: entry.reason,
                    outcome: entry.outcome,
                },
            });
        }
    }
    // Stable: what happened at one instant keeps the order it was gathered in (a delivery
    // before the claim's outcome, before the ledger entry it wrote).
    items.sort_by_key(|item| item.at_ms);
    Ok(items)
}
