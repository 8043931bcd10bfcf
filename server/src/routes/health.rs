//! `/healthz` (the process answers) and `/readyz` (the process is not stopping, and the
//! database is reachable, migrated and takes writes).

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use claimcheck_core::{Store, Writes};
use serde_json::json;

use super::AppState;
use crate::shutdown::Stopping;

/// How long `/readyz` waits for the database before calling it unavailable.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

async fn readyz(State(store): State<Store>, State(stopping): State<Stopping>) -> Response {
    let backend = store.backend().as_str();
    // First of all: the balancer must stop sending here while requests are still answered.
    if stopping.is_set() {
        return not_ready(
            backend,
            "the server is shutting down; requests are still answered for the grace period"
                .to_owned(),
        );
    }
    // A full disk still answers reads: only the writes this process made can tell.
    if let Writes::RefusedFull { since } = store.write_health().writes() {
        let since = chrono::DateTime::from_timestamp_millis(since)
            .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default();
        return not_ready(
            backend,
            format!(
                "the database refuses writes: its disk is full (since {since}); free space and writes resume by themselves"
            ),
        );
    }
    match tokio::time::timeout(READY_TIMEOUT, store.migration_status()).await {
        Ok(Ok(status)) if status.is_current() => (
            StatusCode::OK,
            Json(json!({ "status": "ready", "database": backend })),
        )
            .into_response(),
        Ok(Ok(status)) => not_ready(
            backend,
            format!(
                "{} of {} migrations are not applied; run `claimcheck migrate`",
                status.missing.len(),
                status.expected
            ),
        ),
        Ok(Err(error)) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "readyz: database check failed"
            );
            not_ready(backend, "the database is unreachable".to_owned())
        }
        Err(_) => not_ready(backend, "the database did not answer in time".to_owned()),
    }
}

fn not_ready(backend: &str, reason: String) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "status": "unavailable", "database": backend, "reason": reason })),
    )
        .into_response()
}
