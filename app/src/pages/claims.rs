//! Claims that need attention: pending, running, stale and failed, with age, attempts and
//! the last error.

use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{EventsPage as Page, list_events};
use crate::components::{ActionNotices, Loaded};
use crate::pages::events::ClaimTable;

const STATES: [&str; 4] = ["stale", "failed", "pending", "running"];

#[component]
pub fn ClaimsPage() -> impl IntoView {
    let query = use_query_map();
    let state = move || {
        query
            .read()
            .get("status")
            .filter(|s| STATES.contains(&s.as_str()))
            .unwrap_or_else(|| "stale".into())
    };
    let claims = Resource::new(state, |state| {
        list_events(
            state,
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        )
    });
    view! {
        <Title text="Claims"/>
        <section class="page">
            <h1>"Claims"</h1>
            <ActionNotices/>
            <nav class="tabs" aria-label="Claim states">
                {STATES
                    .iter()
                    .map(|s| {
                        let href = format!("/claims?status={s}");
                        let current = move || (state() == *s).then_some("page");
                        view! { <a href=href aria-current=current>{*s}</a> }
                    })
                    .collect_view()}
            </nav>
            <Loaded resource=claims view=|page: Page| view! { <ClaimTable rows=page.rows/> }/>
        </section>
    }
}
