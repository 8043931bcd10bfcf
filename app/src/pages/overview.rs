//! The overview: how many claims are in each state, at a glance.

use leptos::prelude::*;
use leptos_meta::Title;

use crate::api::{Overview, get_overview};
use crate::components::{ErrorNotice, error_message};
use crate::use_hydrated;

#[component]
pub fn OverviewPage() -> impl IntoView {
    let hydrated = use_hydrated();
    let overview = Resource::new(|| (), |_| get_overview());

    view! {
        <Title text="Overview"/>
        <section class="page">
            <div class="page-head">
                <h1>"Overview"</h1>
                <button
                    type="button"
                    class="button"
                    disabled=move || !hydrated.get()
                    on:click=move |_| overview.refetch()
                >
                    "Refresh"
                </button>
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
            let data_state = state.clone();
            let href = if state == "processed" {
                "/events?status=processed".to_owned()
            } else {
                format!("/claims?status={state}")
            };
            view! {
                <li class=class data-state=data_state>
                    <a href=href>
                        <span class="card-count">{c.count}</span>
                        <span class="card-label">{state}</span>
                    </a>
                </li>
            }
        })
        .collect_view();
    view! {
        <ul class="cards" aria-label="Claims by state">{cards}</ul>
        <p class="muted">
            "Database: " <span data-testid="backend">{overview.backend}</span> ". Checked at "
            <time data-testid="checked-at">{overview.checked_at}</time> "."
        </p>
    }
}
