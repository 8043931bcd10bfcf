//! Crash drills: a real `claimcheck serve` process killed with SIGKILL at a failpoint, then
//! restarted on the same database. Every paid order ends with exactly one unlock, and no claim
//! stays stuck beyond its lease.

use std::time::{Duration, Instant};

use crate::helpers::{Backend, TestDb, fixture};
use crate::process::Server;

pub(crate) async fn wait_until(db: &TestDb, sql: &str, expected: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while db.count(sql).await != expected {
        assert!(
            Instant::now() < deadline,
            "never reached: {sql} = {expected}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The drill: a `serve` (with `env`) killed at `failpoint` while it fulfils `event`, with
/// nothing of it left in `written` (a count); a second one takes the stale claim over while
/// Stripe's `twin` and a resend of `event` arrive; every claim ends processed. The database,
/// for what each case then checks.
#[cfg(feature = "failpoints")]
async fn killed_and_taken_over(
    backend: Backend,
    failpoint: &str,
    env: &[(&str, &str)],
    event: Vec<u8>,
    twin: Vec<u8>,
    written: &str,
) -> TestDb {
    use crate::process::Launch;

    let db = TestDb::create(backend).await;
    let launch = |failpoint: Option<&str>| {
        let mut env: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        env.extend(failpoint.map(|f| ("CLAIMCHECK_FAILPOINT", f.to_owned())));
        Server::launch(
            &db,
            Launch {
                env,
                under: Vec::new(),
            },
        )
    };
    let mut doomed = launch(Some(failpoint));
    doomed.deliver_body(event.clone()).await;
    doomed.wait_for(&format!("failpoint {failpoint} reached"));
    doomed.kill();
    assert_eq!(db.count(written).await, 0, "uncommitted work survived");

    let survivor = launch(None);
    // The twin and a retry arrive while the claim is still stale.
    survivor.deliver_body(twin).await;
    survivor.deliver_body(event).await;
    wait_until(
        &db,
        "SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'",
        1,
    )
    .await;
    assert_eq!(
        db.count("SELECT COUNT(*) FROM processed_stripe_events WHERE status <> 'processed'")
            .await,
        0
    );
    db
}

#[cfg(feature = "failpoints")]
async fn drill(backend: Backend, failpoint: &str) {
    let db = killed_and_taken_over(
        backend,
        failpoint,
        &[],
        fixture("checkout.session.completed.paid"),
        fixture("checkout.session.completed.paid.twin"),
        "SELECT COUNT(*) FROM credit_ledger",
    )
    .await;
    assert_eq!(
        db.count(
            "SELECT COUNT(*) FROM credit_ledger WHERE order_id = 'ord_pub_0001' AND kind = 'unlock'"
        )
        .await,
        1
    );
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_taking_the_lease_sqlite() {
    drill(Backend::Sqlite, "after-lease").await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_taking_the_lease_postgres() {
    drill(Backend::Postgres, "after-lease").await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_ledger_write_sqlite() {
    drill(Backend::Sqlite, "after-ledger").await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_ledger_write_postgres() {
    drill(Backend::Postgres, "after-ledger").await;
}

/// A subscription's paid invoice: the instance granting it is killed at `failpoint`, a
/// second one takes the stale claim over while Stripe's twin (another Event object for the
/// same invoice) and a resend arrive; the period is granted once.
#[cfg(feature = "failpoints")]
async fn billing_drill(backend: Backend, failpoint: &str) {
    use crate::subscriptions::{FIRST_PERIOD_END, PLANS, billing, period_grants_in};

    let db = killed_and_taken_over(
        backend,
        failpoint,
        &[("CLAIMCHECK_PLANS", PLANS)],
        billing("invoice.paid.subscription_create", "crs"),
        billing("invoice.paid.subscription_create.twin", "crs"),
        "SELECT COUNT(*) FROM subscription_grants",
    )
    .await;
    assert_eq!(
        period_grants_in(&db, "sub_1Qcrs0001Plan", FIRST_PERIOD_END).await,
        40
    );
    assert_eq!(
        db.count(
            "SELECT COUNT(*) FROM credit_ledger WHERE order_id = 'in_1Qcrs0001Invoice' \
             AND kind = 'unlock'"
        )
        .await,
        1
    );
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_killed_after_the_lease_is_granted_once_sqlite() {
    billing_drill(Backend::Sqlite, "after-lease").await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_killed_after_the_lease_is_granted_once_postgres() {
    billing_drill(Backend::Postgres, "after-lease").await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_killed_after_its_ledger_write_is_granted_once_postgres() {
    billing_drill(Backend::Postgres, "after-ledger").await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_killed_after_its_ledger_write_is_granted_once_sqlite() {
    billing_drill(Backend::Sqlite, "after-ledger").await;
}

/// Two `claimcheck serve` processes on one PostgreSQL database; every order's deliveries
/// (each event three times, plus a twin) are split across both, concurrently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_a_duplicate_storm_on_postgres() {
    const ORDERS: usize = 25;
    let db = TestDb::create(Backend::Postgres).await;
    let first = Server::start(&db, None);
    let second = Server::start(&db, None);
    let template = String::from_utf8(fixture("checkout.session.completed.paid")).unwrap();
    let event = |i: usize, event_id: &str| {
        template
            .replace("evt_pub0001paid", event_id)
            .replace(
                "cs_test_pub0001a1YS1URlnyQCN5fUUduORoQ7Pw41PJ",
                &format!("cs_storm{i}"),
            )
            .replace("ord_pub_0001", &format!("ord_storm{i}"))
            .replace("pi_pub00013Mxc9vLkdIwHu7ix", &format!("pi_storm{i}"))
            .into_bytes()
    };
    let mut deliveries = Vec::new();
    for i in 0..ORDERS {
        for copy in 0..4 {
            let event_id = if copy == 3 {
                format!("evt_twin{i}")
            } else {
                format!("evt_storm{i}")
            };
            let server = if (i + copy) % 2 == 0 { &first } else { &second };
            deliveries.push(server.deliver_body(event(i, &event_id)));
        }
    }
    futures::future::join_all(deliveries).await;
    wait_until(
        &db,
        "SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'",
        ORDERS as i64,
    )
    .await;
    assert_eq!(
        db.count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        ORDERS as i64
    );
    assert_eq!(
        db.count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        ORDERS as i64
    );
    assert_eq!(
        db.count("SELECT COUNT(DISTINCT order_id) FROM credit_ledger")
            .await,
        ORDERS as i64
    );
    // Every repeat and twin was recognised as a duplicate, whichever instance it reached.
    let duplicates = db
        .count(
            "SELECT COUNT(*) FROM webhook_deliveries WHERE outcome IN ('duplicate_event', 'duplicate_action')",
        )
        .await;
    assert_eq!(duplicates, (ORDERS * 3) as i64);
}
