//! `GET /search/go?q=…`: the header search box. One match opens straight away (the order,
//! the customer, the event); anything else lands on the grouped results page `/search`.
//! A plain GET form, so it works before (and without) the WASM bundle.

use axum::Router;
use axum::extract::{Extension, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use claimcheck_core::auth::{Role, SignedIn};
use claimcheck_core::now_ms;
use claimcheck_core::search::search;
use serde::Deserialize;

use super::AppState;
use super::actions::{require, unavailable};
use super::auth::urlencode;
use super::words::Reading;
use app::i18n::td_string;

/// Longer than any id or e-mail address (RFC 5321 caps a path at 256 characters).
const MAX_TERM: usize = 320;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/search/go", get(go))
}

#[derive(Deserialize)]
pub(super) struct SearchQuery {
    #[serde(default)]
    q: String,
}

async fn go(
    State(state): State<AppState>,
    reading: Reading,
    operator: Option<Extension<SignedIn>>,
    Query(query): Query<SearchQuery>,
) -> Response {
    if let Err(refused) = require(reading, operator.as_deref(), Role::Viewer) {
        return refused;
    }
    let term = query.q.trim();
    if term.is_empty() {
        return Redirect::to("/search").into_response();
    }
    if term.chars().count() > MAX_TERM {
        return (
            StatusCode::BAD_REQUEST,
            td_string!(reading.locale(), messages.search_too_long, max = MAX_TERM),
        )
            .into_response();
    }
    match search(&state.store, term, now_ms()).await {
        Ok(found) => match found.only() {
            Some(one) => Redirect::to(&one.href()).into_response(),
            None => Redirect::to(&format!("/search?q={}", urlencode(term))).into_response(),
        },
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            unavailable(reading, "search", &error),
        )
            .into_response(),
    }
}
