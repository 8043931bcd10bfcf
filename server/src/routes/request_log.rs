//! Every request gets an id, the caller's `x-request-id` when it is sane or a new UUID, and
//! a span that carries it, so every log line of the request names it; the response carries
//! it back. Answered requests are logged at debug (the default `info` log stays free of a line
//! per delivery), server errors at warn.

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::http::HeaderName;
use tower::ServiceBuilder;
use tower::util::MapRequestLayer;
use tower_http::LatencyUnit;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnFailure, DefaultOnResponse, TraceLayer};
use tracing::{Level, Span};

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest request id taken from a caller.
const MAX_REQUEST_ID: usize = 128;

/// `router` with, outermost first: a request id that is not sane dropped, one made if there
/// is none, the request's span opened, the id copied to the response.
pub fn traced(router: Router) -> Router {
    router.layer(
        ServiceBuilder::new()
            .layer(MapRequestLayer::new(keep_sane_request_id))
            .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
            .layer(
                TraceLayer::new_for_http()
                    .make_span_with(request_span)
                    .on_request(())
                    .on_response(
                        DefaultOnResponse::new()
                            .level(Level::DEBUG)
                            .latency_unit(LatencyUnit::Millis),
                    )
                    .on_body_chunk(())
                    .on_eos(())
                    .on_failure(
                        DefaultOnFailure::new()
                            .level(Level::WARN)
                            .latency_unit(LatencyUnit::Millis),
                    ),
            )
            .layer(PropagateRequestIdLayer::new(REQUEST_ID)),
    )
}

/// An info span, so that its fields reach the `info` log: the method, the route (its
/// pattern, so that an email or order id in the path stays out of the log; the path itself
/// when no route matched) and the request id. No query string: searches name customers.
fn request_span(request: &Request) -> Span {
    let request_id = request
        .headers()
        .get(&REQUEST_ID)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let path = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| request.uri().path(), MatchedPath::as_str);
    tracing::info_span!("request", method = %request.method(), path, request_id)
}

/// Only one `x-request-id` of up to 128 letters, digits and `-_.:/+=` is taken from a
/// caller; anything else (which could forge or break log lines) is replaced by a new id.
fn keep_sane_request_id(mut request: Request) -> Request {
    let mut ids = request.headers().get_all(&REQUEST_ID).iter();
    let sane = match (ids.next(), ids.next()) {
        (Some(id), None) => is_sane(id.as_bytes()),
        (None, _) => true,
        (Some(_), Some(_)) => false,
    };
    if !sane {
        request.headers_mut().remove(&REQUEST_ID);
    }
    request
}

fn is_sane(id: &[u8]) -> bool {
    (1..=MAX_REQUEST_ID).contains(&id.len())
        && id
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/+=".contains(b))
}

#[cfg(test)]
mod tests {
    use super::is_sane;

    #[test]
    fn request_ids_are_short_and_plain() {
        assert!(is_sane(b"3f2c9a4e-8d1b-4c55-9d6e-1a2b3c4d5e6f"));
        assert!(is_sane(b"req_abc123"));
        assert!(is_sane(b"lb:7f/Zm9v+YmFy=="));
        assert!(!is_sane(b""));
        assert!(!is_sane(b"two words"));
        assert!(!is_sane(b"line\nbreak"));
        assert!(!is_sane(b"{\"json\":1}"));
        assert!(!is_sane("é".as_bytes()));
        assert!(!is_sane(&[b'a'; 129]));
    }
}
