//! The dashboard's pages and server functions.

use claimcheck_core::auth::Role;
use serde_json::Value;

use crate::helpers::{Backend, TestApp, fixture, on_both_backends, spawn_app};

on_both_backends!(
    overview_page_renders_on_the_server,
    overview_counts_claims_by_state,
    overview_draws_the_last_30_days,
    unknown_page_is_a_404,
);

/// One claim in each state: pending (no lease), running (live lease), stale (expired lease),
/// processed and failed.
const ONE_CLAIM_PER_STATE: &str = "
    INSERT INTO processed_stripe_events
        (event_id, event_type, object_id, action_key, status, lease_owner, lease_expires_at,
         next_attempt_at, stripe_created, livemode, received_at, payload)
    VALUES
        ('evt_p', 'checkout.session.completed', 'cs_p', 'p', 'processing', NULL, NULL, 0, 0, FALSE, 0, '{}'),
        ('evt_r', 'checkout.session.completed', 'cs_r', 'r', 'processing', 'w1', 99999999999999, 0, 0, FALSE, 0, '{}'),
        ('evt_s1', 'checkout.session.completed', 'cs_s1', 's1', 'processing', 'w1', 1, 0, 0, FALSE, 0, '{}'),
        ('evt_s2', 'charge.refunded', 'ch_s2', 's2', 'processing', 'w2', 2, 0, 0, FALSE, 0, '{}'),
        ('evt_d', 'checkout.session.completed', 'cs_d', 'd', 'processed', NULL, NULL, 0, 0, FALSE, 0, '{}'),
        ('evt_f', 'checkout.session.completed', 'cs_f', 'f', 'failed', NULL, NULL, 0, 0, FALSE, 0, '{}');
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
    // (The translated heading is followed by a hydration marker.)
    assert!(html.contains("<h1>Overview"), "{html}");
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
    assert_eq!(empty["ack_p50_ms"], Value::Null, "nothing answered yet");
    assert_eq!(empty["credits_today"], 0);

    // Deliveries this hour (one claimed, one duplicate) and a fulfilled order show up.
    for _ in 0..2 {
        let body = fixture("checkout.session.completed.paid");
        assert_eq!(app.deliver(&body).await.status(), 200);
    }
    let worker = claimcheck_core::worker::Worker::new(
        app.store.clone(),
        "w",
        claimcheck_core::worker::WorkerConfig::default(),
    );
    // Only the new claim is due (the seeded ones have no payload to fulfil): one pass.
    let _ = worker.run_once().await.unwrap();
    let overview: Value = app
        .call(&viewer, "overview", &[])
        .await
        .json()
        .await
        .unwrap();
    let hours = overview["hours"].as_array().unwrap();
    assert_eq!(hours.len(), 24);
    let now = &hours[23];
    assert_eq!(now["claimed"], 1, "{now}");
    assert_eq!(now["duplicate"], 1, "{now}");
    assert_eq!(overview["credits_today"], 40);
    assert_eq!(overview["acked"], 2);
    assert!(overview["ack_p99_ms"].as_f64().unwrap() >= overview["ack_p50_ms"].as_f64().unwrap());
}

/// Credits, money and backlog per UTC day: a payment two days ago, refunded today in two
/// steps, and the backlog sampled on two days (the first sample of an hour stands).
async fn overview_draws_the_last_30_days(app: TestApp) {
    const DAY: i64 = 86_400_000;
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let worker = claimcheck_core::worker::Worker::new(
        app.store.clone(),
        "w",
        claimcheck_core::worker::WorkerConfig::default(),
    );
    assert_eq!(
        app.deliver(&fixture("checkout.session.completed.paid"))
            .await
            .status(),
        200
    );
    let _ = worker.run_once().await.unwrap();
    app.db
        .execute(&format!(
            "UPDATE credit_ledger SET created_at = created_at - {} WHERE kind = 'unlock'",
            2 * DAY
        ))
        .await;
    // Half refunded, then the rest: two steps of CHF 24.50 today.
    let mut half: Value = serde_json::from_slice(&fixture("charge.refunded")).unwrap();
    half["id"] = "evt_days_half".into();
    half["data"]["object"]["amount_refunded"] = 2450.into();
    half["data"]["object"]["refunded"] = false.into();
    for body in [
        serde_json::to_vec(&half).unwrap(),
        fixture("charge.refunded"),
    ] {
        assert_eq!(app.deliver(&body).await.status(), 200);
        let _ = worker.run_once().await.unwrap();
    }
    let now = claimcheck_core::now_ms();
    let hour = |ms: i64| ms - ms.rem_euclid(3_600_000);
    app.db
        .execute(&format!(
            "INSERT INTO backlog_samples (hour, failed, stale) VALUES ({}, 3, 1)",
            hour(now - DAY)
        ))
        .await;
    // (Today's hour is housekeeping's, sampled as the server started.)
    let two_days_ago = now - 2 * DAY;
    app.store
        .alerts()
        .record_backlog(two_days_ago, 5, 2)
        .await
        .unwrap();
    app.store
        .alerts()
        .record_backlog(two_days_ago, 9, 9)
        .await
        .unwrap();

    let overview: Value = app
        .call(&viewer, "overview", &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(overview["currency"], "CHF");
    let days = overview["days"].as_array().unwrap();
    assert_eq!(days.len(), 30);
    let day = |i: usize, field: &str| days[i][field].clone();
    assert_eq!(day(27, "credits"), serde_json::json!([40, 0]), "{overview}");
    assert_eq!(day(27, "money"), serde_json::json!([4900, 0, 0]));
    assert!(day(27, "money_text")[0].as_str().unwrap().contains("49"));
    assert_eq!(day(29, "credits"), serde_json::json!([0, 40]), "{overview}");
    assert_eq!(
        day(29, "money"),
        serde_json::json!([0, 4900, 0]),
        "{overview}"
    );
    assert_eq!(day(28, "backlog"), serde_json::json!([3, 1]));
    assert_eq!(
        day(27, "backlog"),
        serde_json::json!([5, 2]),
        "the first sample of the hour"
    );
    assert_eq!(day(26, "backlog"), Value::Null);
    let unlocked: i64 = days.iter().map(|d| d["credits"][0].as_i64().unwrap()).sum();
    assert_eq!(unlocked, 40);
}

async fn unknown_page_is_a_404(app: TestApp) {
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let response = viewer.get(app.url("/no/such/page")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert!(response.text().await.unwrap().contains("Page not found"));
}

on_both_backends!(
    events_are_filtered_searched_and_paged,
    events_page_links_to_older_claims_keeping_its_filters,
);

/// A paid Checkout Session's event, its ids (`evt_`, `cs_`, `pi_`, `ord_`) named
/// `{prefix}_{i:03}`, for one credit.
fn paid_session(prefix: &str, i: usize, email: &str) -> Vec<u8> {
    let id = |kind: &str| format!("{kind}_{prefix}_{i:03}");
    let event = serde_json::json!({
        "id": id("evt"),
        "object": "event",
        "type": "checkout.session.completed",
        "created": 1,
        "livemode": false,
        "data": { "object": {
            "id": id("cs"),
            "object": "checkout.session",
            "payment_status": "paid",
            "payment_intent": id("pi"),
            "customer_email": email,
            "metadata": { "order_id": id("ord"), "credits": "1" },
        }},
    });
    serde_json::to_vec(&event).unwrap()
}

async fn events_are_filtered_searched_and_paged(app: TestApp) {
    use claimcheck_core::worker::{Worker, WorkerConfig};
    use claimcheck_core::{ClaimState, EventFilter, now_ms};

    for i in 0..60 {
        let email = if i % 3 == 0 {
            "three@example.ch"
        } else {
            "other@example.ch"
        };
        let body = paid_session("list", i, email);
        assert_eq!(app.deliver(&body).await.status(), 200);
    }
    let now = now_ms();
    let all = EventFilter::default();
    let first = app
        .store
        .claims()
        .list_events(&all, None, now, 50)
        .await
        .unwrap();
    assert_eq!(first.len(), 50);
    assert!(
        first
            .windows(2)
            .all(|w| (w[0].received_at, &w[0].event_id) > (w[1].received_at, &w[1].event_id)),
        "newest first"
    );
    let last = first.last().unwrap();
    let after = Some((last.received_at, last.event_id.clone()));
    let second = app
        .store
        .claims()
        .list_events(&all, after, now, 50)
        .await
        .unwrap();
    assert_eq!(second.len(), 10);
    assert!(
        second
            .iter()
            .all(|c| !first.iter().any(|f| f.event_id == c.event_id))
    );

    let pending = EventFilter {
        state: Some(ClaimState::Pending),
        ..EventFilter::default()
    };
    assert_eq!(
        app.store
            .claims()
            .list_events(&pending, None, now, 100)
            .await
            .unwrap()
            .len(),
        60
    );
    let worker = Worker::new(app.store.clone(), "w", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
    let now = now_ms();
    assert!(
        app.store
            .claims()
            .list_events(&pending, None, now, 100)
            .await
            .unwrap()
            .is_empty()
    );
    let processed = EventFilter {
        state: Some(ClaimState::Processed),
        event_type: Some("checkout.session.completed".into()),
        ..EventFilter::default()
    };
    assert_eq!(
        app.store
            .claims()
            .list_events(&processed, None, now, 100)
            .await
            .unwrap()
            .len(),
        60
    );
    let refunds = EventFilter {
        event_type: Some("charge.refunded".into()),
        ..EventFilter::default()
    };
    assert!(
        app.store
            .claims()
            .list_events(&refunds, None, now, 100)
            .await
            .unwrap()
            .is_empty()
    );
    let future = EventFilter {
        from: Some(now + 60_000),
        ..EventFilter::default()
    };
    assert!(
        app.store
            .claims()
            .list_events(&future, None, now, 100)
            .await
            .unwrap()
            .is_empty()
    );

    let search = |term: &str| EventFilter {
        search: Some(term.to_owned()),
        ..EventFilter::default()
    };
    for term in ["evt_list_007", "cs_list_007", "ord_list_007", "pi_list_007"] {
        let found = app
            .store
            .claims()
            .list_events(&search(term), None, now, 100)
            .await
            .unwrap();
        assert_eq!(found.len(), 1, "{term}");
        assert_eq!(found[0].event_id, "evt_list_007", "{term}");
    }
    let by_email = app
        .store
        .claims()
        .list_events(&search("THREE@example.ch"), None, now, 100)
        .await
        .unwrap();
    assert_eq!(by_email.len(), 20);
    let orders = app
        .store
        .orders()
        .find("three@example.ch", 100)
        .await
        .unwrap();
    assert_eq!(orders.len(), 20);
    assert_eq!(
        app.store.orders().find("pi_list_001", 100).await.unwrap()[0].order_id,
        "ord_list_001"
    );
}

/// The events page shows 50 claims and links to the older ones with the same filters; the
/// last page has no such link.
async fn events_page_links_to_older_claims_keeping_its_filters(app: TestApp) {
    for i in 0..55 {
        let body = paid_session("page", i, "pages@example.ch");
        assert_eq!(app.deliver(&body).await.status(), 200);
    }
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let page = |path: String| {
        let viewer = viewer.clone();
        let url = app.url(&path);
        async move {
            let response = viewer.get(url).send().await.unwrap();
            assert_eq!(response.status(), 200, "{path}");
            let html = response.text().await.unwrap();
            let rows = html.matches(r#"<tr data-event="evt_page_"#).count();
            (rows, older_link(&html))
        }
    };

    let (rows, older) = page("/events?status=pending&type=checkout.session.completed".into()).await;
    assert_eq!(rows, 50);
    let older = older.expect("a link to the older claims");
    assert!(
        older.starts_with("/events?status=pending&type=checkout.session.completed&after="),
        "{older}"
    );
    let (rows, older) = page(older).await;
    assert_eq!(rows, 5);
    assert_eq!(older, None);

    // A filter that matches nothing: no rows, no link.
    let (rows, older) = page("/events?type=charge.refunded".into()).await;
    assert_eq!((rows, older), (0, None));
}

/// The target of the page's "older" link (`class="next"`), unescaped.
fn older_link(html: &str) -> Option<String> {
    html.split("<a ")
        .map(|tag| tag.split('>').next().unwrap_or_default())
        .find(|tag| tag.contains(r#"class="next""#))
        .map(|tag| {
            let href = tag.split(r#"href=""#).nth(1).expect("an href");
            href[..href.find('"').unwrap()].replace("&amp;", "&")
        })
}

/// Pages rendered at the same moment each come out whole, titled: a page's reactive values
/// live in its own request's arena, and its `<title>` is put together after the body, when the
/// request may run on another thread or after another request's rendering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_rendered_at_once_each_come_out_whole_and_titled() {
    let app = spawn_app(Backend::Sqlite).await;
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    for _ in 0..16 {
        let pages = (0..24).map(|i| {
            let (path, status, title) = if i % 2 == 0 {
                ("/", 200, "<title>Overview · Claimcheck</title>")
            } else {
                (
                    "/no/such/page",
                    404,
                    "<title>Not found · Claimcheck</title>",
                )
            };
            let request = viewer.get(app.url(path)).send();
            async move {
                let response = request
                    .await
                    .unwrap_or_else(|error| panic!("{path}: {error:?}"));
                assert_eq!(response.status(), status, "{path}");
                let html = response.text().await.unwrap();
                assert!(html.contains(title), "{path}: {html}");
            }
        });
        futures::future::join_all(pages).await;
    }
}
