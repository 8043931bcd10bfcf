//! `GET /search/go?q=…`: the header search box. One match opens straight away (the order,
//! the customer, the event); anything else lands on the grouped results page `/search`.
//! A plain GET form, so it works before (and without) the WASM bundle.

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use claimcheck_core::now_ms;
use claimcheck_core::search::{Found, search};
use serde::Deserialize;

use super::AppState;
use super::actions::unavailable;
use super::words::{Reading, Signed, Viewer};
use app::i18n::td_string;
use app::links;

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
    _viewer: Signed<Viewer>,
    Query(query): Query<SearchQuery>,
) -> Response {
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
        Ok(found) => {
            let page = match found.only() {
                Some(Found::Customer(who)) => links::customer(&who),
                Some(Found::Order(order_id)) => links::order(&order_id),
                Some(Found::Event(event_id)) => links::event(&event_id),
                Some(Found::Subscription(id)) => links::subscription(&id),
                None => links::search(term),
            };
            Redirect::to(&page).into_response()
        }
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            unavailable(reading, "search", &error),
        )
            .into_response(),
    }
}
