//! What every response of the dashboard carries, and the limits that keep one client from
//! taking the server: security headers, a request timeout and a concurrency limit per area,
//! and a cap on the size of request headers.

use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower::ServiceBuilder;
use tower::layer::util::{Identity, Stack};
use tower::limit::ConcurrencyLimitLayer;
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

/// At most `concurrency` requests at once (the rest wait their turn), each answered 503
/// after `timeout`.
pub fn bounded(
    concurrency: usize,
    timeout: Duration,
) -> Stack<ConcurrencyLimitLayer, Stack<TimeoutLayer, Identity>> {
    ServiceBuilder::new()
        .layer(TimeoutLayer::with_status_code(
            StatusCode::SERVICE_UNAVAILABLE,
            timeout,
        ))
        .layer(ConcurrencyLimitLayer::new(concurrency))
        .into_inner()
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
