//! The header search's results, grouped by kind, when a term names more than one thing (or
//! nothing). One match is opened straight away by `GET /search/go` on the server.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{SearchView, global_search};
use crate::components::Loaded;
use crate::i18n::*;
use crate::pages::events::ClaimTable;
use crate::pages::orders::OrderSummary;

#[component]
pub fn SearchPage() -> impl IntoView {
    let i18n = use_i18n();
    let query = use_query_map();
    let term = move || query.read().get("q").unwrap_or_default();
    let found = Resource::new(term, global_search);
    view! {
        <Title text=t_string!(i18n, search.title).to_string()/>
        <section class="page">
            <h1>{t!(i18n, search.title)}</h1>
            {move || {
                if term().trim().is_empty() {
                    view! {
                        <p class="empty">{t!(i18n, search.hint)}</p>
                    }
                    .into_any()
                } else {
                    view! { <Loaded resource=found view=results/> }.into_any()
                }
            }}
        </section>
    }
}

fn results(found: SearchView) -> impl IntoView {
    let i18n = use_i18n();
    let term = found.term.clone();
    if found.customer.is_none()
        && found.orders.is_empty()
        && found.events.is_empty()
        && found.deliveries.is_empty()
    {
        return view! {
            <p class="empty" role="status">
                {t!(i18n, search.nothing_before)} <span class="mono">{term}</span> {t!(i18n, search.nothing_after)}
            </p>
        }
        .into_any();
    }
    view! {
        <p role="status" class="muted">
            {t!(i18n, search.results_for)} <span class="mono">{term}</span>
        </p>
        {found
            .customer
            .map(|c| {
                let href = crate::links::customer(&c.customer);
                view! {
                    <h2>{t!(i18n, search.customer)}</h2>
                    <article class="summary" data-testid="search-customer">
                        <a href=href>{c.customer}</a>
                        " · " {orders_count(i18n, c.orders)} " · " {t!(i18n, search.balance)} " "
                        <strong>{crate::i18n::number(i18n.get_locale(), c.balance)}</strong> " " {t!(i18n, search.credits)}
                    </article>
                }
            })}
        {(!found.orders.is_empty())
            .then(|| {
                view! {
                    <h2>{t!(i18n, search.orders)}</h2>
                    {found.orders.into_iter().map(|order| view! { <OrderSummary order/> }).collect_view()}
                }
            })}
        {(!found.events.is_empty())
            .then(|| {
                view! {
                    <h2>{t!(i18n, search.events)}</h2>
                    <ClaimTable rows=found.events/>
                }
            })}
        {(!found.deliveries.is_empty())
            .then(|| {
                let locale = i18n.get_locale();
                view! {
                    <h2>{t!(i18n, search.unclaimed)}</h2>
                    <p class="muted">{t!(i18n, search.unclaimed_intro)}</p>
                    <div class="table-wrap">
                        <table class="stacked" data-testid="search-unclaimed" aria-label=move || t_string!(i18n, search.unclaimed)>
                            <thead>
                                <tr>
                                    <th scope="col">{t!(i18n, search.col_event)}</th>
                                    <th scope="col">{t!(i18n, search.col_type)}</th>
                                    <th scope="col">{t!(i18n, search.col_outcome)}</th>
                                    <th scope="col">{t!(i18n, search.col_received)}</th>
                                </tr>
                            </thead>
                            <tbody>
                                {found
                                    .deliveries
                                    .into_iter()
                                    .map(|d| {
                                        let outcome = names::outcome(locale, d.outcome);
                                        view! {
                                            <tr>
                                                <td class="mono" data-label=move || t_string!(i18n, search.col_event)>{d.event_id.unwrap_or_default()}</td>
                                                <td data-label=move || t_string!(i18n, search.col_type)>{d.event_type.unwrap_or_default()}</td>
                                                <td data-label=move || t_string!(i18n, search.col_outcome)>
                                                    {outcome}
                                                    {d.detail.map(|detail| view! { <br/> <span class="muted">{detail}</span> })}
                                                </td>
                                                <td class="nowrap" data-label=move || t_string!(i18n, search.col_received)>{d.received_at}</td>
                                            </tr>
                                        }
                                    })
                                    .collect_view()}
                            </tbody>
                        </table>
                    </div>
                }
            })}
    }
    .into_any()
}

/// "1 order", "3 orders" in the reader's words.
fn orders_count(i18n: I18nContext<Locale>, n: usize) -> String {
    match n {
        1 => t_string!(i18n, search.orders_count_one, n).to_string(),
        n => t_string!(i18n, search.orders_count, n).to_string(),
    }
}
