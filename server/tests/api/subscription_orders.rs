//! Subscriptions through the order API, against the Stripe simulator: one Checkout Session
//! per reference (in `mode=subscription`, the reference in the subscription's metadata), a
//! new one only after it expired, none once the subscription started; cancellation once per
//! kind, from the API and the command line, audited.

use claimcheck_core::auth::Role;
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
    an_invoice_naming_no_customer_waits_for_one_and_asks_stripe,
    reads_from_stripe_stop_at_half_the_lease,
    a_subscription_lives_months_on_the_simulator_s_test_clock,
    a_schedule_s_next_phase_is_shown_until_it_begins,
    a_subscription_paid_before_its_events_came_gets_no_second_session,
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

/// A dashboard server function's answer, which must be 200.
async fn dashboard(
    shop: &Shop,
    viewer: &reqwest::Client,
    endpoint: &str,
    form: &[(&str, &str)],
) -> Value {
    let answer = shop.app.call(viewer, endpoint, form).await;
    assert_eq!(answer.status(), 200, "{endpoint}");
    answer.json().await.unwrap()
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
    // Support sees the ask before Stripe tells of the subscription: its page by reference
    // (where the requests list links) and the customer's page list it.
    let viewer = shop.app.sign_in_as("vic", Role::Viewer).await;
    let page: Value = dashboard(&shop, &viewer, "subscription", &[("id", "abo-7")]).await;
    assert!(page["subscription"].is_null(), "{page}");
    assert_eq!(page["asked"]["plan"], "thesis-monthly");
    assert_eq!(page["asked"]["customer"], "abo7@example.ch");
    assert_eq!(page["asked"]["checkout_generation"], 2);
    assert_eq!(
        page["asked"]["checkout_session_id"],
        renewed["checkout_session_id"]
    );
    assert_eq!(page["asked"]["checkout_expired"], false);
    assert_eq!(page["grants"].as_array().unwrap().len(), 0);
    assert_eq!(page["requests"].as_array().unwrap().len(), 2);
    let customer: Value =
        dashboard(&shop, &viewer, "customer", &[("who", "ABO7@example.ch")]).await;
    assert_eq!(
        customer["asked"][0]["subscription_ref"], "abo-7",
        "{customer}"
    );
    assert_eq!(customer["subscriptions"].as_array().unwrap().len(), 0);
    let missing = shop
        .app
        .call(&viewer, "subscription", &[("id", "abo-404")])
        .await;
    assert_eq!(missing.status(), 404);
    // The header search opens the ask by its reference, and its customer by the e-mail.
    let opens = |term: &'static str| {
        let (app, viewer) = (&shop.app, &viewer);
        async move {
            let answer = viewer
                .get(app.url("/search/go"))
                .query(&[("q", term)])
                .send()
                .await
                .unwrap();
            assert_eq!(answer.status(), 303, "{term}");
            answer.headers()["location"].to_str().unwrap().to_owned()
        }
    };
    assert_eq!(opens("abo-7").await, "/subscriptions/abo-7");
    assert_eq!(opens("Abo7@example.ch").await, "/customers/abo7@example.ch");

    let paid = event_of("invoice.paid.subscription_create", "ab7", "abo-7", None);
    assert_eq!(shop.app.deliver(&paid).await.status(), 200);
    drain(&shop.app).await;
    // Started: its page by reference is the subscription's, with the ask beside it; the
    // customer it was asked for and the one of the invoice list it, the ask no longer waits.
    let page: Value = dashboard(&shop, &viewer, "subscription", &[("id", "abo-7")]).await;
    assert_eq!(page["subscription"]["subscription_id"], "sub_1Qab70001Plan");
    assert_eq!(page["asked"]["subscription_ref"], "abo-7");
    assert_eq!(page["grants"].as_array().unwrap().len(), 1);
    let customer: Value =
        dashboard(&shop, &viewer, "customer", &[("who", "abo7@example.ch")]).await;
    assert_eq!(customer["asked"].as_array().unwrap().len(), 0, "{customer}");
    assert_eq!(
        customer["subscriptions"][0]["subscription_id"],
        "sub_1Qab70001Plan"
    );
    let invoiced: Value =
        dashboard(&shop, &viewer, "customer", &[("who", "abo-ab7@example.ch")]).await;
    assert_eq!(
        invoiced["subscriptions"][0]["subscription_id"], "sub_1Qab70001Plan",
        "{invoiced}"
    );
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
    // The command line speaks the API's types: a flag is a boolean in both.
    let (code, cli, stderr) = shop
        .app
        .cli(&["subscriptions", "show", "abo-9", "--json"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let cli: Value = serde_json::from_str(&cli).unwrap();
    let cli = &cli["subscription"];
    assert_eq!(cli["cancel_at_period_end"], shown["cancel_at_period_end"]);
    let shared: Vec<&String> = cli
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| shown.get(k.as_str()).is_some())
        .collect();
    assert!(shared.len() >= 8, "{shared:?}");
    for key in shared {
        let (a, b) = (&cli[key.as_str()], &shown[key.as_str()]);
        let kind = |v: &Value| match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        assert!(
            a.is_null() || b.is_null() || kind(a) == kind(b),
            "{key}: the command line says {a}, the API {b}"
        );
    }
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

/// A paid invoice that carries neither an e-mail nor the reference (delivered before anything
/// else of its subscription) grants nobody: the claim waits. The worker reads the subscription
/// from Stripe (a GET: only its metadata names the reference now), whose order-API customer
/// gets the period once. Stripe away for that GET: retried, nothing lost. An operator's
/// re-drive from the command line asks Stripe too, given a key.
async fn an_invoice_naming_no_customer_waits_for_one_and_asks_stripe(backend: Backend) {
    use claimcheck_core::worker::Attempt;
    use claimcheck_sim::stripe_sim::FaultMode;

    let shop = shop(backend).await;
    let asked = shop
        .post_api(
            "/api/subscriptions",
            json!({ "plan": "thesis-monthly", "customer_email": "walk@example.ch",
                    "subscription_ref": "abo-get" }),
        )
        .await;
    assert_eq!(asked.status(), 201);
    let subscription = start_at_stripe(
        &shop,
        json!({ "id": "sub_1Qget0001Plan", "subscription_ref": "abo-get" }),
    )
    .await;
    let mut paid: Value = serde_json::from_slice(&event_of(
        "invoice.paid.subscription_create",
        "get",
        "abo-get",
        Some(&subscription),
    ))
    .unwrap();
    let invoice = &mut paid["data"]["object"];
    invoice["customer_email"] = Value::Null;
    invoice["parent"]["subscription_details"]["metadata"] = json!({});
    assert_eq!(
        shop.app
            .deliver(&serde_json::to_vec(&paid).unwrap())
            .await
            .status(),
        200
    );
    let worker = |stripe: bool| {
        Worker::new(
            shop.app.store.clone(),
            "subscription-worker",
            WorkerConfig {
                plans: PLANS.parse::<Plans>().unwrap(),
                base_backoff: std::time::Duration::from_millis(1),
                stripe: stripe.then(|| shop.stripe()),
                ..WorkerConfig::default()
            },
        )
    };
    let credits = || {
        shop.app.db.count(
            "SELECT CAST(COALESCE(SUM(delta), 0) AS BIGINT) FROM credit_ledger \
             WHERE customer_email = 'walk@example.ch'",
        )
    };
    let failed = |attempts: Vec<Attempt>, why: &str| {
        assert_eq!(attempts.len(), 1, "{attempts:?}");
        match &attempts[0] {
            Attempt::Failed { error, gave_up, .. } => {
                assert!(error.contains(why), "{error}");
                assert!(!gave_up);
            }
            other => panic!("{other:?}"),
        }
    };
    // Without Stripe to ask: nothing is written, the claim is retried.
    failed(
        worker(false).run_once().await.unwrap(),
        "names no customer yet",
    );
    assert_eq!(credits().await, 0);
    assert_eq!(
        shop.app
            .db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE customer_email IS NULL")
            .await,
        0
    );
    // Stripe away for the GET: retried again.
    let path = format!("/v1/subscriptions/{subscription}");
    shop.arm(&path, FaultMode::Error500, 1, 0).await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    failed(
        worker(true).run_once().await.unwrap(),
        "names no customer yet",
    );
    assert_eq!(credits().await, 0);
    // An operator re-drives it from the command line: without a Stripe key it fails again
    // with why; with one, Stripe answers the reference: its customer, the period once.
    let event_id = paid["id"].as_str().unwrap().to_owned();
    let redrive = [
        "claims",
        "redrive",
        event_id.as_str(),
        "--reason",
        "ask Stripe",
    ];
    let (code, stdout, stderr) = shop
        .app
        .cli_with(&redrive, &[("CLAIMCHECK_PLANS", PLANS)])
        .await;
    assert_ne!(code, 0, "{stdout}");
    assert!(
        format!("{stdout}{stderr}").contains("names no customer yet"),
        "{stdout}{stderr}"
    );
    assert_eq!(credits().await, 0);
    let sim_url = shop.sim_url();
    let env = [
        ("CLAIMCHECK_PLANS", PLANS),
        ("STRIPE_API_KEY", "sk_test_claimcheck"),
        ("STRIPE_API_BASE", sim_url.as_str()),
    ];
    let (code, stdout, stderr) = shop.app.cli_with(&redrive, &env).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("processed"), "{stdout}");
    assert_eq!(credits().await, 40);
    // And the worker, asking again, finds nothing left to do.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(worker(true).run_once().await.unwrap(), vec![]);
    let shown: Value = shop
        .get_api("/api/subscriptions/abo-get")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(shown["subscription_id"], subscription.as_str());
    assert_eq!(shown["credits_granted"], 40);
}

/// A worker reads subscriptions from Stripe only within the first half of its lease, so a
/// slow Stripe cannot keep a batch past its lease (another worker would take the claims over
/// and the batch's work would be lost): three paid invoices naming no customer, leased
/// together for 6 s, each subscription's GET answered after 1.2 s. The third GET starts at
/// 2.4 s at the earliest and would end at 3.6 s, past the half: it is given up at 3 s (or not
/// started) and its invoice retried; each is granted once in the end.
async fn reads_from_stripe_stop_at_half_the_lease(backend: Backend) {
    use claimcheck_core::stripe::{ApiKey, StripeApi, StripeConfig};
    use claimcheck_core::worker::Attempt;
    use claimcheck_sim::stripe_sim::FaultMode;

    const EMAILS: &str = "'half1@example.ch', 'half2@example.ch', 'half3@example.ch'";
    let shop = shop(backend).await;
    for n in 1..=3 {
        let reference = format!("abo-half{n}");
        let asked = shop
            .post_api(
                "/api/subscriptions",
                json!({ "plan": "thesis-monthly", "customer_email": format!("half{n}@example.ch"),
                        "subscription_ref": reference }),
            )
            .await;
        assert_eq!(asked.status(), 201);
        let tag = format!("half{n}");
        let subscription = start_at_stripe(
            &shop,
            json!({ "id": format!("sub_1Q{tag}0001Plan"), "subscription_ref": reference }),
        )
        .await;
        let mut paid: Value = serde_json::from_slice(&event_of(
            "invoice.paid.subscription_create",
            &tag,
            &reference,
            Some(&subscription),
        ))
        .unwrap();
        let invoice = &mut paid["data"]["object"];
        invoice["customer_email"] = Value::Null;
        invoice["parent"]["subscription_details"]["metadata"] = json!({});
        let delivered = shop.app.deliver(&serde_json::to_vec(&paid).unwrap()).await;
        assert_eq!(delivered.status(), 200);
        let path = format!("/v1/subscriptions/{subscription}");
        shop.arm(&path, FaultMode::Slow, 1, 1_200).await;
    }
    let stripe = StripeApi::new(StripeConfig {
        api_base: shop.sim_url(),
        timeout: std::time::Duration::from_secs(10),
        max_attempts: 1,
        ..StripeConfig::new(ApiKey::new("sk_test_claimcheck").unwrap())
    })
    .unwrap();
    let worker = Worker::new(
        shop.app.store.clone(),
        "subscription-worker",
        WorkerConfig {
            plans: PLANS.parse::<Plans>().unwrap(),
            lease: std::time::Duration::from_secs(6),
            base_backoff: std::time::Duration::from_millis(1),
            stripe: Some(stripe),
            ..WorkerConfig::default()
        },
    );
    let granted_sum = format!(
        "SELECT CAST(COALESCE(SUM(delta), 0) AS BIGINT) FROM credit_ledger \
         WHERE customer_email IN ({EMAILS})"
    );
    let credits = || shop.app.db.count(&granted_sum);
    let attempts = worker.run_once().await.unwrap();
    assert_eq!(attempts.len(), 3, "{attempts:?}");
    let granted = attempts
        .iter()
        .filter(|a| matches!(a, Attempt::Processed { .. }))
        .count();
    // The first two GETs end within the half (the second not, should the machine be slow
    // enough); never the third.
    assert!((1..=2).contains(&granted), "{attempts:?}");
    for attempt in &attempts {
        match attempt {
            Attempt::Processed { .. } => {}
            Attempt::Failed { error, gave_up, .. } => {
                assert!(error.contains("names no customer yet"), "{error}");
                assert!(!gave_up);
            }
            other => panic!("the batch outlived its lease: {other:?}"),
        }
    }
    assert_eq!(credits().await, 40 * i64::try_from(granted).unwrap());
    // Stripe quick again: the next attempt asks it for the rest.
    let cleared = reqwest::Client::new()
        .delete(format!("{}/_sim/faults", shop.sim_url()))
        .send()
        .await
        .unwrap();
    assert!(cleared.status().is_success());
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let attempts = worker.run_once().await.unwrap();
    assert_eq!(attempts.len(), 3 - granted, "{attempts:?}");
    assert!(
        attempts
            .iter()
            .all(|a| matches!(a, Attempt::Processed { .. })),
        "{attempts:?}"
    );
    assert_eq!(credits().await, 120);
    assert_eq!(
        shop.app
            .db
            .count(
                "SELECT COUNT(*) FROM subscription_grants WHERE subscription_id LIKE 'sub_1Qhalf%'"
            )
            .await,
        3
    );
}

/// Stripe's test-helper and simulator calls of the lives below.
struct Life<'a> {
    shop: &'a Shop,
    clock: String,
    /// Events of the simulator delivered so far.
    delivered: usize,
    /// The shop's reference of the subscription, and its customer.
    reference: &'static str,
    email: &'static str,
    /// Its Stripe id, once started.
    subscription: String,
}

impl<'a> Life<'a> {
    /// A test clock at `t0` and a subscription to `plan` sold through the order API, paid at
    /// the simulator on that clock, its events delivered and fulfilled.
    async fn start(
        shop: &'a Shop,
        t0: i64,
        reference: &'static str,
        email: &'static str,
        plan: &str,
    ) -> Life<'a> {
        let mut life = Life {
            shop,
            clock: String::new(),
            delivered: 0,
            reference,
            email,
            subscription: String::new(),
        };
        let clock = life
            .stripe(
                "/v1/test_helpers/test_clocks",
                &[("frozen_time", t0.to_string())],
            )
            .await;
        life.clock = clock["id"].as_str().unwrap().to_owned();
        let asked: Value = shop
            .post_api(
                "/api/subscriptions",
                json!({ "plan": plan, "customer_email": email, "subscription_ref": reference }),
            )
            .await
            .json()
            .await
            .unwrap();
        let session = asked["checkout_session_id"].as_str().unwrap();
        let paid = life
            .sim(
                &format!("/_sim/checkout/sessions/{session}/pay"),
                json!({ "outcome": "card", "test_clock": life.clock }),
            )
            .await;
        assert_eq!(paid.status(), 204);
        life.deliver().await;
        let shown = life.shown().await;
        life.subscription = shown["subscription_id"].as_str().unwrap().to_owned();
        life
    }

    /// What the subscription's period ending at `end` was granted.
    async fn granted(&self, end: i64) -> i64 {
        crate::subscriptions::period_grants(&self.shop.app, &self.subscription, end).await
    }

    async fn stripe(&self, path: &str, form: &[(&str, String)]) -> Value {
        let answer = reqwest::Client::new()
            .post(format!("{}{path}", self.shop.sim_url()))
            .bearer_auth("sk_test_life")
            .form(form)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{path}");
        answer.json().await.unwrap()
    }

    async fn sim(&self, path: &str, body: Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}{path}", self.shop.sim_url()))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// Changes the subscription's item to `unit_amount` through the simulator: prorated now,
    /// or (`at_period_end`) billed from the next renewal on.
    async fn change_price(
        &self,
        subscription: &str,
        unit_amount: i64,
        at_period_end: bool,
    ) -> reqwest::Response {
        let mut body = json!({ "unit_amount": unit_amount });
        if at_period_end {
            body["at_period_end"] = true.into();
        }
        self.sim(&format!("/_sim/subscriptions/{subscription}/change"), body)
            .await
    }

    async fn advance(&mut self, to: i64) {
        let path = format!("/v1/test_helpers/test_clocks/{}/advance", self.clock);
        let clock = self.stripe(&path, &[("frozen_time", to.to_string())]).await;
        assert_eq!(clock["frozen_time"], to);
        // Read back as Stripe's GET of a clock shows it.
        let read: Value = reqwest::Client::new()
            .get(format!(
                "{}/v1/test_helpers/test_clocks/{}",
                self.shop.sim_url(),
                self.clock
            ))
            .bearer_auth("sk_test_life")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(read["frozen_time"], to, "{read}");
        assert_eq!(read["object"], "test_helpers.test_clock", "{read}");
        self.deliver().await;
    }

    /// Delivers the events the simulator made since the last call, then fulfils them (with a
    /// worker that reads from the simulator what an event names by id only).
    async fn deliver(&mut self) {
        let events: Vec<Value> = reqwest::get(format!("{}/_sim/events", self.shop.sim_url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for event in &events[self.delivered..] {
            let response = self
                .shop
                .app
                .deliver(&serde_json::to_vec(event).unwrap())
                .await;
            assert_eq!(response.status(), 200, "{event}");
        }
        self.delivered = events.len();
        let worker = Worker::new(
            self.shop.app.store.clone(),
            "subscription-worker",
            WorkerConfig {
                plans: PLANS.parse::<Plans>().unwrap(),
                stripe: Some(self.shop.stripe()),
                ..WorkerConfig::default()
            },
        );
        while !worker.run_once().await.unwrap().is_empty() {}
    }

    async fn shown(&self) -> Value {
        self.shop
            .get_api(&format!("/api/subscriptions/{}", self.reference))
            .await
            .json()
            .await
            .unwrap()
    }

    async fn credits(&self) -> i64 {
        self.shop
            .app
            .db
            .count(&format!(
                "SELECT CAST(COALESCE(SUM(delta), 0) AS BIGINT) FROM credit_ledger \
                 WHERE customer_email = '{}'",
                self.email
            ))
            .await
    }
}

/// A subscription sold through the order API and paid at the simulator lives four months on a
/// test clock, every event delivered as the simulator made it (the creation's in random
/// order): a renewal whose card fails and is paid on retry, an upgrade paid in proportion, a
/// downgrade at the period's end, half a renewal refunded, a cancellation at the period's end.
/// Each period is granted once; delivering every event again changes nothing.
async fn a_subscription_lives_months_on_the_simulator_s_test_clock(backend: Backend) {
    const DAY: i64 = 86_400;
    let shop = shop(backend).await;
    let t0 = 1_767_225_600; // 2026-01-01
    let mut life = Life::start(&shop, t0, "abo-life", "life@example.ch", "thesis-monthly").await;
    let shown = life.shown().await;
    assert_eq!(shown["status"], "active", "{shown}");
    assert_eq!(shown["credits_granted"], 40);
    let subscription = life.subscription.clone();
    let period = |n: i64| t0 + n * 30 * DAY;
    assert_eq!(life.granted(period(1)).await, 40);

    // The first renewal's card fails: nothing for the period, past due; Stripe's retry pays.
    let armed = life
        .sim(
            &format!("/_sim/subscriptions/{subscription}/fail_next"),
            json!({ "count": 1 }),
        )
        .await;
    assert_eq!(armed.status(), 204);
    life.advance(period(1) + DAY).await;
    let shown = life.shown().await;
    assert_eq!(shown["status"], "past_due", "{shown}");
    let unpaid = shown["unpaid_invoice"].as_str().unwrap().to_owned();
    assert_eq!(life.granted(period(2)).await, 0);
    let retried = life
        .sim(&format!("/_sim/invoices/{unpaid}/pay"), json!({}))
        .await;
    assert_eq!(retried.status(), 200);
    life.deliver().await;
    let shown = life.shown().await;
    assert_eq!(shown["status"], "active", "{shown}");
    assert!(shown["unpaid_invoice"].is_null(), "{shown}");
    assert_eq!(life.granted(period(2)).await, 40);

    // Half-way through the second period, an upgrade to thesis-pro: half the price difference
    // paid, half the 60 extra credits granted.
    life.advance(period(1) + 15 * DAY).await;
    let upgraded = life.change_price(&subscription, 8900, false).await;
    assert_eq!(upgraded.status(), 200);
    let upgrade: Value = upgraded.json().await.unwrap();
    assert_eq!(upgrade["amount_paid"], 2500);
    life.deliver().await;
    assert_eq!(life.granted(period(2)).await, 70);
    assert_eq!(life.shown().await["plan"], "thesis-pro");

    // Back to thesis-monthly at the period's end: the third period is billed and granted at it.
    let scheduled = life.change_price(&subscription, 3900, true).await;
    assert_eq!(scheduled.status(), 204);
    // Its status event names the new plan at once: shown as scheduled, the paid one in force.
    life.deliver().await;
    let shown = life.shown().await;
    assert_eq!(shown["plan"], "thesis-pro", "{shown}");
    assert_eq!(
        shown["scheduled_change"],
        json!({ "from": "thesis-pro", "to": "thesis-monthly", "at": period(2) }),
        "{shown}"
    );
    assert_eq!(life.granted(period(2)).await, 70);
    life.advance(period(2) + DAY).await;
    assert_eq!(life.granted(period(3)).await, 40);
    let shown = life.shown().await;
    assert_eq!(shown["plan"], "thesis-monthly");
    assert!(shown["scheduled_change"].is_null(), "{shown}");

    // Moved at the period's end to a price no plan has: told before the renewal, which would
    // grant nothing; moved back a day later, nothing to tell.
    let unplanned = life.change_price(&subscription, 5900, true).await;
    assert_eq!(unplanned.status(), 204);
    life.deliver().await;
    let shown = life.shown().await;
    assert_eq!(shown["plan"], "thesis-monthly", "{shown}");
    assert!(shown["scheduled_change"].is_null(), "{shown}");
    assert_eq!(
        shown["unplanned_renewal"],
        json!({ "amount": 5900, "currency": "chf", "at": period(3) }),
        "{shown}"
    );
    life.advance(period(2) + 2 * DAY).await;
    let back = life.change_price(&subscription, 3900, true).await;
    assert_eq!(back.status(), 204);
    life.deliver().await;
    let shown = life.shown().await;
    assert!(shown["unplanned_renewal"].is_null(), "{shown}");
    assert!(shown["scheduled_change"].is_null(), "{shown}");

    // Half of that renewal refunded: half its credits revoked, once.
    let objects: Value = reqwest::get(format!("{}/_sim/objects", shop.sim_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let renewal = objects["invoices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["billing_reason"] == "subscription_cycle" && i["status"] == "paid")
        .max_by_key(|i| i["created"].as_i64())
        .unwrap()
        .clone();
    let intent = renewal["payments"]["data"][0]["payment"]["payment_intent"]
        .as_str()
        .unwrap()
        .to_owned();
    life.stripe(
        "/v1/refunds",
        &[("payment_intent", intent), ("amount", "1950".into())],
    )
    .await;
    life.deliver().await;
    assert_eq!(life.credits().await, 40 + 40 + 30 + 40 - 20);

    // Cancelled at the period's end through the order API: no fourth period.
    let cancelled = shop
        .post_api(
            "/api/subscriptions/abo-life/cancel",
            json!({ "at_period_end": true }),
        )
        .await;
    assert_eq!(cancelled.status(), 200);
    life.advance(period(3) + DAY).await;
    let shown = life.shown().await;
    assert_eq!(shown["status"], "canceled", "{shown}");
    assert_eq!(shown["credits_granted"], 150);
    assert_eq!(life.granted(period(4)).await, 0);
    assert_eq!(life.credits().await, 130);

    // Stripe resends everything: nothing changes.
    life.delivered = 0;
    life.deliver().await;
    assert_eq!(life.credits().await, 130);
    assert_eq!(life.shown().await["credits_granted"], 150);
}

/// A downgrade made through a Stripe subscription schedule (phases naming prices by id):
/// its phase is shown as a scheduled change from the events that make it, once the worker has
/// read its price from Stripe (a failed read retried, nothing written meanwhile), and a late
/// older event of the schedule does not take it back. When the phase begins the renewal is
/// billed and granted at the new plan and nothing is scheduled any more; the release changes
/// nothing; a schedule to a price no plan has is told as such. Resending every event changes
/// nothing.
async fn a_schedule_s_next_phase_is_shown_until_it_begins(backend: Backend) {
    use claimcheck_core::worker::Attempt;
    use claimcheck_sim::stripe_sim::FaultMode;

    const DAY: i64 = 86_400;
    let shop = shop(backend).await;
    let t0 = 1_767_225_600; // 2026-01-01
    let mut life = Life::start(&shop, t0, "abo-sched", "sched@example.ch", "thesis-pro").await;
    let subscription = life.subscription.clone();
    let period = |n: i64| t0 + n * 30 * DAY;
    assert_eq!(life.granted(period(1)).await, 100);
    let worker = Worker::new(
        shop.app.store.clone(),
        "schedule-worker",
        WorkerConfig {
            plans: PLANS.parse::<Plans>().unwrap(),
            base_backoff: std::time::Duration::from_millis(1),
            stripe: Some(shop.stripe()),
            ..WorkerConfig::default()
        },
    );

    // The schedule: made (one phase), then given thesis-monthly from the period's end. Its
    // newer event is delivered first, and Stripe fails the first read of the price.
    let price = "/v1/prices/price_sim_chf_3900";
    shop.arm(price, FaultMode::Error500, 1, 0).await;
    let made = life
        .sim(
            &format!("/_sim/subscriptions/{subscription}/schedule"),
            json!({ "unit_amount": 3900 }),
        )
        .await;
    assert_eq!(made.status(), 200);
    let schedule: Value = made.json().await.unwrap();
    assert_eq!(
        schedule["phases"][1]["items"][0]["price"],
        "price_sim_chf_3900"
    );
    let events: Vec<Value> = reqwest::get(format!("{}/_sim/events", shop.sim_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (created, updated) = (&events[events.len() - 2], &events[events.len() - 1]);
    assert_eq!(created["type"], "subscription_schedule.created");
    assert_eq!(updated["type"], "subscription_schedule.updated");
    life.delivered = events.len();
    let app = &shop.app;
    let deliver = move |event: &Value| {
        let body = serde_json::to_vec(event).unwrap();
        async move { assert_eq!(app.deliver(&body).await.status(), 200) }
    };
    deliver(updated).await;
    let attempts = worker.run_once().await.unwrap();
    match &attempts[..] {
        [Attempt::Failed { error, gave_up, .. }] => {
            assert!(error.contains("by id only"), "{error}");
            assert!(error.contains("price_sim_chf_3900"), "{error}");
            assert!(!gave_up);
        }
        other => panic!("{other:?}"),
    }
    let shown = life.shown().await;
    assert!(shown["scheduled_change"].is_null(), "{shown}");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let attempts = worker.run_once().await.unwrap();
    assert!(
        matches!(&attempts[..], [Attempt::Processed { .. }]),
        "{attempts:?}"
    );
    let waiting = json!({ "from": "thesis-pro", "to": "thesis-monthly", "at": period(1) });
    let shown = life.shown().await;
    assert_eq!(shown["scheduled_change"], waiting, "{shown}");
    assert_eq!(shown["plan"], "thesis-pro", "{shown}");
    // The late older event (one phase, nothing next) does not take it back.
    deliver(created).await;
    drain(&shop.app).await;
    assert_eq!(life.shown().await["scheduled_change"], waiting);
    // Listed under both plans.
    let listed = shop
        .app
        .cli(&[
            "subscriptions",
            "list",
            "--plan",
            "thesis-monthly",
            "--json",
        ])
        .await;
    assert!(listed.1.contains(&subscription), "{listed:?}");

    // The phase begins at the period's end: the renewal is billed and granted at
    // thesis-monthly, nothing is scheduled any more.
    life.advance(period(1) + DAY).await;
    assert_eq!(life.granted(period(2)).await, 40);
    let shown = life.shown().await;
    assert_eq!(shown["plan"], "thesis-monthly", "{shown}");
    assert!(shown["scheduled_change"].is_null(), "{shown}");
    // Its end releases the subscription, which renews at thesis-monthly.
    life.advance(period(2) + DAY).await;
    assert_eq!(life.granted(period(3)).await, 40);
    assert_eq!(
        shop.app
            .db
            .count(&format!(
                "SELECT COUNT(*) FROM subscriptions WHERE subscription_id = '{subscription}' \
                 AND scheduled_at IS NULL AND schedule_as_of IS NOT NULL"
            ))
            .await,
        1
    );
    let shown = life.shown().await;
    assert!(shown["scheduled_change"].is_null(), "{shown}");
    assert!(shown["unplanned_renewal"].is_null(), "{shown}");

    // A schedule to a price no plan has: its renewal is told to grant nothing, from the
    // phase's start.
    let made = life
        .sim(
            &format!("/_sim/subscriptions/{subscription}/schedule"),
            json!({ "unit_amount": 5900 }),
        )
        .await;
    assert_eq!(made.status(), 200);
    life.deliver().await;
    let shown = life.shown().await;
    assert!(shown["scheduled_change"].is_null(), "{shown}");
    assert_eq!(
        shown["unplanned_renewal"],
        json!({ "amount": 5900, "currency": "chf", "at": period(3) }),
        "{shown}"
    );

    // Stripe resends everything: nothing changes.
    let credits = life.credits().await;
    assert_eq!(credits, 100 + 40 + 40);
    life.delivered = 0;
    life.deliver().await;
    assert_eq!(life.credits().await, credits);
    assert_eq!(
        life.shown().await["unplanned_renewal"],
        json!({ "amount": 5900, "currency": "chf", "at": period(3) })
    );
}

/// The customer paid the subscription's session at the last second and no event of it has
/// been processed: past its expiry by our clock, asking again gets 409 checkout_completed,
/// never a second session (nor, once expired, a paid session expired at Stripe).
async fn a_subscription_paid_before_its_events_came_gets_no_second_session(backend: Backend) {
    let shop = shop(backend).await;
    let ask = json!({ "plan": "thesis-monthly", "customer_email": "late@example.ch",
                      "subscription_ref": "abo-late" });
    let first: Value = shop
        .post_api("/api/subscriptions", ask.clone())
        .await
        .json()
        .await
        .unwrap();
    let session = first["checkout_session_id"].as_str().unwrap().to_owned();
    let paid = reqwest::Client::new()
        .post(format!(
            "{}/_sim/checkout/sessions/{session}/pay",
            shop.sim_url()
        ))
        .json(&json!({ "outcome": "card" }))
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 204);
    shop.app
        .db
        .execute(&format!(
            "UPDATE subscription_checkouts SET checkout_expires_at = {} \
             WHERE subscription_ref = 'abo-late'",
            claimcheck_core::now_ms() - 3_600_000
        ))
        .await;
    let again = shop.post_api("/api/subscriptions", ask).await;
    assert_eq!(again.status(), 409);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["error"], "checkout_completed", "{again}");
    assert!(again["message"].as_str().unwrap().contains(&session));
    assert_eq!(sessions_logged(&shop).await.len(), 1);
    // A paid session cannot be expired at Stripe either.
    let expire = reqwest::Client::new()
        .post(format!(
            "{}/v1/checkout/sessions/{session}/expire",
            shop.sim_url()
        ))
        .bearer_auth("sk_test_shop")
        .send()
        .await
        .unwrap();
    assert_eq!(expire.status(), 400);
}
