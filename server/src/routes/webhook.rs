//! `POST /webhooks/stripe`: verify, claim, answer. The engine does the work; this maps its
//! answer to HTTP and counts it. No session, no cross-origin check: Stripe is the caller.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use claimcheck_core::now_ms;
use claimcheck_core::webhook::{Accepted, DeliveryOutcome, Ingestion, Refusal};
use serde_json::json;

use super::AppState;
use crate::metrics::Metrics;

/// Seconds Stripe (or any sender) is asked to wait after a 503.
const RETRY_AFTER_SECS: u32 = 5;

/// What the webhook route needs.
#[derive(Clone)]
pub(crate) struct WebhookState {
    /// `None` when no signing secret is configured: every delivery is answered 503.
    pub ingestion: Option<Ingestion>,
    pub metrics: Arc<Metrics>,
    pub max_body_bytes: usize,
}

pub(super) fn router(max_body_bytes: usize) -> Router<AppState> {
    Router::new().route(
        "/webhooks/stripe",
        post(receive).layer(DefaultBodyLimit::max(max_body_bytes)),
    )
}

async fn receive(
    State(webhook): State<WebhookState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    let (outcome, response) = answer(&webhook, &headers, body).await;
    webhook.metrics.observe(outcome, started.elapsed());
    response
}

async fn answer(
    webhook: &WebhookState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> (DeliveryOutcome, Response) {
    let body = match body {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            tracing::warn!(
                limit = webhook.max_body_bytes,
                "webhook: delivery too large"
            );
            let reason = format!(
                "the payload is larger than the {} byte limit",
                webhook.max_body_bytes
            );
            return refused(
                DeliveryOutcome::TooLarge,
                StatusCode::PAYLOAD_TOO_LARGE,
                reason,
            );
        }
        Err(rejection) => {
            tracing::warn!(%rejection, "webhook: body could not be read");
            return refused(
                DeliveryOutcome::BadPayload,
                StatusCode::BAD_REQUEST,
                "the request body could not be read".to_owned(),
            );
        }
    };
    let Some(ingestion) = &webhook.ingestion else {
        tracing::error!("webhook: no signing secret configured (STRIPE_WEBHOOK_SECRET)");
        return unavailable(
            DeliveryOutcome::NotConfigured,
            "the webhook signing secret is not configured",
        );
    };
    // A header that is not visible ASCII cannot be a valid signature.
    let signature = headers
        .get("stripe-signature")
        .map(|value| value.to_str().unwrap_or_default());

    match ingestion.receive(signature, &body, now_ms()).await {
        Ok(receipt) => {
            let outcome = receipt.outcome();
            let mut answer =
                json!({ "outcome": outcome.as_str(), "event_id": receipt.event_id.as_str() });
            if let Accepted::DuplicateAction { original } = &receipt.accepted {
                answer["duplicate_of"] = json!(original.as_str());
            }
            tracing::debug!(event_id = %receipt.event_id, %outcome, "webhook: delivery acknowledged");
            (outcome, (StatusCode::OK, Json(answer)).into_response())
        }
        Err(Refusal::Storage(error)) => {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "webhook: the claim could not be stored; answering 503 so Stripe retries"
            );
            unavailable(
                DeliveryOutcome::StorageError,
                "the claim could not be stored; retry later",
            )
        }
        Err(refusal) => {
            let outcome = refusal.outcome();
            tracing::warn!(%outcome, reason = %refusal, "webhook: delivery refused");
            refused(outcome, StatusCode::BAD_REQUEST, refusal.to_string())
        }
    }
}

fn refused(
    outcome: DeliveryOutcome,
    status: StatusCode,
    reason: String,
) -> (DeliveryOutcome, Response) {
    let body = json!({ "outcome": outcome.as_str(), "error": reason });
    (outcome, (status, Json(body)).into_response())
}

fn unavailable(outcome: DeliveryOutcome, reason: &str) -> (DeliveryOutcome, Response) {
    let (outcome, mut response) =
        refused(outcome, StatusCode::SERVICE_UNAVAILABLE, reason.to_owned());
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
    (outcome, response)
}
