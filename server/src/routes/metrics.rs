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
    // tells an operator what the outage did. Each part is read on its own.
    let (claims, open_alerts) = tokio::join!(
        read("claims by state", async {
            store.claims().counts(now_ms()).await
        }),
        read("open alerts", async {
            let open = store.alerts().open().await?;
            Ok(open.into_iter().map(|alert| alert.condition).collect())
        }),
    );
    (
        [(
            header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        webhook.metrics.render(&Snapshot {
            claims,
            open_alerts,
        }),
    )
}

/// What `query` reads, or `None` (logged) when the database fails or does not answer in time.
async fn read<T>(what: &str, query: impl Future<Output = Result<T, StoreError>>) -> Option<T> {
    match tokio::time::timeout(SNAPSHOT_TIMEOUT, query).await {
        Ok(Ok(value)) => Some(value),
        Ok(Err(error)) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "metrics: {what} could not be read; left out of this scrape"
            );
            None
        }
        Err(_) => {
            tracing::warn!("metrics: the database did not answer in time; {what} left out");
            None
        }
    }
}
