//! An admin resolves a failed claim that can never succeed without re-driving it, or reopens
//! a resolved one (`POST /dashboard/actions/claims/{resolve,reopen}`): form posts that work
//! without WASM, audited by the engine, answered with a redirect to the claims page and a
//! notice in the flash.

use app::i18n::{explain, td_string};
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use axum::{Form, Router};
use claimcheck_core::ops::{self, Actor, ResolveRefused};
use claimcheck_core::{ClaimState, EventId};
use serde::Deserialize;

use super::AppState;
use super::actions::unavailable;
use super::redirect::back;
use super::words::{Admin, Reading, Signed};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/dashboard/actions/claims/resolve", post(resolve))
        .route("/dashboard/actions/claims/reopen", post(reopen))
}

#[derive(Deserialize)]
pub(super) struct ClaimForm {
    event_id: String,
    #[serde(default)]
    reason: String,
}

async fn resolve(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Admin>,
    Form(form): Form<ClaimForm>,
) -> Response {
    act(state, reading, &operator.username, form, Act::Resolve).await
}

async fn reopen(
    State(state): State<AppState>,
    reading: Reading,
    Signed { operator, .. }: Signed<Admin>,
    Form(form): Form<ClaimForm>,
) -> Response {
    act(state, reading, &operator.username, form, Act::Reopen).await
}

#[derive(Clone, Copy)]
enum Act {
    Resolve,
    Reopen,
}

async fn act(
    state: AppState,
    reading: Reading,
    username: &str,
    form: ClaimForm,
    act: Act,
) -> Response {
    let locale = reading.locale();
    // Back to the tab the claim was on (failed to resolve, resolved to reopen).
    let page = match act {
        Act::Resolve => format!("/claims?status={}", ClaimState::Failed),
        Act::Reopen => format!("/claims?status={}", ClaimState::Resolved),
    };
    let Ok(event_id) = EventId::parse(form.event_id.trim()) else {
        return back(&page, "error", td_string!(locale, messages.not_an_event_id));
    };
    let actor = Actor::Dashboard(username.to_owned());
    let done = match act {
        Act::Resolve => ops::resolve_claim(&state.store, &actor, &event_id, &form.reason).await,
        Act::Reopen => ops::reopen_claim(&state.store, &actor, &event_id, &form.reason).await,
    };
    match (done, act) {
        (Ok(()), Act::Resolve) => {
            back(&page, "notice", td_string!(locale, messages.claim_resolved))
        }
        (Ok(()), Act::Reopen) => back(&page, "notice", td_string!(locale, messages.claim_reopened)),
        (Err(ResolveRefused::Store(error)), _) => {
            back(&page, "error", &unavailable(reading, "resolve", &error))
        }
        (Err(refused), _) => back(&page, "error", &explain::resolve(locale, &refused)),
    }
}
