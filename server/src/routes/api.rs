//! The order API for the shop's backend, authenticated with an API token
//! (`Authorization: Bearer cct_…`, made with `claimcheck tokens create`):
//!
//! - `POST /api/orders` `{"package", "customer_email", "order_id"?}` records the order and
//!   opens its Stripe Checkout Session; asking again for the same order returns the same
//!   session (201 the first time, 200 after).
//! - `GET /api/orders/{order_id}`: status, credits granted, the Checkout URL.
//! - subscriptions: their Checkout Session, state and cancellation ([`super::subscription_api`]).
//! - the customer's credits: balance, ledger, spends and holds ([`super::spends`]).
//!
//! Every error is JSON `{"error": code, "message": text}`.

use std::sync::Arc;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use claimcheck_core::billing::Plans;
use claimcheck_core::fulfilment::Packages;
use claimcheck_core::money::OrderStatus;
use claimcheck_core::payments::{CheckoutUrls, OrderRequest, PaymentError, open_checkout};
use claimcheck_core::stripe::{CallError, StripeApi};
use claimcheck_core::token::token_hash;
use claimcheck_core::{OrderId, OrderView, Store, StoreError, now_ms};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::AppState;

/// What the order API needs besides the store.
#[derive(Clone)]
pub(crate) struct ApiState {
    pub stripe: Option<StripeApi>,
    pub checkout_urls: Option<CheckoutUrls>,
    pub packages: Arc<Packages>,
    pub plans: Arc<Plans>,
    /// Spends, holds and adjustments, group-committed (captures and releases each alone).
    pub credits: claimcheck_core::CreditWriter,
}

impl ApiState {
    /// The Stripe client and the Checkout URLs, which every call opening a session needs.
    pub(crate) fn checkout(&self) -> Result<(&StripeApi, &CheckoutUrls), ApiError> {
        match (&self.stripe, &self.checkout_urls) {
            (Some(stripe), Some(urls)) => Ok((stripe, urls)),
            _ => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_configured",
                "the order API needs STRIPE_API_KEY, CLAIMCHECK_CHECKOUT_SUCCESS_URL and \
                 CLAIMCHECK_CHECKOUT_CANCEL_URL",
            )),
        }
    }
}

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/orders", post(create_order))
        .route("/api/orders/{order_id}", get(show_order))
        .merge(super::spends::router())
        .merge(super::subscription_api::router())
        // A path of the API that is not one, or a method it does not take, is answered in
        // the API's shape: never the dashboard's sign-in page.
        .method_not_allowed_fallback(method_not_allowed)
        .route("/api", any(no_such_route))
        .route("/api/", any(no_such_route))
        .route("/api/{*rest}", any(no_such_route))
}

async fn no_such_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("the API has no route {method} {}", uri.path()),
    )
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not take {method}", uri.path()),
    )
}

/// An API error: status, stable code, human message.
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    /// What the error is about, when the caller needs it to go on: a field of the body
    /// (`order`, `subscription`) and its value.
    detail: Option<(&'static str, serde_json::Value)>,
}

impl ApiError {
    /// The same error, with `value` under `field` of its body.
    pub(crate) fn with_detail(self, field: &'static str, value: serde_json::Value) -> ApiError {
        ApiError {
            detail: Some((field, value)),
            ..self
        }
    }

    pub(crate) fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            detail: None,
        }
    }

    pub(crate) fn storage(error: StoreError) -> ApiError {
        tracing::error!(
            error = &error as &dyn std::error::Error,
            "order API: storage"
        );
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "storage_error",
            "the database is unavailable; try again",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.code, "message": self.message });
        if let Some((field, value)) = self.detail {
            body[field] = value;
        }
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"claimcheck\""),
            );
        }
        response
    }
}

impl From<PaymentError> for ApiError {
    fn from(error: PaymentError) -> ApiError {
        let message = error.to_string();
        match error {
            PaymentError::UnknownPackage(_)
            | PaymentError::UnknownPlan(_)
            | PaymentError::BadReference(_)
            | PaymentError::NoPrice(_)
            | PaymentError::BadEmail(_)
            | PaymentError::BadOrderId(_)
            | PaymentError::Reason(_) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_order", message)
            }
            PaymentError::OrderConflict(_) => {
                ApiError::new(StatusCode::CONFLICT, "order_conflict", message)
            }
            PaymentError::SubscriptionConflict(_) => {
                ApiError::new(StatusCode::CONFLICT, "subscription_conflict", message)
            }
            PaymentError::NoSuchOrder(_) | PaymentError::NoSuchSubscription(_) => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
            }
            // Nothing is left to pay: the shop shows the order as it is, never a new session.
            PaymentError::Settled(order) => ApiError {
                detail: Some(("order", json!(OrderSummary::from(*order)))),
                ..ApiError::new(StatusCode::CONFLICT, "order_settled", message)
            },
            // The subscription started: its reference never opens a second one.
            PaymentError::Subscribed(subscription) => ApiError {
                detail: Some(("subscription", json!(subscription))),
                ..ApiError::new(StatusCode::CONFLICT, "subscription_active", message)
            },
            // Stripe has the payment; its event has not been processed: retry later.
            PaymentError::CheckoutCompleted(..) => {
                ApiError::new(StatusCode::CONFLICT, "checkout_completed", message)
            }
            PaymentError::NotSubscribed(_) => {
                ApiError::new(StatusCode::CONFLICT, "subscription_not_started", message)
            }
            PaymentError::SubscriptionCanceled(subscription) => ApiError {
                detail: Some(("subscription", json!(subscription))),
                ..ApiError::new(StatusCode::CONFLICT, "subscription_canceled", message)
            },
            PaymentError::NotRefundable { .. }
            | PaymentError::NoPaymentIntent(_)
            | PaymentError::NoAmount(_)
            | PaymentError::BadAmount { .. }
            | PaymentError::RefundUnanswered { .. } => {
                ApiError::new(StatusCode::CONFLICT, "not_refundable", message)
            }
            PaymentError::Call(CallError::Indeterminate { .. }) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "stripe_unavailable",
                message,
            ),
            PaymentError::Call(CallError::Store(e)) | PaymentError::Store(e) => {
                ApiError::storage(e)
            }
            PaymentError::Call(CallError::Config(_) | CallError::NotStripe { .. }) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_configured", message)
            }
            PaymentError::Call(CallError::Rejected { .. })
            | PaymentError::Call(CallError::IdempotencyMismatch { .. }) => {
                tracing::error!(message = ?message, "Stripe refused an order API call");
                ApiError::new(StatusCode::BAD_GATEWAY, "stripe_rejected", message)
            }
            PaymentError::Random(_) => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", message)
            }
        }
    }
}

/// A caller that presented a live API token.
pub(crate) struct ApiCaller {
    pub token_id: String,
}

impl FromRequestParts<AppState> for ApiCaller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        Bearer::from_request_parts(parts, state)
            .await?
            .caller(state)
            .await
    }
}

/// An API token as presented, not yet looked up: a credit write checks it in its own
/// transaction ([`claimcheck_core::spending::CreditWrite::token_hash`]), any other answer
/// through [`Bearer::caller`] first.
pub(crate) struct Bearer {
    pub token_hash: String,
}

impl Bearer {
    /// The live token's caller, or 401.
    pub(crate) async fn caller(&self, state: &AppState) -> Result<ApiCaller, ApiError> {
        let found = state
            .store
            .tokens()
            .authenticate(&self.token_hash, now_ms())
            .await
            .map_err(ApiError::storage)?;
        match found {
            Some(token) => Ok(ApiCaller {
                token_id: token.token_id,
            }),
            None => Err(unknown_token()),
        }
    }
}

/// The answer to a token that is unknown or revoked.
pub(crate) fn unknown_token() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "the API token is unknown or revoked",
    )
}

impl FromRequestParts<AppState> for Bearer {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        _state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "send an API token: Authorization: Bearer cct_… (claimcheck tokens create)",
                )
            })?;
        Ok(Bearer {
            token_hash: token_hash(token),
        })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateOrder {
    package: String,
    customer_email: String,
    #[serde(default)]
    order_id: Option<String>,
}

/// What the shop needs to know about an order.
#[derive(Serialize)]
struct OrderSummary {
    order_id: String,
    status: OrderStatus,
    payment_status: String,
    package: Option<String>,
    customer_email: Option<String>,
    credits: i64,
    credits_granted: i64,
    amount: Option<i64>,
    /// Refunded and not failed, in minor units.
    amount_refunded: i64,
    currency: Option<String>,
    checkout_session_id: Option<String>,
    checkout_url: Option<String>,
}

impl From<OrderView> for OrderSummary {
    fn from(order: OrderView) -> Self {
        OrderSummary {
            order_id: order.order_id,
            status: order.status,
            payment_status: order.payment_status,
            package: order.package,
            customer_email: order.customer_email,
            credits: order.credits,
            credits_granted: order.credits_granted,
            amount: order.amount,
            amount_refunded: order.amount_refunded,
            currency: order.currency,
            checkout_session_id: order.checkout_session_id,
            checkout_url: order.checkout_url,
        }
    }
}

async fn create_order(
    _caller: ApiCaller,
    State(state): State<AppState>,
    body: Result<Json<CreateOrder>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(|rejection| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!(
                "expected JSON {{\"package\", \"customer_email\", \"order_id\"?}}: {}",
                rejection.body_text()
            ),
        )
    })?;
    let api = &state.api;
    let (stripe, urls) = api.checkout()?;
    let request = OrderRequest {
        order_id: body.order_id,
        package: body.package,
        customer_email: body.customer_email,
    };
    let checkout = open_checkout(&state.store, stripe, &api.packages, urls, &request).await?;
    let status = if checkout.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(OrderSummary::from(checkout.order))).into_response())
}

async fn show_order(
    _caller: ApiCaller,
    State(store): State<Store>,
    Path(order_id): Path<String>,
) -> Result<Json<OrderSummary>, ApiError> {
    let order_id = OrderId::parse(order_id)
        .map_err(|e| ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string()))?;
    match store
        .orders()
        .get(&order_id)
        .await
        .map_err(ApiError::storage)?
    {
        Some(order) => Ok(Json(order.into())),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no order {order_id}"),
        )),
    }
}
