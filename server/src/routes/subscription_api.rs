//! Subscriptions through the order API (the same bearer tokens as orders):
//!
//! - `POST /api/subscriptions` `{"plan", "customer_email", "subscription_ref"?}` records the
//!   subscription and opens its Checkout Session (`mode=subscription`); asking again returns
//!   the same session (201 the first time, 200 after), a new one once it expired unpaid, and
//!   `409 subscription_active` once Stripe told of the subscription.
//! - `GET /api/subscriptions/{ref}`: status, period, credits granted, the Checkout URL.
//! - `POST /api/subscriptions/{ref}/cancel` `{"at_period_end": true, "reason"?}`: one Stripe
//!   call per kind of cancellation, under a key derived from the reference.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use claimcheck_core::audit::Actor;
use claimcheck_core::payments::{
    AskedSubscription, PaymentError, SubscriptionRequest, asked_subscription, cancel_subscription,
    open_subscription_checkout,
};
use claimcheck_core::{
    ScheduledChange, Store, StoreError, SubscriptionRef, SubscriptionView, UnplannedRenewal,
};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::api::{ApiCaller, ApiError};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/subscriptions", post(create_subscription))
        .route("/api/subscriptions/{reference}", get(show_subscription))
        .route("/api/subscriptions/{reference}/cancel", post(cancel))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateSubscription {
    plan: String,
    customer_email: String,
    #[serde(default)]
    subscription_ref: Option<String>,
}

/// What the shop needs to know about a subscription.
#[derive(Serialize)]
struct SubscriptionSummary {
    subscription_ref: String,
    /// `awaiting_payment` until Stripe tells of the subscription, then Stripe's status
    /// (`active`, `past_due`, `canceled`…; `started` before a status event came).
    status: String,
    plan: Option<String>,
    customer_email: Option<String>,
    subscription_id: Option<String>,
    /// Unix seconds.
    current_period_end: Option<i64>,
    cancel_at_period_end: bool,
    /// A change of plan billed from the next renewal on (`from`, `to`, `at` in unix seconds);
    /// `plan` is the one in force until then.
    scheduled_change: Option<ScheduledChange>,
    /// The next renewal bills a price none of the shop's plans has (`amount`, `currency`,
    /// `at`): its invoice will grant nothing until such a plan is configured.
    unplanned_renewal: Option<UnplannedRenewal>,
    credits_per_period: Option<i64>,
    credits_granted: i64,
    /// The renewal whose payment failed and is not paid yet.
    unpaid_invoice: Option<String>,
    amount: Option<i64>,
    currency: Option<String>,
    interval: Option<String>,
    checkout_session_id: Option<String>,
    checkout_url: Option<String>,
}

impl SubscriptionSummary {
    fn new(
        reference: &SubscriptionRef,
        asked: Option<&AskedSubscription>,
        subscription: Option<&SubscriptionView>,
    ) -> SubscriptionSummary {
        let checkout = asked.map(|a| &a.checkout);
        let status = match subscription {
            Some(s) => s.status.clone().unwrap_or_else(|| "started".into()),
            None => "awaiting_payment".into(),
        };
        SubscriptionSummary {
            subscription_ref: reference.to_string(),
            status,
            plan: subscription
                .and_then(|s| s.plan.clone())
                .or_else(|| checkout.map(|c| c.plan.clone())),
            customer_email: checkout
                .map(|c| c.customer_email.clone())
                .or_else(|| subscription.and_then(|s| s.customer_email.clone())),
            subscription_id: subscription.map(|s| s.subscription_id.clone()),
            current_period_end: subscription.and_then(|s| s.current_period_end),
            cancel_at_period_end: subscription.is_some_and(|s| s.cancel_at_period_end != 0),
            scheduled_change: subscription.and_then(|s| s.scheduled_change.clone()),
            unplanned_renewal: subscription.and_then(|s| s.unplanned_renewal.clone()),
            credits_per_period: checkout.map(|c| c.credits),
            credits_granted: subscription.map_or(0, |s| s.credits_granted),
            unpaid_invoice: subscription.and_then(|s| s.unpaid_invoice.clone()),
            amount: checkout.map(|c| c.amount),
            currency: checkout.map(|c| c.currency.clone()),
            interval: checkout.map(|c| c.billing_interval.clone()),
            checkout_session_id: checkout.and_then(|c| c.checkout_session_id.clone()),
            checkout_url: checkout.and_then(|c| c.checkout_url.clone()),
        }
    }
}

fn bad_json(expected: &str, rejection: JsonRejection) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "bad_request",
        format!("expected JSON {expected}: {}", rejection.body_text()),
    )
}

async fn create_subscription(
    _caller: ApiCaller,
    State(state): State<AppState>,
    body: Result<Json<CreateSubscription>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|rejection| {
        bad_json(
            "{\"plan\", \"customer_email\", \"subscription_ref\"?}",
            rejection,
        )
    })?;
    let (stripe, urls) = state.api.checkout()?;
    let request = SubscriptionRequest {
        subscription_ref: body.subscription_ref,
        plan: body.plan,
        customer_email: body.customer_email,
    };
    let reference = request.subscription_ref.clone().unwrap_or_default();
    let asked = open_subscription_checkout(&state.store, stripe, &state.api.plans, urls, &request)
        .await
        .map_err(|error| with_summary(error, &reference))?;
    let reference = SubscriptionRef::parse(asked.checkout.subscription_ref.as_str())
        .map_err(|e| ApiError::storage(StoreError::Inconsistent(e.to_string())))?;
    let summary = SubscriptionSummary::new(&reference, Some(&asked), asked.subscription.as_ref());
    let status = if asked.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(summary)).into_response())
}

/// A refusal about a subscription carries it as `GET /api/subscriptions/{ref}` shows it.
fn with_summary(error: PaymentError, reference: &str) -> ApiError {
    let subscription = match &error {
        PaymentError::Subscribed(s) | PaymentError::SubscriptionCanceled(s) => Some(s.clone()),
        _ => None,
    };
    let api_error = ApiError::from(error);
    match subscription {
        Some(subscription) => {
            let reference = subscription
                .subscription_ref
                .clone()
                .unwrap_or_else(|| reference.to_owned());
            let summary = match SubscriptionRef::parse(reference) {
                Ok(reference) => SubscriptionSummary::new(&reference, None, Some(&subscription)),
                Err(_) => return api_error,
            };
            api_error.with_detail("subscription", serde_json::json!(summary))
        }
        None => api_error,
    }
}

/// What is known of `reference`: asked for through the API, told of by Stripe, or both.
async fn summary(store: &Store, reference: &str) -> Result<SubscriptionSummary, ApiError> {
    let not_found = || {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no subscription {reference}"),
        )
    };
    let reference = SubscriptionRef::parse(reference).map_err(|_| not_found())?;
    let asked = asked_subscription(store, &reference).await?;
    let subscription = match &asked {
        Some(asked) => asked.subscription.clone(),
        None => store
            .subscriptions()
            .by_ref(reference.as_str())
            .await
            .map_err(ApiError::storage)?,
    };
    if asked.is_none() && subscription.is_none() {
        return Err(not_found());
    }
    Ok(SubscriptionSummary::new(
        &reference,
        asked.as_ref(),
        subscription.as_ref(),
    ))
}

async fn show_subscription(
    _caller: ApiCaller,
    State(store): State<Store>,
    Path(reference): Path<String>,
) -> Result<Json<SubscriptionSummary>, ApiError> {
    Ok(Json(summary(&store, &reference).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    /// At the end of the period (the customer keeps what they paid for), or now.
    #[serde(default = "at_period_end")]
    at_period_end: bool,
    #[serde(default)]
    reason: Option<String>,
}

fn at_period_end() -> bool {
    true
}

#[derive(Serialize)]
struct CancelAnswer {
    subscription: SubscriptionSummary,
    at_period_end: bool,
    /// The Idempotency-Key the cancellation was sent under.
    idempotency_key: String,
    /// False when an earlier call had sent it already (Stripe's answer stands).
    sent_now: bool,
}

async fn cancel(
    caller: ApiCaller,
    State(state): State<AppState>,
    Path(reference): Path<String>,
    body: Result<Json<CancelBody>, JsonRejection>,
) -> Result<Json<CancelAnswer>, ApiError> {
    let Json(body) =
        body.map_err(|rejection| bad_json("{\"at_period_end\"?, \"reason\"?}", rejection))?;
    let Some(stripe) = &state.api.stripe else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_configured",
            "cancelling a subscription needs STRIPE_API_KEY",
        ));
    };
    // Only a subscription the shop knows by its reference: its known statuses or its
    // Stripe id never stand in for it.
    let known = summary(&state.store, &reference).await?;
    let Some(subscription_id) = known.subscription_id else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "subscription_not_started",
            format!(
                "subscription {reference} has not started: its Checkout Session is not paid yet"
            ),
        ));
    };
    let reason = body
        .reason
        .unwrap_or_else(|| "cancelled by the shop through the order API".into());
    let cancelled = cancel_subscription(
        &state.store,
        stripe,
        &subscription_id,
        body.at_period_end,
        &Actor::Api(caller.token_id),
        &reason,
    )
    .await
    .map_err(|error| with_summary(error, &reference))?;
    Ok(Json(CancelAnswer {
        subscription: summary(&state.store, &reference).await?,
        at_period_end: cancelled.at_period_end,
        idempotency_key: cancelled.key,
        sent_now: cancelled.sent_now,
    }))
}
