//! The worker: every fixture path fulfils exactly once, through duplicates, twins, reruns,
//! out-of-order arrival, failures and a lease taken over.

use std::time::Duration;

use claimcheck_core::fulfilment::{Packages, plan};
use claimcheck_core::now_ms;
use claimcheck_core::worker::{Attempt, Worker, WorkerConfig};
use claimcheck_core::{Fulfilled, Store};

use crate::helpers::{Backend, TestApp, fixture, on_both_backends, spawn_app_with};

on_both_backends!(
    every_fixture_path_fulfils_exactly_once,
    fulfilling_a_claim_again_changes_nothing,
    events_out_of_order_still_unlock_once,
    an_unmappable_event_fails_after_max_attempts_with_its_reason,
    a_lease_taken_over_cannot_complete_twice,
    a_claim_whose_worker_keeps_dying_fails_after_max_attempts,
    a_batch_of_distinct_orders_unlocks_each_once_in_one_commit,
    a_batch_with_one_lease_lost_writes_nothing,
);

/// A paid `checkout.session.completed` for `order`, as Stripe would send it.
fn paid_session(order: &str, unpaid: bool) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": format!("evt_{order}"),
        "object": "event",
        "type": "checkout.session.completed",
        "created": now_ms() / 1000,
        "livemode": false,
        "data": { "object": {
            "id": format!("cs_{order}"),
            "object": "checkout.session",
            "payment_status": if unpaid { "unpaid" } else { "paid" },
            "payment_intent": format!("pi_{order}"),
            "customer_email": "batch@example.ch",
            "metadata": { "order_id": order, "credits": "5" },
        }},
    }))
    .unwrap()
}

fn worker(store: &Store, name: &str) -> Worker {
    worker_with_attempts(store, name, 3)
}

fn worker_with_attempts(store: &Store, name: &str, max_attempts: i64) -> Worker {
    Worker::new(
        store.clone(),
        name,
        WorkerConfig {
            base_backoff: Duration::from_millis(10),
            max_attempts,
            ..WorkerConfig::default()
        },
    )
}

/// Runs `worker` until nothing is due.
async fn drain(worker: &Worker) -> Vec<Attempt> {
    let mut attempts = Vec::new();
    loop {
        let batch = worker.run_once().await.unwrap();
        if batch.is_empty() {
            break;
        }
        attempts.extend(batch);
    }
    attempts
}

/// Runs `worker` until `done` holds, for at most five seconds (backoffs must come due).
async fn work_until(app: &TestApp, worker: &Worker, done: &str, expected: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        drain(worker).await;
        if app.db.count(done).await == expected {
            return;
        }
        if std::time::Instant::now() > deadline {
            let claims = app
                .db
                .texts(
                    "SELECT event_id || ' ' || status || ' ' || CAST(attempts AS TEXT) || ' ' \
                     || COALESCE(last_error, '') FROM processed_stripe_events",
                )
                .await;
            panic!("never reached: {done} = {expected}; claims: {claims:#?}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn deliver_all(app: &TestApp, names: &[&str]) {
    for name in names {
        assert_eq!(app.deliver(&fixture(name)).await.status(), 200, "{name}");
    }
}

async fn ledger(app: &TestApp, order: &str, kind: &str) -> i64 {
    app.db
        .count(&format!(
            "SELECT COUNT(*) FROM credit_ledger WHERE order_id = '{order}' AND kind = '{kind}'"
        ))
        .await
}

async fn balance(app: &TestApp, order: &str) -> i64 {
    app.db
        .count(&format!(
            "SELECT CAST(COALESCE(SUM(delta), 0) AS BIGINT) FROM credit_ledger WHERE order_id = '{order}'"
        ))
        .await
}

async fn order_status(app: &TestApp, order: &str) -> i64 {
    let statuses = ["awaiting_payment", "payment_failed", "paid", "refunded"];
    for (i, status) in statuses.iter().enumerate() {
        let n = app
            .db
            .count(&format!(
                "SELECT COUNT(*) FROM orders WHERE order_id = '{order}' AND status = '{status}'"
            ))
            .await;
        if n == 1 {
            return i as i64;
        }
    }
    -1
}

const AWAITING: i64 = 0;
const PAYMENT_FAILED: i64 = 1;
const PAID: i64 = 2;
const REFUNDED: i64 = 3;

async fn every_fixture_path_fulfils_exactly_once(app: TestApp) {
    deliver_all(
        &app,
        &[
            "checkout.session.completed.paid",
            "checkout.session.completed.paid.twin",
            "checkout.session.completed.paid",
            "checkout.session.completed.free",
            "checkout.session.completed.unpaid",
            "checkout.session.async_payment_succeeded",
            "checkout.session.completed.unpaid.3",
            "checkout.session.async_payment_failed",
            "payment_intent.succeeded",
            "charge.refunded",
            "charge.refunded",
        ],
    )
    .await;
    let attempts = drain(&worker(&app.store, "w1")).await;
    assert!(
        attempts
            .iter()
            .all(|a| matches!(a, Attempt::Processed { .. })),
        "{attempts:?}"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'")
            .await,
        7
    );
    // Paid, then refunded (twin and repeated refund change nothing).
    assert_eq!(ledger(&app, "ord_pub_0001", "unlock").await, 1);
    assert_eq!(ledger(&app, "ord_pub_0001", "revoke").await, 1);
    assert_eq!(balance(&app, "ord_pub_0001").await, 0);
    assert_eq!(order_status(&app, "ord_pub_0001").await, REFUNDED);
    // Delayed payment that succeeded: one unlock.
    assert_eq!(balance(&app, "ord_pub_0002").await, 40);
    assert_eq!(order_status(&app, "ord_pub_0002").await, PAID);
    // Delayed payment that failed: nothing.
    assert_eq!(ledger(&app, "ord_pub_0003", "unlock").await, 0);
    assert_eq!(order_status(&app, "ord_pub_0003").await, PAYMENT_FAILED);
    // Nothing to pay: unlocked.
    assert_eq!(balance(&app, "ord_pub_0005").await, 40);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM credit_ledger").await, 4);
}

async fn fulfilling_a_claim_again_changes_nothing(app: TestApp) {
    deliver_all(&app, &["checkout.session.completed.paid"]).await;
    let worker = worker(&app.store, "w1");
    drain(&worker).await;
    // As if the process died after the ledger write and before the claim was marked.
    app.db
        .execute("UPDATE processed_stripe_events SET status = 'processing', processed_at = NULL")
        .await;
    let attempts = drain(&worker).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(ledger(&app, "ord_pub_0001", "unlock").await, 1);
    assert_eq!(balance(&app, "ord_pub_0001").await, 40);
}

async fn events_out_of_order_still_unlock_once(app: TestApp) {
    // The refund and the async success arrive before the sessions they belong to.
    deliver_all(
        &app,
        &[
            "charge.refunded",
            "checkout.session.async_payment_succeeded",
        ],
    )
    .await;
    // The refund fails until its order is known, however often it comes due first.
    let worker = worker_with_attempts(&app.store, "w1", 30);
    drain(&worker).await;
    assert_eq!(order_status(&app, "ord_pub_0002").await, PAID);
    deliver_all(
        &app,
        &[
            "checkout.session.completed.unpaid",
            "checkout.session.completed.paid",
        ],
    )
    .await;
    // The late `unpaid` does not take order 2 back to awaiting payment; the refund finds
    // order 1 once its session is in, on a later attempt.
    work_until(
        &app,
        &worker,
        "SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'",
        4,
    )
    .await;
    assert_eq!(order_status(&app, "ord_pub_0002").await, PAID);
    assert_eq!(ledger(&app, "ord_pub_0002", "unlock").await, 1);
    assert_eq!(order_status(&app, "ord_pub_0001").await, REFUNDED);
    assert_eq!(balance(&app, "ord_pub_0001").await, 0);
    assert_ne!(order_status(&app, "ord_pub_0002").await, AWAITING);
}

async fn an_unmappable_event_fails_after_max_attempts_with_its_reason(app: TestApp) {
    let body = String::from_utf8(fixture("checkout.session.completed.paid"))
        .unwrap()
        .replace("\"credits\":\"40\"", "\"credits\":\"lots\"");
    assert_eq!(app.deliver(body.as_bytes()).await.status(), 200);
    let worker = worker(&app.store, "w1");
    work_until(
        &app,
        &worker,
        "SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'failed' AND attempts = 3",
        1,
    )
    .await;
    let reason = app
        .db
        .count(
            "SELECT COUNT(*) FROM processed_stripe_events \
             WHERE last_error LIKE '%metadata.credits ''lots''%'",
        )
        .await;
    assert_eq!(reason, 1);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM credit_ledger").await, 0);
    // A failed claim waits for an operator: workers leave it alone.
    assert!(drain(&worker).await.is_empty());
}

async fn a_lease_taken_over_cannot_complete_twice(app: TestApp) {
    deliver_all(&app, &["checkout.session.completed.paid"]).await;
    // Worker A takes the claim with a lease that runs out before it finishes.
    let claim = app
        .store
        .claims()
        .lease_next("worker-a", now_ms(), 1, true, 3)
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    // Worker B rescues the stale claim and fulfils it.
    let attempts = drain(&worker(&app.store, "worker-b")).await;
    assert!(
        matches!(attempts.as_slice(), [Attempt::Processed { .. }]),
        "{attempts:?}"
    );
    // A wakes up and tries to complete: refused, nothing written.
    let plan = plan(
        &claim.event_type,
        &claim.payload,
        &Packages::default(),
        &Default::default(),
    )
    .unwrap();
    let late = app
        .store
        .claims()
        .fulfil(&claim, "worker-a", &plan, now_ms())
        .await
        .unwrap();
    assert_eq!(late, Fulfilled::LeaseLost);
    assert_eq!(ledger(&app, "ord_pub_0001", "unlock").await, 1);
}

/// The server's own workers pick up a new claim without being asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_workers_fulfil_new_claims() {
    let app = spawn_app_with(Backend::Sqlite, |config| config.workers = 2).await;
    deliver_all(&app, &["checkout.session.completed.paid"]).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ledger(&app, "ord_pub_0001", "unlock").await == 0 {
        assert!(std::time::Instant::now() < deadline, "no unlock");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(balance(&app, "ord_pub_0001").await, 40);
}

async fn a_claim_whose_worker_keeps_dying_fails_after_max_attempts(app: TestApp) {
    deliver_all(&app, &["checkout.session.completed.paid"]).await;
    // Three workers in a row take the lease and die with it (max attempts: 3).
    for i in 0..3 {
        let taken = app
            .store
            .claims()
            .lease_next(&format!("doomed-{i}"), now_ms(), 1, true, 3)
            .await
            .unwrap();
        assert!(taken.is_some(), "attempt {i}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let worker = worker(&app.store, "survivor");
    // Out of attempts: not rescued again, but failed by the sweep, with the reason.
    assert!(drain(&worker).await.is_empty());
    assert_eq!(worker.sweep().await.unwrap(), 1);
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'failed' \
                 AND last_error LIKE 'the lease expired on the last allowed attempt%'"
            )
            .await,
        1
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM credit_ledger").await, 0);
}

async fn a_batch_of_distinct_orders_unlocks_each_once_in_one_commit(app: TestApp) {
    for i in 0..40 {
        let body = paid_session(&format!("ord_b{i:03}"), i % 10 == 0);
        assert_eq!(app.deliver(&body).await.status(), 200);
    }
    let leased = app
        .store
        .claims()
        .lease_due("batcher", now_ms(), 60_000, true, 3, 40)
        .await
        .unwrap();
    assert_eq!(leased.len(), 40);
    let plans: Vec<_> = leased
        .iter()
        .map(|c| {
            plan(
                &c.event_type,
                &c.payload,
                &Packages::default(),
                &Default::default(),
            )
            .unwrap()
        })
        .collect();
    let batch: Vec<_> = leased.iter().zip(&plans).collect();
    let results = app
        .store
        .claims()
        .fulfil_batch(&batch, "batcher", now_ms())
        .await
        .unwrap()
        .unwrap();
    assert!(results.iter().all(|r| *r == Fulfilled::Processed));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM orders").await, 40);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        36,
        "the four unpaid orders wait"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM orders WHERE status = 'awaiting_payment'")
            .await,
        4
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'")
            .await,
        40
    );
    // Again: nothing changes (the claims are processed, the ledger is keyed by order).
    assert_eq!(
        app.store
            .claims()
            .fulfil_batch(&batch, "batcher", now_ms())
            .await
            .unwrap(),
        None
    );
    let balance = app
        .store
        .orders()
        .customer("batch@example.ch")
        .await
        .unwrap()
        .balance;
    assert_eq!(balance, 36 * 5);
}

async fn a_batch_with_one_lease_lost_writes_nothing(app: TestApp) {
    for i in 0..5 {
        let body = paid_session(&format!("ord_l{i}"), false);
        assert_eq!(app.deliver(&body).await.status(), 200);
    }
    let leased = app
        .store
        .claims()
        .lease_due("slow", now_ms(), 1, true, 3, 5)
        .await
        .unwrap();
    assert_eq!(leased.len(), 5);
    tokio::time::sleep(Duration::from_millis(5)).await;
    // Another worker rescues one of the five.
    let rescued = app
        .store
        .claims()
        .lease_next("fast", now_ms(), 60_000, true, 3)
        .await
        .unwrap()
        .unwrap();
    let plans: Vec<_> = leased
        .iter()
        .map(|c| {
            plan(
                &c.event_type,
                &c.payload,
                &Packages::default(),
                &Default::default(),
            )
            .unwrap()
        })
        .collect();
    let batch: Vec<_> = leased.iter().zip(&plans).collect();
    let result = app
        .store
        .claims()
        .fulfil_batch(&batch, "slow", now_ms())
        .await
        .unwrap();
    assert_eq!(result, None, "{rescued:?}");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM orders").await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM credit_ledger").await, 0);
}
