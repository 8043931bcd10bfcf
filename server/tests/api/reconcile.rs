//! No lost order when Stripe gives up: the simulator delivers webhooks like Stripe (retries on
//! a compressed schedule, then gives up), and the reconciler lists the events from the API and
//! claims the missing ones through the same path as a delivery.

use std::time::Duration;

use claimcheck_core::OrderId;
use claimcheck_core::auth::Role;
use claimcheck_core::payments::{CheckoutUrls, OrderRequest, open_checkout};
use claimcheck_core::reconcile::{ReconcileConfig, ReconcileError, run};
use claimcheck_core::stripe::{ApiKey, ListError, StripeApi, StripeConfig};
use claimcheck_core::worker::{Worker, WorkerConfig};
use claimcheck_sim::stripe_sim::{Fault, FaultMode, SimOptions, StripeSim};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, WEBHOOK_SECRET, on_both_backends, spawn_app};

on_both_backends!(
    backend =>
    orders_paid_during_an_outage_longer_than_the_retries_are_recovered_once,
    a_renewal_paid_during_an_outage_is_granted_once_by_reconciliation,
    a_wrong_signing_secret_loses_nothing_once_reconciled,
    reconciling_while_stripe_still_delivers_claims_each_event_once,
    two_runs_at_once_make_one_and_a_refused_key_changes_nothing,
    a_backlog_of_250_events_is_recovered_across_pages,
);

/// Stripe's three days of retries in about a second.
const TIME_SCALE: f64 = 250_000.0;
const PACKAGES: &str = "thesis-40=40:4900:chf";

struct Drill {
    app: TestApp,
    sim: StripeSim,
    api: StripeApi,
}

fn api(sim: &StripeSim, key: &str) -> StripeApi {
    StripeApi::new(StripeConfig {
        api_base: sim.base_url(),
        timeout: Duration::from_secs(5),
        max_attempts: 2,
        base_backoff: Duration::from_millis(50),
        ..StripeConfig::new(ApiKey::new(key).unwrap())
    })
    .unwrap()
}

/// The app, and a simulator delivering to its webhook signed with `secret`.
async fn drill(backend: Backend, secret: Option<&str>) -> Drill {
    let app = spawn_app(backend).await;
    let webhooks = secret
        .map(|s| vec![(app.url("/webhooks/stripe"), s.to_owned())])
        .unwrap_or_default();
    let sim = StripeSim::start_with(
        "127.0.0.1:0".parse().unwrap(),
        SimOptions {
            webhooks,
            time_scale: TIME_SCALE,
        },
    )
    .await
    .unwrap();
    let api = api(&sim, "sk_test_reconcile");
    Drill { app, sim, api }
}

fn config() -> ReconcileConfig {
    ReconcileConfig {
        base_backoff: Duration::from_millis(50),
        ..ReconcileConfig::default()
    }
}

impl Drill {
    async fn sim_post(&self, path: &str, body: Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}{path}", self.sim.base_url()))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn deliveries(&self, kind: &str) -> Value {
        reqwest::get(format!(
            "{}/_sim/deliveries?kind={kind}",
            self.sim.base_url()
        ))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
    }

    /// Orders opened through the outgoing client, then paid by card at the simulator.
    async fn paid_orders(&self, prefix: &str, n: usize) -> Vec<OrderId> {
        let urls = CheckoutUrls {
            success_url: "https://shop.example/thanks".into(),
            cancel_url: "https://shop.example/cart".into(),
        };
        let mut orders = Vec::new();
        for i in 0..n {
            let checkout = open_checkout(
                &self.app.store,
                &self.api,
                &PACKAGES.parse().unwrap(),
                &urls,
                &OrderRequest {
                    order_id: Some(format!("ord_{prefix}_{i}")),
                    package: "thesis-40".into(),
                    customer_email: format!("c{i}@example.ch"),
                },
            )
            .await
            .unwrap();
            let session = checkout.order.checkout_session_id.clone().unwrap();
            let paid = self
                .sim_post(
                    &format!("/_sim/checkout/sessions/{session}/pay"),
                    json!({ "outcome": "card" }),
                )
                .await;
            assert_eq!(paid.status(), 204);
            orders.push(OrderId::parse(checkout.order.order_id).unwrap());
        }
        orders
    }

    /// Waits until Stripe gave up delivering `n` events of `kind`.
    async fn until_given_up(&self, kind: &str, n: i64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let counts = self.deliveries(kind).await;
            if counts["gave_up"].as_i64() == Some(n) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "Stripe never gave up: {counts}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn fulfil(&self) {
        let worker = Worker::new(self.app.store.clone(), "w", WorkerConfig::default());
        while !worker.run_once().await.unwrap().is_empty() {}
    }

    async fn credits(&self, order: &OrderId) -> (String, i64) {
        let order = self.app.store.orders().get(order).await.unwrap().unwrap();
        (order.status.to_string(), order.credits_granted)
    }
}

async fn orders_paid_during_an_outage_longer_than_the_retries_are_recovered_once(backend: Backend) {
    let drill = drill(backend, Some(WEBHOOK_SECRET)).await;
    let outage = drill
        .sim_post("/_sim/outage", json!({ "seconds": 60, "mode": "refused" }))
        .await;
    assert_eq!(outage.status(), 204);
    let orders = drill.paid_orders("outage", 5).await;
    drill.until_given_up("checkout.session.completed", 5).await;
    for order in &orders {
        assert_eq!(drill.credits(order).await, ("awaiting_payment".into(), 0));
    }

    let report = run(&drill.app.store, &drill.api, &config(), "test", None, false)
        .await
        .unwrap();
    assert_eq!(report.claimed, 5, "{report:?}");
    assert_eq!(report.per_type["checkout.session.completed"].claimed, 5);
    drill.fulfil().await;
    for order in &orders {
        assert_eq!(drill.credits(order).await, ("paid".into(), 40));
    }
    assert_eq!(
        drill
            .app
            .db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE source = 'reconcile'")
            .await,
        5
    );
    assert_eq!(
        drill
            .app
            .db
            .count("SELECT COUNT(*) FROM webhook_deliveries WHERE source = 'reconcile'")
            .await,
        5
    );

    // The next run finds them claimed; Stripe's late resend is a duplicate; one unlock each.
    let again = run(&drill.app.store, &drill.api, &config(), "test", None, false)
        .await
        .unwrap();
    assert_eq!((again.claimed, again.already_claimed), (0, 5));
    let events: Vec<Value> = reqwest::get(format!("{}/_sim/events", drill.sim.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let completed = events
        .iter()
        .find(|e| e["type"] == "checkout.session.completed")
        .unwrap();
    let resend: Value = drill
        .app
        .deliver(&serde_json::to_vec(completed).unwrap())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(resend["outcome"], "duplicate_event");
    drill.fulfil().await;
    assert_eq!(
        drill
            .app
            .db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        5
    );
    let runs = drill
        .app
        .store
        .reconcile_runs()
        .recent(10, true)
        .await
        .unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1].claimed, 5);

    // The first run's recovered events are listed by its number (the alert's link), each
    // naming the run; the second run recovered none.
    let viewer = drill.app.sign_in_as("vic", Role::Viewer).await;
    let by_run = |run: i64| {
        let (app, viewer) = (&drill.app, &viewer);
        async move {
            let run = run.to_string();
            let page: Value = app
                .call(
                    viewer,
                    "events",
                    &[
                        ("status", ""),
                        ("event_type", ""),
                        ("search", ""),
                        ("from", ""),
                        ("to", ""),
                        ("after", ""),
                        ("source", "reconcile"),
                        ("run", &run),
                    ],
                )
                .await
                .json()
                .await
                .unwrap();
            page["rows"].as_array().unwrap().len()
        }
    };
    assert_eq!(by_run(runs[1].id).await, 5);
    assert_eq!(by_run(runs[0].id).await, 0);
    assert_eq!(by_run(9_999).await, 0);
    let order: Value = drill
        .app
        .call(&viewer, "order", &[("order_id", orders[0].as_str())])
        .await
        .json()
        .await
        .unwrap();
    let recovered = order["history"]["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|line| line["what"]["Delivery"]["recovered_by"].as_i64())
        .collect::<Vec<_>>();
    assert_eq!(recovered, [runs[1].id], "{order}");
}

/// A subscription's renewal is paid while the server is down longer than Stripe's retries:
/// reconciliation lists `invoice.paid` (never the `invoice.payment_succeeded` telemetry) and
/// the period is granted once, through runs again and Stripe's late resend.
async fn a_renewal_paid_during_an_outage_is_granted_once_by_reconciliation(backend: Backend) {
    use crate::subscriptions::{
        FIRST_PERIOD_END, SECOND_PERIOD_END, billing, drain, period_grants, worker,
    };

    let drill = drill(backend, Some(WEBHOOK_SECRET)).await;
    let worker = worker(&drill.app.store);
    let subscription = "sub_1Qren0001Plan";
    // The first period came while the server was up.
    let first = drill
        .app
        .deliver(&billing("invoice.paid.subscription_create", "ren"))
        .await;
    assert_eq!(first.status(), 200);
    drain(&worker).await;
    assert_eq!(
        period_grants(&drill.app, subscription, FIRST_PERIOD_END).await,
        40
    );

    let outage = drill
        .sim_post("/_sim/outage", json!({ "seconds": 60, "mode": "refused" }))
        .await;
    assert_eq!(outage.status(), 204);
    let mut made = Vec::new();
    for name in [
        "invoice.paid.subscription_cycle",
        "invoice.payment_succeeded.subscription_create",
    ] {
        let event: Value = serde_json::from_slice(&billing(name, "ren")).unwrap();
        let injected = drill
            .sim_post(
                "/_sim/events",
                json!({ "type": event["type"], "data": event["data"] }),
            )
            .await;
        assert_eq!(injected.status(), 200);
        made.push(injected.json::<Value>().await.unwrap());
    }
    drill.until_given_up("invoice.paid", 1).await;
    drain(&worker).await;
    assert_eq!(
        period_grants(&drill.app, subscription, SECOND_PERIOD_END).await,
        0
    );

    let report = run(&drill.app.store, &drill.api, &config(), "test", None, false)
        .await
        .unwrap();
    assert_eq!(report.claimed, 1, "{report:?}");
    assert_eq!(report.per_type["invoice.paid"].claimed, 1);
    assert!(!report.per_type.contains_key("invoice.payment_succeeded"));
    drain(&worker).await;
    assert_eq!(
        period_grants(&drill.app, subscription, SECOND_PERIOD_END).await,
        40
    );

    // Again: nothing new; Stripe's late resend of the renewal is a duplicate.
    let again = run(&drill.app.store, &drill.api, &config(), "test", None, false)
        .await
        .unwrap();
    assert_eq!((again.claimed, again.already_claimed), (0, 1));
    let resend: Value = drill
        .app
        .deliver(&serde_json::to_vec(&made[0]).unwrap())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(resend["outcome"], "duplicate_event");
    drain(&worker).await;
    assert_eq!(
        period_grants(&drill.app, subscription, FIRST_PERIOD_END).await,
        40
    );
    assert_eq!(
        period_grants(&drill.app, subscription, SECOND_PERIOD_END).await,
        40
    );
    assert_eq!(
        drill
            .app
            .db
            .count(
                "SELECT CAST(SUM(delta) AS BIGINT) FROM credit_ledger \
                 WHERE customer_email = 'abo-ren@example.ch'"
            )
            .await,
        80
    );
}

async fn a_wrong_signing_secret_loses_nothing_once_reconciled(backend: Backend) {
    // The secret was rotated at Stripe but not here: every delivery is refused (400).
    let drill = drill(backend, Some("whsec_rotated_at_stripe_only_0123456789")).await;
    let orders = drill.paid_orders("rotated", 3).await;
    drill.until_given_up("checkout.session.completed", 3).await;
    let counts = drill.deliveries("checkout.session.completed").await;
    assert_eq!(counts["last_error"], "HTTP 400", "{counts}");
    let report = run(&drill.app.store, &drill.api, &config(), "test", None, false)
        .await
        .unwrap();
    assert_eq!(report.claimed, 3);
    drill.fulfil().await;
    for order in &orders {
        assert_eq!(drill.credits(order).await, ("paid".into(), 40));
    }
}

async fn reconciling_while_stripe_still_delivers_claims_each_event_once(backend: Backend) {
    let drill = drill(backend, Some(WEBHOOK_SECRET)).await;
    let store = drill.app.store.clone();
    let api = drill.api.clone();
    let reconciling = tokio::spawn(async move {
        let mut claimed = 0;
        for _ in 0..20 {
            match run(&store, &api, &config(), "test", None, false).await {
                Ok(report) => claimed += report.claimed,
                Err(ReconcileError::Busy) => {}
                Err(error) => panic!("{error}"),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        claimed
    });
    let orders = drill.paid_orders("race", 8).await;
    let by_reconcile = reconciling.await.unwrap();
    // Whatever Stripe still delivers afterwards is a duplicate.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while drill.deliveries("checkout.session.completed").await["pending"] != 0 {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = run(&drill.app.store, &drill.api, &config(), "test", None, false)
        .await
        .unwrap();
    drill.fulfil().await;
    assert_eq!(
        drill
            .app
            .db
            .count(
                "SELECT COUNT(*) FROM processed_stripe_events \
                 WHERE event_type = 'checkout.session.completed'"
            )
            .await,
        8,
        "one claim per event (reconcile claimed {by_reconcile} + {})",
        report.claimed
    );
    for order in &orders {
        assert_eq!(drill.credits(order).await, ("paid".into(), 40));
    }
    assert_eq!(
        drill
            .app
            .db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        8
    );
}

async fn two_runs_at_once_make_one_and_a_refused_key_changes_nothing(backend: Backend) {
    let drill = drill(backend, None).await;
    drill.paid_orders("lease", 2).await;
    // The first run meets a rate limit and waits, holding the lease.
    for _ in 0..2 {
        let fault = Fault {
            path: "/v1/events".into(),
            mode: FaultMode::RateLimit,
            count: 1,
            hold_ms: 0,
        };
        reqwest::Client::new()
            .post(format!("{}/_sim/faults", drill.sim.base_url()))
            .json(&fault)
            .send()
            .await
            .unwrap();
    }
    let slow = ReconcileConfig {
        base_backoff: Duration::from_millis(400),
        ..config()
    };
    // The runs report to metrics like the server's: the run made, the one refused as busy not.
    let metrics = std::sync::Arc::new(claimcheck_server::metrics::Metrics::default());
    let observed = |api: StripeApi| api.with_observer(metrics.clone());
    let first = tokio::spawn({
        let store = drill.app.store.clone();
        let api = observed(drill.api.clone());
        async move { run(&store, &api, &slow, "first", None, false).await }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while drill
        .app
        .db
        .count("SELECT COUNT(*) FROM reconcile_state WHERE lease_owner IS NOT NULL")
        .await
        == 0
    {
        assert!(std::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = run(
        &drill.app.store,
        &observed(drill.api.clone()),
        &config(),
        "second",
        None,
        false,
    )
    .await;
    assert!(matches!(second, Err(ReconcileError::Busy)), "{second:?}");
    let first = first.await.unwrap().unwrap();
    assert_eq!(first.claimed, 2, "the rate limit was waited out");

    // A refused key: the run fails visibly and the cursor stays.
    let cursor = drill
        .app
        .db
        .count("SELECT COALESCE(cursor, 0) FROM reconcile_state")
        .await;
    let refused = run(
        &drill.app.store,
        &observed(api(&drill.sim, "rk_test_wrong_key")),
        &config(),
        "refused",
        None,
        false,
    )
    .await;
    assert!(
        matches!(
            refused,
            Err(ReconcileError::List(ListError::Unauthorized(401)))
        ),
        "{refused:?}"
    );
    assert_eq!(
        drill
            .app
            .db
            .count("SELECT COALESCE(cursor, 0) FROM reconcile_state")
            .await,
        cursor
    );
    let runs = drill
        .app
        .store
        .reconcile_runs()
        .recent(1, true)
        .await
        .unwrap();
    assert!(
        runs[0].error.as_deref().unwrap().contains("STRIPE_API_KEY"),
        "{runs:?}"
    );
    assert_eq!(
        drill
            .app
            .db
            .count("SELECT COUNT(*) FROM reconcile_state WHERE lease_owner IS NULL")
            .await,
        1,
        "the lease is given back"
    );
    let figures = metrics.render(&Default::default());
    for counted in [
        "claimcheck_reconcile_runs_total 2\n",
        "claimcheck_reconcile_failures_total 1\n",
        "claimcheck_reconcile_events_recovered_total 2\n",
    ] {
        assert!(figures.contains(counted), "{counted} in {figures}");
    }
}

async fn a_backlog_of_250_events_is_recovered_across_pages(backend: Backend) {
    let drill = drill(backend, None).await;
    for i in 0..250 {
        let made = drill
            .sim_post(
                "/_sim/events",
                json!({
                    "type": "checkout.session.completed",
                    "data": { "object": {
                        "id": format!("cs_backlog_{i}"),
                        "object": "checkout.session",
                        "payment_status": "paid",
                        "amount_total": 4900,
                        "currency": "chf",
                        "payment_intent": format!("pi_backlog_{i}"),
                        "metadata": { "order_id": format!("ord_backlog_{i}"), "credits": "40" },
                    }},
                }),
            )
            .await;
        assert_eq!(made.status(), 200);
    }
    let dry = run(&drill.app.store, &drill.api, &config(), "test", None, true)
        .await
        .unwrap();
    assert_eq!((dry.claimed, dry.pages), (250, 3), "{dry:?}");
    assert_eq!(
        drill
            .app
            .db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        0,
        "a dry run claims nothing"
    );
    let report = run(&drill.app.store, &drill.api, &config(), "test", None, false)
        .await
        .unwrap();
    assert_eq!((report.listed, report.claimed), (250, 250));
    drill.fulfil().await;
    assert_eq!(
        drill
            .app
            .db
            .count("SELECT COUNT(*) FROM orders WHERE status = 'paid'")
            .await,
        250
    );
}

/// An admin sees what a run would claim, runs it from the dashboard (audited, counted in
/// `/metrics`, shown on the overview); `claimcheck reconcile --dry-run --json` reports the
/// same events as claimed. Signature failures with no success in between raise the alarm on
/// the overview until a delivery is accepted again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admins_reconcile_from_the_dashboard_and_the_overview_tells_a_wrong_secret() {
    use claimcheck_core::auth::Role;

    let sim = StripeSim::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let app = crate::helpers::spawn_app_with(Backend::Sqlite, |config| {
        config.stripe = Some(api(&sim, "sk_test_dashboard"));
    })
    .await;
    for i in 0..3 {
        reqwest::Client::new()
            .post(format!("{}/_sim/events", sim.base_url()))
            .json(&json!({
                "type": "checkout.session.completed",
                "data": { "object": {
                    "id": format!("cs_dash_{i}"), "object": "checkout.session",
                    "payment_status": "paid", "payment_intent": format!("pi_dash_{i}"),
                    "metadata": { "order_id": format!("ord_dash_{i}"), "credits": "5" },
                }},
            }))
            .send()
            .await
            .unwrap();
    }
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let dry_run = |client: reqwest::Client| {
        let url = app.url("/dashboard/actions/reconcile/preview");
        async move { client.post(url).send().await.unwrap() }
    };
    assert_eq!(dry_run(viewer.clone()).await.status(), 403);
    let admin = app.sign_in_as("ada", Role::Admin).await;
    // Opening the page, as anyone, asks Stripe nothing and records nothing.
    for (client, is_admin) in [(&viewer, false), (&admin, true)] {
        let page = client.get(app.url("/reconcile")).send().await.unwrap();
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        assert!(html.contains("No run yet."), "{html}");
        // Only the role that may run it is offered the buttons.
        assert_eq!(
            html.contains("/dashboard/actions/reconcile/preview"),
            is_admin
        );
    }
    assert_eq!(app.db.count("SELECT COUNT(*) FROM reconcile_runs").await, 0);
    // The dry run is a POST: it says what a run would claim, and the history keeps it.
    let done = dry_run(admin.clone()).await;
    assert_eq!(done.status(), 303);
    let location = crate::helpers::landing(&done);
    let notice = crate::helpers::query_value(&location, "notice").unwrap();
    assert!(notice.contains("3 would be claimed now"), "{notice}");
    let history: Value = app
        .call(&viewer, "reconcile_history", &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(history["runs"][0]["dry_run"], true, "{history}");
    assert_eq!(history["runs"][0]["claimed"], 3, "{history}");
    assert_eq!(history["can_run"], false, "{history}");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        0
    );
    let done = admin
        .post(app.url("/dashboard/actions/reconcile"))
        .form(&[("reason", "after the firewall change")])
        .send()
        .await
        .unwrap();
    let location = crate::helpers::landing(&done);
    assert!(
        location.contains("3%20claimed") || location.contains("3+claimed"),
        "{location}"
    );
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'reconcile' \
                 AND actor = 'dashboard:ada' AND reason = 'after the firewall change'"
            )
            .await,
        1
    );
    assert!(
        app.get_metrics()
            .await
            .contains("claimcheck_reconcile_events_recovered_total 3")
    );
    let overview: Value = app
        .call(&admin, "overview", &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(overview["reconcile"]["claimed"], 3, "{overview}");
    assert_eq!(overview["can_reconcile"], true);

    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args(["reconcile", "--dry-run", "--json", "--since", "1h"])
        .env("DATABASE_URL", app.db.url())
        .env("STRIPE_API_KEY", "sk_test_cli")
        .env("STRIPE_API_BASE", sim.base_url())
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        (report["listed"].as_u64(), report["claimed"].as_u64()),
        (Some(3), Some(0)),
        "{report}"
    );

    // A secret rotated at Stripe only: refusals and no success, said on the overview.
    for _ in 0..3 {
        let refused = app.post_webhook(b"{}", Some("t=1,v1=00")).await.status();
        assert_eq!(refused, 400);
    }
    let overview: Value = app
        .call(&admin, "overview", &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(overview["bad_signatures_in_a_row"], 3);
    let html = admin
        .get(app.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("STRIPE_WEBHOOK_SECRET"),
        "the alarm names the setting"
    );
    app.deliver(&crate::helpers::fixture("customer.discount.created"))
        .await;
    let overview: Value = app
        .call(&admin, "overview", &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(overview["bad_signatures_in_a_row"], 0);
}

/// The simulator lists events as Stripe does: by one `type` or a `*` group, by `types[]` (at
/// most 20), never both at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_lists_events_by_type_and_by_wildcard() {
    let sim = StripeSim::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = reqwest::Client::new();
    for (i, kind) in [
        "charge.refunded",
        "charge.dispute.created",
        "checkout.session.completed",
        "customer.subscription.updated",
    ]
    .into_iter()
    .enumerate()
    {
        let made = client
            .post(format!("{}/_sim/events", sim.base_url()))
            .json(&json!({ "type": kind, "data": { "object": { "id": format!("obj_{i}") } } }))
            .send()
            .await
            .unwrap();
        assert!(made.status().is_success());
    }
    let list = |query: &'static str| {
        let url = format!("{}/v1/events?{query}", sim.base_url());
        let client = client.clone();
        async move {
            let answer = client
                .get(url)
                .bearer_auth("sk_test_list")
                .send()
                .await
                .unwrap();
            let status = answer.status().as_u16();
            let body: Value = answer.json().await.unwrap();
            let mut types: Vec<String> = body["data"]
                .as_array()
                .map(|events| {
                    events
                        .iter()
                        .map(|e| e["type"].as_str().unwrap().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            types.sort();
            (status, types)
        }
    };
    assert_eq!(
        list("type=charge.refunded").await,
        (200, vec!["charge.refunded".to_owned()])
    );
    assert_eq!(
        list("type=charge.*").await,
        (
            200,
            vec![
                "charge.dispute.created".to_owned(),
                "charge.refunded".to_owned()
            ]
        )
    );
    assert_eq!(
        list("type=*.updated").await,
        (200, vec!["customer.subscription.updated".to_owned()])
    );
    assert_eq!(
        list("types[]=checkout.session.completed&types[]=charge.refunded").await,
        (
            200,
            vec![
                "charge.refunded".to_owned(),
                "checkout.session.completed".to_owned()
            ]
        )
    );
    assert_eq!(list("limit=100").await.1.len(), 4);
    assert_eq!(list("type=charge.*&types[]=charge.refunded").await.0, 400);
    let many = (0..21)
        .map(|i| format!("types[]=t.{i}"))
        .collect::<Vec<_>>()
        .join("&");
    let answer = client
        .get(format!("{}/v1/events?{many}", sim.base_url()))
        .bearer_auth("sk_test_list")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 400);
}

/// A subscription's `customer.subscription.updated` carries what changed, as Stripe's does:
/// `data.previous_attributes` with the values before the change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_s_updated_events_carry_their_previous_attributes() {
    let sim = StripeSim::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let started: Value = client
        .post(format!("{}/_sim/subscriptions", sim.base_url()))
        .json(&json!({ "customer_email": "prev@example.ch" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = started["id"].as_str().unwrap();
    let changed = client
        .post(format!("{}/v1/subscriptions/{id}", sim.base_url()))
        .bearer_auth("sk_test_prev")
        .form(&[("cancel_at_period_end", "true")])
        .send()
        .await
        .unwrap();
    assert_eq!(changed.status(), 200);
    let events_of = |kind: &'static str| {
        let request = client
            .get(format!("{}/v1/events?type={kind}", sim.base_url()))
            .bearer_auth("sk_test_prev");
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let listed = events_of("customer.subscription.updated").await;
    let event = &listed["data"][0];
    assert_eq!(event["data"]["object"]["cancel_at_period_end"], true);
    assert!(
        event["data"]["object"]["billing_cycle_anchor"].is_i64(),
        "{event}"
    );
    assert_eq!(
        event["data"]["previous_attributes"],
        json!({ "cancel_at_period_end": false }),
        "{event}"
    );

    // Fields Stripe always sends are there: a charge's capture and billing details, a
    // dispute's evidence.
    let refunded = client
        .post(format!("{}/v1/refunds", sim.base_url()))
        .bearer_auth("sk_test_prev")
        .form(&[("payment_intent", "pi_prev"), ("amount", "100")])
        .send()
        .await
        .unwrap();
    assert_eq!(refunded.status(), 200);
    let listed = events_of("charge.refunded").await;
    let charge = &listed["data"][0]["data"]["object"];
    assert_eq!(charge["captured"], true, "{charge}");
    assert!(charge["amount_captured"].is_i64(), "{charge}");
    assert!(charge["billing_details"]["address"].is_object(), "{charge}");
    let disputed: Value = client
        .post(format!("{}/_sim/disputes", sim.base_url()))
        .json(&json!({ "payment_intent": "pi_prev" }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let evidence = &disputed["data"]["object"]["evidence"];
    assert!(evidence.is_object(), "{disputed}");
    assert!(
        evidence.get("customer_email_address").is_some(),
        "{disputed}"
    );
}
