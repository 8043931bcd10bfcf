//! Outgoing Stripe calls against the Stripe simulator: order-scoped Idempotency-Keys,
//! recorded before sending, retried under the same key, and never a second object.

use std::time::Duration;

use claimcheck_core::audit::Actor;
use claimcheck_core::money::{LedgerKind, OrderStatus};
use claimcheck_core::payments::{self, CheckoutUrls};
use claimcheck_core::stripe::{ApiKey, CallError, StripeApi, StripeConfig};
use claimcheck_core::token::NewToken;
use claimcheck_core::worker::{Worker, WorkerConfig};
use claimcheck_core::{OrderId, now_ms};
use claimcheck_sim::stripe_sim::{Fault, FaultMode, LogEntry, StripeSim};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, on_both_backends, spawn_app_with};

on_both_backends!(
    backend =>
    the_order_api_needs_a_live_token,
    api_paths_that_are_not_routes_answer_in_the_api_shape,
    creating_the_checkout_session_twice_makes_one_session_under_one_key,
    a_checkout_session_that_timed_out_is_retried_under_the_same_key,
    changed_parameters_under_one_key_surface_as_an_error_on_the_order,
    a_refund_that_times_out_after_stripe_acted_is_retried_into_the_same_refund,
    two_refunds_at_the_same_moment_make_one_refund,
    a_refund_and_its_charge_refunded_event_revoke_once,
    bad_order_requests_get_clear_errors_and_create_nothing,
    tokens_refunds_and_keys_from_the_command_line,
    a_refund_killed_during_the_call_is_completed_by_the_next_run,
    admins_refund_from_the_dashboard_and_support_cannot,
    a_call_given_up_while_stripe_works_gets_the_replay,
    a_refused_request_stays_refused,
    a_refund_stripe_refused_is_made_when_asked_again,
    an_api_base_that_is_not_stripe_is_named_as_such,
    our_partial_refunds_and_their_events_revoke_each_share_once,
    a_refund_for_more_than_is_left_is_refused_before_sending,
    the_order_api_never_opens_a_second_session_for_a_settled_order,
    an_expired_session_is_replaced_under_the_next_key,
    a_session_stripe_does_not_know_is_replaced,
    a_session_paid_before_its_event_came_is_never_replaced,
    a_refund_left_without_an_answer_is_listed_where_its_alert_points,
);

pub const PACKAGES: &str = "thesis-40=40:4900:chf,thesis-100=100:9900:chf";

/// A client for the simulator: short timeouts and backoffs keep the tests quick.
pub fn stripe_api(sim: &StripeSim) -> StripeApi {
    StripeApi::new(StripeConfig {
        api_base: sim.base_url(),
        timeout: Duration::from_millis(400),
        max_attempts: 4,
        base_backoff: Duration::from_millis(50),
        ..StripeConfig::new(ApiKey::new("sk_test_claimcheck").unwrap())
    })
    .unwrap()
}

pub fn urls() -> CheckoutUrls {
    CheckoutUrls {
        success_url: "https://shop.example/thanks?session={CHECKOUT_SESSION_ID}".into(),
        cancel_url: "https://shop.example/cart".into(),
    }
}

pub(crate) struct Shop {
    pub(crate) app: TestApp,
    sim: StripeSim,
    token: String,
}

pub(crate) async fn shop(backend: Backend) -> Shop {
    let sim = StripeSim::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let api = stripe_api(&sim);
    let app = spawn_app_with(backend, |config| {
        config.stripe = Some(api);
        config.checkout_urls = Some(urls());
        config.worker.packages = PACKAGES.parse().unwrap();
        config.worker.plans = crate::subscriptions::PLANS.parse().unwrap();
    })
    .await;
    let token = NewToken::generate().unwrap();
    app.store
        .tokens()
        .insert(&token, "test shop", now_ms())
        .await
        .unwrap();
    Shop {
        app,
        sim,
        token: token.token,
    }
}

impl Shop {
    async fn post_order(&self, body: Value) -> reqwest::Response {
        self.app
            .client
            .post(self.app.url("/api/orders"))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    pub(crate) async fn post_api(&self, path: &str, body: Value) -> reqwest::Response {
        self.app
            .client
            .post(self.app.url(path))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// The simulator's base URL (`STRIPE_API_BASE` for the command line).
    pub(crate) fn sim_url(&self) -> String {
        self.sim.base_url()
    }

    /// A client of the simulator, as the server's.
    pub(crate) fn stripe(&self) -> StripeApi {
        stripe_api(&self.sim)
    }

    pub(crate) async fn get_api(&self, path: &str) -> reqwest::Response {
        self.app
            .client
            .get(self.app.url(path))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap()
    }

    pub(crate) async fn log(&self) -> Vec<LogEntry> {
        reqwest::get(format!("{}/_sim/log", self.sim.base_url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    pub(crate) async fn objects(&self, kind: &str) -> Vec<Value> {
        let objects: Value = reqwest::get(format!("{}/_sim/objects", self.sim.base_url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        objects[kind].as_array().unwrap().clone()
    }

    pub(crate) async fn arm(&self, path: &str, mode: FaultMode, count: u32, hold_ms: u64) {
        let fault = Fault {
            path: path.into(),
            mode,
            count,
            hold_ms,
        };
        let status = reqwest::Client::new()
            .post(format!("{}/_sim/faults", self.sim.base_url()))
            .json(&fault)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 204);
    }

    async fn clear_faults(&self) {
        let cleared = reqwest::Client::new()
            .delete(format!("{}/_sim/faults", self.sim.base_url()))
            .send()
            .await
            .unwrap();
        assert!(cleared.status().is_success());
    }

    /// Stripe expires the Checkout Session (what it does at its `expires_at`).
    pub(crate) async fn expire_at_stripe(&self, session_id: &str) {
        let expired = reqwest::Client::new()
            .post(format!(
                "{}/v1/checkout/sessions/{session_id}/expire",
                self.sim.base_url()
            ))
            .bearer_auth("sk_test_shop")
            .send()
            .await
            .unwrap();
        assert_eq!(expired.status(), 200);
    }

    async fn latency(&self, ms: u64) {
        reqwest::Client::new()
            .post(format!("{}/_sim/latency", self.sim.base_url()))
            .json(&json!({ "ms": ms }))
            .send()
            .await
            .unwrap();
    }

    /// An order paid through the webhook path: created through the API, then its
    /// `checkout.session.completed` (paid, with a payment intent) delivered and fulfilled.
    pub(crate) async fn paid_order(&self, order_id: &str) {
        let created = self
            .post_order(json!({
                "order_id": order_id,
                "package": "thesis-40",
                "customer_email": "anna@example.ch",
            }))
            .await;
        assert_eq!(created.status(), 201);
        self.paid_order_of_existing(order_id).await;
    }

    async fn paid_order_of_existing(&self, order_id: &str) {
        let order: Value = self
            .get_api(&format!("/api/orders/{order_id}"))
            .await
            .json()
            .await
            .unwrap();
        let event = json!({
            "id": format!("evt_paid_{order_id}"),
            "object": "event",
            "type": "checkout.session.completed",
            "created": now_ms() / 1000,
            "livemode": false,
            "data": { "object": {
                "id": order["checkout_session_id"],
                "object": "checkout.session",
                "payment_status": "paid",
                "payment_intent": format!("pi_{order_id}"),
                "client_reference_id": order_id,
                "customer_email": "anna@example.ch",
                "metadata": { "order_id": order_id, "credits": "40", "package": "thesis-40" },
            }},
        });
        let body = serde_json::to_vec(&event).unwrap();
        assert_eq!(self.app.deliver(&body).await.status(), 200);
        let worker = Worker::new(
            self.app.store.clone(),
            "test-worker",
            WorkerConfig::default(),
        );
        while !worker.run_once().await.unwrap().is_empty() {}
        assert_eq!(self.credits(order_id).await, 40);
    }

    pub(crate) async fn credits(&self, order_id: &str) -> i64 {
        let order = self
            .app
            .store
            .orders()
            .get(&OrderId::parse(order_id).unwrap())
            .await
            .unwrap()
            .unwrap();
        order.credits_granted
    }

    async fn ledger_rows(&self, order_id: &str, kind: &str) -> i64 {
        self.app
            .db
            .count(&format!(
                "SELECT COUNT(*) FROM credit_ledger WHERE order_id = '{order_id}' AND kind = '{kind}'"
            ))
            .await
    }

    async fn refund(&self, order_id: &str) -> Result<payments::Refunded, payments::PaymentError> {
        self.refund_amount(order_id, None).await
    }

    async fn refund_amount(
        &self,
        order_id: &str,
        amount: Option<i64>,
    ) -> Result<payments::Refunded, payments::PaymentError> {
        let api = stripe_api(&self.sim);
        payments::refund(
            &self.app.store,
            &api,
            &OrderId::parse(order_id).unwrap(),
            amount,
            &Actor::Dashboard("support".into()),
            "customer asked",
        )
        .await
    }
}

impl Shop {
    /// Delivers every event the simulator made (refunds) and fulfils them.
    async fn deliver_sim_events(&self, kind: &str) -> usize {
        let events: Vec<Value> = reqwest::get(format!("{}/_sim/events", self.sim.base_url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let mut delivered = 0;
        for event in events.iter().filter(|e| e["type"] == kind) {
            let status = self
                .app
                .deliver(&serde_json::to_vec(event).unwrap())
                .await
                .status();
            assert_eq!(status, 200, "{event}");
            delivered += 1;
        }
        let worker = Worker::new(self.app.store.clone(), "w", WorkerConfig::default());
        while !worker.run_once().await.unwrap().is_empty() {}
        delivered
    }

    /// Runs the `claimcheck` binary against this shop's database and simulator.
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"));
        command
            .args(args)
            .env("DATABASE_URL", self.app.db.url())
            .env("STRIPE_API_KEY", "sk_test_claimcheck")
            .env("STRIPE_API_BASE", self.sim.base_url())
            .env("CLAIMCHECK_STRIPE_BACKOFF_MS", "50")
            .env("RUST_LOG", "warn")
            .env("USER", "support-sam")
            .kill_on_drop(true);
        command
    }

    async fn cli_json(&self, args: &[&str]) -> Value {
        let output = self.command(args).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{args:?}: {stderr}");
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }
}

pub(crate) fn performed<'a>(log: &'a [LogEntry], path: &str) -> Vec<&'a LogEntry> {
    log.iter()
        .filter(|e| e.path == path && e.outcome == "performed")
        .collect()
}

/// An API client meets JSON everywhere under `/api`: 404 for a path that is no route, 405
/// (with `Allow`) for a method a route does not take; never the dashboard's sign-in page.
async fn api_paths_that_are_not_routes_answer_in_the_api_shape(backend: Backend) {
    let shop = shop(backend).await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    for (method, path) in [
        (reqwest::Method::GET, "/api/nope"),
        (reqwest::Method::GET, "/api"),
        (reqwest::Method::POST, "/api/orders/ord_1/refund"),
        (
            reqwest::Method::DELETE,
            "/api/customers/anna@example.ch/nothing/here",
        ),
    ] {
        let answer = client
            .request(method.clone(), shop.app.url(path))
            .bearer_auth(&shop.token)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 404, "{method} {path}");
        assert!(
            answer.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        let body: Value = answer.json().await.unwrap();
        assert_eq!(body["error"], "not_found", "{body}");
        assert!(body["message"].as_str().unwrap().contains(path), "{body}");
    }
    let answer = client
        .delete(shop.app.url("/api/orders"))
        .bearer_auth(&shop.token)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 405);
    assert_eq!(answer.headers()["allow"], "POST");
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["error"], "method_not_allowed", "{body}");
}

async fn the_order_api_needs_a_live_token(backend: Backend) {
    let shop = shop(backend).await;
    let body = json!({ "package": "thesis-40", "customer_email": "anna@example.ch" });
    let anonymous = shop
        .app
        .client
        .post(shop.app.url("/api/orders"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert!(anonymous.headers().contains_key("www-authenticate"));
    let forged = shop
        .app
        .client
        .get(shop.app.url("/api/orders/ord_1"))
        .bearer_auth("cct_000000000000_00000000000000000000000000000000")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401);
    let error: Value = forged.json().await.unwrap();
    assert_eq!(error["error"], "unauthorized");

    // A token's use is recorded, at most once a minute however often it is used.
    let token_id = shop.token.split('_').nth(1).unwrap().to_owned();
    let last_used = || async {
        let tokens = shop.app.store.tokens().list().await.unwrap();
        let token = tokens.iter().find(|t| t.token_id == token_id).unwrap();
        token.last_used_at
    };
    assert_eq!(last_used().await, None);
    let lookup = || {
        shop.app
            .client
            .get(shop.app.url("/api/orders/ord_none"))
            .bearer_auth(&shop.token)
            .send()
    };
    assert_eq!(lookup().await.unwrap().status(), 404);
    let first = last_used().await.expect("the use is recorded");
    assert_eq!(lookup().await.unwrap().status(), 404);
    assert_eq!(
        last_used().await,
        Some(first),
        "not written again within the minute"
    );

    // A revoked token stops working at once.
    assert!(
        shop.app
            .store
            .tokens()
            .revoke(&token_id, now_ms())
            .await
            .unwrap()
    );
    assert_eq!(shop.post_order(body).await.status(), 401);
    assert!(shop.log().await.is_empty(), "nothing reached Stripe");
}

async fn creating_the_checkout_session_twice_makes_one_session_under_one_key(backend: Backend) {
    let shop = shop(backend).await;
    let body = json!({
        "order_id": "ord_twice",
        "package": "thesis-40",
        "customer_email": "Anna@Example.ch",
    });
    let first = shop.post_order(body.clone()).await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["status"], "awaiting_payment");
    assert_eq!(first["amount"], 4900);
    assert_eq!(first["currency"], "chf");
    assert!(
        first["checkout_url"]
            .as_str()
            .unwrap()
            .contains("/pay/cs_test_")
    );

    let again = shop.post_order(body).await;
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["checkout_session_id"], first["checkout_session_id"]);
    assert_eq!(again["checkout_url"], first["checkout_url"]);

    // Two orders at once for a third id: still one session each.
    let concurrent = json!({
        "order_id": "ord_race",
        "package": "thesis-100",
        "customer_email": "ben@example.ch",
    });
    let (a, b) = tokio::join!(
        shop.post_order(concurrent.clone()),
        shop.post_order(concurrent.clone())
    );
    let a: Value = a.json().await.unwrap();
    let b: Value = b.json().await.unwrap();
    assert_eq!(a["checkout_session_id"], b["checkout_session_id"]);

    let sessions = shop.objects("checkout_sessions").await;
    assert_eq!(sessions.len(), 2, "{sessions:#?}");
    let session = sessions
        .iter()
        .find(|s| s["id"] == first["checkout_session_id"])
        .unwrap();
    assert_eq!(session["metadata"]["order_id"], "ord_twice");
    assert_eq!(session["metadata"]["credits"], "40");
    assert_eq!(session["client_reference_id"], "ord_twice");
    assert_eq!(session["customer_email"], "anna@example.ch");
    assert_eq!(session["amount_total"], 4900);
    for entry in shop.log().await {
        let key = entry.idempotency_key.as_deref().unwrap();
        assert!(
            key == "checkout-session:ord_twice" || key == "checkout-session:ord_race",
            "{key}"
        );
    }

    let shown: Value = shop
        .get_api("/api/orders/ord_twice")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["checkout_session_id"], first["checkout_session_id"]);
    assert_eq!(shown["credits_granted"], 0);
    assert_eq!(shop.get_api("/api/orders/ord_nope").await.status(), 404);
}

async fn a_checkout_session_that_timed_out_is_retried_under_the_same_key(backend: Backend) {
    let shop = shop(backend).await;
    shop.arm("/v1/checkout/sessions", FaultMode::Timeout, 1, 2_000)
        .await;
    let response = shop
        .post_order(json!({
            "order_id": "ord_slow",
            "package": "thesis-40",
            "customer_email": "anna@example.ch",
        }))
        .await;
    assert_eq!(response.status(), 201);
    let order: Value = response.json().await.unwrap();

    let log = shop.log().await;
    assert_eq!(performed(&log, "/v1/checkout/sessions").len(), 1);
    assert!(log.iter().any(|e| e.outcome == "replayed"), "{log:#?}");
    assert!(
        log.iter()
            .all(|e| e.idempotency_key.as_deref() == Some("checkout-session:ord_slow"))
    );
    assert_eq!(
        Some(order["checkout_session_id"].as_str().unwrap()),
        performed(&log, "/v1/checkout/sessions")[0]
            .object_id
            .as_deref()
    );
    let view = shop
        .app
        .store
        .orders()
        .get(&OrderId::parse("ord_slow").unwrap())
        .await
        .unwrap()
        .unwrap();
    let request = &view.stripe_requests[0];
    assert_eq!(request.idempotency_key, "checkout-session:ord_slow");
    assert_eq!(request.status.as_str(), "succeeded");
    assert!(request.attempts >= 2, "{request:?}");
}

async fn changed_parameters_under_one_key_surface_as_an_error_on_the_order(backend: Backend) {
    let shop = shop(backend).await;
    // Stripe acts but never answers: the request stays indeterminate.
    shop.arm("/v1/checkout/sessions", FaultMode::Drop, 10, 0)
        .await;
    let body = json!({
        "order_id": "ord_changed",
        "package": "thesis-40",
        "customer_email": "anna@example.ch",
    });
    let response = shop.post_order(body.clone()).await;
    assert_eq!(response.status(), 503);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"], "stripe_unavailable");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("checkout-session:ord_changed")
    );
    reqwest::Client::new()
        .delete(format!("{}/_sim/faults", shop.sim.base_url()))
        .send()
        .await
        .unwrap();

    // The shop's return URL changed in between (a new deployment): the retry carries other
    // parameters under the same key.
    let api = stripe_api(&shop.sim);
    let changed = CheckoutUrls {
        success_url: "https://shop.example/new-thanks".into(),
        ..urls()
    };
    let request = payments::OrderRequest {
        order_id: Some("ord_changed".into()),
        package: "thesis-40".into(),
        customer_email: "anna@example.ch".into(),
    };
    let result = payments::open_checkout(
        &shop.app.store,
        &api,
        &PACKAGES.parse().unwrap(),
        &changed,
        &request,
    )
    .await;
    match result {
        Err(payments::PaymentError::Call(CallError::IdempotencyMismatch { key, .. })) => {
            assert_eq!(key, "checkout-session:ord_changed")
        }
        other => panic!("expected the idempotency error, got {other:?}"),
    }

    let log = shop.log().await;
    assert_eq!(performed(&log, "/v1/checkout/sessions").len(), 1);
    assert_eq!(shop.objects("checkout_sessions").await.len(), 1);
    assert!(log.iter().any(|e| e.outcome == "idempotency_conflict"));
    assert!(
        log.iter()
            .all(|e| e.idempotency_key.as_deref() == Some("checkout-session:ord_changed")),
        "no new key was made up"
    );
    let order = shop
        .app
        .store
        .orders()
        .get(&OrderId::parse("ord_changed").unwrap())
        .await
        .unwrap()
        .unwrap();
    let request = &order.stripe_requests[0];
    assert_eq!(request.status.as_str(), "failed");
    assert_eq!(request.http_status, Some(400));
    assert!(
        request
            .error
            .as_deref()
            .unwrap()
            .starts_with("idempotency_error")
    );

    // The failure is final: the API reports it and sends nothing more.
    let before = shop.log().await.len();
    let again = shop.post_order(body).await;
    assert_eq!(again.status(), 502);
    let error: Value = again.json().await.unwrap();
    assert_eq!(error["error"], "stripe_rejected");
    assert_eq!(shop.log().await.len(), before);
}

async fn a_refund_that_times_out_after_stripe_acted_is_retried_into_the_same_refund(
    backend: Backend,
) {
    let shop = shop(backend).await;
    shop.paid_order("ord_refund").await;
    shop.arm("/v1/refunds", FaultMode::Timeout, 1, 2_000).await;
    let refunded = shop.refund("ord_refund").await.unwrap();

    let log = shop.log().await;
    let refunds = performed(&log, "/v1/refunds");
    assert_eq!(refunds.len(), 1, "{log:#?}");
    assert_eq!(refunds[0].fault, Some(FaultMode::Timeout));
    let replay = log.iter().find(|e| e.outcome == "replayed").unwrap();
    assert_eq!(replay.object_id, refunds[0].object_id);
    assert_eq!(refunded.refund_id, refunds[0].object_id);
    assert_eq!(shop.objects("refunds").await.len(), 1);
    assert_eq!(shop.ledger_rows("ord_refund", "revoke").await, 1);
    assert_eq!(shop.credits("ord_refund").await, 0);
    assert_eq!(refunded.order.status, OrderStatus::Refunded);
    let request = refunded
        .order
        .stripe_requests
        .iter()
        .find(|r| r.idempotency_key == "refund:ord_refund:4900")
        .unwrap();
    assert_eq!(request.status.as_str(), "succeeded");
    assert_eq!(request.object_id, refunds[0].object_id);

    // Asking again reports the refund and sends nothing.
    let again = shop.refund("ord_refund").await.unwrap();
    assert!(again.already_refunded);
    assert_eq!(shop.log().await.len(), log.len());
    assert_eq!(
        shop.app
            .db
            .count("SELECT COUNT(*) FROM audit_log WHERE action = 'refund'")
            .await,
        2,
        "requested + refunded"
    );
}

async fn two_refunds_at_the_same_moment_make_one_refund(backend: Backend) {
    let shop = shop(backend).await;
    shop.paid_order("ord_double").await;
    // Slow operations make the second request arrive while the first is in flight (409).
    shop.latency(150).await;
    let (a, b) = tokio::join!(shop.refund("ord_double"), shop.refund("ord_double"));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(a.refund_id, b.refund_id);
    let log = shop.log().await;
    assert_eq!(performed(&log, "/v1/refunds").len(), 1, "{log:#?}");
    assert!(
        log.iter()
            .any(|e| e.outcome == "in_flight" && e.http_status == 409),
        "the second request met the first in flight: {log:#?}"
    );
    assert_eq!(shop.objects("refunds").await.len(), 1);
    assert_eq!(shop.ledger_rows("ord_double", "revoke").await, 1);
    assert_eq!(shop.credits("ord_double").await, 0);
    assert!(
        [a.revoked_now, b.revoked_now]
            .iter()
            .filter(|r| **r)
            .count()
            <= 1,
        "one revoke at most"
    );
}

async fn a_refund_and_its_charge_refunded_event_revoke_once(backend: Backend) {
    let shop = shop(backend).await;
    shop.paid_order("ord_evt").await;
    shop.refund("ord_evt").await.unwrap();
    let event = json!({
        "id": "evt_refunded_ord_evt",
        "object": "event",
        "type": "charge.refunded",
        "created": now_ms() / 1000,
        "livemode": false,
        "data": { "object": {
            "id": "ch_ord_evt",
            "object": "charge",
            "amount": 4900,
            "amount_refunded": 4900,
            "payment_intent": "pi_ord_evt",
            "refunded": true,
        }},
    });
    assert_eq!(
        shop.app
            .deliver(&serde_json::to_vec(&event).unwrap())
            .await
            .status(),
        200
    );
    let worker = Worker::new(shop.app.store.clone(), "w", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
    assert_eq!(
        shop.app
            .db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'")
            .await,
        2
    );
    assert_eq!(shop.ledger_rows("ord_evt", "revoke").await, 1);
    assert_eq!(shop.credits("ord_evt").await, 0);
    let order = shop
        .app
        .store
        .orders()
        .get(&OrderId::parse("ord_evt").unwrap())
        .await
        .unwrap()
        .unwrap();
    let revoke = order
        .ledger
        .iter()
        .find(|e| e.kind == LedgerKind::Revoke)
        .unwrap();
    assert_eq!(revoke.event_id, None);
    assert_eq!(
        revoke.idempotency_key.as_deref(),
        Some("refund:ord_evt:4900")
    );

    // The customer's balance through the API.
    let balance: Value = shop
        .get_api("/api/customers/Anna@example.ch/balance")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(balance["balance"], 0);
    assert_eq!(balance["orders"], 1);
}

async fn bad_order_requests_get_clear_errors_and_create_nothing(backend: Backend) {
    let shop = shop(backend).await;
    for (body, status, code) in [
        (
            json!({ "package": "nope", "customer_email": "a@example.ch" }),
            422,
            "invalid_order",
        ),
        (
            json!({ "package": "thesis-40", "customer_email": "not-an-email" }),
            422,
            "invalid_order",
        ),
        (
            json!({ "package": "thesis-40", "customer_email": "a@example.ch", "order_id": "a b" }),
            422,
            "invalid_order",
        ),
        // A right-to-left override makes "ord_1\u{202E}fdp.exe" read as "ord_1exe.pdf".
        (
            json!({ "package": "thesis-40", "customer_email": "a@example.ch", "order_id": "ord_1\u{202E}fdp.exe" }),
            422,
            "invalid_order",
        ),
        (
            json!({ "package": "thesis-40", "customer_email": "an\u{200B}na@example.ch" }),
            422,
            "invalid_order",
        ),
        (json!({ "package": "thesis-40" }), 400, "bad_request"),
        (
            json!({ "package": "thesis-40", "customer_email": "a@example.ch", "extra": 1 }),
            400,
            "bad_request",
        ),
    ] {
        let response = shop.post_order(body.clone()).await;
        assert_eq!(response.status(), status, "{body}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"], code, "{body}");
        assert!(!error["message"].as_str().unwrap().is_empty());
    }
    // The same order id for another customer is refused, not overwritten.
    let first =
        json!({ "order_id": "ord_x", "package": "thesis-40", "customer_email": "a@example.ch" });
    assert_eq!(shop.post_order(first).await.status(), 201);
    let other =
        json!({ "order_id": "ord_x", "package": "thesis-40", "customer_email": "b@example.ch" });
    let response = shop.post_order(other).await;
    assert_eq!(response.status(), 409);
    assert_eq!(shop.app.db.count("SELECT COUNT(*) FROM orders").await, 1);
    assert_eq!(shop.objects("checkout_sessions").await.len(), 1);

    // A refund of an unpaid order is refused before anything is sent.
    let error = shop.refund("ord_x").await.unwrap_err();
    assert!(error.to_string().contains("awaiting_payment"), "{error}");
    assert!(performed(&shop.log().await, "/v1/refunds").is_empty());
}

async fn tokens_refunds_and_keys_from_the_command_line(backend: Backend) {
    let shop = shop(backend).await;
    let made = shop
        .cli_json(&["tokens", "create", "--name", "Thesis shop", "--json"])
        .await;
    let token = made["token"].as_str().unwrap().to_owned();
    let listed = shop.cli_json(&["tokens", "list", "--json"]).await;
    assert_eq!(listed.as_array().unwrap().len(), 2);
    assert!(
        !listed.to_string().contains(&token),
        "a listing never shows a token"
    );

    let created = shop
        .app
        .client
        .post(shop.app.url("/api/orders"))
        .bearer_auth(&token)
        .json(&json!({ "order_id": "ord_cli", "package": "thesis-40", "customer_email": "anna@example.ch" }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    shop.app
        .store
        .orders()
        .set_checkout_session(
            &OrderId::parse("ord_cli").unwrap(),
            "cs_x",
            None,
            now_ms() + 86_400_000,
            now_ms(),
        )
        .await
        .unwrap();
    // Paid through its webhook.
    shop.paid_order_of_existing("ord_cli").await;

    let refunded = shop
        .cli_json(&[
            "orders",
            "refund",
            "ord_cli",
            "--reason",
            "customer asked",
            "--json",
        ])
        .await;
    assert_eq!(refunded["status"], "refunded");
    assert_eq!(refunded["credits_granted"], 0);
    assert_eq!(refunded["revoked_now"], true);
    let again = shop
        .cli_json(&[
            "orders",
            "refund",
            "ord_cli",
            "--reason",
            "clicked twice",
            "--json",
        ])
        .await;
    assert_eq!(again["already_refunded"], true);
    assert_eq!(again["refund_id"], refunded["refund_id"]);

    // Every key Stripe saw for the order is on the order, with Stripe's answer.
    let shown = shop
        .cli_json(&["orders", "show", "ord_cli", "--json"])
        .await;
    let requests = shown["stripe_requests"].as_array().unwrap();
    let recorded: Vec<&str> = requests
        .iter()
        .map(|r| r["idempotency_key"].as_str().unwrap())
        .collect();
    for entry in shop.log().await {
        let key = entry.idempotency_key.unwrap();
        assert!(
            recorded.contains(&key.as_str()),
            "{key} not in {recorded:?}"
        );
    }
    for request in requests {
        for field in ["idempotency_key", "operation", "status", "http_status"] {
            assert!(request.get(field).is_some(), "{field} missing in {request}");
        }
        assert_eq!(request["status"], "succeeded");
        assert_eq!(request["http_status"], 200);
    }
    assert_eq!(
        shop.app
            .db
            .count("SELECT COUNT(*) FROM audit_log WHERE actor = 'cli:support-sam' AND action = 'refund'")
            .await,
        2
    );

    // A refund without an API key is refused with the setting named.
    let output = shop
        .command(&["orders", "refund", "ord_cli", "--reason", "x"])
        .env_remove("STRIPE_API_KEY")
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("STRIPE_API_KEY"));
}

/// The process making a refund is killed with SIGKILL after Stripe performed it but before
/// the answer arrived. The next run sends the same key, gets the same refund back and
/// revokes the credits once.
async fn a_refund_killed_during_the_call_is_completed_by_the_next_run(backend: Backend) {
    let shop = shop(backend).await;
    shop.paid_order("ord_crash").await;
    shop.arm("/v1/refunds", FaultMode::Timeout, 1, 60_000).await;
    let mut child = shop
        .command(&[
            "orders",
            "refund",
            "ord_crash",
            "--reason",
            "customer asked",
        ])
        .env("CLAIMCHECK_STRIPE_TIMEOUT_MS", "120000")
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while performed(&shop.log().await, "/v1/refunds").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the refund never reached Stripe"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = child.id().unwrap().to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .await
        .unwrap();
    assert!(killed.success());
    child.wait().await.unwrap();

    // Stripe refunded; Claimcheck only knows it asked.
    let order = shop
        .app
        .store
        .orders()
        .get(&OrderId::parse("ord_crash").unwrap())
        .await
        .unwrap()
        .unwrap();
    let refund = order
        .stripe_requests
        .iter()
        .find(|r| r.idempotency_key == "refund:ord_crash:4900")
        .unwrap();
    assert_eq!(refund.status.as_str(), "pending");
    assert_eq!(refund.attempts, 1);
    assert_eq!(order.credits_granted, 40);

    let finished = shop
        .cli_json(&[
            "orders",
            "refund",
            "ord_crash",
            "--reason",
            "finish the refund",
            "--json",
        ])
        .await;
    let log = shop.log().await;
    let refunds = performed(&log, "/v1/refunds");
    assert_eq!(refunds.len(), 1, "{log:#?}");
    assert_eq!(
        finished["refund_id"].as_str(),
        refunds[0].object_id.as_deref()
    );
    assert_eq!(finished["credits_granted"], 0);
    assert_eq!(shop.objects("refunds").await.len(), 1);
    assert_eq!(shop.ledger_rows("ord_crash", "revoke").await, 1);
}

async fn admins_refund_from_the_dashboard_and_support_cannot(backend: Backend) {
    use claimcheck_core::auth::Role;

    let shop = shop(backend).await;
    shop.paid_order("ord_dash").await;
    let form = [
        ("order_id", "ord_dash"),
        ("amount", "CHF 49.00"),
        ("reason", "customer asked"),
    ];
    let support = shop.app.sign_in_as("sam", Role::Support).await;
    let refused = support
        .post(shop.app.url("/dashboard/actions/refund"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    assert!(performed(&shop.log().await, "/v1/refunds").is_empty());

    let admin = shop.app.sign_in_as("ada", Role::Admin).await;
    let done = admin
        .post(shop.app.url("/dashboard/actions/refund"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(done.status(), 303);
    let location = crate::helpers::landing(&done);
    assert!(
        location.starts_with("/orders/ord_dash?notice=Refunded"),
        "{location}"
    );
    assert_eq!(shop.credits("ord_dash").await, 0);
    assert_eq!(performed(&shop.log().await, "/v1/refunds").len(), 1);
    assert_eq!(
        shop.app
            .db
            .count(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'refund' AND actor = 'dashboard:ada'"
            )
            .await,
        2,
        "requested and refunded"
    );
    // Clicking again reports it and sends nothing.
    let again = admin
        .post(shop.app.url("/dashboard/actions/refund"))
        .form(&form)
        .send()
        .await
        .unwrap();
    assert!(crate::helpers::landing(&again).contains("already"));
    assert_eq!(performed(&shop.log().await, "/v1/refunds").len(), 1);
}

/// The client's timeout (400 ms) ends the first attempt while the simulator still works on
/// it (600 ms); the retry meets it in flight (409), the next gets its answer replayed.
async fn a_call_given_up_while_stripe_works_gets_the_replay(backend: Backend) {
    let shop = shop(backend).await;
    shop.paid_order("ord_slowpoke").await;
    shop.latency(600).await;
    let refunded = shop.refund("ord_slowpoke").await.unwrap();
    let log = shop.log().await;
    let refunds = performed(&log, "/v1/refunds");
    assert_eq!(refunds.len(), 1, "{log:#?}");
    assert_eq!(refunded.refund_id, refunds[0].object_id);
    assert!(log.iter().any(|e| e.outcome == "replayed"), "{log:#?}");
    assert_eq!(shop.ledger_rows("ord_slowpoke", "revoke").await, 1);
}

/// A late "no answer" from a concurrent caller cannot turn a refused request back into one
/// worth sending.
async fn a_refused_request_stays_refused(backend: Backend) {
    use claimcheck_core::{RequestOutcome, RequestStatus};

    let shop = shop(backend).await;
    shop.paid_order("ord_refused").await;
    let store = &shop.app.store;
    let order = OrderId::parse("ord_refused").unwrap();
    store
        .stripe_requests()
        .record(
            "refund:ord_refused:4900",
            "refund",
            Some(4900),
            order.as_str(),
            "h",
            now_ms(),
        )
        .await
        .unwrap();
    let outcome = |status, error: &'static str| RequestOutcome {
        status,
        http_status: Some(400),
        stripe_request_id: None,
        object_id: None,
        error: Some(error),
    };
    store
        .stripe_requests()
        .record_outcome(
            "refund:ord_refused:4900",
            &outcome(RequestStatus::Failed, "invalid_request_error: no"),
            now_ms(),
        )
        .await
        .unwrap();
    store
        .stripe_requests()
        .record_outcome(
            "refund:ord_refused:4900",
            &outcome(RequestStatus::Indeterminate, "timed out"),
            now_ms(),
        )
        .await
        .unwrap();
    let request = store
        .stripe_requests()
        .get("refund:ord_refused:4900")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(request.status, RequestStatus::Failed);
    assert_eq!(request.error.as_deref(), Some("invalid_request_error: no"));
    // Its key is never sent again: the refund goes out under the next one.
    let refunded = shop.refund("ord_refused").await.unwrap();
    let refunds = performed(&shop.log().await, "/v1/refunds")
        .into_iter()
        .map(|e| e.idempotency_key.clone().unwrap())
        .collect::<Vec<_>>();
    assert_eq!(refunds, ["refund:ord_refused:4900:2"]);
    assert_eq!(refunded.order.credits_granted, 0);
}

/// A refund Stripe turned down (its balance too low) is made once the cause is gone, each
/// time by a new `claimcheck` process: under the next key, the refusal kept on the order,
/// the credits revoked once.
async fn a_refund_stripe_refused_is_made_when_asked_again(backend: Backend) {
    use claimcheck_core::RequestStatus;

    let shop = shop(backend).await;
    shop.paid_order("ord_broke").await;
    shop.arm("/v1/refunds", FaultMode::Refuse, 2, 0).await;
    let refund = |reason: &'static str| {
        let mut command = shop.command(&[
            "orders",
            "refund",
            "ord_broke",
            "--reason",
            reason,
            "--json",
        ]);
        async move { command.output().await.unwrap() }
    };
    for reason in ["customer asked", "asked again"] {
        let refused = refund(reason).await;
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success());
        assert!(stderr.contains("balance_insufficient"), "{stderr}");
        assert_eq!(shop.credits("ord_broke").await, 40, "nothing revoked");
    }
    let refunded = refund("balance topped up").await;
    assert!(
        refunded.status.success(),
        "{}",
        String::from_utf8_lossy(&refunded.stderr)
    );
    let refunded: Value = serde_json::from_slice(&refunded.stdout).unwrap();
    assert_eq!(refunded["status"], "refunded");
    assert_eq!(refunded["credits_granted"], 0);

    let log = shop.log().await;
    let sent: Vec<(&str, &str)> = log
        .iter()
        .filter(|e| e.path == "/v1/refunds")
        .map(|e| (e.idempotency_key.as_deref().unwrap(), e.outcome.as_str()))
        .collect();
    assert_eq!(
        sent,
        [
            ("refund:ord_broke:4900", "refused"),
            ("refund:ord_broke:4900:2", "refused"),
            ("refund:ord_broke:4900:3", "performed"),
        ]
    );
    let order = shop
        .app
        .store
        .orders()
        .get(&OrderId::parse("ord_broke").unwrap())
        .await
        .unwrap()
        .unwrap();
    let refunds: Vec<_> = order
        .stripe_requests
        .iter()
        .filter(|r| r.operation == "refund")
        .collect();
    let keys: Vec<(&str, RequestStatus)> = refunds
        .iter()
        .map(|r| (r.idempotency_key.as_str(), r.status))
        .collect();
    assert_eq!(
        keys,
        [
            ("refund:ord_broke:4900", RequestStatus::Failed),
            ("refund:ord_broke:4900:2", RequestStatus::Failed),
            ("refund:ord_broke:4900:3", RequestStatus::Succeeded),
        ]
    );
    assert!(refunds[..2].iter().all(|r| r.http_status == Some(400)));
    assert_eq!(shop.ledger_rows("ord_broke", "revoke").await, 1);

    // Nothing is left: asking again sends nothing.
    let again = shop
        .cli_json(&[
            "orders",
            "refund",
            "ord_broke",
            "--reason",
            "twice",
            "--json",
        ])
        .await;
    assert_eq!(again["already_refunded"], true);
    assert_eq!(shop.log().await.len(), log.len());
}

/// `STRIPE_API_BASE` pointing at something that is not Stripe (a web server answering a
/// plain-text 404): the operator is told that, not "Stripe may or may not have acted"; the
/// request stays indeterminate (its alert), and with the right address the same key goes out.
async fn an_api_base_that_is_not_stripe_is_named_as_such(backend: Backend) {
    let shop = shop(backend).await;
    shop.paid_order("ord_wrong_base").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let website = format!("http://{}/", listener.local_addr().unwrap());
    let not_stripe = axum::Router::new()
        .fallback(|| async { (axum::http::StatusCode::NOT_FOUND, "404 page not found") });
    let server = tokio::spawn(async move { axum::serve(listener, not_stripe).await });
    let wrong = StripeApi::new(StripeConfig {
        api_base: website.clone(),
        ..shop.stripe().config().clone()
    })
    .unwrap();
    let order_id = OrderId::parse("ord_wrong_base").unwrap();
    let actor = Actor::Dashboard("support".into());
    let error = payments::refund(&shop.app.store, &wrong, &order_id, None, &actor, "asked")
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            payments::PaymentError::Call(CallError::NotStripe { key, api_base, attempts: 4 })
                if key == "refund:ord_wrong_base:4900" && *api_base == website
        ),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(text.contains("STRIPE_API_BASE is probably wrong"), "{text}");
    assert!(!text.contains("may or may not"), "{text}");
    server.abort();
    let order = shop
        .app
        .store
        .orders()
        .get(&order_id)
        .await
        .unwrap()
        .unwrap();
    let request = order
        .stripe_requests
        .iter()
        .find(|r| r.operation == "refund")
        .unwrap();
    assert_eq!(
        request.status,
        claimcheck_core::RequestStatus::Indeterminate
    );
    assert_eq!(order.credits_granted, 40);
    // The address mended: the same key, one refund.
    let refunded = shop.refund("ord_wrong_base").await.unwrap();
    assert_eq!(refunded.order.credits_granted, 0);
    let sent: Vec<String> = performed(&shop.log().await, "/v1/refunds")
        .iter()
        .map(|e| e.idempotency_key.clone().unwrap())
        .collect();
    assert_eq!(sent, ["refund:ord_wrong_base:4900"]);
}

/// Half of an order back, then the rest, each through the outgoing client with its own key
/// (`refund:<order>:<total after it>`); Stripe's `charge.refunded` for each arrives later and
/// writes nothing more.
async fn our_partial_refunds_and_their_events_revoke_each_share_once(backend: Backend) {
    let shop = shop(backend).await;
    shop.paid_order("ord_parts").await;
    let half = shop.refund_amount("ord_parts", Some(2450)).await.unwrap();
    assert!(half.revoked_now);
    assert_eq!(half.amount, Some(2450));
    assert_eq!(half.order.credits_granted, 20);
    assert_eq!(half.order.status, OrderStatus::PartiallyRefunded);
    assert!(
        half.order
            .stripe_requests
            .iter()
            .any(|r| r.idempotency_key == "refund:ord_parts:2450" && r.amount == Some(2450))
    );
    assert_eq!(shop.deliver_sim_events("charge.refunded").await, 1);
    assert_eq!(
        shop.credits("ord_parts").await,
        20,
        "the event revokes nothing more"
    );

    let rest = shop.refund("ord_parts").await.unwrap();
    assert_eq!(rest.amount, Some(2450), "what was left");
    assert_eq!(rest.order.credits_granted, 0);
    assert_eq!(rest.order.status, OrderStatus::Refunded);
    assert_eq!(shop.deliver_sim_events("charge.refunded").await, 2);
    assert_eq!(shop.credits("ord_parts").await, 0);
    assert_eq!(shop.ledger_rows("ord_parts", "revoke").await, 2);
    let keys: Vec<String> = rest
        .order
        .ledger
        .iter()
        .filter_map(|e| e.idempotency_key.clone())
        .collect();
    assert_eq!(keys, ["refund:ord_parts:2450", "refund:ord_parts:4900"]);
    let log = shop.log().await;
    assert_eq!(performed(&log, "/v1/refunds").len(), 2);

    // Nothing is left: asking again reports the last refund and sends nothing.
    let again = shop.refund("ord_parts").await.unwrap();
    assert!(again.already_refunded);
    assert_eq!(shop.log().await.len(), log.len());
}

async fn a_refund_for_more_than_is_left_is_refused_before_sending(backend: Backend) {
    let shop = shop(backend).await;
    shop.paid_order("ord_much").await;
    shop.refund_amount("ord_much", Some(4000)).await.unwrap();
    let error = shop
        .refund_amount("ord_much", Some(1000))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            payments::PaymentError::BadAmount {
                refundable: 900,
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error
            .to_string()
            .contains("CHF 10.00 is not a refundable amount (CHF 0.01 to CHF 9.00 are left)"),
        "{error}"
    );
    assert_eq!(performed(&shop.log().await, "/v1/refunds").len(), 1);
    // floor(40 × 4000 ÷ 4900) = 32 revoked.
    assert_eq!(shop.credits("ord_much").await, 8);
}

async fn the_order_api_never_opens_a_second_session_for_a_settled_order(backend: Backend) {
    let shop = shop(backend).await;
    shop.paid_order("ord_settled").await;
    let sessions = shop.objects("checkout_sessions").await.len();
    let again = shop
        .post_order(json!({
            "order_id": "ord_settled",
            "package": "thesis-40",
            "customer_email": "anna@example.ch",
        }))
        .await;
    assert_eq!(again.status(), 409);
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["error"], "order_settled");
    assert_eq!(body["order"]["status"], "paid");
    assert_eq!(body["order"]["credits_granted"], 40);
    assert_eq!(shop.objects("checkout_sessions").await.len(), sessions);

    // Refunded in full: still settled.
    shop.refund("ord_settled").await.unwrap();
    let refunded = shop
        .post_order(json!({
            "order_id": "ord_settled",
            "package": "thesis-40",
            "customer_email": "anna@example.ch",
        }))
        .await;
    assert_eq!(refunded.status(), 409);
    let body: Value = refunded.json().await.unwrap();
    assert_eq!(body["order"]["status"], "refunded");
    assert_eq!(shop.objects("checkout_sessions").await.len(), sessions);
}

async fn an_expired_session_is_replaced_under_the_next_key(backend: Backend) {
    let shop = shop(backend).await;
    let body = json!({
        "order_id": "ord_late",
        "package": "thesis-40",
        "customer_email": "anna@example.ch",
    });
    let first: Value = shop.post_order(body.clone()).await.json().await.unwrap();
    // Still open: the same session again.
    let same: Value = shop.post_order(body.clone()).await.json().await.unwrap();
    assert_eq!(same["checkout_session_id"], first["checkout_session_id"]);
    // A day later (plus the safety margin) by our clock, but Stripe still calls it open:
    // kept, and only a GET of the session was sent.
    shop.app
        .db
        .execute(&format!(
            "UPDATE orders SET checkout_expires_at = {} WHERE order_id = 'ord_late'",
            now_ms() - 3_600_000
        ))
        .await;
    let kept: Value = shop.post_order(body.clone()).await.json().await.unwrap();
    assert_eq!(kept["checkout_session_id"], first["checkout_session_id"]);
    assert_eq!(shop.objects("checkout_sessions").await.len(), 1);
    // Stripe expired it: replaced under the next key.
    shop.expire_at_stripe(first["checkout_session_id"].as_str().unwrap())
        .await;
    let renewed = shop.post_order(body.clone()).await;
    assert_eq!(renewed.status(), 200);
    let renewed: Value = renewed.json().await.unwrap();
    assert_ne!(renewed["checkout_session_id"], first["checkout_session_id"]);
    assert_ne!(renewed["checkout_url"], first["checkout_url"]);
    assert_eq!(shop.objects("checkout_sessions").await.len(), 2);
    let order = shop
        .app
        .store
        .orders()
        .get(&OrderId::parse("ord_late").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(order.checkout_generation, 2);
    let requests: Vec<(&str, bool)> = order
        .stripe_requests
        .iter()
        .map(|r| (r.idempotency_key.as_str(), r.expired_at.is_some()))
        .collect();
    assert_eq!(
        requests,
        [
            ("checkout-session:ord_late", true),
            ("checkout-session:ord_late:2", false)
        ]
    );
    // And the new one is kept while it is open.
    let kept: Value = shop.post_order(body).await.json().await.unwrap();
    assert_eq!(kept["checkout_session_id"], renewed["checkout_session_id"]);
    assert_eq!(shop.objects("checkout_sessions").await.len(), 2);
}

/// Past its expiry, a session Stripe answers 404 for (the shop moved to another account, say)
/// cannot be paid: the order gets the next session rather than a 503 forever; unless a payment
/// of it is on its way.
async fn a_session_stripe_does_not_know_is_replaced(backend: Backend) {
    let shop = shop(backend).await;
    let body = json!({
        "order_id": "ord_lost",
        "package": "thesis-40",
        "customer_email": "anna@example.ch",
    });
    let first: Value = shop.post_order(body.clone()).await.json().await.unwrap();
    // Not yet past its expiry: kept, Stripe not asked.
    shop.app
        .db
        .execute(
            "UPDATE orders SET checkout_session_id = 'cs_test_elsewhere' \
             WHERE order_id = 'ord_lost'",
        )
        .await;
    let kept: Value = shop.post_order(body.clone()).await.json().await.unwrap();
    assert_eq!(kept["checkout_session_id"], "cs_test_elsewhere");
    shop.app
        .db
        .execute(&format!(
            "UPDATE orders SET checkout_expires_at = {} WHERE order_id = 'ord_lost'",
            now_ms() - 3_600_000
        ))
        .await;
    let renewed = shop.post_order(body.clone()).await;
    assert_eq!(renewed.status(), 200);
    let renewed: Value = renewed.json().await.unwrap();
    let id = renewed["checkout_session_id"].as_str().unwrap();
    assert!(
        id != "cs_test_elsewhere" && id != first["checkout_session_id"],
        "{renewed}"
    );
    assert_eq!(shop.objects("checkout_sessions").await.len(), 2);
    let order = shop
        .app
        .store
        .orders()
        .get(&OrderId::parse("ord_lost").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(order.checkout_generation, 2);
    // The new one is at Stripe: kept.
    let kept: Value = shop.post_order(body).await.json().await.unwrap();
    assert_eq!(kept["checkout_session_id"], renewed["checkout_session_id"]);

    // Its session completed with a bank debit still clearing (a payment intent recorded):
    // never replaced, even when Stripe no longer knows the session.
    let clearing = json!({
        "order_id": "ord_clearing",
        "package": "thesis-40",
        "customer_email": "anna@example.ch",
    });
    assert_eq!(shop.post_order(clearing.clone()).await.status(), 201);
    shop.app
        .db
        .execute(&format!(
            "UPDATE orders SET checkout_session_id = 'cs_test_clearing', \
             payment_intent_id = 'pi_test_clearing', checkout_expires_at = {} \
             WHERE order_id = 'ord_clearing'",
            now_ms() - 3_600_000
        ))
        .await;
    let refused = shop.post_order(clearing).await;
    assert_eq!(refused.status(), 409);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"], "checkout_completed", "{refused}");
    assert_eq!(shop.objects("checkout_sessions").await.len(), 3);
}

/// The customer paid at Stripe at the last second and the payment's event has not been
/// processed: past its expiry by our clock, the session is not replaced (the customer would
/// pay twice) but answered 409 until the event comes; the event then settles the order. Stripe
/// unreachable: 503, and nothing replaced.
async fn a_session_paid_before_its_event_came_is_never_replaced(backend: Backend) {
    let shop = shop(backend).await;
    let body = json!({
        "order_id": "ord_last_second",
        "package": "thesis-40",
        "customer_email": "anna@example.ch",
    });
    let first: Value = shop.post_order(body.clone()).await.json().await.unwrap();
    let session = first["checkout_session_id"].as_str().unwrap().to_owned();
    shop.app
        .db
        .execute(&format!(
            "UPDATE orders SET checkout_expires_at = {} WHERE order_id = 'ord_last_second'",
            now_ms() - 3_600_000
        ))
        .await;
    shop.arm(
        &format!("/v1/checkout/sessions/{session}"),
        FaultMode::Error500,
        4,
        0,
    )
    .await;
    let away = shop.post_order(body.clone()).await;
    assert_eq!(away.status(), 503);
    let away: Value = away.json().await.unwrap();
    assert_eq!(away["error"], "stripe_unavailable", "{away}");
    assert_eq!(shop.objects("checkout_sessions").await.len(), 1);
    shop.clear_faults().await;

    let paid = reqwest::Client::new()
        .post(format!(
            "{}/_sim/checkout/sessions/{session}/pay",
            shop.sim.base_url()
        ))
        .json(&json!({ "outcome": "card" }))
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 204);
    for _ in 0..2 {
        let again = shop.post_order(body.clone()).await;
        assert_eq!(again.status(), 409);
        let again: Value = again.json().await.unwrap();
        assert_eq!(again["error"], "checkout_completed", "{again}");
        assert!(
            again["message"].as_str().unwrap().contains(&session),
            "{again}"
        );
    }
    assert_eq!(shop.objects("checkout_sessions").await.len(), 1);
    let order = shop
        .app
        .store
        .orders()
        .get(&OrderId::parse("ord_last_second").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(order.checkout_generation, 1);
    assert!(order.stripe_requests.iter().all(|r| r.expired_at.is_none()));
    // Its event comes: the order is paid, and stays the one order.
    shop.paid_order_of_existing("ord_last_second").await;
    let settled: Value = shop.post_order(body).await.json().await.unwrap();
    assert_eq!(settled["error"], "order_settled", "{settled}");
    assert_eq!(shop.objects("checkout_sessions").await.len(), 1);
}

/// Every attempt's answer lost on the way back: the refund is left indeterminate, listed on
/// the page its alert links to (with its order), and sending it again gets Stripe's replay.
async fn a_refund_left_without_an_answer_is_listed_where_its_alert_points(backend: Backend) {
    use claimcheck_core::alert::AlertCondition;
    use claimcheck_core::auth::Role;

    let shop = shop(backend).await;
    shop.paid_order("ord_lost").await;
    shop.arm("/v1/refunds", FaultMode::Drop, 4, 0).await;
    let lost = shop.refund("ord_lost").await;
    assert!(lost.is_err(), "{lost:?}");
    let key = "refund:ord_lost:4900";
    assert_eq!(
        shop.app
            .store
            .stripe_requests()
            .get(key)
            .await
            .unwrap()
            .unwrap()
            .status
            .as_str(),
        "indeterminate"
    );

    let vera = shop.app.sign_in_as("vera", Role::Viewer).await;
    let page = |path: &str| {
        let request = vera.get(shop.app.url(path));
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 200);
            response.text().await.unwrap()
        }
    };
    let listed = page(&app::links::alert(
        AlertCondition::IndeterminateRequests,
        None,
    ))
    .await;
    assert!(listed.contains(&format!(r#"data-key="{key}""#)), "{listed}");
    assert!(listed.contains(r#"href="/orders/ord_lost""#), "{listed}");
    assert!(
        listed.contains(r#"data-status="indeterminate""#),
        "{listed}"
    );
    assert!(listed.contains("1 of 1"), "{listed}");
    // The order's own checkout session succeeded: it is on another tab.
    let succeeded = page("/requests?status=succeeded").await;
    assert!(
        succeeded.contains("checkout-session:ord_lost"),
        "{succeeded}"
    );
    assert!(!succeeded.contains(key), "{succeeded}");

    // Sent again under its key: Stripe's first answer, one refund, one revoke.
    let refunded = shop.refund("ord_lost").await.unwrap();
    assert_eq!(shop.objects("refunds").await.len(), 1);
    assert_eq!(shop.ledger_rows("ord_lost", "revoke").await, 1);
    assert_eq!(refunded.order.status, OrderStatus::Refunded);
    let listed = page("/requests?status=indeterminate").await;
    assert!(listed.contains(r#"data-testid="no-requests""#), "{listed}");
    assert!(page("/requests?status=succeeded").await.contains(key));

    // A status that is not one is refused, in words.
    let garbled = shop
        .app
        .call(&vera, "requests", &[("status", "answered")])
        .await;
    assert_eq!(garbled.status(), 400);
    assert!(
        garbled
            .text()
            .await
            .unwrap()
            .contains("not a request status"),
        "the reason is given"
    );
    // Anonymous callers are not shown a thing.
    let anonymous = shop
        .app
        .call(&shop.app.client, "requests", &[("status", "indeterminate")])
        .await;
    assert_eq!(anonymous.status(), 401);
}
