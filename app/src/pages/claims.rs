//! Claims that need attention: pending, running, stale and failed, with age, attempts and
//! the last error.

use claimcheck_core::ClaimState;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{EventsPage as Page, get_me, list_events};
use crate::components::{ActionNotices, Loaded};
use crate::pages::events::ClaimTable;

/// The states a claim waits in, the ones that need an operator first.
const STATES: [ClaimState; 4] = [
    ClaimState::Stale,
    ClaimState::Failed,
    ClaimState::Pending,
    ClaimState::Running,
];

#[component]
pub fn ClaimsPage() -> impl IntoView {
    let query = use_query_map();
    let state = move || {
        query
            .read()
            .get("status")
            .and_then(|s| s.parse::<ClaimState>().ok())
            .filter(|s| STATES.contains(s))
            .unwrap_or(ClaimState::Stale)
    };
    let claims = Resource::new(state, |state| {
        list_events(
            state.as_str().to_owned(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        )
    });
    let me = Resource::new(|| (), |_| get_me());
    // Support re-drives the claims of this tab in bulk (running ones are not re-drivable).
    let bulk = move || {
        let state = state();
        me.get()
            .and_then(Result::ok)
            .filter(|me| me.can_redrive() && state.is_redrivable())
            .map(|_| {
                let href = format!("/claims/redrive?status={state}&preview=1");
                view! { <a href=href class="button">"Re-drive in bulk…"</a> }
            })
    };
    view! {
        <Title text="Claims"/>
        <section class="page">
            <div class="page-head">
                <h1>"Claims"</h1>
                <Transition fallback=|| ()>{bulk}</Transition>
            </div>
            <ActionNotices/>
            <nav class="tabs" aria-label="Claim states">
                {STATES
                    .iter()
                    .map(|s| {
                        let href = format!("/claims?status={s}");
                        let current = move || (state() == *s).then_some("page");
                        view! { <a href=href aria-current=current>{s.as_str()}</a> }
                    })
                    .collect_view()}
            </nav>
            <Loaded resource=claims view=|page: Page| view! { <ClaimTable rows=page.rows/> }/>
        </section>
    }
}
