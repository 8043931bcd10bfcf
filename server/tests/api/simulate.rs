//! `claimcheck simulate` against a cluster: two instances sharing one PostgreSQL database,
//! each with its own workers, the traffic spread over both.

use claimcheck_core::now_ms;
use claimcheck_core::token::NewToken;
use claimcheck_sim::simulate::{SimulateArgs, run_day};

use crate::helpers::{Backend, WEBHOOK_SECRET, spawn_app_with, spawn_instance};

/// Spends the shop makes while the day's deliveries flow.
const SPENDS: usize = 60;

/// A fresh API token of `app` (what `claimcheck tokens create` prints).
async fn api_token(app: &crate::helpers::TestApp) -> String {
    let token = NewToken::generate().unwrap();
    app.store
        .tokens()
        .insert(&token, "simulate", now_ms())
        .await
        .unwrap();
    token.token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_day_on_two_postgres_instances_is_exactly_once() {
    let first = spawn_app_with(Backend::Postgres, |config| config.workers = 2).await;
    let (second, _stop_second) = spawn_instance(&first, |config| config.workers = 2).await;
    let token = api_token(&first).await;
    let args = SimulateArgs {
        targets: vec![first.url(""), format!("http://{second}")],
        secret: WEBHOOK_SECRET.into(),
        api_token: token,
        orders: 80,
        rate: 0,
        duplicates: 0.3,
        twins: 0.2,
        reorder: 0.3,
        run: Some("cluster".into()),
        settle_secs: 60,
        stripe_sim: None,
        package: "thesis-40".into(),
        spends: SPENDS,
        subscriptions: 0,
        plan: "thesis-monthly".into(),
        upgrade_plan: None,
    };
    let verdict = run_day(&args).await.unwrap();
    assert!(
        verdict.exactly_once,
        "{:#?} {:#?}",
        verdict.wrong, verdict.credits_wrong
    );
    // Every spend answered, each once in the ledger, racing the unlocks, refunds and
    // disputes on both instances.
    assert_eq!(verdict.spends + verdict.spends_refused, SPENDS);
    assert!(verdict.spends > 0);
    assert_eq!(
        first
            .db
            .count("SELECT COUNT(*) FROM credit_movements WHERE kind = 'spend'")
            .await,
        verdict.spends as i64
    );
    // And from the database: never two unlocks for one order, never more taken back than
    // was granted.
    assert_eq!(
        first
            .db
            .count(
                "SELECT COUNT(*) FROM (SELECT order_id FROM credit_ledger WHERE kind = 'unlock' \
                 GROUP BY order_id HAVING COUNT(*) > 1) AS doubled"
            )
            .await,
        0
    );
    assert_eq!(
        first
            .db
            .count(
                "SELECT COUNT(*) FROM (SELECT order_id FROM credit_ledger \
                 GROUP BY order_id HAVING SUM(delta) < 0) AS overdrawn"
            )
            .await,
        0
    );
    assert_eq!(first.db.count("SELECT COUNT(*) FROM orders").await, 80);
}

/// A day whose verdict cannot hold (the token reads nothing back) says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_is_reported_not_a_verdict() {
    let app = spawn_app_with(Backend::Sqlite, |config| config.workers = 1).await;
    let args = SimulateArgs {
        targets: vec![app.url("")],
        secret: WEBHOOK_SECRET.into(),
        api_token: "cct_nope_nope".into(),
        orders: 3,
        rate: 0,
        duplicates: 0.0,
        twins: 0.0,
        reorder: 0.0,
        run: Some("refused".into()),
        settle_secs: 5,
        stripe_sim: None,
        package: "thesis-40".into(),
        spends: SPENDS,
        subscriptions: 0,
        plan: "thesis-monthly".into(),
        upgrade_plan: None,
    };
    let error = run_day(&args).await.unwrap_err();
    assert!(error.to_string().contains("API token"), "{error}");
}

/// The command itself against two `claimcheck serve` processes on one PostgreSQL database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulate_command_against_two_serve_processes_is_exactly_once() {
    use claimcheck_core::{Store, StoreOptions};

    use crate::helpers::TestDb;
    use crate::process::Server;

    let db = TestDb::create(Backend::Postgres).await;
    let first = Server::start(&db, None);
    let second = Server::start(&db, None);
    let store = Store::connect(&db.url().parse().unwrap(), &StoreOptions::default())
        .await
        .unwrap();
    let token = NewToken::generate().unwrap();
    store
        .tokens()
        .insert(&token, "simulate", now_ms())
        .await
        .unwrap();
    let first_url = format!("http://{}", first.addr);
    let second_url = format!("http://{}", second.addr);
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args(["simulate", "--target", &first_url, "--target", &second_url])
        .args(["--orders", "60", "--rate", "0", "--run", "procs"])
        .env("STRIPE_WEBHOOK_SECRET", WEBHOOK_SECRET)
        .env("CLAIMCHECK_API_TOKEN", &token.token)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("exactly-once verdict: true"), "{stdout}");
    assert!(stdout.contains("to 2 target(s)"), "{stdout}");
    store.close().await;
}

/// The day played through the Stripe simulator: orders opened through the order API, paid,
/// refunded and disputed at the simulator, subscriptions sold and run three months on its
/// test clock, every event made and delivered by it (with duplicates and twins), on two
/// instances sharing PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_through_the_simulator_on_two_instances_is_exactly_once() {
    use claimcheck_sim::stripe_sim::{SimOptions, StripeSim};

    let sim = StripeSim::start_with(
        "127.0.0.1:0".parse().unwrap(),
        SimOptions {
            webhooks: Vec::new(),
            time_scale: 200_000.0,
        },
    )
    .await
    .unwrap();
    let stripe = crate::outgoing::stripe_api(&sim);
    let configure = |config: &mut claimcheck_server::ServeConfig| {
        config.workers = 2;
        config.stripe = Some(stripe.clone());
        config.checkout_urls = Some(crate::outgoing::urls());
        config.worker.packages = crate::outgoing::PACKAGES.parse().unwrap();
        config.worker.plans = crate::subscriptions::PLANS.parse().unwrap();
    };
    let first = spawn_app_with(Backend::Postgres, configure).await;
    let (second, _stop_second) = spawn_instance(&first, configure).await;
    let token = api_token(&first).await;
    let args = SimulateArgs {
        targets: vec![first.url(""), format!("http://{second}")],
        secret: WEBHOOK_SECRET.into(),
        api_token: token,
        orders: 40,
        rate: 0,
        duplicates: 0.3,
        twins: 0.2,
        reorder: 0.0,
        run: Some("viasim".into()),
        settle_secs: 60,
        stripe_sim: Some(sim.base_url()),
        package: "thesis-40".into(),
        spends: SPENDS,
        subscriptions: 10,
        plan: "thesis-monthly".into(),
        upgrade_plan: Some("thesis-pro=100:8900:chf:month".parse().unwrap()),
    };
    let verdict = run_day(&args).await.unwrap();
    assert!(
        verdict.exactly_once,
        "{:#?} {:#?}",
        verdict.wrong, verdict.credits_wrong
    );
    assert_eq!(verdict.spends + verdict.spends_refused, SPENDS);
    // Ten subscriptions, two of each life, 40 credits a paid period: 4 + 4 + 3 + 2 + 4
    // periods; the upgrade an hour into a 30-day period pays 4,993 of the 5,000 difference:
    // 59 of the 60 extra credits, one more grant.
    assert_eq!(verdict.subscriptions, 10);
    assert_eq!(
        verdict.subscription_credits,
        2 * (40 * (4 + 4 + 3 + 2 + 4) + 59)
    );
    assert_eq!(
        first
            .db
            .count("SELECT COUNT(*) FROM subscription_grants")
            .await,
        2 * (4 + 4 + 3 + 2 + 5)
    );
    assert_eq!(
        first
            .db
            .count(
                "SELECT COUNT(*) FROM (SELECT order_id FROM credit_ledger WHERE kind = 'unlock' \
                 GROUP BY order_id HAVING COUNT(*) > 1) AS doubled"
            )
            .await,
        0
    );
    // The deliveries came from the simulator: duplicates and twins among them.
    assert!(
        first
            .db
            .count(
                "SELECT COUNT(*) FROM webhook_deliveries \
                 WHERE outcome IN ('duplicate_event', 'duplicate_action')"
            )
            .await
            > 0
    );
}
