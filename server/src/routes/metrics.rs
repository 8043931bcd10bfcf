//! `GET /metrics`: the Prometheus exposition. This process's counters, and the claims by
//! state as the database has them at the moment of the scrape.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use claimcheck_core::{Store, now_ms};

use super::{AppState, WebhookState};

/// How long a scrape waits for the claim counts before leaving them out.
const COUNTS_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(
    State(webhook): State<WebhookState>,
    State(store): State<Store>,
) -> impl IntoResponse {
    // A database that is away must not cost the scrape the rest: the counters are what
    // tells an operator what the outage did.
    let claims = match tokio::time::timeout(COUNTS_TIMEOUT, store.claims().counts(now_ms())).await {
        Ok(Ok(counts)) => Some(counts),
        Ok(Err(error)) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "metrics: claims by state could not be read; left out of this scrape"
            );
            None
        }
        Err(_) => {
            tracing::warn!(
                "metrics: the database did not answer in time; claims by state left out"
            );
            None
        }
    };
    (
        [(
            header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        webhook.metrics.render(claims.as_ref()),
    )
}
