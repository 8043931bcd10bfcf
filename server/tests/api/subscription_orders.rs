//! Subscriptions through the order API, against the Stripe simulator: one Checkout Session
//! per reference (in `mode=subscription`, the reference in the subscription's metadata), a
//! new one only after it expired, none once the subscription started; cancellation once per
//! kind, from the API and the command line, audited.

use claimcheck_core::billing::Plans;
use claimcheck_core::worker::{Worker, WorkerConfig};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, on_both_backends};
use crate::outgoing::{Shop, shop};
use crate::subscriptions::{PLANS, billing};

on_both_backends!(
    backend =>
    a_subscription_gets_one_checkout_session_until_it_starts,
    a_subscription_is_cancelled_once_per_kind,
    a_refused_cancellation_is_asked_again_under_the_next_key,
);

async fn drain(app: &TestApp) {
    let worker = Worker::new(
        app.store.clone(),
        "subscription-worker",
        WorkerConfig {
            plans: PLANS.parse::<Plans>().unwrap(),
            ..WorkerConfig::default()
        },
    );
    while !worker.run_once().await.unwrap().is_empty() {}
}

/// A Billing fixture of the subscription `subscription_id` the shop knows as `reference`.
fn event_of(name: &str, tag: &str, reference: &str, subscription_id: Option<&str>) -> Vec<u8> {
    let text = String::from_utf8(billing(name, tag)).unwrap();
    let text = text.replace("subref_0001", reference);
    let text = match subscription_id {
        Some(id) => text.replace(&format!("sub_1Q{tag}0001Plan"), id),
        None => text,
    };
    text.into_bytes()
}

async fn sessions_logged(shop: &Shop) -> Vec<(String, std::collections::BTreeMap<String, String>)> {
    shop.log()
        .await
        .into_iter()
        .filter(|e| e.path == "/v1/checkout/sessions" && e.outcome == "performed")
        .map(|e| (e.idempotency_key.unwrap_or_default(), e.params))
        .collect()
}

async fn a_subscription_gets_one_checkout_session_until_it_starts(backend: Backend) {
    let shop = shop(backend).await;
    let ask = json!({
        "plan": "thesis-monthly",
        "customer_email": "Abo7@Example.ch",
        "subscription_ref": "abo-7",
    });
    let first = shop.post_api("/api/subscriptions", ask.clone()).await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["status"], "awaiting_payment");
    assert_eq!(first["customer_email"], "abo7@example.ch");
    assert_eq!(first["credits_per_period"], 40);
    assert_eq!(first["interval"], "month");
    assert!(first["checkout_url"].as_str().unwrap().starts_with("http"));
    // Asked again (a retry, a double click): the same session.
    let again = shop.post_api("/api/subscriptions", ask.clone()).await;
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["checkout_session_id"], first["checkout_session_id"]);
    let sessions = sessions_logged(&shop).await;
    assert_eq!(sessions.len(), 1);
    let (key, params) = &sessions[0];
    assert_eq!(key, "subscription-checkout:abo-7");
    for (name, value) in [
        ("mode", "subscription"),
        ("client_reference_id", "abo-7"),
        ("customer_email", "abo7@example.ch"),
        ("subscription_data[metadata][subscription_ref]", "abo-7"),
        ("line_items[0][price_data][unit_amount]", "3900"),
        ("line_items[0][price_data][currency]", "chf"),
        ("line_items[0][price_data][recurring][interval]", "month"),
    ] {
        assert_eq!(params.get(name).map(String::as_str), Some(value), "{name}");
    }

    // Another plan or customer under the same reference is refused; so are bad requests.
    let other = shop
        .post_api(
            "/api/subscriptions",
            json!({ "plan": "thesis-pro", "customer_email": "abo7@example.ch",
                    "subscription_ref": "abo-7" }),
        )
        .await;
    assert_eq!(other.status(), 409);
    assert_eq!(
        other.json::<Value>().await.unwrap()["error"],
        "subscription_conflict"
    );
    for (body, status, code) in [
        (
            json!({ "plan": "gold", "customer_email": "a@example.ch" }),
            422,
            "invalid_order",
        ),
        (
            json!({ "plan": "thesis-monthly", "customer_email": "nobody" }),
            422,
            "invalid_order",
        ),
        (json!({ "plan": "thesis-monthly" }), 400, "bad_request"),
        (
            json!({ "plan": "thesis-monthly", "customer_email": "a@example.ch",
                    "subscription_ref": " " }),
            422,
            "invalid_order",
        ),
        // A reference whose keys would read like another's, or like Stripe's id.
        (
            json!({ "plan": "thesis-monthly", "customer_email": "a@example.ch",
                    "subscription_ref": "abo-7:2" }),
            422,
            "invalid_order",
        ),
        (
            json!({ "plan": "thesis-monthly", "customer_email": "a@example.ch",
                    "subscription_ref": "sub_1Qab70001Plan" }),
            422,
            "invalid_order",
        ),
    ] {
        let answer = shop.post_api("/api/subscriptions", body.clone()).await;
        assert_eq!(answer.status(), status, "{body}");
        assert_eq!(
            answer.json::<Value>().await.unwrap()["error"],
            code,
            "{body}"
        );
    }
    assert_eq!(sessions_logged(&shop).await.len(), 1);
    let unknown = shop.get_api("/api/subscriptions/abo-404").await;
    assert_eq!(unknown.status(), 404);
    let shown: Value = shop
        .get_api("/api/subscriptions/abo-7")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["status"], "awaiting_payment");
    assert_eq!(shown["checkout_url"], first["checkout_url"]);

    // Past its expiry by our clock, but open at Stripe: kept.
    shop.app
        .db
        .execute(&format!(
            "UPDATE subscription_checkouts SET checkout_expires_at = {} \
             WHERE subscription_ref = 'abo-7'",
            claimcheck_core::now_ms() - 3_600_000
        ))
        .await;
    let kept: Value = shop
        .post_api("/api/subscriptions", ask.clone())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(kept["checkout_session_id"], first["checkout_session_id"]);
    assert_eq!(sessions_logged(&shop).await.len(), 1);
    // Stripe expired the session unpaid: the next ask opens one under the next key.
    shop.expire_at_stripe(first["checkout_session_id"].as_str().unwrap())
        .await;
    let renewed: Value = shop
        .post_api("/api/subscriptions", ask.clone())
        .await
        .json()
        .await
        .unwrap();
    assert_ne!(renewed["checkout_session_id"], first["checkout_session_id"]);
    let keys: Vec<String> = sessions_logged(&shop)
        .await
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        keys,
        [
            "subscription-checkout:abo-7",
            "subscription-checkout:abo-7:2"
        ]
    );
    assert_eq!(
        shop.app
            .db
            .count(
                "SELECT COUNT(*) FROM stripe_requests WHERE order_id = 'abo-7' \
                 AND operation = 'subscription_checkout' AND expired_at IS NOT NULL"
            )
            .await,
        1
    );

    // Paid: the first invoice names the reference in its subscription's metadata.
    let paid = event_of("invoice.paid.subscription_create", "ab7", "abo-7", None);
    assert_eq!(shop.app.deliver(&paid).await.status(), 200);
    drain(&shop.app).await;
    let started: Value = shop
        .get_api("/api/subscriptions/abo-7")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(started["subscription_id"], "sub_1Qab70001Plan");
    assert_eq!(started["credits_granted"], 40);
    assert_eq!(started["status"], "started");
    // From now on the reference never opens another session.
    let late = shop.post_api("/api/subscriptions", ask).await;
    assert_eq!(late.status(), 409);
    let late: Value = late.json().await.unwrap();
    assert_eq!(late["error"], "subscription_active");
    // As GET shows it.
    assert_eq!(late["subscription"]["subscription_id"], "sub_1Qab70001Plan");
    assert_eq!(late["subscription"]["subscription_ref"], "abo-7");
    assert_eq!(late["subscription"]["cancel_at_period_end"], false);
    assert_eq!(late["subscription"]["credits_granted"], 40);
    assert_eq!(sessions_logged(&shop).await.len(), 2);
}

async fn a_subscription_is_cancelled_once_per_kind(backend: Backend) {
    let shop = shop(backend).await;
    let asked = shop
        .post_api(
            "/api/subscriptions",
            json!({ "plan": "thesis-monthly", "customer_email": "abo9@example.ch",
                    "subscription_ref": "abo-9" }),
        )
        .await;
    assert_eq!(asked.status(), 201);
    // Not started yet: nothing to cancel.
    let early = shop
        .post_api("/api/subscriptions/abo-9/cancel", json!({}))
        .await;
    assert_eq!(early.status(), 409);
    assert_eq!(
        early.json::<Value>().await.unwrap()["error"],
        "subscription_not_started"
    );
    let unknown = shop
        .post_api("/api/subscriptions/abo-0/cancel", json!({}))
        .await;
    assert_eq!(unknown.status(), 404);

    // The customer paid: Stripe has the subscription, and told us.
    let id = start_at_stripe(&shop, json!({ "subscription_ref": "abo-9" })).await;
    let created = event_of("customer.subscription.created", "ab9", "abo-9", Some(&id));
    assert_eq!(shop.app.deliver(&created).await.status(), 200);
    drain(&shop.app).await;

    // At the period's end, twice: one request, one key.
    for sent_now in [true, false] {
        let answer = shop
            .post_api(
                "/api/subscriptions/abo-9/cancel",
                json!({ "at_period_end": true }),
            )
            .await;
        assert_eq!(answer.status(), 200);
        let answer: Value = answer.json().await.unwrap();
        assert_eq!(
            answer["idempotency_key"],
            "subscription-cancel:abo-9:period-end"
        );
        assert_eq!(answer["sent_now"], sent_now);
        assert_eq!(answer["subscription"]["subscription_id"], id.as_str());
    }
    // Now, from the command line (an operator).
    let sim_url = shop.sim_url();
    let env = [
        ("STRIPE_API_KEY", "sk_test_claimcheck"),
        ("STRIPE_API_BASE", sim_url.as_str()),
    ];
    let args = [
        "subscriptions",
        "cancel",
        "abo-9",
        "--now",
        "--reason",
        "chargeback risk",
        "--json",
    ];
    let cancel_now = || async {
        let (code, stdout, stderr) = shop.app.cli_with(&args, &env).await;
        assert_eq!(code, 0, "{stderr}");
        serde_json::from_str::<Value>(&stdout).unwrap()
    };
    let out = cancel_now().await;
    assert_eq!(out["idempotency_key"], "subscription-cancel:abo-9:now");
    assert_eq!(out["sent_now"], true);
    // Stripe's events of both changes reach Claimcheck: the status follows them.
    deliver_sim_events(&shop, &id).await;
    let shown: Value = shop
        .get_api("/api/subscriptions/abo-9")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["status"], "canceled");
    // Asked again once canceled, either kind: Stripe's answer under the same key, nothing new.
    let again = cancel_now().await;
    assert_eq!(again["sent_now"], false);
    let other = shop
        .post_api(
            "/api/subscriptions/abo-9/cancel",
            json!({ "at_period_end": false, "reason": "x" }),
        )
        .await;
    assert_eq!(other.status(), 200);
    let late = shop
        .post_api(
            "/api/subscriptions/abo-9/cancel",
            json!({ "at_period_end": true }),
        )
        .await;
    assert_eq!(late.status(), 200, "the period-end cancel succeeded before");
    let calls: Vec<(String, String, String)> = shop
        .log()
        .await
        .into_iter()
        .filter(|e| e.path.starts_with("/v1/subscriptions/") && e.outcome == "performed")
        .map(|e| (e.method, e.path, e.idempotency_key.unwrap_or_default()))
        .collect();
    let path = format!("/v1/subscriptions/{id}");
    assert_eq!(
        calls,
        [
            (
                "POST".into(),
                path.clone(),
                "subscription-cancel:abo-9:period-end".into()
            ),
            (
                "DELETE".into(),
                path,
                "subscription-cancel:abo-9:now".into()
            ),
        ]
    );
    // Audited: who (the shop's token, the operator), what and the key.
    let audited = shop
        .app
        .db
        .texts(
            "SELECT actor || ' ' || target || ' ' || outcome FROM audit_log \
             WHERE action = 'subscription_cancel' ORDER BY id",
        )
        .await;
    assert!(audited[0].starts_with("api:"), "{audited:?}");
    assert!(audited[1].ends_with("subscription-cancel:abo-9:period-end: succeeded"));
    assert!(audited[3].ends_with("period-end: sent before under this key"));
    assert!(
        audited[4].starts_with(&format!("cli:support-sam {id}")),
        "{audited:?}"
    );
    assert!(audited[5].ends_with("subscription-cancel:abo-9:now: succeeded"));
    // The requests are the subscription's, never an order's of the same name.
    shop.app
        .db
        .execute(
            "INSERT INTO orders (order_id, credits, status, payment_status, created_at, updated_at) \
             VALUES ('abo-9', 40, 'awaiting_payment', 'unpaid', 1, 1)",
        )
        .await;
    assert!(
        shop.app
            .store
            .stripe_requests()
            .for_order("abo-9")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        shop.app
            .store
            .stripe_requests()
            .for_subscription("abo-9")
            .await
            .unwrap()
            .len(),
        3
    );
}

/// Stripe has a subscription (`POST /_sim/subscriptions`): its id.
async fn start_at_stripe(shop: &Shop, body: Value) -> String {
    let started: Value = reqwest::Client::new()
        .post(format!("{}/_sim/subscriptions", shop.sim_url()))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    started["id"].as_str().unwrap().to_owned()
}

/// Delivers what the simulator's changes of `subscription` made, as Stripe would.
async fn deliver_sim_events(shop: &Shop, subscription: &str) {
    let events: Vec<Value> = reqwest::get(format!("{}/_sim/events", shop.sim_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for event in events {
        if event["data"]["object"]["id"] == subscription {
            let response = shop.app.deliver(&serde_json::to_vec(&event).unwrap()).await;
            assert_eq!(response.status(), 200);
        }
    }
    drain(&shop.app).await;
}

/// Stripe refused a cancellation (it did not know the subscription yet): once that is mended,
/// asking again sends the next key instead of replaying the refusal for ever.
async fn a_refused_cancellation_is_asked_again_under_the_next_key(backend: Backend) {
    let shop = shop(backend).await;
    let created = event_of("customer.subscription.created", "ab8", "abo-8", None);
    assert_eq!(shop.app.deliver(&created).await.status(), 200);
    drain(&shop.app).await;
    let refused = shop
        .post_api("/api/subscriptions/abo-8/cancel", json!({}))
        .await;
    assert_eq!(refused.status(), 502);
    assert_eq!(
        refused.json::<Value>().await.unwrap()["error"],
        "stripe_rejected"
    );
    start_at_stripe(
        &shop,
        json!({ "id": "sub_1Qab80001Plan", "subscription_ref": "abo-8" }),
    )
    .await;
    let answer = shop
        .post_api("/api/subscriptions/abo-8/cancel", json!({}))
        .await;
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await.unwrap();
    assert_eq!(
        answer["idempotency_key"],
        "subscription-cancel:abo-8:period-end:2"
    );
    assert_eq!(answer["sent_now"], true);
    let again: Value = shop
        .post_api("/api/subscriptions/abo-8/cancel", json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        again["idempotency_key"],
        "subscription-cancel:abo-8:period-end:2"
    );
    assert_eq!(again["sent_now"], false);
}
