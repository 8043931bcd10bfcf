//! Who may use the dashboard: every page, server function and action checks the session and
//! the role on the server; sign-in, throttling, cookies, sign-out; cross-origin refusals; and
//! the webhook and order API outside all of it.

use claimcheck_core::auth::Role;
use claimcheck_core::worker::{Worker, WorkerConfig};
use claimcheck_core::{EventId, now_ms};
use serde_json::Value;

use crate::helpers::{PASSWORD, TestApp, fixture, on_both_backends, query_value, spawn_app_with};

on_both_backends!(
    every_server_function_and_action_refuses_anonymous_callers,
    viewers_read_but_cannot_mutate,
    sign_in_answers_the_same_for_unknown_users_and_wrong_passwords,
    sign_out_and_disabling_end_the_session,
    cross_origin_posts_are_refused_but_the_webhook_is_not,
    support_redrives_a_stale_claim_once_even_when_two_click,
    admins_manage_operators_and_everything_is_audited,
);

/// Every page of the dashboard (GET), with a path that exists.
const PAGES: [&str; 19] = [
    "/claims/redrive",
    "/claims/redrive?status=failed&preview=1",
    "/claims/redrive/bulk_nope",
    "/",
    "/claims",
    "/events",
    "/events/evt_pub0001paid",
    "/events/evt_pub0001paid/redrive",
    "/orders",
    "/orders/ord_pub_0001",
    "/orders/ord_pub_0001/refund",
    "/audit",
    "/operators",
    "/claims?status=failed",
    "/search?q=ord_pub_0001",
    "/requests",
    "/requests?status=succeeded",
    "/subscriptions?status=past_due",
    "/subscriptions/sub_1Qfix0001Plan",
];

/// Every mutating action, with a valid form.
const ACTIONS: [(&str, &[(&str, &str)]); 11] = [
    (
        "/dashboard/actions/redrive",
        &[("event_id", "evt_pub0001paid"), ("reason", "forged")],
    ),
    (
        "/dashboard/actions/bulk-redrive",
        &[("status", "failed"), ("reason", "forged"), ("confirm", "1")],
    ),
    (
        "/dashboard/actions/bulk-redrive/cancel",
        &[("batch_id", "bulk_nope"), ("confirm", "yes")],
    ),
    (
        "/dashboard/actions/bulk-redrive/resume",
        &[("batch_id", "bulk_nope"), ("reason", "forged")],
    ),
    (
        "/dashboard/actions/refund",
        &[("order_id", "ord_pub_0001"), ("reason", "forged")],
    ),
    (
        "/dashboard/actions/operators",
        &[
            ("username", "mallory"),
            ("role", "admin"),
            ("password", "a long enough password"),
        ],
    ),
    (
        "/dashboard/actions/operators/access",
        &[("username", "vera"), ("action", "disable")],
    ),
    ("/dashboard/actions/reconcile", &[("reason", "forged")]),
    ("/dashboard/actions/reconcile/preview", &[]),
    (
        "/dashboard/actions/claims/resolve",
        &[("event_id", "evt_pub0001paid"), ("reason", "forged")],
    ),
    (
        "/dashboard/actions/claims/reopen",
        &[("event_id", "evt_pub0001paid"), ("reason", "forged")],
    ),
];

/// The arguments each server function needs, so that a signed-in call would succeed.
fn arguments(path: &str) -> Vec<(&'static str, &'static str)> {
    match path.rsplit('/').next().unwrap_or_default() {
        "events" => vec![
            ("status", ""),
            ("event_type", ""),
            ("search", ""),
            ("from", ""),
            ("to", ""),
            ("after", ""),
            ("source", ""),
            ("run", ""),
        ],
        "event" => vec![("event_id", "evt_pub0001paid")],
        "bulk_preview" => vec![
            ("status", "failed"),
            ("event_type", ""),
            ("from", ""),
            ("to", ""),
            ("older_than", "10m"),
            ("error_contains", ""),
            ("search", ""),
            ("event_ids", ""),
        ],
        "bulk_batch" | "bulk_batch_progress" => vec![("batch_id", "bulk_nope")],
        "orders" | "search" => vec![("term", "ord_pub_0001")],
        "order" | "refund_draft" => vec![("order_id", "ord_pub_0001")],
        "customer" => vec![("who", "student1@example.ch")],
        "orders_list" => vec![
            ("status", ""),
            ("package", ""),
            ("from", ""),
            ("to", ""),
            ("after", ""),
        ],
        "requests" => vec![("status", "indeterminate")],
        "subscriptions" => vec![("status", ""), ("plan", ""), ("past_due", "false")],
        "subscription" => vec![("id", "sub_1Qfix0001Plan")],
        _ => vec![],
    }
}

/// Every registered server function, as the framework lists them.
fn server_functions() -> Vec<String> {
    let mut paths: Vec<String> = leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path.to_owned())
        .collect();
    paths.sort();
    paths
}

async fn seed(app: &TestApp) {
    for name in [
        "checkout.session.completed.paid",
        "billing/customer.subscription.created",
    ] {
        assert_eq!(app.deliver(&fixture(name)).await.status(), 200, "{name}");
    }
    let worker = Worker::new(
        app.store.clone(),
        "seed",
        WorkerConfig {
            plans: "thesis-monthly=40:3900:chf:month".parse().unwrap(),
            ..WorkerConfig::default()
        },
    );
    while !worker.run_once().await.unwrap().is_empty() {}
}

async fn post_form(
    client: &reqwest::Client,
    app: &TestApp,
    path: &str,
    form: &[(&str, &str)],
) -> reqwest::Response {
    client
        .post(app.url(path))
        .header("accept", "application/json")
        .form(form)
        .send()
        .await
        .unwrap()
}

async fn every_server_function_and_action_refuses_anonymous_callers(app: TestApp) {
    seed(&app).await;
    let anonymous = TestApp::browser();
    let functions = server_functions();
    assert!(functions.len() >= 8, "{functions:?}");
    for path in &functions {
        let response = post_form(&anonymous, &app, path, &arguments(path)).await;
        assert_eq!(response.status(), 401, "{path}");
    }
    for (path, form) in ACTIONS {
        let response = post_form(&anonymous, &app, path, form).await;
        assert_eq!(response.status(), 401, "{path}");
    }
    for page in PAGES {
        let response = anonymous.get(app.url(page)).send().await.unwrap();
        assert_eq!(response.status(), 303, "{page}");
        let location = crate::helpers::landing(&response);
        assert!(
            location.starts_with("/login?next=%2F"),
            "{page}: {location}"
        );
    }
    // The sign-in page and the bundle are public.
    assert_eq!(
        anonymous
            .get(app.url("/login"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );

    // Signed in as an admin, the same calls succeed: the refusals above were about access.
    let admin = app.sign_in_as("ada", Role::Admin).await;
    for path in &functions {
        let response = post_form(&admin, &app, path, &arguments(path)).await;
        assert_eq!(
            response.status(),
            200,
            "{path}: {}",
            response.text().await.unwrap()
        );
    }
    for page in PAGES {
        let response = admin.get(app.url(page)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{page}");
    }
}

async fn viewers_read_but_cannot_mutate(app: TestApp) {
    seed(&app).await;
    app.add_operator("vera", Role::Viewer).await;
    let viewer = app.sign_in_as("victor", Role::Viewer).await;
    for path in server_functions() {
        let response = post_form(&viewer, &app, &path, &arguments(&path)).await;
        let expected = if path.ends_with("/operators") || path.ends_with("/bulk_preview") {
            403
        } else {
            200
        };
        assert_eq!(response.status(), expected, "{path}");
    }
    for (path, form) in ACTIONS {
        let response = post_form(&viewer, &app, path, form).await;
        assert_eq!(response.status(), 403, "{path}");
    }
    // A support operator may re-drive (one claim or in bulk) but not refund or manage
    // operators.
    let support = app.sign_in_as("sam", Role::Support).await;
    for (path, form) in &ACTIONS[4..] {
        let response = post_form(&support, &app, path, form).await;
        assert_eq!(response.status(), 403, "{path}");
    }
    // Nothing happened.
    assert_eq!(app.db.count("SELECT COUNT(*) FROM audit_log").await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM operators").await, 3);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM operators WHERE disabled_at IS NOT NULL")
            .await,
        0
    );
    // The viewer's pages hide what they may not do.
    let html = viewer
        .get(app.url("/events/evt_pub0001paid"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!html.contains("Re-drive…"), "{html}");
    // Nor anything to click for a bulk re-drive.
    for page in [
        "/claims?status=failed",
        "/claims/redrive?status=failed&preview=1",
    ] {
        let html = viewer
            .get(app.url(page))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(!html.contains("Re-drive in bulk"), "{page}: {html}");
        assert!(
            !html.contains("/dashboard/actions/bulk-redrive"),
            "{page}: {html}"
        );
    }
}

async fn sign_in_answers_the_same_for_unknown_users_and_wrong_passwords(app: TestApp) {
    app.add_operator("anna", Role::Support).await;
    let client = TestApp::browser();
    let attempt = |username: &'static str, password: &'static str| {
        let client = client.clone();
        let url = app.url("/login");
        async move {
            client
                .post(url)
                .form(&[
                    ("username", username),
                    ("password", password),
                    ("next", "/claims"),
                ])
                .send()
                .await
                .unwrap()
        }
    };
    let wrong = attempt("anna", "not her password").await;
    let unknown = attempt("nobody", "not her password").await;
    assert_eq!(wrong.status(), 303);
    assert_eq!(
        crate::helpers::landing(&wrong),
        crate::helpers::landing(&unknown)
    );
    let refused = crate::helpers::landing(&wrong);
    assert!(
        query_value(&refused, "error").is_some_and(|e| e.contains("Wrong username or password")),
        "{refused}"
    );
    assert!(!has_session_cookie(&wrong));

    // The right password: a session cookie, HttpOnly and SameSite=Strict, and the page asked for.
    let right = attempt("anna", PASSWORD).await;
    assert_eq!(right.headers()["location"], "/claims");
    let cookie = right.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(cookie.starts_with("claimcheck_session="), "{cookie}");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP on loopback: {cookie}"
    );
    // A second sign-in in the same browser gets a new session id.
    let again = attempt("anna", PASSWORD).await;
    let second = again.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert_ne!(
        cookie.split(';').next(),
        second.split(';').next(),
        "the session id changes at sign-in"
    );

    // Signed out, five failures for one username: the sixth attempt is throttled, even with
    // the right password.
    client.post(app.url("/logout")).send().await.unwrap();
    for _ in 0..5 {
        attempt("anna", "guessing").await;
    }
    let throttled = attempt("anna", PASSWORD).await;
    let location = crate::helpers::landing(&throttled);
    assert!(
        query_value(&location, "error").is_some_and(|e| e.contains("Too many")),
        "{location}"
    );
    // How long to wait, in words that count: "in 15 minutes" or "in 1 minute".
    assert!(
        query_value(&location, "error").is_some_and(
            |e| !e.contains("(s)") && (e.contains(" minutes.") || e.contains(" 1 minute."))
        ),
        "{location}"
    );
    assert!(!has_session_cookie(&throttled));
}

async fn sign_out_and_disabling_end_the_session(app: TestApp) {
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    assert_eq!(app.call(&viewer, "me", &[]).await.status(), 200);
    let out = viewer.post(app.url("/logout")).send().await.unwrap();
    assert_eq!(out.status(), 303);
    assert_eq!(app.call(&viewer, "me", &[]).await.status(), 401);

    let support = app.sign_in_as("sam", Role::Support).await;
    let me: Value = app.call(&support, "me", &[]).await.json().await.unwrap();
    assert_eq!(me["role"], "support");
    assert!(
        app.store
            .operators()
            .set_disabled("sam", true, now_ms())
            .await
            .unwrap()
    );
    assert_eq!(app.call(&support, "me", &[]).await.status(), 401);
}

async fn cross_origin_posts_are_refused_but_the_webhook_is_not(app: TestApp) {
    seed(&app).await;
    let admin = app.sign_in_as("ada", Role::Admin).await;
    let forged = admin
        .post(app.url("/dashboard/actions/operators"))
        .header("origin", "https://evil.example")
        .form(&[
            ("username", "mallory"),
            ("role", "admin"),
            ("password", "a long enough password"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    let forged = admin
        .post(app.url("/dashboard/fn/overview"))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 403);
    assert!(
        app.store
            .operators()
            .credentials("mallory")
            .await
            .unwrap()
            .is_none()
    );

    // The same-origin form works.
    let own = admin
        .post(app.url("/dashboard/actions/operators"))
        .header("origin", app.url(""))
        .form(&[
            ("username", "otto"),
            ("role", "viewer"),
            ("password", "a long enough password"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 303);
    assert!(
        app.store
            .operators()
            .credentials("otto")
            .await
            .unwrap()
            .is_some()
    );

    // Stripe posts from anywhere, without a session.
    let delivered = app
        .client
        .post(app.url("/webhooks/stripe"))
        .header("origin", "https://stripe.example")
        .header("stripe-signature", "t=1,v1=00")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(
        delivered.status(),
        400,
        "judged by its signature, not its origin"
    );
    let api = app
        .client
        .get(app.url("/api/orders/ord_pub_0001"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        api.status(),
        401,
        "the order API asks for its token, not a session"
    );
}

async fn support_redrives_a_stale_claim_once_even_when_two_click(app: TestApp) {
    assert_eq!(
        app.deliver(&fixture("checkout.session.completed.paid"))
            .await
            .status(),
        200
    );
    // A worker took the claim and died: its lease ran out.
    let taken = app
        .store
        .claims()
        .lease_next("dead-worker", now_ms(), 1, false, 8)
        .await
        .unwrap();
    assert!(taken.is_some());
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;

    let sam = app.sign_in_as("sam", Role::Support).await;
    let sue = app.sign_in_as("sue", Role::Support).await;
    let form = [
        ("event_id", "evt_pub0001paid"),
        ("reason", "worker crashed"),
    ];
    let (a, b) = tokio::join!(
        post_form(&sam, &app, "/dashboard/actions/redrive", &form),
        post_form(&sue, &app, "/dashboard/actions/redrive", &form)
    );
    let locations: Vec<String> = [a, b]
        .iter()
        .map(|r| {
            assert_eq!(r.status(), 303);
            crate::helpers::landing(r)
        })
        .collect();
    assert!(
        locations.iter().any(|l| l.contains("notice=Re-driven")),
        "{locations:?}"
    );
    assert!(
        locations.iter().any(|l| l.contains("error=Not")),
        "the other operator is told: {locations:?}"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        1
    );
    let claim = app
        .store
        .claims()
        .get(&EventId::parse("evt_pub0001paid").unwrap(), now_ms())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim.status, claimcheck_core::ClaimState::Processed);
    // Both attempts are in the audit log, with who asked and what came of it.
    let outcomes = app
        .db
        .texts(
            "SELECT outcome FROM audit_log WHERE action = 'redrive' AND actor LIKE 'dashboard:s%'",
        )
        .await;
    assert_eq!(outcomes.len(), 2, "{outcomes:?}");
    assert_eq!(
        outcomes.iter().filter(|o| o.starts_with("refused")).count(),
        1,
        "{outcomes:?}"
    );
    // The event's timeline shows both, from the audit entries about it.
    let event: Value = app
        .call(&sam, "event", &[("event_id", "evt_pub0001paid")])
        .await
        .json()
        .await
        .unwrap();
    let timeline = event["timeline"].to_string();
    assert_eq!(
        timeline.matches("redrive by dashboard:s").count(),
        2,
        "{timeline}"
    );
}

async fn admins_manage_operators_and_everything_is_audited(app: TestApp) {
    let admin = app.sign_in_as("ada", Role::Admin).await;
    let added = post_form(
        &admin,
        &app,
        "/dashboard/actions/operators",
        &[
            ("username", "otto"),
            ("role", "support"),
            ("password", PASSWORD),
        ],
    )
    .await;
    assert_eq!(added.status(), 303);
    let short = post_form(
        &admin,
        &app,
        "/dashboard/actions/operators",
        &[
            ("username", "tim"),
            ("role", "viewer"),
            ("password", "short"),
        ],
    )
    .await;
    assert!(
        crate::helpers::landing(&short).contains("error="),
        "a short password is refused"
    );
    let myself = post_form(
        &admin,
        &app,
        "/dashboard/actions/operators/access",
        &[("username", "ada"), ("action", "disable")],
    )
    .await;
    assert!(crate::helpers::landing(&myself).contains("error="));
    let disabled = post_form(
        &admin,
        &app,
        "/dashboard/actions/operators/access",
        &[("username", "otto"), ("action", "disable")],
    )
    .await;
    assert!(crate::helpers::landing(&disabled).contains("notice="));
    let operators: Value = app
        .call(&admin, "operators", &[])
        .await
        .json()
        .await
        .unwrap();
    let otto = operators
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["username"] == "otto")
        .unwrap();
    assert_eq!(otto["disabled"], true);
    assert_eq!(otto["role"], "support");
    let audit: Value = app.call(&admin, "audit", &[]).await.json().await.unwrap();
    let actions: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["operator_disable", "operator_add"]);
}

/// The session cookie a server configured by `customize` sets at sign-in.
async fn sign_in_cookie(customize: impl FnOnce(&mut claimcheck_server::ServeConfig)) -> String {
    let app = spawn_app_with(crate::helpers::Backend::Sqlite, customize).await;
    app.add_operator("anna", Role::Viewer).await;
    let url = format!("http://127.0.0.1:{}/login", app.addr.port());
    let response = TestApp::browser()
        .post(url)
        .form(&[("username", "anna"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned()
}

/// Bound beyond loopback, the cookie is `Secure` unless configured otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_is_secure_when_bound_beyond_loopback() {
    let cookie = sign_in_cookie(|config| config.bind = "0.0.0.0:0".parse().unwrap()).await;
    assert!(cookie.contains("Secure"), "{cookie}");
}

/// Plain HTTP on a loopback address gets a cookie without `Secure`; everything else (or an
/// explicit setting) gets `Secure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_is_secure_unless_plain_http_on_loopback() {
    let cookie = sign_in_cookie(|config| config.dashboard.secure_cookie = Some(true)).await;
    assert!(cookie.contains("Secure"), "{cookie}");
}

/// A session older than the absolute limit is over, however busy it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_at_the_absolute_limit() {
    let app = spawn_app_with(crate::helpers::Backend::Sqlite, |config| {
        config.dashboard.absolute_timeout = std::time::Duration::ZERO;
    })
    .await;
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    assert_eq!(app.call(&viewer, "me", &[]).await.status(), 401);
    let page = viewer.get(app.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 303, "back to the sign-in page");
}

/// Whether `response` starts a session (the flash cookie of a refusal does not).
fn has_session_cookie(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .any(|c| c.to_str().unwrap().starts_with("claimcheck_session="))
}
