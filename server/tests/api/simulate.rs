//! `claimcheck simulate` against a cluster: two instances sharing one PostgreSQL database,
//! each with its own workers, the traffic spread over both.

use claimcheck_core::now_ms;
use claimcheck_core::token::{NewToken, token_hash};
use claimcheck_server::simulate::{SimulateArgs, run_day};

use crate::helpers::{Backend, WEBHOOK_SECRET, spawn_app_with, spawn_instance};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_day_on_two_postgres_instances_is_exactly_once() {
    let first = spawn_app_with(Backend::Postgres, |config| config.workers = 2).await;
    let (second, _stop_second) = spawn_instance(&first, |config| config.workers = 2).await;
    let token = NewToken::generate().unwrap();
    first
        .store
        .insert_token(
            &token.token_id,
            "simulate",
            &token_hash(&token.token),
            now_ms(),
        )
        .await
        .unwrap();
    let args = SimulateArgs {
        targets: vec![first.url(""), format!("http://{second}")],
        secret: WEBHOOK_SECRET.into(),
        api_token: token.token,
        orders: 80,
        rate: 0,
        duplicates: 0.3,
        twins: 0.2,
        reorder: 0.3,
        run: Some("cluster".into()),
        settle_secs: 60,
    };
    let verdict = run_day(&args).await.unwrap();
    assert!(verdict.exactly_once, "{:#?}", verdict.wrong);
    // And from the database: never two unlocks or two revokes for one order.
    assert_eq!(
        first
            .db
            .count(
                "SELECT COUNT(*) FROM (SELECT order_id, kind FROM credit_ledger \
                 GROUP BY order_id, kind HAVING COUNT(*) > 1) AS doubled"
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
    };
    let error = run_day(&args).await.unwrap_err();
    assert!(error.to_string().contains("API token"), "{error}");
}
