//! What operators watch: `/metrics` after a small run (deliveries, fulfilment, an outgoing
//! Stripe call retried once, claims by state, an alert and its message sent on the second
//! try), and the request id every answer carries.

use std::time::{Duration, Instant};

use claimcheck_core::now_ms;
use claimcheck_core::token::NewToken;
use claimcheck_sim::stripe_sim::{Fault, FaultMode, StripeSim};
use serde_json::{Value, json};

use crate::alerts::sinks::ChatHook;
use crate::alerts::{alerting, channels};
use crate::helpers::{Backend, TestApp, fixture, on_both_backends, spawn_app, spawn_app_with};
use crate::outgoing::{PACKAGES, stripe_api, urls};

on_both_backends!(backend => a_small_run_is_counted_in_metrics);

/// The value of one series (`name{labels}`) in a scrape.
fn series(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Scrapes until every `(series, value)` in `expected` holds, for at most ten seconds: the
/// workers count an attempt just after committing it.
async fn scrape_until(app: &TestApp, expected: &[(&str, f64)]) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = app.get_metrics().await;
        let off: Vec<_> = expected
            .iter()
            .filter(|(name, value)| series(&metrics, name) != Some(*value))
            .collect();
        if off.is_empty() {
            return metrics;
        }
        assert!(
            Instant::now() < deadline,
            "never reached {off:?} in\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A `checkout.session.completed` for `session` (no order id when `order` is `None`: such a
/// claim cannot be fulfilled).
fn session_completed(event_id: &str, session: &str, order: Option<&str>) -> Vec<u8> {
    let metadata = match order {
        Some(order) => json!({ "order_id": order, "credits": "40", "package": "thesis-40" }),
        None => json!({}),
    };
    serde_json::to_vec(&json!({
        "id": event_id,
        "object": "event",
        "type": "checkout.session.completed",
        "created": now_ms() / 1000,
        "livemode": false,
        "data": { "object": {
            "id": session,
            "object": "checkout.session",
            "payment_status": "paid",
            "payment_intent": format!("pi_{session}"),
            "client_reference_id": order,
            "customer_email": "anna@example.ch",
            "metadata": metadata,
        }},
    }))
    .unwrap()
}

/// An order opened through the order API (its Checkout Session answered 500 once, then
/// replayed), paid, delivered twice and as a twin; an ignored type, a forged signature and an
/// event no order can be found for, whose failed claim opens an alert that reaches the chat
/// on its second try; one worker. Every figure is exact.
async fn a_small_run_is_counted_in_metrics(backend: Backend) {
    let sim = StripeSim::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let chat = ChatHook::failing_first(1).await;
    let app = spawn_app_with(backend, |config| {
        alerting(
            config,
            channels(None, Some(chat.url()), Duration::from_secs(5)),
            Duration::from_millis(50),
        );
        config.stripe = Some(stripe_api(&sim));
        config.checkout_urls = Some(urls());
        config.worker.packages = PACKAGES.parse().unwrap();
        // A claim that cannot be fulfilled gives up at once: the counts stay exact.
        config.worker.max_attempts = 1;
        config.workers = 1;
    })
    .await;
    let token = NewToken::generate().unwrap();
    app.store
        .tokens()
        .insert(&token, "shop", now_ms())
        .await
        .unwrap();

    let fault = Fault {
        path: "/v1/checkout/sessions".into(),
        mode: FaultMode::Error500,
        count: 1,
        hold_ms: 0,
    };
    let armed = app
        .client
        .post(format!("{}/_sim/faults", sim.base_url()))
        .json(&fault)
        .send()
        .await
        .unwrap();
    assert_eq!(armed.status(), 204);
    let created = app
        .client
        .post(app.url("/api/orders"))
        .bearer_auth(&token.token)
        .json(&json!({
            "order_id": "ord_metrics",
            "package": "thesis-40",
            "customer_email": "anna@example.ch",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let order: Value = created.json().await.unwrap();
    let session = order["checkout_session_id"].as_str().unwrap().to_owned();

    let paid = session_completed("evt_metrics_paid", &session, Some("ord_metrics"));
    let twin = session_completed("evt_metrics_twin", &session, Some("ord_metrics"));
    let orphan = session_completed("evt_metrics_orphan", "cs_nobody", None);
    for (body, outcome) in [
        (&paid, "claimed"),
        (&paid, "duplicate_event"),
        (&twin, "duplicate_action"),
        (&fixture("customer.discount.created"), "ignored"),
        (&orphan, "claimed"),
    ] {
        let answer: Value = app.deliver(body).await.json().await.unwrap();
        assert_eq!(answer["outcome"], outcome);
    }
    let forged = app.post_webhook(&paid, Some("t=1,v1=00")).await;
    assert_eq!(forged.status(), 400);

    let deliveries =
        |outcome: &str| format!("claimcheck_webhook_deliveries_total{{outcome=\"{outcome}\"}}");
    let attempts =
        |result: &str| format!("claimcheck_fulfilment_attempts_total{{result=\"{result}\"}}");
    let claims = |state: &str| format!("claimcheck_claims{{state=\"{state}\"}}");
    let opened = |condition: &str| {
        format!("claimcheck_alert_changes_total{{condition=\"{condition}\",kind=\"opened\"}}")
    };
    let messages = |result: &str| {
        format!("claimcheck_alert_messages_total{{channel=\"webhook\",result=\"{result}\"}}")
    };
    let open = |condition: &str| format!("claimcheck_alerts_open{{condition=\"{condition}\"}}");
    let stripe = |status: &str| {
        format!(
            "claimcheck_stripe_requests_total{{operation=\"checkout_session\",status=\"{status}\"}}"
        )
    };
    let expected: Vec<(String, f64)> = vec![
        (deliveries("claimed"), 2.0),
        (deliveries("duplicate_event"), 1.0),
        (deliveries("duplicate_action"), 1.0),
        (deliveries("ignored"), 1.0),
        (deliveries("bad_signature"), 1.0),
        (deliveries("storage_error"), 0.0),
        ("claimcheck_webhook_ack_seconds_count".into(), 6.0),
        (attempts("processed"), 1.0),
        (attempts("gave_up"), 1.0),
        (attempts("failed"), 0.0),
        (attempts("lease_lost"), 0.0),
        (attempts("deferred"), 0.0),
        ("claimcheck_fulfilment_seconds_count".into(), 1.0),
        (claims("processed"), 1.0),
        (claims("failed"), 1.0),
        (claims("pending"), 0.0),
        (claims("running"), 0.0),
        (claims("stale"), 0.0),
        (stripe("500"), 1.0),
        (stripe("200"), 1.0),
        ("claimcheck_reconcile_runs_total".into(), 0.0),
        (opened("failed_claims"), 1.0),
        (opened("stale_claims"), 0.0),
        (open("failed_claims"), 1.0),
        (open("signature_failures"), 0.0),
        (messages("failed"), 1.0),
        (messages("sent"), 1.0),
        (messages("gave_up"), 0.0),
    ];
    let expected: Vec<(&str, f64)> = expected.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    let metrics = scrape_until(&app, &expected).await;

    for family in [
        "# TYPE claimcheck_webhook_deliveries_total counter",
        "# TYPE claimcheck_webhook_ack_seconds histogram",
        "# TYPE claimcheck_fulfilment_attempts_total counter",
        "# TYPE claimcheck_fulfilment_seconds histogram",
        "# TYPE claimcheck_claims gauge",
        "# TYPE claimcheck_stripe_requests_total counter",
        "# TYPE claimcheck_reconcile_runs_total counter",
        "# TYPE claimcheck_alert_changes_total counter",
        "# TYPE claimcheck_alert_messages_total counter",
        "# TYPE claimcheck_alerts_open gauge",
    ] {
        assert!(metrics.contains(family), "{family} missing in\n{metrics}");
    }
    assert_eq!(
        series(
            &metrics,
            "claimcheck_webhook_ack_seconds_bucket{le=\"+Inf\"}"
        ),
        Some(6.0)
    );
    assert_eq!(chat.posts.len(), 1, "the alert reached the chat once");
    assert_eq!(
        app.store
            .orders()
            .get(&"ord_metrics".parse().unwrap())
            .await
            .unwrap()
            .unwrap()
            .credits_granted,
        40
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_its_request_id() {
    let app = spawn_app(Backend::Sqlite).await;
    let id_of = |response: &reqwest::Response| {
        response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned()
    };

    // A caller's id comes back as it was sent, on every kind of route.
    for path in ["/healthz", "/metrics", "/login", "/no-such-page"] {
        let response = app
            .client
            .get(app.url(path))
            .header("x-request-id", "lb-7f3a:0001")
            .send()
            .await
            .unwrap();
        assert_eq!(id_of(&response), "lb-7f3a:0001", "{path}");
    }
    let delivery = app
        .client
        .post(app.url("/webhooks/stripe"))
        .header("x-request-id", "stripe-retry-2")
        .body(fixture("checkout.session.completed.paid"))
        .send()
        .await
        .unwrap();
    assert_eq!(delivery.status(), 400);
    assert_eq!(id_of(&delivery), "stripe-retry-2");

    // Without one, each request gets a new UUID.
    let first = id_of(&app.get_healthz().await);
    let second = id_of(&app.get_healthz().await);
    assert_eq!(first.len(), 36, "{first}");
    assert_eq!(first.matches('-').count(), 4, "{first}");
    assert_ne!(first, second);

    // One that could break a log line, or is absurdly long, is replaced.
    for insane in ["two words", "{\"forged\":true}", &"x".repeat(129)] {
        let response = app
            .client
            .get(app.url("/healthz"))
            .header("x-request-id", insane)
            .send()
            .await
            .unwrap();
        let id = id_of(&response);
        assert_ne!(id, insane);
        assert_eq!(id.len(), 36, "{id}");
    }
}
