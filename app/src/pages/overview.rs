//! The overview: how many claims are in each state, at a glance.

use claimcheck_core::ClaimState;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{DayRow, Overview, get_overview};
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
        // Its own type: the release build (without erase_components) lays out the page's
        // future within the recursion limit.
        {view! { <DayCharts days=overview.days currency=overview.currency/> }.into_any()}
        <p class="muted">
            {t!(i18n, overview.database)} " " <span data-testid="backend">{overview.backend}</span> ". "
            {t!(i18n, overview.checked_at)} " "
            <time data-testid="checked-at">{overview.checked_at}</time> "."
        </p>
    }
}

/// A series of a day chart: its name and the class that colours its bars.
struct Series {
    name: String,
    class: &'static str,
}

/// The last 30 days in three pictures: credits unlocked and taken back, money paid against
/// refunds and chargebacks, and the failed and stale backlog.
#[component]
fn DayCharts(days: Vec<DayRow>, currency: String) -> impl IntoView {
    let i18n = use_i18n();
    let locale = i18n.get_locale_untracked();
    let count = move |n: i64| crate::i18n::number(locale, n);
    let series = |name: String, class| Series { name, class };
    let credits = days
        .iter()
        .map(|d| {
            (
                d.label.clone(),
                d.credits.to_vec(),
                d.credits.map(count).to_vec(),
            )
        })
        .collect();
    let money = days
        .iter()
        .map(|d| (d.label.clone(), d.money.to_vec(), d.money_text.to_vec()))
        .collect();
    let backlog = days
        .iter()
        .map(|d| {
            let values = d.backlog.unwrap_or_default();
            let texts = match d.backlog {
                Some(backlog) => backlog.map(count).to_vec(),
                None => vec![t_string!(i18n, overview.no_sample).to_string(); 2],
            };
            (d.label.clone(), values.to_vec(), texts)
        })
        .collect();
    let money_axis = move |minor: i64| format!("{currency} {}", count(minor / 100));
    view! {
        <h2>{t!(i18n, overview.days_heading)}</h2>
        <div class="day-charts">
            <DayChart
                testid="chart-credits"
                title=t_string!(i18n, overview.chart_credits).to_string()
                series=vec![
                    series(t_string!(i18n, overview.series_unlocked).to_string(), "ok"),
                    series(t_string!(i18n, overview.series_revoked).to_string(), "bad"),
                ]
                days=credits
                axis=count
            />
            <DayChart
                testid="chart-money"
                title=t_string!(i18n, overview.chart_money).to_string()
                series=vec![
                    series(t_string!(i18n, overview.series_revenue).to_string(), "accent"),
                    series(t_string!(i18n, overview.series_refunds).to_string(), "warn"),
                    series(t_string!(i18n, overview.series_chargebacks).to_string(), "bad"),
                ]
                days=money
                axis=money_axis
            />
            <DayChart
                testid="chart-backlog"
                title=t_string!(i18n, overview.chart_backlog).to_string()
                series=vec![
                    series(t_string!(i18n, overview.series_failed).to_string(), "bad"),
                    series(t_string!(i18n, overview.series_stale).to_string(), "warn"),
                ]
                days=backlog
                axis=count
            />
        </div>
    }
}

/// One picture of the last days: a bar per series and day, scaled to the largest value,
/// with its axes (the largest value and zero; the first and the last day), and the same
/// figures as a table for those who do not see the picture.
#[component]
fn DayChart(
    testid: &'static str,
    title: String,
    series: Vec<Series>,
    /// Per day: its label, its values (one per series) and the same written out.
    days: Vec<(String, Vec<i64>, Vec<String>)>,
    /// Writes a value for the vertical axis.
    axis: impl Fn(i64) -> String + 'static,
) -> impl IntoView {
    let i18n = use_i18n();
    let peak = days
        .iter()
        .flat_map(|(_, values, _)| values.iter().copied())
        .max()
        .unwrap_or(0)
        .max(1);
    let first = days
        .first()
        .map(|(label, _, _)| label.clone())
        .unwrap_or_default();
    let last = days
        .last()
        .map(|(label, _, _)| label.clone())
        .unwrap_or_default();
    let legend = series
        .iter()
        .map(|s| view! { <span class=format!("seg {}", s.class)></span> {s.name.clone()} " " })
        .collect_view();
    let bars = days
        .iter()
        .map(|(label, values, _)| {
            let segs = values
                .iter()
                .zip(&series)
                .map(|(value, s)| {
                    let height = format!("height: {}%", value.max(&0) * 100 / peak);
                    view! { <span class=format!("seg {}", s.class) style=height></span> }
                })
                .collect_view();
            view! { <li title=label.clone()>{segs}</li> }
        })
        .collect_view();
    let head = series
        .iter()
        .map(|s| view! { <th scope="col">{s.name.clone()}</th> })
        .collect_view();
    let rows = days
        .into_iter()
        .rev()
        .map(|(label, _, texts)| {
            let cells = texts
                .into_iter()
                .map(|text| view! { <td>{text}</td> })
                .collect_view();
            view! { <tr><th scope="row">{label}</th>{cells}</tr> }
        })
        .collect_view();
    view! {
        <figure class="day-chart" data-testid=testid>
            <figcaption>{title}</figcaption>
            <p class="legend">{legend}</p>
            <div class="plot" aria-hidden="true">
                <div class="y-axis"><span>{axis(peak)}</span><span>"0"</span></div>
                <ol class="days">{bars}</ol>
            </div>
            <div class="x-axis" aria-hidden="true"><span>{first}</span><span>{last}</span></div>
            <details>
                <summary>{t!(i18n, overview.as_table)}</summary>
                <div class="table-wrap">
                    <table>
                        <thead><tr><th scope="col">{t!(i18n, overview.col_day)}</th>{head}</tr></thead>
                        <tbody>{rows}</tbody>
                    </table>
                </div>
            </details>
        </figure>
    }
}
