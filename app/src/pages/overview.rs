//! The overview: how many claims are in each state, at a glance.

use claimcheck_core::ClaimState;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{Overview, get_overview};
use crate::components::{ActionNotices, Loaded, StateName};
use crate::i18n::*;

#[component]
pub fn OverviewPage() -> impl IntoView {
    let i18n = use_i18n();
    let overview = Resource::new(|| (), |_| get_overview());

    view! {
        <Title text=t_string!(i18n, overview.title).to_string()/>
        <section class="page">
            <div class="page-head">
                <h1>{t!(i18n, overview.title)}</h1>
                // Reads the figures again: the page is the server's, with or without WASM.
                <form method="get" action="/">
                    <button type="submit" class="button">{t!(i18n, overview.refresh)}</button>
                </form>
            </div>
            <ActionNotices/>
            <Loaded resource=overview view=|figures| view! { <ClaimCards overview=figures/> }/>
        </section>
    }
}

#[component]
fn ClaimCards(overview: Overview) -> impl IntoView {
    let i18n = use_i18n();
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
                        <span class="card-count">{crate::i18n::number(i18n.get_locale(), c.count)}</span>
                        <span class="card-label"><StateName state/></span>
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
            let title = t_string!(
                i18n,
                overview.hour_bar,
                hour = h.label.clone(),
                claimed = h.claimed,
                duplicate = h.duplicate,
                other = h.other
            )
            .to_string();
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
        (Some(p50), Some(p99)) => {
            t_string!(i18n, overview.latency, p50, p99, n = overview.acked).to_string()
        }
        _ => t_string!(i18n, overview.latency_none).to_string(),
    };
    let signature_alarm = (overview.bad_signatures_in_a_row >= 3).then(|| {
        let n = overview.bad_signatures_in_a_row;
        view! {
            <p class="notice notice-error" role="alert" data-testid="signature-alarm">
                {t!(i18n, overview.signature_alarm, n)}
            </p>
        }
    });
    let storage_alarm = overview.storage_full_since.clone().map(|since| {
        view! {
            <p class="notice notice-error" role="alert" data-testid="storage-alarm">
                {t!(i18n, overview.storage_full, since)}
            </p>
        }
    });
    let reconcile = match overview.reconcile {
        None => t_string!(i18n, overview.reconcile_never).to_string(),
        Some(run) => {
            let (at, actor, listed, claimed) = (run.at, run.actor, run.listed, run.claimed);
            match (run.error, run.dry_run) {
                (Some(error), _) => {
                    t_string!(i18n, overview.reconcile_failed, at, actor, error).to_string()
                }
                (None, true) => {
                    t_string!(i18n, overview.reconcile_preview, at, actor, listed, claimed)
                        .to_string()
                }
                (None, false) => {
                    t_string!(i18n, overview.reconcile_done, at, actor, listed, claimed).to_string()
                }
            }
        }
    };
    let reconcile_now = overview.can_reconcile.then(|| {
        view! { <a href="/reconcile" class="button">{t!(i18n, overview.reconcile_now)}</a> }
    });
    view! {
        {storage_alarm}
        {signature_alarm}
        <ul class="cards" aria-label=move || t_string!(i18n, overview.claims_by_state)>{cards}</ul>
        <dl class="facts">
            <dt>{t!(i18n, overview.credits_today)}</dt>
            <dd data-testid="credits-today">{crate::i18n::number(i18n.get_locale(), overview.credits_today)}</dd>
            <dt>{t!(i18n, overview.ack_latency)}</dt>
            <dd data-testid="ack-latency">{latency}</dd>
            <dt>{t!(i18n, overview.last_reconcile)}</dt>
            <dd data-testid="last-reconcile">{reconcile} " " {reconcile_now}</dd>
        </dl>
        <h2>{t!(i18n, overview.deliveries_24h, n = crate::i18n::number(i18n.get_locale(), total))}</h2>
        <p class="legend">
            <span class="seg claimed"></span> {t!(i18n, overview.legend_claimed)} " "
            <span class="seg duplicate"></span> {t!(i18n, overview.legend_duplicate)} " "
            <span class="seg other"></span> {t!(i18n, overview.legend_other)}
        </p>
        <ol class="chart" aria-label=move || t_string!(i18n, overview.per_hour)>{bars}</ol>
        <p class="muted">
            {t!(i18n, overview.database)} " " <span data-testid="backend">{overview.backend}</span> ". "
            {t!(i18n, overview.checked_at)} " "
            <time data-testid="checked-at">{overview.checked_at}</time> "."
        </p>
    }
}
