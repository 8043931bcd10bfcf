//! Stripe's side of the wire: every event the simulator makes is delivered to the registered
//! webhook endpoints like Stripe delivers it (a fresh signature per attempt, retried on a
//! non-2xx or a timeout on Stripe's schedule, compressed by the time scale, then given up),
//! and listed by `GET /v1/events` with Stripe's parameters for reconciliation.
//!
//! - `POST /v1/webhook_endpoints` (`url`) registers an endpoint and answers its `secret`.
//! - `POST /_sim/checkout/sessions/{id}/pay` `{"outcome": "card"|"sepa_ok"|"sepa_fail"}`: the
//!   customer pays; the events Stripe makes follow (async results after a simulated delay).
//!   A `mode=subscription` session starts its subscription (see `billing`).
//! - `POST /_sim/outage` `{"seconds", "mode": "refused"|"error500"|"timeout"}`: deliveries
//!   fail for a while.
//! - `POST /_sim/webhooks` `{"url", "secret"}` registers an endpoint whose secret the caller
//!   chose (an endpoint configured at Stripe before Claimcheck started).
//! - `POST /_sim/delivery_faults` `{"duplicates": 0.2, "twins": 0.1}`: shares of deliveries
//!   sent twice and of events made twice (twin Event objects for one action).
//! - `POST /_sim/events` records an event as if Stripe had made it (test set-ups);
//!   `GET /_sim/deliveries` counts deliveries pending, delivered and given up.

use std::time::Duration;

use axum::extract::{Path, Query, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use claimcheck_core::now_ms;
use claimcheck_core::webhook::SigningSecret;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Sim, SimState, authorized, respond, sim_error, stripe_error};

/// Stripe's retries of a failing delivery (live mode: about three days), in seconds after
/// the first attempt; divided by the time scale.
const RETRY_AFTER_SECS: [u64; 9] = [
    60,
    300,
    1_800,
    3_600,
    7_200,
    14_400,
    28_800,
    57_600,
    86_400 + 43_200,
];
/// Events stay listable this long (divided by the time scale).
const LISTABLE_FOR_SECS: u64 = 30 * 86_400;
/// How long after a SEPA debit is started its result arrives (divided by the time scale).
const SEPA_DELAY_SECS: u64 = 2 * 86_400;

/// A registered webhook endpoint.
#[derive(Clone)]
pub(super) struct Endpoint {
    pub url: String,
    pub secret: SigningSecret,
}

/// One event on its way to one endpoint.
#[derive(Debug, Clone, Default)]
pub(super) struct DeliveryState {
    pub attempts: u32,
    pub next_at: i64,
    pub delivered: bool,
    pub gave_up: bool,
    /// Why the last attempt failed: an outage's mode, or the endpoint's HTTP status.
    pub last_error: Option<String>,
    /// Deliveries still to be repeated after a success (Stripe delivers at least once).
    pub repeats: u8,
}

/// Deliveries fail until `until` (unix ms).
#[derive(Debug, Clone)]
pub(super) struct Outage {
    pub until: i64,
    pub mode: String,
}

pub(super) fn router() -> Router<Sim> {
    Router::new()
        .route("/v1/events", get(list_events))
        .route("/v1/events/{id}", get(retrieve_event))
        .route("/v1/webhook_endpoints", post(add_endpoint))
        .route("/_sim/checkout/sessions/{id}/pay", post(pay))
        .route("/_sim/outage", post(outage))
        .route("/_sim/events", post(inject_event).get(all_events))
        .route("/_sim/deliveries", get(delivery_counts))
        .route("/_sim/webhooks", post(add_known_endpoint))
        .route("/_sim/delivery_faults", post(delivery_faults))
}

impl SimState {
    /// Queues `event` for every registered endpoint.
    pub(super) fn queue(&mut self, event_id: &str) {
        let now = now_ms();
        for i in 0..self.endpoints.len() {
            let repeats = u8::from(self.chance(self.duplicate_rate));
            self.deliveries.insert(
                (event_id.to_owned(), i),
                DeliveryState {
                    next_at: now,
                    repeats,
                    ..DeliveryState::default()
                },
            );
        }
    }

    fn scaled(&self, secs: u64) -> i64 {
        ((secs as f64) * 1000.0 / self.time_scale.max(1e-6)) as i64
    }

    /// Whether every endpoint got the event (Stripe's `delivery_success`).
    fn delivered(&self, event_id: &str) -> bool {
        (0..self.endpoints.len()).all(|i| {
            self.deliveries
                .get(&(event_id.to_owned(), i))
                .is_none_or(|d| d.delivered)
        })
    }
}

/// Delivers due events for as long as the simulator runs.
pub(super) async fn deliver_forever(sim: Sim) {
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
    {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "the simulator cannot deliver webhooks");
            return;
        }
    };
    loop {
        let due: Vec<(String, usize, Value, Endpoint, Option<Outage>)> = {
            let state = sim.lock();
            let now = now_ms();
            let outage = state.outage.clone().filter(|o| o.until > now);
            state
                .deliveries
                .iter()
                .filter(|(_, d)| !d.delivered && !d.gave_up && d.next_at <= now)
                .filter_map(|((id, i), _)| {
                    let event = state.events.iter().find(|e| e["id"] == id.as_str())?;
                    Some((
                        id.clone(),
                        *i,
                        event.clone(),
                        state.endpoints.get(*i)?.clone(),
                        outage.clone(),
                    ))
                })
                .collect()
        };
        for (id, i, event, endpoint, outage) in due {
            let failure = match outage {
                Some(outage) => Some(format!("outage: {}", outage.mode)),
                None => {
                    let body = event.to_string();
                    let signature = endpoint.secret.sign(now_ms() / 1000, body.as_bytes());
                    match client
                        .post(&endpoint.url)
                        .header("content-type", "application/json")
                        .header("stripe-signature", signature)
                        .body(body)
                        .send()
                        .await
                    {
                        Ok(r) if r.status().is_success() => None,
                        Ok(r) => Some(format!("HTTP {}", r.status().as_u16())),
                        Err(error) => Some(error.to_string()),
                    }
                }
            };
            let delivered = failure.is_none();
            let mut state = sim.lock();
            let retry_in: Vec<i64> = RETRY_AFTER_SECS.iter().map(|s| state.scaled(*s)).collect();
            if let Some(delivery) = state.deliveries.get_mut(&(id, i)) {
                delivery.attempts += 1;
                delivery.last_error = failure;
                if delivered && delivery.repeats > 0 {
                    // Delivered, and delivered again a moment later.
                    delivery.repeats -= 1;
                    delivery.next_at = now_ms() + 5;
                } else if delivered {
                    delivery.delivered = true;
                } else {
                    match retry_in.get(delivery.attempts as usize - 1) {
                        Some(wait) => delivery.next_at = now_ms() + wait,
                        None => delivery.gave_up = true,
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn unauthorized() -> Response {
    respond(
        &stripe_error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            None,
            "Invalid API Key provided.",
        ),
        false,
    )
}

/// `GET /v1/events`: newest first; `limit` (1–100, default 10), `starting_after`,
/// `type` (one type, or a group with `*` as a wildcard: `charge.*`) or `types[]` (or
/// `types[n]`, at most 20; not both), `created[gte]`, `delivery_success`.
async fn list_events(
    State(sim): State<Sim>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    if let Some(answer) = super::take_get_fault(&sim, "/v1/events").await {
        return answer;
    }
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(query.as_deref().unwrap_or("")).unwrap_or_default();
    let get = |name: &str| {
        pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let limit = get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(10);
    if !(1..=100).contains(&limit) {
        return respond(
            &stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("parameter_invalid_integer"),
                "limit: between 1 and 100",
            ),
            false,
        );
    }
    let types: Vec<&str> = pairs
        .iter()
        .filter(|(k, _)| k == "types[]" || (k.starts_with("types[") && k.ends_with(']')))
        .map(|(_, v)| v.as_str())
        .collect();
    let one_type = get("type");
    let refused = match (one_type, types.len()) {
        (Some(_), 1..) => Some("You may pass either type or types, but not both."),
        (None, 21..) => Some("types: an array of at most 20 event types."),
        _ => None,
    };
    if let Some(message) = refused {
        return respond(
            &stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("parameter_invalid"),
                message,
            ),
            false,
        );
    }
    let wanted = |event_type: &str| match one_type {
        Some(pattern) => type_matches(pattern, event_type),
        None => types.is_empty() || types.contains(&event_type),
    };
    let created_gte = get("created[gte]").and_then(|c| c.parse::<i64>().ok());
    let delivery_success = get("delivery_success").map(|d| d == "true");
    let state = sim.lock();
    let oldest = now_ms() - state.scaled(LISTABLE_FOR_SECS);
    let mut matching: Vec<&Value> = state
        .events
        .iter()
        .rev()
        .filter(|e| e["_sim_made_at"].as_i64().unwrap_or(0) >= oldest)
        .filter(|e| wanted(e["type"].as_str().unwrap_or("")))
        .filter(|e| created_gte.is_none_or(|t| e["created"].as_i64().unwrap_or(0) >= t))
        .filter(|e| {
            delivery_success
                .is_none_or(|want| state.delivered(e["id"].as_str().unwrap_or("")) == want)
        })
        .collect();
    if let Some(after) = get("starting_after") {
        match matching.iter().position(|e| e["id"] == after) {
            Some(at) => {
                matching.drain(..=at);
            }
            None => {
                return respond(
                    &stripe_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_request_error",
                        Some("resource_missing"),
                        &format!("No such event: '{after}'"),
                    ),
                    false,
                );
            }
        }
    }
    let has_more = matching.len() > limit;
    let data: Vec<Value> = matching.into_iter().take(limit).map(public).collect();
    Json(json!({ "object": "list", "url": "/v1/events", "has_more": has_more, "data": data }))
        .into_response()
}

/// Whether `event_type` is `pattern`, where each `*` stands for any run of characters.
fn type_matches(pattern: &str, event_type: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = event_type.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// An event as Stripe shows it (without the simulator's bookkeeping).
fn public(event: &Value) -> Value {
    let mut event = event.clone();
    if let Some(object) = event.as_object_mut() {
        object.remove("_sim_made_at");
    }
    event
}

async fn retrieve_event(
    State(sim): State<Sim>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    let state = sim.lock();
    match state.events.iter().find(|e| e["id"] == id.as_str()) {
        Some(event) => Json(public(event)).into_response(),
        None => respond(
            &stripe_error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                Some("resource_missing"),
                &format!("No such event: '{id}'"),
            ),
            false,
        ),
    }
}

#[derive(Deserialize)]
struct NewEndpoint {
    url: String,
}

async fn add_endpoint(
    State(sim): State<Sim>,
    headers: HeaderMap,
    Form(new): Form<NewEndpoint>,
) -> Response {
    if !authorized(&headers) {
        return unauthorized();
    }
    let mut state = sim.lock();
    let id = state.next("we");
    let secret_text = format!("whsec_{}", state.next("secret"));
    let Ok(secret) = SigningSecret::new(secret_text.clone()) else {
        return sim_error(StatusCode::INTERNAL_SERVER_ERROR, "no secret");
    };
    state.endpoints.push(Endpoint {
        url: new.url.clone(),
        secret,
    });
    Json(json!({ "id": id, "object": "webhook_endpoint", "url": new.url, "secret": secret_text }))
        .into_response()
}

#[derive(Deserialize)]
struct DeliveryFaults {
    #[serde(default)]
    duplicates: f64,
    #[serde(default)]
    twins: f64,
}

async fn delivery_faults(State(sim): State<Sim>, Json(faults): Json<DeliveryFaults>) -> Response {
    let mut state = sim.lock();
    state.duplicate_rate = faults.duplicates.clamp(0.0, 1.0);
    state.twin_rate = faults.twins.clamp(0.0, 1.0);
    StatusCode::NO_CONTENT.into_response()
}

#[derive(Deserialize)]
struct KnownEndpoint {
    url: String,
    secret: String,
}

async fn add_known_endpoint(State(sim): State<Sim>, Json(new): Json<KnownEndpoint>) -> Response {
    match SigningSecret::new(new.secret) {
        Ok(secret) => {
            let mut state = sim.lock();
            // The same URL again replaces its secret: one endpoint per URL.
            match state.endpoints.iter_mut().find(|e| e.url == new.url) {
                Some(endpoint) => endpoint.secret = secret,
                None => state.endpoints.push(Endpoint {
                    url: new.url,
                    secret,
                }),
            }
            StatusCode::NO_CONTENT.into_response()
        }
        Err(error) => sim_error(StatusCode::BAD_REQUEST, &error.to_string()),
    }
}

#[derive(Deserialize)]
struct Payment {
    /// card | sepa_ok | sepa_fail
    outcome: String,
    /// A subscription's session: the test clock its subscription runs on.
    #[serde(default)]
    test_clock: Option<String>,
}

/// The customer pays a Checkout Session.
async fn pay(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    Json(payment): Json<Payment>,
) -> Response {
    let (delayed, delay) = {
        let mut state = sim.lock();
        let Some(mut session) = state.sessions.get(&id).cloned() else {
            return sim_error(
                StatusCode::NOT_FOUND,
                &format!("No such checkout.session: '{id}'"),
            );
        };
        if session["status"] == "complete" {
            return sim_error(StatusCode::BAD_REQUEST, "The session is paid already.");
        }
        if session["status"] == "expired" {
            return sim_error(StatusCode::BAD_REQUEST, "The session has expired.");
        }
        if let Some(plan) = state.session_plans.get(&id).cloned() {
            // A subscription's session: its subscription and first invoice (card only).
            if payment.outcome != "card" {
                return sim_error(
                    StatusCode::BAD_REQUEST,
                    "a subscription's session is paid by card",
                );
            }
            if let Err(error) = state.start_subscription(&mut session, plan, payment.test_clock) {
                return sim_error(StatusCode::BAD_REQUEST, &error);
            }
            state.sessions.insert(id, session);
            return StatusCode::NO_CONTENT.into_response();
        }
        let intent = format!("pi_{}", id.trim_start_matches("cs_"));
        let card = payment.outcome == "card";
        if !card && !matches!(payment.outcome.as_str(), "sepa_ok" | "sepa_fail") {
            return sim_error(
                StatusCode::BAD_REQUEST,
                "outcome: card, sepa_ok or sepa_fail",
            );
        }
        session["status"] = json!("complete");
        session["payment_intent"] = json!(intent);
        session["payment_status"] = json!(if card { "paid" } else { "unpaid" });
        state.sessions.insert(id.clone(), session.clone());
        state.event("checkout.session.completed", session.clone());
        if card {
            let amount = session["amount_total"].clone();
            state.event(
                "payment_intent.succeeded",
                json!({ "id": intent, "object": "payment_intent", "amount": amount, "status": "succeeded" }),
            );
            state.event(
                "charge.succeeded",
                json!({ "id": format!("ch_{}", id.trim_start_matches("cs_")), "object": "charge",
                        "amount": amount, "amount_captured": amount, "captured": true,
                        "billing_details": super::empty_billing_details(),
                        "payment_intent": intent, "paid": true }),
            );
            (None, 0)
        } else {
            let mut result = session;
            let kind = if payment.outcome == "sepa_ok" {
                result["payment_status"] = json!("paid");
                "checkout.session.async_payment_succeeded"
            } else {
                "checkout.session.async_payment_failed"
            };
            (Some((kind, result)), state.scaled(SEPA_DELAY_SECS))
        }
    };
    if let Some((kind, session)) = delayed {
        let sim = sim.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(u64::try_from(delay).unwrap_or(0))).await;
            let mut state = sim.lock();
            let id = session["id"].as_str().unwrap_or_default().to_owned();
            if kind == "checkout.session.async_payment_failed" {
                // As Stripe does: the payment intent's own failure, with the bank's reason,
                // which the session's event does not carry.
                state.event(
                    "payment_intent.payment_failed",
                    json!({ "id": session["payment_intent"], "object": "payment_intent",
                            "amount": session["amount_total"], "status": "requires_payment_method",
                            "last_payment_error": {
                                "type": "invalid_request_error",
                                "code": "insufficient_funds",
                                "message": "The customer's account has insufficient funds to cover this payment."
                            } }),
                );
            }
            state.sessions.insert(id, session.clone());
            state.event(kind, session);
        });
    }
    StatusCode::NO_CONTENT.into_response()
}

#[derive(Deserialize)]
struct OutageRequest {
    seconds: f64,
    #[serde(default = "refused")]
    mode: String,
}

fn refused() -> String {
    "refused".into()
}

async fn outage(State(sim): State<Sim>, Json(request): Json<OutageRequest>) -> Response {
    if !matches!(request.mode.as_str(), "refused" | "error500" | "timeout") {
        return sim_error(
            StatusCode::BAD_REQUEST,
            "mode: refused, error500 or timeout",
        );
    }
    sim.lock().outage = Some(Outage {
        until: now_ms() + (request.seconds * 1000.0) as i64,
        mode: request.mode,
    });
    StatusCode::NO_CONTENT.into_response()
}

/// Records an event as if Stripe had made it (and queues its deliveries).
async fn inject_event(State(sim): State<Sim>, Json(event): Json<Value>) -> Response {
    let (Some(kind), Some(object)) = (
        event["type"].as_str(),
        event.get("data").and_then(|d| d.get("object")),
    ) else {
        return sim_error(
            StatusCode::BAD_REQUEST,
            "an event: {\"type\", \"data\": {\"object\"}}",
        );
    };
    let made = sim.lock().event(kind, object.clone());
    Json(public(&made)).into_response()
}

async fn all_events(State(sim): State<Sim>) -> Json<Vec<Value>> {
    Json(sim.lock().events.iter().map(public).collect())
}

#[derive(Deserialize)]
struct CountsQuery {
    #[serde(default)]
    kind: Option<String>,
}

/// Deliveries pending, delivered and given up (of one event type with `?kind=`).
async fn delivery_counts(State(sim): State<Sim>, Query(q): Query<CountsQuery>) -> Json<Value> {
    let state = sim.lock();
    let (mut pending, mut delivered, mut gave_up, mut attempts) = (0, 0, 0, 0);
    let mut last_error = None;
    for ((id, _), d) in &state.deliveries {
        let kind = state
            .events
            .iter()
            .find(|e| e["id"] == id.as_str())
            .and_then(|e| e["type"].as_str());
        if q.kind.as_deref().is_some_and(|k| kind != Some(k)) {
            continue;
        }
        attempts += d.attempts;
        if d.last_error.is_some() {
            last_error = d.last_error.clone();
        }
        if d.delivered {
            delivered += 1;
        } else if d.gave_up {
            gave_up += 1;
        } else {
            pending += 1;
        }
    }
    Json(json!({
        "pending": pending, "delivered": delivered, "gave_up": gave_up, "attempts": attempts,
        "last_error": last_error,
    }))
}

#[cfg(test)]
mod tests {
    use super::type_matches;

    #[test]
    fn a_type_pattern_takes_a_type_or_a_wildcard_group() {
        assert!(type_matches("charge.refunded", "charge.refunded"));
        assert!(!type_matches("charge.refunded", "charge.refunded.updated"));
        assert!(type_matches("charge.*", "charge.refunded"));
        assert!(type_matches("charge.*", "charge.dispute.created"));
        assert!(!type_matches("charge.*", "checkout.session.completed"));
        assert!(type_matches("*.updated", "customer.subscription.updated"));
        assert!(!type_matches("*.updated", "customer.subscription.deleted"));
        assert!(type_matches(
            "customer.*.updated",
            "customer.subscription.updated"
        ));
        assert!(!type_matches("customer.*.updated", "invoice.updated"));
        assert!(type_matches("*", "invoice.paid"));
        assert!(!type_matches("invoice.*.paid", "invoice.paid"));
    }
}
