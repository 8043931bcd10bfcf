//! An order's timeline in the reader's words: one line per thing that happened, oldest
//! first, each with the event or key it concerns.

use leptos::prelude::*;

use crate::api::{TimelineItem, TimelineWhat};
use crate::components::StateBadge;
use crate::i18n::*;
use crate::pages::orders::ledger_kind_name;
use crate::pages::requests::request_status_name;

#[component]
pub fn OrderTimeline(items: Vec<TimelineItem>) -> impl IntoView {
    let i18n = use_i18n();
    if items.is_empty() {
        return view! { <p class="empty">{t!(i18n, timeline.empty)}</p> }.into_any();
    }
    view! {
        <ol class="timeline" aria-label=move || t_string!(i18n, timeline.label) data-testid="order-timeline">
            {items.into_iter().map(|item| view! { <TimelineLine item/> }).collect_view()}
        </ol>
    }
    .into_any()
}

#[component]
fn TimelineLine(item: TimelineItem) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale();
    let event_link = |event_id: Option<String>| {
        event_id.map(|id| {
            let href = crate::links::event(&id);
            view! { " " <a href=href class="mono">{id}</a> }
        })
    };
    let (kind, line, more) = match item.what {
        TimelineWhat::Delivery {
            event_id,
            event_type,
            outcome,
            detail,
            recovered_by,
        } => {
            let outcome = names::outcome(locale, outcome);
            let recovered = recovered_by.map(|run| {
                let href = format!("/events?run={run}");
                view! { " · " <a href=href>{t!(i18n, timeline.recovered_by, run)}</a> }
            });
            (
                "delivery",
                view! { {t!(i18n, timeline.delivery, event_type, outcome)} {event_link(event_id)} {recovered} }
                    .into_any(),
                detail,
            )
        }
        TimelineWhat::Attempts {
            event_id,
            event_type,
            state,
            attempts,
            last_error,
        } => {
            let state_name = names::state(locale, state);
            (
                "attempts",
                view! {
                    {match attempts {
                        1 => t_string!(i18n, timeline.attempts_one, event_type, state = state_name, n = 1).to_string(),
                        n => t_string!(i18n, timeline.attempts, event_type, state = state_name, n).to_string(),
                    }}
                    " " <StateBadge state/> {event_link(Some(event_id))}
                }
                .into_any(),
                last_error.map(|error| t_string!(i18n, timeline.attempts_error, error).to_string()),
            )
        }
        TimelineWhat::Processed {
            event_id,
            event_type,
        } => (
            "processed",
            view! { {t!(i18n, timeline.processed, event_type)} {event_link(Some(event_id))} }.into_any(),
            None,
        ),
        TimelineWhat::Resolved {
            event_id,
            event_type,
            by,
            reason,
        } => (
            "resolved",
            view! { {t!(i18n, timeline.resolved, event_type, by, reason)} {event_link(Some(event_id))} }
                .into_any(),
            None,
        ),
        TimelineWhat::Ledger { kind, delta, money } => {
            let entry = ledger_kind_name(i18n, kind);
            let delta = format!("{delta:+}");
            (
                "ledger",
                view! { {t!(i18n, timeline.ledger, delta, entry)} }.into_any(),
                Some(money).filter(|m| !m.is_empty()),
            )
        }
        TimelineWhat::Request {
            idempotency_key,
            operation,
            status,
            error,
        } => {
            let status = request_status_name(i18n, status);
            (
                "request",
                view! {
                    {t!(i18n, timeline.request, operation, status)} " "
                    <span class="mono">{idempotency_key}</span>
                }
                .into_any(),
                error,
            )
        }
        TimelineWhat::Audit {
            actor,
            action,
            reason,
            outcome,
        } => (
            "audit",
            view! { {t!(i18n, timeline.audit, actor, action, reason, outcome)} }.into_any(),
            None,
        ),
    };
    view! {
        <li data-kind=kind>
            <span class="when nowrap" data-at=item.at_ms.to_string()>{item.at}</span>
            <span class="what">{line}</span>
            {more.map(|more| view! { <span class="more">{more}</span> })}
        </li>
    }
}
