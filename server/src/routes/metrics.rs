//! `GET /metrics`: the Prometheus exposition. This process's counters, and the claims by
//! state and open alerts as the database has them at the moment of the scrape.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use claimcheck_core::{Store, StoreError, now_ms};

use crate::metrics::Snapshot;

use super::{AppState, WebhookState};

/// How long a scrape waits for the database's figures before leaving them out.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics(
    State(webhook): State<WebhookState>,
    State(store): State<Store>,
) -> impl IntoResponse {
    // A database that is away must not cost the scrape the rest: the counters are what
    // tells an operator what the outage did.
    let database = match tokio::time::timeout(SNAPSHOT_TIMEOUT, snapshot(&store)).await {
        Ok(Ok(snapshot)) => Some(snapshot),
        Ok(Err(error)) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "metrics: claims by state and open alerts could not be read; left out of this scrape"
            );
            None
        }
        Err(_) => {
            tracing::warn!(
                "metrics: the database did not answer in time; claims by state and open alerts left out"
            );
            None
        }
    };
    (
        [(
            header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        webhook.metrics.render(database.as_ref()),
    )
}

/// Claims by state and the open alerts, as the database has them now.
async fn snapshot(store: &Store) -> Result<Snapshot, StoreError> {
    Ok(Snapshot {
        claims: store.claims().counts(now_ms()).await?,
        open_alerts: store
            .alerts()
            .open()
            .await?
            .into_iter()
            .map(|alert| alert.condition)
            .collect(),
    })
}
