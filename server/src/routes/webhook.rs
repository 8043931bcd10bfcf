//! `POST /webhooks/stripe`: verify, claim, answer. The engine does the work; this maps its
//! answer to HTTP and counts it. No session, no cross-origin check: Stripe is the caller.
//!
//! At most `CLAIMCHECK_WEBHOOK_CONCURRENCY` deliveries are read and claimed at once, holding
//! at most `CLAIMCHECK_WEBHOOK_MEMORY_BYTES` of bodies between them (each counts what it
//! announces, or the body limit if it announces nothing); one more is answered 503 at once,
//! unread (Stripe retries it), so a flood of slow senders can neither hold the memory of their
//! bodies nor leave Stripe's deliveries waiting. A body must arrive within
//! `CLAIMCHECK_BODY_TIMEOUT` (408 otherwise, the connection closed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
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
    /// One permit per delivery being read and claimed.
    pub in_flight: Arc<tokio::sync::Semaphore>,
    /// One permit per byte of body those deliveries may hold.
    pub body_bytes: Arc<tokio::sync::Semaphore>,
    pub body_timeout: Duration,
}

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/webhooks/stripe", post(receive))
}

async fn receive(State(webhook): State<WebhookState>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let (outcome, response) = answer(&webhook, &headers, body).await;
    webhook.metrics.observe(outcome, started.elapsed());
    response
}

async fn answer(
    webhook: &WebhookState,
    headers: &HeaderMap,
    body: Body,
) -> (DeliveryOutcome, Response) {
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    // A body announced larger than the limit is still read up to it before the 413 (a sender
    // finishes writing before it reads the answer), and reserves the limit.
    let reserve = u32::try_from(
        announced
            .unwrap_or(webhook.max_body_bytes)
            .clamp(1, webhook.max_body_bytes),
    )
    .unwrap_or(u32::MAX);
    let (Ok(_delivery), Ok(_bytes)) = (
        webhook.in_flight.try_acquire(),
        webhook.body_bytes.try_acquire_many(reserve),
    ) else {
        return unavailable(
            DeliveryOutcome::Overloaded,
            "too many deliveries at once; retry later",
        );
    };
    let body = match super::limits::read_within(body, webhook.max_body_bytes, webhook.body_timeout)
        .await
    {
        Ok(body) => body,
        Err(super::limits::Unread::TooLarge) => return too_large(webhook.max_body_bytes),
        Err(super::limits::Unread::TimedOut) => {
            let (outcome, mut response) = refused(
                DeliveryOutcome::BodyTimeout,
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive within {} s",
                    webhook.body_timeout.as_secs()
                ),
            );
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            return (outcome, response);
        }
        Err(super::limits::Unread::Broken(error)) => {
            tracing::warn!(%error, "webhook: body could not be read");
            return refused(
                DeliveryOutcome::BadPayload,
                StatusCode::BAD_REQUEST,
                "the request body could not be read".to_owned(),
            );
        }
    };
    let body: Bytes = body;
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
            tracing::warn!(%outcome, reason = ?refusal.to_string(), "webhook: delivery refused");
            refused(outcome, StatusCode::BAD_REQUEST, refusal.to_string())
        }
    }
}

fn too_large(limit: usize) -> (DeliveryOutcome, Response) {
    tracing::warn!(limit, "webhook: delivery too large");
    refused(
        DeliveryOutcome::TooLarge,
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the payload is larger than the {limit} byte limit"),
    )
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
