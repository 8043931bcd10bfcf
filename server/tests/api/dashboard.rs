//! The dashboard's pages and server functions.

use claimcheck_core::auth::Role;
use serde_json::Value;

use crate::helpers::{TestApp, on_both_backends};

on_both_backends!(
    overview_page_renders_on_the_server,
    overview_counts_claims_by_state,
    unknown_page_is_a_404,
);

/// One claim in each state: pending (no lease), running (live lease), stale (expired lease),
/// processed and failed.
const ONE_CLAIM_PER_STATE: &str = "
    INSERT INTO processed_stripe_events
        (event_id, event_type, object_id, status, lease_owner, lease_expires_at,
         next_attempt_at, stripe_created, livemode, received_at, payload)
    VALUES
        ('evt_p', 'checkout.session.completed', 'cs_p', 'processing', NULL, NULL, 0, 0, FALSE, 0, '{}'),
        ('evt_r', 'checkout.session.completed', 'cs_r', 'processing', 'w1', 99999999999999, 0, 0, FALSE, 0, '{}'),
        ('evt_s1', 'checkout.session.completed', 'cs_s1', 'processing', 'w1', 1, 0, 0, FALSE, 0, '{}'),
        ('evt_s2', 'charge.refunded', 'ch_s2', 'processing', 'w2', 2, 0, 0, FALSE, 0, '{}'),
        ('evt_d', 'checkout.session.completed', 'cs_d', 'processed', NULL, NULL, 0, 0, FALSE, 0, '{}'),
        ('evt_f', 'checkout.session.completed', 'cs_f', 'failed', NULL, NULL, 0, 0, FALSE, 0, '{}');
";

async fn overview_page_renders_on_the_server(app: TestApp) {
    app.db.execute(ONE_CLAIM_PER_STATE).await;
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let response = viewer.get(app.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let html = response.text().await.unwrap();
    assert!(html.contains("<h1>Overview</h1>"), "{html}");
    // The browser bundle that hydrates the page is referenced.
    assert!(html.contains("/pkg/claimcheck.js"), "{html}");
    // Rendered before any JavaScript ran.
    assert!(html.contains(r#"data-hydrated="false""#), "{html}");
    assert!(html.contains(r#"data-state="stale""#), "{html}");
}

async fn overview_counts_claims_by_state(app: TestApp) {
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let empty: Value = app
        .call(&viewer, "overview", &[])
        .await
        .json()
        .await
        .unwrap();
    assert!(
        empty["claims"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["count"] == 0),
        "{empty}"
    );

    app.db.execute(ONE_CLAIM_PER_STATE).await;
    let response = app.call(&viewer, "overview", &[]).await;
    assert_eq!(response.status(), 200);
    let overview: Value = response.json().await.unwrap();
    let count = |state: &str| {
        overview["claims"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["state"] == state)
            .unwrap_or_else(|| panic!("no {state} in {overview}"))["count"]
            .as_i64()
            .unwrap()
    };
    assert_eq!(count("pending"), 1);
    assert_eq!(count("running"), 1);
    assert_eq!(count("stale"), 2);
    assert_eq!(count("processed"), 1);
    assert_eq!(count("failed"), 1);
    assert!(["sqlite", "postgres"].contains(&overview["backend"].as_str().unwrap()));
}

async fn unknown_page_is_a_404(app: TestApp) {
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let response = viewer.get(app.url("/no/such/page")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert!(response.text().await.unwrap().contains("Page not found"));
}
