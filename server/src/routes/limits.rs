//! What every response of the dashboard carries, and the limits that keep one client from
//! taking the server: security headers, a body that must arrive in time, a request timeout
//! and a concurrency limit per area (one for the whole area, not one per route), and a cap
//! on the size of request headers.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::timeout::TimeoutLayer;

/// Request headers larger than this, all together, are refused (431).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// The policy for dashboard responses that do not set their own: pages set one with their
/// hydration script's nonce; redirects, errors and assets get this one (no inline script).
const DEFAULT_POLICY: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data:; object-src 'none'; \
    base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

type HeaderLayer = SetResponseHeaderLayer<HeaderValue>;
/// The four header layers of [`security_headers`], innermost last.
type SecurityHeaders =
    Stack<HeaderLayer, Stack<HeaderLayer, Stack<HeaderLayer, Stack<HeaderLayer, Identity>>>>;

/// `Content-Security-Policy` (unless the page set its own), no framing, no MIME sniffing,
/// no referrer leaving the site.
pub fn security_headers() -> SecurityHeaders {
    let set = |name: HeaderName, value: &'static str| {
        SetResponseHeaderLayer::overriding(name, HeaderValue::from_static(value))
    };
    ServiceBuilder::new()
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(DEFAULT_POLICY),
        ))
        .layer(set(header::X_FRAME_OPTIONS, "DENY"))
        .layer(set(header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .layer(set(header::REFERRER_POLICY, "same-origin"))
        .into_inner()
}

/// `Cache-Control: no-store` on every answer that has no caching rule of its own: what the
/// dashboard and the API answer names customers, orders and balances, and no browser,
/// proxy or shared machine may keep it.
pub fn no_store() -> SetResponseHeaderLayer<HeaderValue> {
    SetResponseHeaderLayer::if_not_present(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    )
}

/// At most `concurrency` requests at once in the whole area the layer is put on (the rest
/// wait their turn), each answered 503 after `timeout`. One semaphore for every route of the
/// area: `Router::layer` wraps each route on its own, and a plain concurrency limit would be
/// one per route and method.
pub fn bounded(
    concurrency: usize,
    timeout: Duration,
) -> Stack<GlobalConcurrencyLimitLayer, Stack<TimeoutLayer, Identity>> {
    ServiceBuilder::new()
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            timeout,
        ))
        .layer(GlobalConcurrencyLimitLayer::new(concurrency))
        .into_inner()
}

/// What a route group accepts of a body: at most `limit` bytes, all of them within
/// `deadline` of the headers.
#[derive(Debug, Clone, Copy)]
pub struct BodyRule {
    pub limit: usize,
    pub deadline: Duration,
}

impl BodyRule {
    pub fn new(limit: usize, deadline: Duration) -> BodyRule {
        BodyRule { limit, deadline }
    }
}

/// Why a body was not read.
#[derive(Debug)]
pub enum Unread {
    TooLarge,
    TimedOut,
    Broken(axum::Error),
}

/// The whole of `body`, if it is at most `limit` bytes and arrives within `deadline`.
pub async fn read_within(body: Body, limit: usize, deadline: Duration) -> Result<Bytes, Unread> {
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(Unread::TimedOut),
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(error)) => {
            let too_large =
                std::iter::successors(Some(&error as &(dyn std::error::Error + 'static)), |e| {
                    e.source()
                })
                .any(|e| e.is::<http_body_util::LengthLimitError>());
            Err(if too_large {
                Unread::TooLarge
            } else {
                Unread::Broken(error)
            })
        }
    }
}

/// Reads the request's body by the group's [`BodyRule`] before anything else sees it, so a
/// client that sends it slowly holds no place in the area's concurrency limit and is cut off
/// at the deadline (408, the connection closed); one announced or found larger than the
/// limit is refused (413) unread.
pub async fn bodies_within(State(rule): State<BodyRule>, request: Request, next: Next) -> Response {
    let closing = |status: StatusCode, text: String| {
        let mut response = (status, text).into_response();
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        response
    };
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = || {
        closing(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request bodies over {} bytes are refused", rule.limit),
        )
    };
    if announced.is_some_and(|n| n > rule.limit as u64) {
        return too_large();
    }
    let (parts, body) = request.into_parts();
    match read_within(body, rule.limit, rule.deadline).await {
        Ok(bytes) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Err(Unread::TooLarge) => too_large(),
        Err(Unread::TimedOut) => closing(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                rule.deadline.as_secs()
            ),
        ),
        Err(Unread::Broken(error)) => {
            tracing::debug!(%error, "a request body could not be read");
            closing(
                StatusCode::BAD_REQUEST,
                "the request body could not be read".to_owned(),
            )
        }
    }
}

/// Refuses requests whose headers, all together, exceed [`MAX_HEADER_BYTES`].
pub async fn header_size(request: Request, next: Next) -> Response {
    let size: usize = request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if size > MAX_HEADER_BYTES {
        return (
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("request headers over {MAX_HEADER_BYTES} bytes are refused"),
        )
            .into_response();
    }
    next.run(request).await
}
