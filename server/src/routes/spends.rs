//! The spend API, for the shop's backend (the order API's bearer tokens):
//!
//! - `POST /api/customers/{email}/spends` `{"credits", "reference", "metadata"?}`;
//! - `POST /api/customers/{email}/holds` `{"credits", "reference", "metadata"?, "expires_in"?}`;
//! - `POST /api/holds/{id}/capture` `{"credits"?}` and `POST /api/holds/{id}/release`;
//! - `GET /api/customers/{email}/balance` and `GET /api/customers/{email}/ledger?cursor=`.
//!
//! Every POST needs an `Idempotency-Key`: the same key with the same request gets the first
//! answer again, byte for byte, with `Idempotent-Replayed: true`; with another request, 422.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use claimcheck_core::now_ms;
use claimcheck_core::spending::{
    Answer, CreditOutcome, CreditRequest, CreditWrite, IdempotencyKey, KeyScope, Keyed,
    LedgerCursor, SpendError,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::AppState;
use super::api::{ApiCaller, ApiError, Bearer, unknown_token};

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/api/customers/{email}/spends", post(spend))
        .route("/api/customers/{email}/holds", post(hold))
        .route("/api/holds/{hold_id}/capture", post(capture))
        .route("/api/holds/{hold_id}/release", post(release))
        .route("/api/customers/{email}/balance", get(balance))
        .route("/api/customers/{email}/ledger", get(ledger))
}

/// Ledger rows per page.
const LEDGER_PAGE: i64 = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpendBody {
    credits: i64,
    reference: String,
    #[serde(default)]
    metadata: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HoldBody {
    credits: i64,
    reference: String,
    #[serde(default)]
    metadata: Option<Value>,
    /// `15m`, `2h`: how long the hold lasts (default 15 minutes, at most 24 hours).
    #[serde(default)]
    expires_in: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct CaptureBody {
    #[serde(default)]
    credits: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ReleaseBody {}

fn body<T: DeserializeOwned + Default>(bytes: &Bytes, shape: &str) -> Result<T, ApiError> {
    // No body, or JSON `null`, is the request without options.
    let text = bytes.trim_ascii();
    if text.is_empty() || text == b"null" {
        return Ok(T::default());
    }
    required_body(bytes, shape)
}

fn required_body<T: DeserializeOwned>(bytes: &Bytes, shape: &str) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("expected JSON {shape}: {e}"),
        )
    })
}

fn key(headers: &HeaderMap) -> Result<IdempotencyKey, ApiError> {
    let value = headers
        .get("idempotency-key")
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "idempotency_key_missing",
                SpendError::BadKey.to_string(),
            )
        })?
        .to_str()
        .map_err(|_| invalid(SpendError::BadKey, StatusCode::BAD_REQUEST))?;
    IdempotencyKey::parse(value).map_err(|e| invalid(e, StatusCode::BAD_REQUEST))
}

fn invalid(error: SpendError, status: StatusCode) -> ApiError {
    ApiError::new(status, "invalid_request", error.to_string())
}

/// The answer the caller gets for an outcome, and gets again under its key.
pub(crate) fn render(outcome: &CreditOutcome) -> Answer {
    let (status, body) = match outcome {
        CreditOutcome::Spent(spend) => (201, json!(spend)),
        CreditOutcome::Held(hold) => (201, json!(hold)),
        CreditOutcome::Captured { hold, spend } => (200, json!({ "hold": hold, "spend": spend })),
        CreditOutcome::Released(hold) => (200, json!(hold)),
        CreditOutcome::Adjusted(adjustment) => (201, json!(adjustment)),
        CreditOutcome::Insufficient { balance, available } => (
            409,
            json!({
                "error": "insufficient_credits",
                "message": format!(
                    "{available} credits are available (balance {balance}); nothing was spent"
                ),
                "balance": balance,
                "available": available,
            }),
        ),
        CreditOutcome::HoldSettled(hold) => (
            409,
            json!({
                "error": "hold_settled",
                "message": format!("the hold is {} already", hold.status.as_str()),
                "hold": hold,
            }),
        ),
        CreditOutcome::OverCapture(hold) => (
            422,
            json!({
                "error": "capture_exceeds_hold",
                "message": format!("the hold holds {} credits", hold.credits),
                "hold": hold,
            }),
        ),
        CreditOutcome::NoSuchHold(id) => (
            404,
            json!({ "error": "not_found", "message": format!("no hold {id}") }),
        ),
    };
    Answer {
        status,
        body: body.to_string(),
    }
}

/// Carries out a request under its key. The caller's token is checked in the write's own
/// transaction; a request refused before it (a bad body, key or request) looks the token up
/// first, so an unknown token gets 401 whatever it sent.
async fn apply(
    state: &AppState,
    bearer: Bearer,
    headers: &HeaderMap,
    request: Result<Result<CreditRequest, SpendError>, ApiError>,
) -> Result<Response, ApiError> {
    let checked = request.and_then(|request| {
        let key = key(headers)?;
        let request = request.map_err(|e| invalid(e, StatusCode::UNPROCESSABLE_ENTITY))?;
        Ok((key, request))
    });
    let (key, request) = match checked {
        Ok(checked) => checked,
        Err(error) => {
            bearer.caller(state).await?;
            return Err(error);
        }
    };
    let operation = request.operation();
    let applied = state
        .api
        .credits
        .apply(CreditWrite {
            token_hash: Some(bearer.token_hash),
            scope: KeyScope::Api,
            key,
            request,
            now: now_ms(),
            render,
        })
        .await
        .map_err(ApiError::storage)?;
    if !matches!(applied.keyed, Keyed::Unauthorized) {
        state
            .webhook
            .metrics
            .credit_request(operation, applied.metric());
    }
    let keyed = applied.keyed;
    Ok(match keyed {
        Keyed::Fresh(answer) => answered(answer, false),
        Keyed::Replayed(answer) => answered(answer, true),
        Keyed::KeyReused => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            "this Idempotency-Key was used for another request; use a new key for a new request",
        )
        .into_response(),
        Keyed::KeyInUse => {
            let mut response = ApiError::new(
                StatusCode::CONFLICT,
                "idempotency_key_in_use",
                "the first request under this Idempotency-Key is still running; retry shortly",
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
        Keyed::Unauthorized => unknown_token().into_response(),
    })
}

fn answered(answer: Answer, replayed: bool) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        answer.body,
    )
        .into_response();
    if replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

async fn spend(
    bearer: Bearer,
    State(state): State<AppState>,
    Path(email): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let request =
        required_body(&bytes, r#"{"credits", "reference", "metadata"?}"#).map(|body: SpendBody| {
            CreditRequest::spend(&email, body.credits, &body.reference, body.metadata)
        });
    apply(&state, bearer, &headers, request).await
}

async fn hold(
    bearer: Bearer,
    State(state): State<AppState>,
    Path(email): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let request = required_body(
        &bytes,
        r#"{"credits", "reference", "metadata"?, "expires_in"?}"#,
    )
    .and_then(|body: HoldBody| {
        let expires_in = match body.expires_in.as_deref() {
            None => None,
            Some(text) => Some(claimcheck_core::text::duration_ms(text).ok_or_else(|| {
                invalid(SpendError::BadHoldExpiry, StatusCode::UNPROCESSABLE_ENTITY)
            })?),
        };
        Ok(CreditRequest::hold(
            &email,
            body.credits,
            &body.reference,
            body.metadata,
            expires_in,
        ))
    });
    apply(&state, bearer, &headers, request).await
}

async fn capture(
    bearer: Bearer,
    State(state): State<AppState>,
    Path(hold_id): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let request = body(&bytes, r#"{"credits"?}"#)
        .map(|body: CaptureBody| CreditRequest::capture(&hold_id, body.credits));
    apply(&state, bearer, &headers, request).await
}

async fn release(
    bearer: Bearer,
    State(state): State<AppState>,
    Path(hold_id): Path<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Result<Response, ApiError> {
    let request = body(&bytes, "{}").map(|ReleaseBody {}| CreditRequest::release(&hold_id));
    apply(&state, bearer, &headers, request).await
}

async fn balance(
    _caller: ApiCaller,
    State(state): State<AppState>,
    Path(email): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let email = claimcheck_core::spending::customer_email(&email)
        .map_err(|e| invalid(e, StatusCode::UNPROCESSABLE_ENTITY))?;
    let credits = state
        .store
        .credits()
        .balance(&email, &state.api.packages, now_ms())
        .await
        .map_err(ApiError::storage)?;
    let orders = state
        .store
        .orders()
        .customer(&email)
        .await
        .map_err(ApiError::storage)?
        .orders
        .len();
    let mut body = json!(credits);
    body["orders"] = json!(orders);
    Ok(Json(body))
}

#[derive(Deserialize)]
struct LedgerQuery {
    #[serde(default)]
    cursor: Option<String>,
}

async fn ledger(
    _caller: ApiCaller,
    State(state): State<AppState>,
    Path(email): Path<String>,
    Query(query): Query<LedgerQuery>,
) -> Result<Json<Value>, ApiError> {
    let email = claimcheck_core::spending::customer_email(&email)
        .map_err(|e| invalid(e, StatusCode::UNPROCESSABLE_ENTITY))?;
    let cursor = match query.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(text) => Some(LedgerCursor::parse(text).ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "the cursor is the next_cursor of the previous page",
            )
        })?),
    };
    let page = state
        .store
        .credits()
        .ledger(&email, cursor, LEDGER_PAGE)
        .await
        .map_err(ApiError::storage)?;
    Ok(Json(json!(page)))
}
