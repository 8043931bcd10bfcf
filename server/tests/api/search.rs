//! The header search: `GET /search/go` opens the one match (order, customer, event) or lands
//! on the grouped results page; the results server function groups what it found.

use claimcheck_core::auth::Role;
use claimcheck_core::worker::{Worker, WorkerConfig};
use serde_json::Value;

use crate::helpers::{TestApp, fixture, on_both_backends, search_go as go};

on_both_backends!(
    one_match_opens_straight_away,
    several_matches_or_none_land_on_the_results_page,
    a_charge_refunded_in_parts_and_its_dispute_open_their_order,
    search_is_for_signed_in_operators_and_bounded,
    a_delivery_recorded_without_a_claim_is_found_by_its_id_and_type,
    a_claim_written_without_its_terms_is_found_once_indexed,
);

/// The paid session, its twin and a refund of it, delivered and fulfilled.
async fn paid_and_refunded(app: &TestApp) {
    for name in [
        "checkout.session.completed.paid",
        "checkout.session.completed.paid.twin",
        "charge.refunded",
    ] {
        assert_eq!(app.deliver(&fixture(name)).await.status(), 200, "{name}");
    }
    let worker = Worker::new(app.store.clone(), "search-test", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
}

async fn one_match_opens_straight_away(app: TestApp) {
    paid_and_refunded(&app).await;
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let order = "/orders/ord_pub_0001";
    // The order by its own id, its session, its payment intent, and the charge refunded
    // (whose events name the charge, not the order).
    assert_eq!(go(&app, &viewer, "ord_pub_0001").await, order);
    assert_eq!(
        go(
            &app,
            &viewer,
            "cs_test_pub0001a1YS1URlnyQCN5fUUduORoQ7Pw41PJ"
        )
        .await,
        order
    );
    assert_eq!(
        go(&app, &viewer, " pi_pub00013Mxc9vLkdIwHu7ix ").await,
        order
    );
    assert_eq!(go(&app, &viewer, "ch_pub00013Mxc9vLk").await, order);
    // An event by its id, even though it belongs to the order.
    assert_eq!(
        go(&app, &viewer, "evt_pub0001refund").await,
        "/events/evt_pub0001refund"
    );
    // The customer by e-mail (any case) or Stripe customer id.
    assert_eq!(
        go(&app, &viewer, "Student1@Example.ch").await,
        "/customers/student1@example.ch"
    );
    assert_eq!(
        go(&app, &viewer, "cus_pub0001Q4vWm8").await,
        "/customers/cus_pub0001Q4vWm8"
    );
    // Where the jump lands renders.
    let page = viewer.get(app.url(order)).send().await.unwrap();
    assert_eq!(page.status(), 200);
}

/// Several events about one charge or one dispute still name one order: the search opens it.
async fn a_charge_refunded_in_parts_and_its_dispute_open_their_order(app: TestApp) {
    let paid = fixture("checkout.session.completed.paid");
    assert_eq!(app.deliver(&paid).await.status(), 200);
    let refund: Value = serde_json::from_slice(&fixture("charge.refunded")).unwrap();
    let charge = refund["data"]["object"]["id"].as_str().unwrap().to_owned();
    let intent = refund["data"]["object"]["payment_intent"]
        .as_str()
        .unwrap()
        .to_owned();
    for (i, refunded) in [1000, 2500, 3000].into_iter().enumerate() {
        let mut part = refund.clone();
        part["id"] = format!("evt_part_{i}").into();
        part["data"]["object"]["amount_refunded"] = refunded.into();
        part["data"]["object"]["refunded"] = false.into();
        let body = serde_json::to_vec(&part).unwrap();
        assert_eq!(app.deliver(&body).await.status(), 200, "part {i}");
    }
    for (id, kind, status) in [
        ("evt_dp_open", "charge.dispute.created", "needs_response"),
        ("evt_dp_won", "charge.dispute.closed", "won"),
    ] {
        let event = serde_json::json!({
            "id": id, "object": "event", "type": kind, "created": 1_764_400_000,
            "livemode": false,
            "data": {"object": {"id": "dp_pub0001", "object": "dispute", "amount": 1900,
                                "currency": "chf", "charge": charge, "payment_intent": intent,
                                "reason": "fraudulent", "status": status}}
        });
        let body = serde_json::to_vec(&event).unwrap();
        assert_eq!(app.deliver(&body).await.status(), 200, "{kind}");
    }
    let worker = Worker::new(app.store.clone(), "search-test", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'")
            .await,
        6,
        "the payment, three refunds and the dispute's two events"
    );

    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let order = "/orders/ord_pub_0001";
    assert_eq!(go(&app, &viewer, &charge).await, order, "three refunds");
    assert_eq!(
        go(&app, &viewer, "dp_pub0001").await,
        order,
        "opened and won"
    );
    assert_eq!(
        go(&app, &viewer, "evt_part_1").await,
        "/events/evt_part_1",
        "an event id is the event"
    );
}

async fn several_matches_or_none_land_on_the_results_page(app: TestApp) {
    // Two refund.failed events for a payment intent no order knows: two events, no order.
    for (id, refund) in [("evt_rf_1", "re_lost_1"), ("evt_rf_2", "re_lost_2")] {
        let event = serde_json::json!({
            "id": id, "object": "event", "type": "refund.failed", "created": 1_764_400_000,
            "livemode": false,
            "data": {"object": {"id": refund, "object": "refund", "amount": 100,
                                "payment_intent": "pi_nobody", "status": "failed"}}
        });
        assert_eq!(
            app.deliver(event.to_string().as_bytes()).await.status(),
            200
        );
    }
    let support = app.sign_in_as("sam", Role::Support).await;
    assert_eq!(
        go(&app, &support, "nothing_like_it").await,
        "/search?q=nothing_like_it"
    );
    assert_eq!(go(&app, &support, "").await, "/search");
    // One refund id: its one event.
    assert_eq!(go(&app, &support, "re_lost_1").await, "/events/evt_rf_1");

    let found: Value = app
        .call(&support, "search", &[("term", "pi_nobody")])
        .await
        .json()
        .await
        .unwrap();
    // No order has that payment intent, but both refunds' payloads name it.
    assert!(found["customer"].is_null(), "{found}");
    assert_eq!(found["orders"].as_array().unwrap().len(), 0, "{found}");
    assert_eq!(found["events"].as_array().unwrap().len(), 2, "{found}");

    // Delivered sessions for two orders of one customer id, with no e-mail in common.
    for (order, email) in [("ord_two_a", "a@example.ch"), ("ord_two_b", "b@example.ch")] {
        let event = serde_json::json!({
            "id": format!("evt_{order}"), "object": "event", "type": "checkout.session.completed",
            "created": 1_764_400_000, "livemode": false,
            "data": {"object": {"id": format!("cs_{order}"), "object": "checkout.session",
                "payment_status": "paid", "amount_total": 4900, "currency": "chf",
                "payment_intent": format!("pi_{order}"), "customer": "cus_twice",
                "customer_details": {"email": email},
                "metadata": {"order_id": order, "credits": "40"}}}
        });
        assert_eq!(
            app.deliver(event.to_string().as_bytes()).await.status(),
            200
        );
    }
    let worker = Worker::new(app.store.clone(), "search-test", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
    let found: Value = app
        .call(&support, "search", &[("term", "cus_twice")])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(found["customer"]["orders"], 2, "{found}");
    assert_eq!(found["customer"]["balance"], 80, "{found}");
    assert_eq!(found["orders"].as_array().unwrap().len(), 2, "{found}");
    // The results page lists both kinds for the server-rendered page.
    let page = support
        .get(app.url("/search?q=ord_two_a"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains(r#"data-order="ord_two_a""#), "{html}");
}

async fn search_is_for_signed_in_operators_and_bounded(app: TestApp) {
    let anonymous = TestApp::browser();
    let response = anonymous
        .get(app.url("/search/go?q=ord_pub_0001"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303);
    let location = response.headers()["location"].to_str().unwrap();
    assert!(location.starts_with("/login?next="), "{location}");
    let refused = app.call(&anonymous, "search", &[("term", "x")]).await;
    assert_eq!(refused.status(), 401);

    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let long = "x".repeat(321);
    let response = viewer
        .get(app.url("/search/go"))
        .query(&[("q", long.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.text().await.unwrap().contains("at most 320"));
}

async fn a_delivery_recorded_without_a_claim_is_found_by_its_id_and_type(app: TestApp) {
    // A type this version does not act on: recorded, answered 200, no claim.
    assert_eq!(
        app.deliver(&fixture("customer.discount.created"))
            .await
            .status(),
        200
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        0
    );
    let support = app.sign_in_as("sam", Role::Support).await;
    for term in ["evt_pub0004disc", "customer.discount.created"] {
        assert_eq!(
            go(&app, &support, term).await,
            format!("/search?q={}", app::links::encode(term)),
            "{term}"
        );
        let found: Value = app
            .call(&support, "search", &[("term", term)])
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(
            found["deliveries"][0]["event_id"], "evt_pub0004disc",
            "{found}"
        );
        assert_eq!(found["deliveries"][0]["outcome"], "ignored", "{found}");
    }
    let html = support
        .get(app.url("/search?q=evt_pub0004disc"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("data-testid=\"search-unclaimed\""), "{html}");
    // A claimed event's own deliveries are its claim's: not listed again.
    assert_eq!(
        app.deliver(&fixture("checkout.session.completed.paid"))
            .await
            .status(),
        200
    );
    let found: Value = app
        .call(
            &support,
            "search",
            &[("term", "checkout.session.completed")],
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(found["deliveries"].as_array().unwrap().len(), 0, "{found}");
}

async fn a_claim_written_without_its_terms_is_found_once_indexed(app: TestApp) {
    // A version from before the search terms (or one during a rolling deploy that does not
    // write them) claimed a refund.failed: its payment intent is only in the payload.
    let event = serde_json::json!({
        "id": "evt_old_1", "object": "event", "type": "refund.failed", "created": 1_764_400_000,
        "livemode": false,
        "data": {"object": {"id": "re_old_1", "object": "refund", "amount": 100,
                            "payment_intent": "pi_old_1", "status": "failed"}}
    });
    app.db
        .execute(&format!(
            "INSERT INTO processed_stripe_events (event_id, event_type, object_id, action_key, \
                 status, attempts, next_attempt_at, stripe_created, livemode, received_at, \
                 payload, source, terms_indexed) \
             VALUES ('evt_old_1', 'refund.failed', 're_old_1', '', 'processing', 0, 0, \
                     1764400000, FALSE, 0, '{}', 'webhook', FALSE)",
            event.to_string().replace('\'', "''")
        ))
        .await;
    // The upkeep's backfill indexes it, once (the server's own pass at its start may have
    // come first).
    assert!(app.store.claims().index_unindexed(200).await.unwrap() <= 1);
    assert_eq!(app.store.claims().index_unindexed(200).await.unwrap(), 0);
    let support = app.sign_in_as("sam", Role::Support).await;
    assert_eq!(go(&app, &support, "pi_old_1").await, "/events/evt_old_1");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE NOT terms_indexed")
            .await,
        0
    );
}
