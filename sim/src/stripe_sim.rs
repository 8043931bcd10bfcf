//! A Stripe API simulator for the tests and the demo: the endpoints Claimcheck calls, with
//! Stripe's idempotency semantics and fault injection.
//!
//! - The first result under an Idempotency-Key is replayed for the same key (errors
//!   included) with `Idempotent-Replayed: true` and the original `Request-Id`; keys never
//!   expire while the simulator runs (Stripe keeps them at least 24 h).
//! - The same key with other parameters (or another endpoint) answers 400
//!   `idempotency_error`; the same key while its first request is still running, 409.
//! - Faults strike AFTER the operation is performed and its result stored: a 500 instead of
//!   the answer, a dropped connection, or an answer held until the client gives up.
//! - `GET /_sim/log` lists every request and what became of it; `GET /_sim/objects` lists
//!   what was created; `POST /_sim/faults` arms faults and `POST /_sim/latency` slows every
//!   operation (so concurrent requests overlap).
//! - Money after the purchase: refunds may be partial and several per charge, up to what was
//!   charged; each makes the Event objects Stripe makes (`charge.refunded` with the
//!   cumulative `amount_refunded`, `refund.created`). `POST /_sim/refunds/{id}/fail` fails a
//!   refund (`refund.failed`); `POST /_sim/disputes` opens a dispute on a payment intent
//!   (`charge.dispute.created`) and `POST /_sim/disputes/{id}/close` closes it won or lost
//!   (`charge.dispute.closed`). `GET /_sim/events` lists the events made, oldest first, for
//!   the caller to deliver.
//! - Billing (`billing`): a paid `mode=subscription` session starts a subscription; test
//!   clocks renew it period by period, with failed payments, retries and plan changes.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use claimcheck_core::now_ms;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::SimError;

mod billing;
mod events;

use billing::{Billing, SessionPlan};
use events::{DeliveryState, Endpoint, Outage};

/// What a fault does to the answer of an operation that has been performed (or, for
/// `refuse`, to a request before anything is performed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultMode {
    /// Answer 500 `api_error` instead of the result.
    Error500,
    /// Close the connection without a complete answer.
    Drop,
    /// Hold the answer for `hold_ms`, then close the connection.
    Timeout,
    /// Answer 429 `rate_limit` (GET endpoints such as `/v1/events`).
    RateLimit,
    /// Hold the answer for `hold_ms`, then give it: a slow Stripe that works.
    Slow,
    /// Refuse the request before performing it: 400 `invalid_request_error`
    /// (`balance_insufficient`), nothing made and no idempotent result saved for its key,
    /// as Stripe does for a request it turns down before executing.
    Refuse,
}

/// Strikes the next `count` requests to `path` (e.g. `/v1/refunds`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    pub path: String,
    pub mode: FaultMode,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default = "default_hold_ms")]
    pub hold_ms: u64,
}

fn one() -> u32 {
    1
}

fn default_hold_ms() -> u64 {
    30_000
}

/// One request the simulator answered, for tests to read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub seq: u64,
    pub at: i64,
    pub method: String,
    pub path: String,
    pub idempotency_key: Option<String>,
    pub params: BTreeMap<String, String>,
    /// performed | replayed | idempotency_conflict | in_flight | unauthorized | not_found
    pub outcome: String,
    pub http_status: u16,
    pub object_id: Option<String>,
    pub request_id: String,
    pub fault: Option<FaultMode>,
}

#[derive(Clone)]
struct Stored {
    path: String,
    params: BTreeMap<String, String>,
    answer: Option<Answer>,
}

#[derive(Clone)]
struct Answer {
    status: StatusCode,
    body: Value,
    request_id: String,
}

#[derive(Default)]
struct SimState {
    /// Random per simulator run, so that ids stay unique across restarts (like Stripe's).
    instance: String,
    next_id: u64,
    keys: HashMap<String, Stored>,
    sessions: BTreeMap<String, Value>,
    refunds: BTreeMap<String, Value>,
    /// payment intent → what was refunded of its charge so far.
    charges: HashMap<String, Charge>,
    disputes: BTreeMap<String, Value>,
    subscriptions: BTreeMap<String, Value>,
    /// How each subscription started by a paid session is billed.
    billing: HashMap<String, Billing>,
    /// What each `mode=subscription` session starts once paid.
    session_plans: HashMap<String, SessionPlan>,
    /// Every price billed or scheduled, by id (`GET /v1/prices/{id}`).
    prices: HashMap<String, billing::Price>,
    invoices: BTreeMap<String, Value>,
    /// Test clocks and their frozen time (unix seconds).
    clocks: BTreeMap<String, i64>,
    /// Event objects made by the operations above, oldest first.
    events: Vec<Value>,
    /// Where events are delivered, and how each delivery stands.
    endpoints: Vec<Endpoint>,
    deliveries: HashMap<(String, usize), DeliveryState>,
    outage: Option<Outage>,
    /// Simulated seconds per real second (Stripe's three days of retries in a minute: 4320).
    time_scale: f64,
    /// Shares of deliveries sent twice and of events made twice (twin Event objects).
    duplicate_rate: f64,
    twin_rate: f64,
    /// A small deterministic generator (xorshift) for those shares.
    dice: u64,
    faults: Vec<Fault>,
    latency_ms: u64,
    log: Vec<LogEntry>,
}

/// A payment intent's charge as the simulator knows it.
#[derive(Debug, Clone, Default)]
struct Charge {
    id: String,
    /// What was charged, when a session the simulator made says; otherwise unknown and any
    /// refund is accepted.
    amount: Option<i64>,
    refunded: i64,
    currency: String,
}

impl SimState {
    fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        self.dice ^= self.dice << 13;
        self.dice ^= self.dice >> 7;
        self.dice ^= self.dice << 17;
        (self.dice % 10_000) as f64 / 10_000.0 < p
    }

    fn next(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}_sim{}{:06}", self.instance, self.next_id)
    }

    /// Records an Event object about `object`, as Stripe makes one per change.
    fn event(&mut self, kind: &str, object: Value) -> Value {
        self.event_at(kind, object, now_ms() / 1000)
    }

    /// Likewise, `created` at `at` (unix seconds: a test clock's time).
    fn event_at(&mut self, kind: &str, object: Value, at: i64) -> Value {
        self.event_with(kind, object, None, at)
    }

    /// An `*.updated` event of `object`, which was `before`: `data.previous_attributes` holds
    /// what changed, as Stripe sends it.
    fn updated_at(&mut self, kind: &str, before: &Value, object: Value, at: i64) -> Value {
        let previous = previous_attributes(before, &object);
        self.event_with(kind, object, Some(previous), at)
    }

    fn event_with(&mut self, kind: &str, object: Value, previous: Option<Value>, at: i64) -> Value {
        let id = self.next("evt");
        let mut event = json!({
            "id": id,
            "object": "event",
            "type": kind,
            "created": at,
            "livemode": false,
            "api_version": "2025-03-31.basil",
            "pending_webhooks": 1,
            "request": { "id": null, "idempotency_key": null },
            "data": { "object": object },
            "_sim_made_at": now_ms(),
        });
        if let Some(previous) = previous {
            event["data"]["previous_attributes"] = previous;
        }
        self.events.push(event.clone());
        self.queue(&id);
        if self.chance(self.twin_rate) {
            // A second Event object for the same action: another id, the same object.
            let mut twin = event.clone();
            let twin_id = self.next("evt");
            twin["id"] = json!(twin_id);
            self.events.push(twin);
            self.queue(&twin_id);
        }
        event
    }

    /// The charge of a payment intent; its amount is the session's that the payment intent
    /// paid, or that names `order_id` in its metadata.
    fn charge(&mut self, payment_intent: &str, order_id: Option<&str>) -> Charge {
        if let Some(charge) = self.charges.get(payment_intent) {
            return charge.clone();
        }
        let paid = self.sessions.values().find(|s| {
            s["payment_intent"].as_str() == Some(payment_intent)
                || order_id.is_some_and(|o| s["metadata"]["order_id"].as_str() == Some(o))
        });
        let charge = Charge {
            id: format!("ch_{}", payment_intent.trim_start_matches("pi_")),
            amount: paid.and_then(|s| s["amount_total"].as_i64()),
            refunded: 0,
            currency: paid
                .and_then(|s| s["currency"].as_str())
                .unwrap_or("chf")
                .to_owned(),
        };
        self.charges
            .insert(payment_intent.to_owned(), charge.clone());
        charge
    }

    fn charge_object(&self, payment_intent: &str, charge: &Charge) -> Value {
        json!({
            "id": charge.id,
            "object": "charge",
            "amount": charge.amount.unwrap_or(charge.refunded),
            "amount_captured": charge.amount.unwrap_or(charge.refunded),
            "captured": true,
            "billing_details": empty_billing_details(),
            "amount_refunded": charge.refunded,
            "refunded": charge.amount.is_some_and(|a| charge.refunded >= a),
            "currency": charge.currency,
            "payment_intent": payment_intent,
            "paid": true,
            "status": "succeeded",
            "livemode": false,
        })
    }
}

#[derive(Clone)]
struct Sim {
    state: Arc<Mutex<SimState>>,
    public_url: String,
}

impl Sim {
    fn lock(&self) -> MutexGuard<'_, SimState> {
        // A panicking handler must not take the simulator down with it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running simulator.
pub struct StripeSim {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

/// Where and how fast the simulator delivers webhooks.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Endpoints (URL and signing secret) every event is delivered to.
    pub webhooks: Vec<(String, String)>,
    /// Simulated seconds per real second: retries, SEPA delays and the 30 days events stay
    /// listable all shrink by it.
    pub time_scale: f64,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            webhooks: Vec::new(),
            time_scale: 1.0,
        }
    }
}

impl StripeSim {
    /// Binds `bind` (port 0 picks a free port) and serves until dropped or stopped.
    pub async fn start(bind: SocketAddr) -> Result<StripeSim, SimError> {
        StripeSim::start_with(bind, SimOptions::default()).await
    }

    /// As [`StripeSim::start`], delivering events to `options.webhooks`.
    pub async fn start_with(bind: SocketAddr, options: SimOptions) -> Result<StripeSim, SimError> {
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|source| SimError::Bind { addr: bind, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| SimError::Bind { addr: bind, source })?;
        let (router, sim) = router(format!("http://{addr}"), options)?;
        let task = tokio::spawn(async move {
            let delivering = tokio::spawn(events::deliver_forever(sim));
            if let Err(error) = axum::serve(listener, router).await {
                tracing::error!(%error, "the Stripe simulator stopped");
            }
            delivering.abort();
        });
        Ok(StripeSim { addr, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to give Claimcheck as `STRIPE_API_BASE`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves until `shutdown` resolves.
    pub async fn run_until(self, shutdown: impl Future<Output = ()>) -> Result<(), SimError> {
        shutdown.await;
        self.task.abort();
        Ok(())
    }
}

impl Drop for StripeSim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn router(public_url: String, options: SimOptions) -> Result<(Router, Sim), SimError> {
    let instance = claimcheck_core::token::random_id("x")
        .map(|id| id[2..10].to_owned())
        .unwrap_or_else(|_| format!("{:08x}", now_ms() & 0xffff_ffff));
    let endpoints = options
        .webhooks
        .into_iter()
        .map(|(url, secret)| {
            claimcheck_core::webhook::SigningSecret::new(secret)
                .map(|secret| Endpoint { url, secret })
                .map_err(|e| SimError::Config(format!("--webhook-secret: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let sim = Sim {
        state: Arc::new(Mutex::new(SimState {
            instance,
            endpoints,
            time_scale: options.time_scale.max(1e-3),
            dice: now_ms().unsigned_abs() | 1,
            ..SimState::default()
        })),
        public_url,
    };
    let router = Router::new()
        .route("/v1/checkout/sessions", post(create_session))
        .route("/v1/checkout/sessions/{id}", get(retrieve_session))
        .route("/v1/checkout/sessions/{id}/expire", post(expire_session))
        .route("/v1/refunds", post(create_refund))
        .route(
            "/v1/subscriptions/{id}",
            get(retrieve_subscription)
                .post(update_subscription)
                .delete(delete_subscription),
        )
        .route("/_sim/subscriptions", post(start_subscription))
        .route("/_sim/log", get(log))
        .route("/_sim/objects", get(objects))
        .route("/_sim/faults", post(arm_fault).delete(clear_faults))
        .route("/_sim/latency", post(set_latency))
        .route("/_sim/refunds/{id}/fail", post(fail_refund))
        .route("/_sim/disputes", post(open_dispute))
        .route("/_sim/disputes/{id}/close", post(close_dispute))
        .merge(events::router())
        .merge(billing::router())
        .fallback(not_found)
        .with_state(sim.clone());
    Ok((router, sim))
}

/// A charge's `billing_details`, which Stripe always sends (each field `null` when Checkout
/// collected nothing).
pub(crate) fn empty_billing_details() -> Value {
    json!({
        "address": {
            "city": null, "country": null, "line1": null, "line2": null,
            "postal_code": null, "state": null,
        },
        "email": null,
        "name": null,
        "phone": null,
        "tax_id": null,
    })
}

/// A dispute's `evidence`, which Stripe always sends: nothing submitted yet.
fn dispute_evidence() -> Value {
    let fields = [
        "access_activity_log",
        "billing_address",
        "cancellation_policy",
        "cancellation_policy_disclosure",
        "cancellation_rebuttal",
        "customer_communication",
        "customer_email_address",
        "customer_name",
        "customer_purchase_ip",
        "customer_signature",
        "duplicate_charge_documentation",
        "duplicate_charge_explanation",
        "duplicate_charge_id",
        "product_description",
        "receipt",
        "refund_policy",
        "refund_policy_disclosure",
        "refund_refusal_explanation",
        "service_date",
        "service_documentation",
        "shipping_address",
        "shipping_carrier",
        "shipping_date",
        "shipping_documentation",
        "shipping_tracking_number",
        "uncategorized_file",
        "uncategorized_text",
    ];
    Value::Object(
        fields
            .iter()
            .map(|f| ((*f).to_owned(), Value::Null))
            .collect(),
    )
}

/// The top-level fields of `now` that differ from `before`, with the values they had (a
/// field `before` lacked is `null`): an `*.updated` event's `data.previous_attributes`.
fn previous_attributes(before: &Value, now: &Value) -> Value {
    let changed: serde_json::Map<String, Value> = now
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(field, value)| before.get(field.as_str()) != Some(*value))
        .map(|(field, _)| (field.clone(), before[field.as_str()].clone()))
        .collect();
    Value::Object(changed)
}

/// An armed fault for a GET endpoint (`/v1/events`, a Checkout Session, a subscription): a
/// 429 or a 500 instead of the answer, or the answer held for a while (`slow`).
async fn take_get_fault(sim: &Sim, path: &str) -> Option<Response> {
    let fault = {
        let mut state = sim.lock();
        let fault = state
            .faults
            .iter_mut()
            .find(|f| f.path == path && f.count > 0)?;
        fault.count -= 1;
        fault.clone()
    };
    let answer = match fault.mode {
        FaultMode::Slow => {
            tokio::time::sleep(Duration::from_millis(fault.hold_ms)).await;
            return None;
        }
        FaultMode::RateLimit => stripe_error(
            StatusCode::TOO_MANY_REQUESTS,
            "invalid_request_error",
            Some("rate_limit"),
            "Too many requests hit the API too quickly.",
        ),
        FaultMode::Refuse => refusal(),
        _ => stripe_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            None,
            "Something went wrong on Stripe's end.",
        ),
    };
    Some(respond(&answer, false))
}

/// What an armed `refuse` fault answers.
fn refusal() -> Answer {
    stripe_error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        Some("balance_insufficient"),
        "You have insufficient funds in your Stripe account for this transfer.",
    )
}

/// Takes an armed `refuse` fault for `path`, if there is one.
fn take_refusal(sim: &Sim, path: &str) -> bool {
    let mut state = sim.lock();
    let armed = state
        .faults
        .iter_mut()
        .find(|f| f.path == path && f.mode == FaultMode::Refuse && f.count > 0);
    armed.map(|fault| fault.count -= 1).is_some()
}

fn stripe_error(status: StatusCode, kind: &str, code: Option<&str>, message: &str) -> Answer {
    let mut error = json!({ "type": kind, "message": message });
    if let Some(code) = code {
        error["code"] = json!(code);
    }
    Answer {
        status,
        body: json!({ "error": error }),
        request_id: String::new(),
    }
}

fn respond(answer: &Answer, replayed: bool) -> Response {
    let mut response = (answer.status, Json(&answer.body)).into_response();
    if let Ok(value) = HeaderValue::from_str(&answer.request_id) {
        response.headers_mut().insert("request-id", value);
    }
    if replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// A body that fails at once: hyper aborts the connection instead of completing the answer.
fn dropped_connection() -> Response {
    let failing = futures_util::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other("connection dropped by a fault"))
    });
    let mut response = Response::new(Body::from_stream(failing));
    *response.status_mut() = StatusCode::OK;
    response
}

fn authorized(headers: &HeaderMap) -> bool {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|key| key.starts_with("sk_test_") || key.starts_with("sk_live_"))
}

fn parse_form(body: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_bytes(body).map_err(|e| e.to_string())?;
    Ok(pairs.into_iter().collect())
}

type Operation = fn(&mut SimState, &str, &BTreeMap<String, String>) -> Answer;

async fn create_session(State(sim): State<Sim>, headers: HeaderMap, body: Bytes) -> Response {
    handle_post(sim, "/v1/checkout/sessions", headers, body, perform_session).await
}

async fn create_refund(State(sim): State<Sim>, headers: HeaderMap, body: Bytes) -> Response {
    handle_post(sim, "/v1/refunds", headers, body, perform_refund).await
}

/// `POST /v1/checkout/sessions/{id}/expire`: an open session can no longer be paid (what
/// Stripe does itself at its `expires_at`); a paid or expired one answers 400, as at Stripe.
async fn expire_session(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/v1/checkout/sessions/{id}/expire");
    let operation = move |state: &mut SimState, _: &str, _: &BTreeMap<String, String>| {
        let Some(mut session) = state.sessions.get(&id).cloned() else {
            return stripe_error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                Some("resource_missing"),
                &format!("No such checkout.session: '{id}'"),
            );
        };
        if session["status"] != "open" {
            return stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                None,
                &format!(
                    "Only Checkout Sessions with a status in [\"open\"] can be expired. This \
                     Checkout Session has a status of {}.",
                    session["status"].as_str().unwrap_or("unknown")
                ),
            );
        }
        session["status"] = json!("expired");
        state.sessions.insert(id.clone(), session.clone());
        state.event("checkout.session.expired", session.clone());
        Answer {
            status: StatusCode::OK,
            body: session,
            request_id: String::new(),
        }
    };
    handle(sim, "POST", &path, headers, body, operation).await
}

/// `POST /v1/subscriptions/{id}`: the simulator changes only `cancel_at_period_end`.
async fn update_subscription(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/v1/subscriptions/{id}");
    let operation = move |state: &mut SimState, _: &str, params: &BTreeMap<String, String>| {
        let at_period_end = params.get("cancel_at_period_end").map(String::as_str);
        change_subscription(state, &id, |subscription| {
            if let Some(flag) = at_period_end {
                subscription["cancel_at_period_end"] = json!(flag == "true");
            }
            "customer.subscription.updated"
        })
    };
    handle(sim, "POST", &path, headers, body, operation).await
}

/// `DELETE /v1/subscriptions/{id}`: cancelled now.
async fn delete_subscription(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = format!("/v1/subscriptions/{id}");
    let operation = move |state: &mut SimState, _: &str, _: &BTreeMap<String, String>| {
        change_subscription(state, &id, |subscription| {
            subscription["status"] = json!("canceled");
            subscription["canceled_at"] = json!(now_ms() / 1000);
            "customer.subscription.deleted"
        })
    };
    handle(sim, "DELETE", &path, headers, body, operation).await
}

/// Applies `change` to a subscription the simulator knows and records its event (the kind
/// `change` names); a canceled subscription changes no more, as at Stripe.
fn change_subscription(
    state: &mut SimState,
    id: &str,
    change: impl FnOnce(&mut Value) -> &'static str,
) -> Answer {
    let Some(mut subscription) = state.subscriptions.get(id).cloned() else {
        return stripe_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("resource_missing"),
            &format!("No such subscription: '{id}'"),
        );
    };
    if subscription["status"] == "canceled" {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            None,
            &format!("A canceled subscription can only update its metadata: '{id}'"),
        );
    }
    let before = state.subscription_object(id);
    let kind = change(&mut subscription);
    state.subscriptions.insert(id.to_owned(), subscription);
    let at = state.stamp(id);
    let object = state.subscription_object(id);
    if kind.ends_with(".updated") {
        state.updated_at(kind, &before, object.clone(), at);
    } else {
        state.event_at(kind, object.clone(), at);
    }
    Answer {
        status: StatusCode::OK,
        body: object,
        request_id: String::new(),
    }
}

#[derive(Deserialize)]
struct NewSubscription {
    /// Its id, when a test needs one it already delivered events about.
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    subscription_ref: Option<String>,
    #[serde(default)]
    customer_email: Option<String>,
}

/// A subscription as a paid `mode=subscription` Checkout Session starts it (tests and the
/// demo deliver its Billing events themselves).
async fn start_subscription(State(sim): State<Sim>, Json(new): Json<NewSubscription>) -> Response {
    let mut state = sim.lock();
    let id = match new.id {
        Some(id) => id,
        None => state.next("sub"),
    };
    let now = now_ms() / 1000;
    let metadata = match &new.subscription_ref {
        Some(reference) => json!({ "subscription_ref": reference }),
        None => json!({}),
    };
    let subscription = json!({
        "id": id,
        "object": "subscription",
        "status": "active",
        "customer": state.next("cus"),
        "customer_email": new.customer_email,
        "metadata": metadata,
        "cancel_at_period_end": false,
        "current_period_start": now,
        "current_period_end": now + 30 * 86_400,
        "billing_cycle_anchor": now,
        "created": now,
        "livemode": false,
    });
    state.subscriptions.insert(id, subscription.clone());
    Json(subscription).into_response()
}

async fn handle_post(
    sim: Sim,
    path: &str,
    headers: HeaderMap,
    body: Bytes,
    operation: Operation,
) -> Response {
    handle(sim, "POST", path, headers, body, operation).await
}

/// Stripe's idempotency rules around one operation, then the armed fault, if any.
async fn handle<O>(
    sim: Sim,
    method: &str,
    path: &str,
    headers: HeaderMap,
    body: Bytes,
    operation: O,
) -> Response
where
    O: FnOnce(&mut SimState, &str, &BTreeMap<String, String>) -> Answer + Send + 'static,
{
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let params = parse_form(&body).unwrap_or_default();
    let mut entry = LogEntry {
        seq: 0,
        at: now_ms(),
        method: method.into(),
        path: path.into(),
        idempotency_key: key.clone(),
        params: params.clone(),
        outcome: String::new(),
        http_status: 0,
        object_id: None,
        request_id: String::new(),
        fault: None,
    };

    if !authorized(&headers) {
        let answer = stripe_error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            None,
            "Invalid API Key provided.",
        );
        return finish(&sim, entry, "unauthorized", answer, false);
    }
    if let Err(error) = parse_form(&body) {
        let answer = stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            None,
            &format!("Invalid request body: {error}"),
        );
        return finish(&sim, entry, "invalid", answer, false);
    }

    if take_refusal(&sim, path) {
        return finish(&sim, entry, "refused", refusal(), false);
    }

    // Look the key up and, if it is new, mark it in flight: one lock, so two requests with
    // one key cannot both perform.
    if let Some(key) = &key {
        match check_key(&sim, key, path, &params) {
            KeyCheck::New => {}
            KeyCheck::Replay(answer) => {
                entry.object_id = answer.body["id"].as_str().map(str::to_owned);
                return finish_with_fault(&sim, entry, "replayed", answer, true).await;
            }
            KeyCheck::Refused(outcome, answer) => {
                return finish(&sim, entry, outcome, answer, false);
            }
        }
    }

    // The operation runs to the end in its own task, like Stripe finishing a request whose
    // client hung up: a dropped connection must not leave the key in flight for ever.
    let latency = sim.lock().latency_ms;
    let performing = {
        let sim = sim.clone();
        let params = params.clone();
        let key = key.clone();
        tokio::spawn(async move {
            if latency > 0 {
                tokio::time::sleep(Duration::from_millis(latency)).await;
            }
            let answer = {
                let mut state = sim.lock();
                let mut answer = operation(&mut state, &sim.public_url, &params);
                answer.request_id = state.next("req");
                if let Some(key) = &key
                    && let Some(stored) = state.keys.get_mut(key)
                {
                    stored.answer = Some(answer.clone());
                }
                answer
            };
            // Logged here, so the log has it even if the client is gone.
            let fault = log_with_fault(&sim, entry, "performed", &answer);
            (answer, fault)
        })
    };
    match performing.await {
        Ok((answer, fault)) => respond_with_fault(answer, fault, false).await,
        Err(error) => respond(
            &stripe_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "api_error",
                None,
                &format!("the simulator failed: {error}"),
            ),
            false,
        ),
    }
}

enum KeyCheck {
    New,
    Replay(Answer),
    Refused(&'static str, Answer),
}

fn check_key(sim: &Sim, key: &str, path: &str, params: &BTreeMap<String, String>) -> KeyCheck {
    let mut state = sim.lock();
    match state.keys.get(key) {
        Some(stored) if stored.path != path || &stored.params != params => KeyCheck::Refused(
            "idempotency_conflict",
            stripe_error(
                StatusCode::BAD_REQUEST,
                "idempotency_error",
                None,
                &format!(
                    "Keys for idempotent requests can only be used with the same parameters \
                     they were first used with. Try using a key other than '{key}' if you \
                     meant to execute a different request."
                ),
            ),
        ),
        Some(Stored {
            answer: Some(answer),
            ..
        }) => KeyCheck::Replay(answer.clone()),
        Some(Stored { answer: None, .. }) => KeyCheck::Refused(
            "in_flight",
            stripe_error(
                StatusCode::CONFLICT,
                "invalid_request_error",
                Some("idempotency_key_in_use"),
                "There is currently another in-progress request using this Stripe API key \
                 and idempotency key. Try again later.",
            ),
        ),
        None => {
            state.keys.insert(
                key.to_owned(),
                Stored {
                    path: path.to_owned(),
                    params: params.clone(),
                    answer: None,
                },
            );
            KeyCheck::New
        }
    }
}

fn finish(
    sim: &Sim,
    mut entry: LogEntry,
    outcome: &str,
    answer: Answer,
    replayed: bool,
) -> Response {
    let mut answer = answer;
    if answer.request_id.is_empty() {
        answer.request_id = sim.lock().next("req");
    }
    entry.outcome = outcome.into();
    entry.http_status = answer.status.as_u16();
    entry.request_id = answer.request_id.clone();
    push_log(sim, entry);
    respond(&answer, replayed)
}

/// Takes the armed fault for this request, if any, and logs the request with it.
fn log_with_fault(sim: &Sim, mut entry: LogEntry, outcome: &str, answer: &Answer) -> Option<Fault> {
    let fault = {
        let mut state = sim.lock();
        let armed = state
            .faults
            .iter_mut()
            .find(|f| f.path == entry.path && f.mode != FaultMode::Refuse && f.count > 0);
        armed.map(|fault| {
            fault.count -= 1;
            fault.clone()
        })
    };
    entry.outcome = outcome.into();
    entry.http_status = answer.status.as_u16();
    entry.request_id = answer.request_id.clone();
    entry.object_id = answer.body["id"].as_str().map(str::to_owned);
    entry.fault = fault.as_ref().map(|f| f.mode);
    push_log(sim, entry);
    fault
}

/// The answer, or what the fault makes of it.
async fn respond_with_fault(answer: Answer, fault: Option<Fault>, replayed: bool) -> Response {
    match fault {
        None => respond(&answer, replayed),
        Some(fault) => match fault.mode {
            FaultMode::Error500 => {
                let mut error = stripe_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "api_error",
                    None,
                    "An unknown error occurred.",
                );
                error.request_id = answer.request_id;
                respond(&error, false)
            }
            FaultMode::Drop => dropped_connection(),
            FaultMode::Timeout => {
                tokio::time::sleep(Duration::from_millis(fault.hold_ms)).await;
                dropped_connection()
            }
            FaultMode::Slow => {
                tokio::time::sleep(Duration::from_millis(fault.hold_ms)).await;
                respond(&answer, replayed)
            }
            FaultMode::RateLimit => respond(
                &stripe_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    "invalid_request_error",
                    Some("rate_limit"),
                    "Too many requests hit the API too quickly.",
                ),
                false,
            ),
            // Taken before the operation (`take_refusal`), never after it.
            FaultMode::Refuse => respond(&answer, replayed),
        },
    }
}

async fn finish_with_fault(
    sim: &Sim,
    entry: LogEntry,
    outcome: &str,
    answer: Answer,
    replayed: bool,
) -> Response {
    let fault = log_with_fault(sim, entry, outcome, &answer);
    respond_with_fault(answer, fault, replayed).await
}

fn push_log(sim: &Sim, mut entry: LogEntry) {
    let mut state = sim.lock();
    entry.seq = state.log.len() as u64 + 1;
    state.log.push(entry);
}

fn required<'a>(params: &'a BTreeMap<String, String>, name: &str) -> Result<&'a str, Answer> {
    params.get(name).map(String::as_str).ok_or_else(|| {
        stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("parameter_missing"),
            &format!("Missing required param: {name}."),
        )
    })
}

fn prefixed(params: &BTreeMap<String, String>, prefix: &str) -> serde_json::Map<String, Value> {
    params
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(']'))
                .map(|name| (name.to_owned(), json!(v)))
        })
        .collect()
}

fn perform_session(
    state: &mut SimState,
    public_url: &str,
    params: &BTreeMap<String, String>,
) -> Answer {
    let checked = (|| {
        let mode = required(params, "mode")?;
        let success_url = required(params, "success_url")?;
        let unit_amount: i64 = required(params, "line_items[0][price_data][unit_amount]")?
            .parse()
            .map_err(|_| {
                stripe_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("parameter_invalid_integer"),
                    "Invalid integer: line_items[0][price_data][unit_amount].",
                )
            })?;
        let currency = required(params, "line_items[0][price_data][currency]")?;
        let quantity: i64 = params
            .get("line_items[0][quantity]")
            .and_then(|q| q.parse().ok())
            .unwrap_or(1);
        Ok::<_, Answer>((mode, success_url, unit_amount * quantity, currency))
    })();
    let (mode, success_url, amount_total, currency) = match checked {
        Ok(values) => values,
        Err(answer) => return answer,
    };
    let id = state.next("cs_test");
    if let Some(plan) = SessionPlan::of(params) {
        state.session_plans.insert(id.clone(), plan);
    }
    let session = json!({
        "id": id,
        "object": "checkout.session",
        "mode": mode,
        "status": "open",
        "payment_status": "unpaid",
        "amount_total": amount_total,
        "currency": currency,
        "client_reference_id": params.get("client_reference_id"),
        "customer_email": params.get("customer_email"),
        "metadata": prefixed(params, "metadata["),
        "success_url": success_url,
        "cancel_url": params.get("cancel_url"),
        "payment_intent": null,
        "url": format!("{public_url}/pay/{id}"),
        "livemode": false,
        "created": now_ms() / 1000,
        "expires_at": now_ms() / 1000 + 24 * 3600,
        "automatic_tax": { "enabled": false },
        "custom_fields": [],
        "custom_text": {},
        "payment_method_types": ["card"],
        "shipping_options": [],
    });
    state.sessions.insert(id, session.clone());
    Answer {
        status: StatusCode::OK,
        body: session,
        request_id: String::new(),
    }
}

fn perform_refund(state: &mut SimState, _: &str, params: &BTreeMap<String, String>) -> Answer {
    let payment_intent = match required(params, "payment_intent") {
        Ok(pi) => pi.to_owned(),
        Err(answer) => return answer,
    };
    let order_id = params.get("metadata[order_id]").map(String::as_str);
    let mut charge = state.charge(&payment_intent, order_id);
    let left = charge.amount.map(|a| a - charge.refunded);
    if left == Some(0) {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("charge_already_refunded"),
            &format!("Charge {} has already been refunded.", charge.id),
        );
    }
    let amount = match (params.get("amount").map(|a| a.parse::<i64>()), left) {
        (Some(Ok(amount)), _) if amount > 0 => amount,
        (None, Some(left)) => left,
        _ => {
            return stripe_error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("parameter_invalid_integer"),
                "amount: a positive integer (minor units) is required here.",
            );
        }
    };
    if left.is_some_and(|left| amount > left) {
        return stripe_error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("amount_too_large"),
            &format!(
                "Refund amount ({amount}) is greater than unrefunded amount on charge ({}).",
                left.unwrap_or_default()
            ),
        );
    }
    let id = state.next("re");
    let refund = json!({
        "id": id,
        "object": "refund",
        "status": "succeeded",
        "payment_intent": payment_intent,
        "charge": charge.id,
        "amount": amount,
        "currency": charge.currency,
        "reason": params.get("reason"),
        "metadata": prefixed(params, "metadata["),
        "created": now_ms() / 1000,
    });
    charge.refunded += amount;
    state.charges.insert(payment_intent.clone(), charge.clone());
    state.refunds.insert(id, refund.clone());
    // Stripe makes these whoever asked for the refund.
    let charge_object = state.charge_object(&payment_intent, &charge);
    state.event("charge.refunded", charge_object);
    state.event("refund.created", refund.clone());
    Answer {
        status: StatusCode::OK,
        body: refund,
        request_id: String::new(),
    }
}

fn sim_error(status: StatusCode, message: &str) -> Response {
    respond(
        &stripe_error(status, "invalid_request_error", None, message),
        false,
    )
}

/// The refund fails after it was made (the card was closed, say): its money comes back.
async fn fail_refund(State(sim): State<Sim>, Path(id): Path<String>) -> Response {
    let mut state = sim.lock();
    let Some(mut refund) = state.refunds.get(&id).cloned() else {
        return sim_error(StatusCode::NOT_FOUND, &format!("No such refund: '{id}'"));
    };
    if refund["status"] == "failed" {
        return sim_error(StatusCode::BAD_REQUEST, "The refund has already failed.");
    }
    refund["status"] = json!("failed");
    refund["failure_reason"] = json!("expired_or_canceled_card");
    state.refunds.insert(id, refund.clone());
    let event = state.event("refund.failed", refund);
    Json(event).into_response()
}

#[derive(Deserialize)]
struct NewDispute {
    payment_intent: String,
    #[serde(default)]
    amount: Option<i64>,
}

/// The customer's bank disputes the charge of a payment intent.
async fn open_dispute(State(sim): State<Sim>, Json(new): Json<NewDispute>) -> Response {
    let mut state = sim.lock();
    let charge = state.charge(&new.payment_intent, None);
    let id = state.next("dp");
    let dispute = json!({
        "id": id,
        "object": "dispute",
        "amount": new.amount.or(charge.amount).unwrap_or_default(),
        "currency": charge.currency,
        "charge": charge.id,
        "payment_intent": new.payment_intent,
        "reason": "fraudulent",
        "status": "needs_response",
        "evidence": dispute_evidence(),
        "created": now_ms() / 1000,
        "livemode": false,
    });
    state.disputes.insert(id, dispute.clone());
    let event = state.event("charge.dispute.created", dispute);
    Json(event).into_response()
}

#[derive(Deserialize)]
struct DisputeOutcome {
    /// won | lost
    status: String,
}

async fn close_dispute(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    Json(outcome): Json<DisputeOutcome>,
) -> Response {
    if !matches!(outcome.status.as_str(), "won" | "lost") {
        return sim_error(StatusCode::BAD_REQUEST, "status: won or lost");
    }
    let mut state = sim.lock();
    let Some(mut dispute) = state.disputes.get(&id).cloned() else {
        return sim_error(StatusCode::NOT_FOUND, &format!("No such dispute: '{id}'"));
    };
    if matches!(dispute["status"].as_str(), Some("won" | "lost")) {
        return sim_error(StatusCode::BAD_REQUEST, "The dispute is already closed.");
    }
    dispute["status"] = json!(outcome.status);
    state.disputes.insert(id, dispute.clone());
    let event = state.event("charge.dispute.closed", dispute);
    Json(event).into_response()
}

async fn retrieve_session(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/v1/checkout/sessions/{id}");
    retrieve(&sim, &headers, &path, "checkout.session", &id, |state| {
        state.sessions.get(&id).cloned()
    })
    .await
}

/// `GET /v1/subscriptions/{id}`.
async fn retrieve_subscription(
    State(sim): State<Sim>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/v1/subscriptions/{id}");
    retrieve(&sim, &headers, &path, "subscription", &id, |state| {
        state
            .subscriptions
            .contains_key(&id)
            .then(|| state.subscription_object(&id))
    })
    .await
}

/// A GET of one object (`kind` as Stripe names it in a 404): authorized, through the armed
/// faults of `path`.
async fn retrieve(
    sim: &Sim,
    headers: &HeaderMap,
    path: &str,
    kind: &str,
    id: &str,
    find: impl FnOnce(&SimState) -> Option<Value>,
) -> Response {
    if !authorized(headers) {
        let answer = stripe_error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            None,
            "Invalid API Key provided.",
        );
        return respond(&answer, false);
    }
    if let Some(fault) = take_get_fault(sim, path).await {
        return fault;
    }
    let found = find(&sim.lock());
    match found {
        Some(object) => Json(object).into_response(),
        None => respond(
            &stripe_error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                Some("resource_missing"),
                &format!("No such {kind}: '{id}'"),
            ),
            false,
        ),
    }
}

async fn not_found() -> Response {
    respond(
        &stripe_error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            None,
            "Unrecognized request URL. The Claimcheck Stripe simulator knows \
             POST /v1/checkout/sessions, GET /v1/checkout/sessions/{id}, POST \
             /v1/checkout/sessions/{id}/expire, POST /v1/refunds, \
             GET, POST and DELETE /v1/subscriptions/{id} and GET /v1/prices/{id}.",
        ),
        false,
    )
}

async fn log(State(sim): State<Sim>) -> Json<Vec<LogEntry>> {
    Json(sim.lock().log.clone())
}

async fn objects(State(sim): State<Sim>) -> Json<Value> {
    let state = sim.lock();
    Json(json!({
        "checkout_sessions": state.sessions.values().collect::<Vec<_>>(),
        "refunds": state.refunds.values().collect::<Vec<_>>(),
        "disputes": state.disputes.values().collect::<Vec<_>>(),
        "subscriptions": state
            .subscriptions
            .keys()
            .map(|id| state.subscription_object(id))
            .collect::<Vec<_>>(),
        "invoices": state.invoices.values().collect::<Vec<_>>(),
    }))
}

async fn arm_fault(State(sim): State<Sim>, Json(fault): Json<Fault>) -> StatusCode {
    sim.lock().faults.push(fault);
    StatusCode::NO_CONTENT
}

async fn clear_faults(State(sim): State<Sim>) -> StatusCode {
    sim.lock().faults.clear();
    StatusCode::NO_CONTENT
}

#[derive(Deserialize)]
struct Latency {
    ms: u64,
}

async fn set_latency(State(sim): State<Sim>, Json(latency): Json<Latency>) -> StatusCode {
    sim.lock().latency_ms = latency.ms;
    StatusCode::NO_CONTENT
}
