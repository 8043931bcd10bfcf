//! Claims that need attention: pending, running, stale and failed, with age, attempts and
//! the last error.

use claimcheck_core::ClaimState;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{EventsPage as Page, get_me, list_events};
use crate::components::{ActionNotices, Loaded, state_name};
use crate::i18n::*;
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
    let i18n = use_i18n();
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
                view! { <a href=href class="button">{t!(i18n, claims.bulk_link)}</a> }
            })
    };
    view! {
        <Title text=t_string!(i18n, claims.title).to_string()/>
        <section class="page">
            <div class="page-head">
                <h1>{t!(i18n, claims.title)}</h1>
                <Transition fallback=|| ()>{bulk}</Transition>
            </div>
            <ActionNotices/>
            <nav class="tabs" aria-label=move || t_string!(i18n, claims.tabs_label)>
                {STATES
                    .iter()
                    .map(|s| {
                        let href = format!("/claims?status={s}");
                        let current = move || (state() == *s).then_some("page");
                        view! { <a href=href aria-current=current data-state=s.as_str()>{state_name(i18n, *s)}</a> }
                    })
                    .collect_view()}
            </nav>
            <Loaded resource=claims view=|page: Page| view! { <ClaimTable rows=page.rows/> }/>
        </section>
    }
}
