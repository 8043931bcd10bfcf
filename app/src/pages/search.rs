//! The header search's results, grouped by kind, when a term names more than one thing (or
//! nothing). One match is opened straight away by `GET /search/go` on the server.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{SearchView, global_search};
use crate::components::Loaded;
use crate::pages::events::ClaimTable;
use crate::pages::orders::OrderSummary;

#[component]
pub fn SearchPage() -> impl IntoView {
    let query = use_query_map();
    let term = move || query.read().get("q").unwrap_or_default();
    let found = Resource::new(term, global_search);
    view! {
        <Title text="Search"/>
        <section class="page">
            <h1>"Search"</h1>
            {move || {
                if term().trim().is_empty() {
                    view! {
                        <p class="empty">
                            "Type an order id, an e-mail, an event, session, payment, charge, refund or customer id in the search box at the top (press / to get there)."
                        </p>
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
    let term = found.term.clone();
    if found.customer.is_none() && found.orders.is_empty() && found.events.is_empty() {
        return view! {
            <p class="empty" role="status">
                "Nothing matches " <span class="mono">{term}</span>
                ". Ids are matched whole: paste the full order, event, session, payment, charge, refund or customer id, or the e-mail."
            </p>
        }
        .into_any();
    }
    view! {
        <p role="status" class="muted">
            "Results for " <span class="mono">{term}</span>
        </p>
        {found
            .customer
            .map(|c| {
                let href = format!("/orders?q={}", c.customer);
                view! {
                    <h2>"Customer"</h2>
                    <article class="summary" data-testid="search-customer">
                        <a href=href>{c.customer}</a>
                        " · " {c.orders} " order(s) · balance " <strong>{c.balance}</strong> " credits"
                    </article>
                }
            })}
        {(!found.orders.is_empty())
            .then(|| {
                view! {
                    <h2>"Orders"</h2>
                    {found.orders.into_iter().map(|order| view! { <OrderSummary order/> }).collect_view()}
                }
            })}
        {(!found.events.is_empty())
            .then(|| {
                view! {
                    <h2>"Events"</h2>
                    <ClaimTable rows=found.events/>
                }
            })}
    }
    .into_any()
}
