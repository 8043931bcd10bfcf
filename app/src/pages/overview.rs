//! The overview: how many claims are in each state, at a glance.

use claimcheck_core::ClaimState;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{Overview, get_overview};
use crate::components::{ErrorNotice, error_message};

#[component]
pub fn OverviewPage() -> impl IntoView {
    let overview = Resource::new(|| (), |_| get_overview());

    view! {
        <Title text="Overview"/>
        <section class="page">
            <div class="page-head">
                <h1>"Overview"</h1>
                // Reads the figures again: the page is the server's, with or without WASM.
                <form method="get" action="/">
                    <button type="submit" class="button">"Refresh"</button>
                </form>
            </div>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || {
                    overview
                        .get()
                        .map(|result| match result {
                            Ok(figures) => view! { <ClaimCards overview=figures/> }.into_any(),
                            Err(error) => {
                                view! { <ErrorNotice message=error_message(&error)/> }.into_any()
                            }
                        })
                }}
            </Transition>
        </section>
    }
}

#[component]
fn ClaimCards(overview: Overview) -> impl IntoView {
    let cards = overview
        .claims
        .into_iter()
        .map(|c| {
            let state = c.state;
            let class = format!("card state-{state}");
            let data_state = state.as_str();
            let href = if state == ClaimState::Processed {
                "/events?status=processed".to_owned()
            } else {
                format!("/claims?status={state}")
            };
            view! {
                <li class=class data-state=data_state>
                    <a href=href>
                        <span class="card-count">{c.count}</span>
                        <span class="card-label">{state.as_str()}</span>
                    </a>
                </li>
            }
        })
        .collect_view();
    let peak = overview
        .hours
        .iter()
        .map(|h| h.claimed + h.duplicate + h.other)
        .max()
        .unwrap_or(0)
        .max(1);
    let total: i64 = overview
        .hours
        .iter()
        .map(|h| h.claimed + h.duplicate + h.other)
        .sum();
    let bars = overview
        .hours
        .into_iter()
        .map(|h| {
            let height = |n: i64| format!("height: {}%", n * 100 / peak);
            let title = format!(
                "{}: {} claimed, {} duplicates, {} other",
                h.label, h.claimed, h.duplicate, h.other
            );
            view! {
                <li title=title.clone() aria-label=title>
                    <span class="bar">
                        <span class="seg other" style=height(h.other)></span>
                        <span class="seg duplicate" style=height(h.duplicate)></span>
                        <span class="seg claimed" style=height(h.claimed)></span>
                    </span>
                    <span class="hour">{h.label}</span>
                </li>
            }
        })
        .collect_view();
    let latency = match (overview.ack_p50_ms, overview.ack_p99_ms) {
        (Some(p50), Some(p99)) => format!(
            "p50 ≤ {p50} ms, p99 ≤ {p99} ms over {} deliveries since this server started",
            overview.acked
        ),
        _ => "no delivery answered since this server started".to_owned(),
    };
    let signature_alarm = (overview.bad_signatures_in_a_row >= 3).then(|| {
        view! {
            <p class="notice notice-error" role="alert" data-testid="signature-alarm">
                {overview.bad_signatures_in_a_row}
                " deliveries in a row failed the signature check and none was accepted since. "
                "Check STRIPE_WEBHOOK_SECRET: was the signing secret rolled at Stripe but not "
                "here? Once fixed, reconcile to recover what Stripe gave up on."
            </p>
        }
    });
    let reconcile = match overview.reconcile {
        None => "Never ran yet.".to_owned(),
        Some(run) => match run.error {
            Some(error) => format!("{} by {}: failed: {error}", run.at, run.actor),
            None => format!(
                "{} by {}: {} listed, {} {}",
                run.at,
                run.actor,
                run.listed,
                run.claimed,
                if run.dry_run {
                    "would be claimed (preview)"
                } else {
                    "claimed that Stripe never delivered"
                }
            ),
        },
    };
    let reconcile_now = overview.can_reconcile.then(|| {
        view! { <a href="/reconcile" class="button">"Reconcile now…"</a> }
    });
    view! {
        {signature_alarm}
        <ul class="cards" aria-label="Claims by state">{cards}</ul>
        <dl class="facts">
            <dt>"Credits unlocked today"</dt>
            <dd data-testid="credits-today">{overview.credits_today}</dd>
            <dt>"Acknowledgement latency"</dt>
            <dd data-testid="ack-latency">{latency}</dd>
            <dt>"Last reconcile run"</dt>
            <dd data-testid="last-reconcile">{reconcile} " " {reconcile_now}</dd>
        </dl>
        <h2>"Deliveries, last 24 hours (" {total} ")"</h2>
        <p class="legend">
            <span class="seg claimed"></span> "claimed "
            <span class="seg duplicate"></span> "duplicates "
            <span class="seg other"></span> "ignored or refused"
        </p>
        <ol class="chart" aria-label="Deliveries per hour">{bars}</ol>
        <p class="muted">
            "Database: " <span data-testid="backend">{overview.backend}</span> ". Checked at "
            <time data-testid="checked-at">{overview.checked_at}</time> "."
        </p>
    }
}
