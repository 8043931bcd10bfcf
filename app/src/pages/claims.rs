//! Claims handled like a job queue: a tab per state that is not done, each with its count;
//! who each claim is for and what was paid; support ticks rows and re-drives the selection
//! through the bulk path (its preview and typed count first), an admin resolves a hopeless
//! failed claim without re-driving it. The list refreshes itself while the page is visible
//! and nothing is being chosen.

use claimcheck_core::ClaimState;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

use crate::api::{EventsPage as Page, Me, WaitingCounts, claim_tabs, get_me, list_events};
use crate::components::{ActionNotices, LoadedWithMe, state_name};
use crate::i18n::*;
use crate::pages::events::{ClaimTable, SELECTION_FORM};
use crate::refresh::{LIVE_REGION, RefreshWhileVisible};

/// The states a claim waits in, the ones that need an operator first.
const STATES: [ClaimState; 5] = [
    ClaimState::Stale,
    ClaimState::Failed,
    ClaimState::Pending,
    ClaimState::Running,
    ClaimState::Resolved,
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
            None,
            None,
        )
    });
    let tabs = Resource::new(|| (), |_| claim_tabs());
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
    let count = move |s: ClaimState| {
        tabs.get()
            .and_then(Result::ok)
            .and_then(|tabs: WaitingCounts| tabs.counts.into_iter().find(|(c, _)| *c == s))
            .map(|(_, n)| n)
    };
    let list = move |page: Page, me: Option<Me>| {
        let select = me.as_ref().is_some_and(Me::can_redrive)
            && state().is_redrivable()
            && !page.rows.is_empty();
        view! {
            // The rows' boxes belong to this form (`form=`), so each row can hold its
            // own resolve form without nesting forms.
            {select.then(|| view! {
                <form method="get" action="/claims/redrive" id=SELECTION_FORM class="selection">
                    <input type="hidden" name="preview" value="1"/>
                    <button type="submit" class="button" data-testid="redrive-selected">
                        {t!(i18n, claims.redrive_selected)}
                    </button>
                    <span class="muted">{t!(i18n, claims.selection_hint)}</span>
                </form>
            })}
            <ClaimTable rows=page.rows me=me.unwrap_or_else(nobody)/>
        }
    };
    view! {
        <Title text=t_string!(i18n, claims.title).to_string()/>
        <section class="page">
            <div class="page-head">
                <h1>{t!(i18n, claims.title)}</h1>
                <Transition fallback=|| ()>{bulk}</Transition>
            </div>
            <ActionNotices/>
            <RefreshWhileVisible/>
            <div id=LIVE_REGION>
            <nav class="tabs" aria-label=move || t_string!(i18n, claims.tabs_label)>
                {STATES
                    .iter()
                    .map(|s| {
                        let href = format!("/claims?status={s}");
                        let current = move || (state() == *s).then_some("page");
                        let n = move || count(*s).map(|n| view! { " " <span class="count" data-count=n>{format_count(i18n, n)}</span> });
                        view! {
                            <a href=href aria-current=current data-state=s.as_str()>
                                {state_name(i18n, *s)}
                                <Transition fallback=|| ()>{n}</Transition>
                            </a>
                        }
                    })
                    .collect_view()}
            </nav>
            <LoadedWithMe resource=claims me view=list/>
            </div>
        </section>
    }
}

/// No operator: a table with no actions (the page is refused before it gets here anyway).
fn nobody() -> Me {
    Me {
        username: String::new(),
        role: claimcheck_core::auth::Role::Viewer,
    }
}

/// A count as the reader writes numbers (4’920 in Swiss German).
fn format_count(i18n: I18nContext<Locale>, n: i64) -> String {
    crate::i18n::number(i18n.get_locale(), n)
}
