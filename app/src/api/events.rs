//! The events (claims) list and one event's page: payload, deliveries, timeline, the order it touches.
// A server function's arguments are the fields of its page's filter form, one each.
#![allow(clippy::too_many_arguments)]

use super::*;
use claimcheck_core::ClaimSource;

/// A claim in a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRow {
    pub event_id: String,
    pub event_type: String,
    pub object_id: String,
    pub status: ClaimState,
    pub attempts: i64,
    pub last_error: Option<String>,
    pub received_at: String,
    /// How long ago it was received, in words.
    pub age: String,
    pub received_ms: i64,
    /// Where it came from.
    pub source: ClaimSource,
    /// When a claim that is waiting for its next attempt gets it, in words.
    pub next_attempt: Option<String>,
    /// Who resolved it without re-driving, and why.
    pub resolved_by: Option<String>,
    pub resolution: Option<String>,
    /// Whose it is and what was paid, on the lists that say so
    /// ([`crate::api::server::with_summaries`]).
    pub customer: Option<String>,
    pub order_id: Option<String>,
    pub amount: Option<String>,
    /// A claim of a type this version does not fulfil, waiting for the newer version that
    /// made it ([`claimcheck_core::ClaimView::waits_for_a_newer_version`]).
    pub for_a_newer_version: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventsPage {
    pub rows: Vec<ClaimRow>,
    /// The cursor of the next page (`received_ms:event_id`), if there is one.
    pub next: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventDeliveryRow {
    pub outcome: String,
    pub received_at: String,
    pub detail: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub at: String,
    pub what: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventDetail {
    pub claim: ClaimRow,
    pub payload: String,
    pub deliveries: Vec<EventDeliveryRow>,
    pub timeline: Vec<TimelineEntry>,
    pub order: Option<OrderDetail>,
    /// The order the event names (metadata.order_id or client_reference_id), known even
    /// before its first fulfilment created the order.
    pub order_id: Option<String>,
    /// Whether a re-drive can take it now (pending, stale or failed).
    pub redrivable: bool,
    /// The number of the reconcile run that recovered it, for a claim the reconciler made.
    pub recovered_by: Option<i64>,
}

/// Events (claims), newest first, filtered and searched, 50 per page.
#[server(prefix = "/dashboard/fn", endpoint = "events")]
pub async fn list_events(
    status: String,
    event_type: String,
    search: String,
    from: String,
    to: String,
    after: String,
    /// webhook or reconcile; empty or absent: both.
    source: Option<String>,
    /// A reconcile run's number: only the claims it recovered.
    run: Option<String>,
) -> Result<EventsPage, ServerFnError> {
    use claimcheck_core::{EventFilter, now_ms};

    const PAGE: i64 = 50;
    let (store, _) = server::require(Role::Viewer).await?;
    let nonempty = |s: String| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
    let state = match nonempty(status) {
        None => None,
        Some(s) => Some(server::claim_state(&s)?),
    };
    let source = match source.and_then(nonempty) {
        None => None,
        Some(s) => Some(s.parse::<ClaimSource>().map_err(|_| {
            server::bad_input(td_string!(
                server::locale(),
                messages.not_a_source,
                source = s
            ))
        })?),
    };
    let source_run = match run.and_then(nonempty) {
        None => None,
        Some(n) => {
            let number = n.parse::<i64>().map_err(|_| {
                server::bad_input(td_string!(
                    server::locale(),
                    messages.not_a_run,
                    run = n.clone()
                ))
            })?;
            // An unknown run recovered nothing: a key no claim carries.
            Some(
                store
                    .reconcile_runs()
                    .key_of(number)
                    .await
                    .map_err(server::unavailable)?
                    .unwrap_or_else(|| format!("no run #{number}")),
            )
        }
    };
    let filter = EventFilter {
        state,
        event_type: nonempty(event_type),
        from: server::day(&from, false)?,
        to: server::day(&to, true)?,
        search: nonempty(search),
        error_contains: None,
        source,
        source_run,
        event_ids: Vec::new(),
    };
    let after = after
        .split_once(':')
        .and_then(|(at, id)| Some((at.parse::<i64>().ok()?, id.to_owned())));
    let mut rows = store
        .claims()
        .list_events(&filter, after, now_ms(), PAGE + 1)
        .await
        .map_err(server::unavailable)?;
    let more = rows.len() as i64 > PAGE;
    rows.truncate(PAGE as usize);
    let next = more
        .then(|| {
            rows.last()
                .map(|r| format!("{}:{}", r.received_at, r.event_id))
        })
        .flatten();
    let rows = server::with_summaries(&store, rows.into_iter().map(server::claim_row).collect())
        .await
        .map_err(server::unavailable)?;
    Ok(EventsPage { rows, next })
}

/// One event: its claim, payload, deliveries, timeline and the order it touched.
#[server(prefix = "/dashboard/fn", endpoint = "event")]
pub async fn get_event(event_id: String) -> Result<EventDetail, ServerFnError> {
    use crate::i18n::names;
    use claimcheck_core::fulfilment::{OrderRef, order_ref};
    use claimcheck_core::{EventId, now_ms};

    let (store, _) = server::require(Role::Viewer).await?;
    let id = EventId::parse(event_id.trim()).map_err(|e| server::not_found(e.to_string()))?;
    let now = now_ms();
    let claim = store
        .claims()
        .get(&id, now)
        .await
        .map_err(server::unavailable)?
        .ok_or_else(|| {
            server::not_found(td_string!(
                server::locale(),
                messages.no_event,
                id = id.clone()
            ))
        })?;
    let payload = store
        .claims()
        .payload(&id)
        .await
        .map_err(server::unavailable)?
        .unwrap_or_default();
    let locale = server::locale();
    let pretty = if payload.is_empty() {
        td_string!(locale, messages.payload_pruned).to_string()
    } else {
        serde_json::from_str::<serde_json::Value>(&payload)
            .and_then(|v| serde_json::to_string_pretty(&v))
            .unwrap_or(payload.clone())
    };
    let deliveries = store
        .claims()
        .deliveries(&id)
        .await
        .map_err(server::unavailable)?
        .into_iter()
        .map(|d| EventDeliveryRow {
            outcome: names::outcome(locale, d.outcome),
            received_at: server::time(d.received_at),
            detail: d.detail.or(d
                .duplicate_of
                .map(|event| td_string!(locale, messages.claimed_by, event))),
        })
        .collect();
    let reference = order_ref(&claim.event_type, &payload);
    let order = match &reference {
        Some(reference) => store
            .orders()
            .of_ref(reference)
            .await
            .map_err(server::unavailable)?
            .map(server::order_detail),
        None => None,
    };
    // A session names its order even before fulfilment has written it.
    let order_id = match &reference {
        Some(OrderRef::Order(order_id)) => Some(order_id.to_string()),
        _ => order.as_ref().map(|o| o.order_id.clone()),
    };
    let audit = store
        .audit()
        .about(&claim.event_id)
        .await
        .map_err(server::unavailable)?;
    let recovered_by = match &claim.source_run {
        Some(key) => store
            .reconcile_runs()
            .by_key(key)
            .await
            .map_err(server::unavailable)?
            .map(|run| run.id),
        None => None,
    };
    let mut timeline = vec![TimelineEntry {
        at: server::time(claim.received_at),
        what: match (claim.source, recovered_by) {
            (ClaimSource::Reconcile, Some(run)) => {
                td_string!(locale, messages.timeline_recovered_run, run)
            }
            (ClaimSource::Reconcile, None) => {
                td_string!(locale, messages.timeline_recovered).to_string()
            }
            (ClaimSource::Webhook, _) => td_string!(locale, messages.timeline_claimed).to_string(),
        },
    }];
    for entry in audit {
        let (action, actor, reason, outcome) =
            (entry.action, entry.actor, entry.reason, entry.outcome);
        timeline.push(TimelineEntry {
            at: server::time(entry.at),
            what: td_string!(
                locale,
                messages.timeline_audit,
                action,
                actor,
                reason,
                outcome
            ),
        });
    }
    if let Some(owner) = &claim.lease_owner {
        let until = claim.lease_expires_at.map(server::time).unwrap_or_default();
        timeline.push(TimelineEntry {
            at: until.clone(),
            what: td_string!(
                locale,
                messages.timeline_leased,
                owner,
                until = until.clone()
            ),
        });
    }
    if claim.attempts > 0 {
        let n = claim.attempts;
        timeline.push(TimelineEntry {
            at: String::new(),
            what: match (claim.last_error.as_deref(), n) {
                (Some(error), 1) => {
                    td_string!(locale, messages.timeline_attempts_error_one, n, error)
                }
                (Some(error), _) => td_string!(locale, messages.timeline_attempts_error, n, error),
                (None, 1) => td_string!(locale, messages.timeline_attempts_one, n),
                (None, _) => td_string!(locale, messages.timeline_attempts, n),
            },
        });
    }
    if let Some(at) = claim.processed_at {
        timeline.push(TimelineEntry {
            at: server::time(at),
            what: names::state(locale, ClaimState::Processed),
        });
    }
    // A newer version's claim is that version's to fulfil: no re-drive from here.
    let redrivable = claim.status.is_redrivable() && !claim.waits_for_a_newer_version();
    Ok(EventDetail {
        claim: server::claim_row(claim),
        payload: pretty,
        deliveries,
        timeline,
        order,
        order_id,
        redrivable,
        recovered_by,
    })
}
