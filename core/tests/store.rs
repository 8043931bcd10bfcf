//! The store's exactly-once rules, on both backends, without the server: claims are taken
//! once per event and once per action, a lease is held by one worker at a time, a claim
//! commits only while its lease is held, a batch writes all or nothing, and re-drive is a
//! compare-and-set.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU32, Ordering};

use claimcheck_core::audit::{Actor, AuditAction, AuditRecord};
use claimcheck_core::bulk::BulkFilter;
use claimcheck_core::fulfilment::{Packages, Plan, plan};
use claimcheck_core::money::LedgerKind;
use claimcheck_core::webhook::Envelope;
use claimcheck_core::{
    ClaimOutcome, ClaimSource, ClaimState, DatabaseUrl, EventId, Fulfilled, LeasedClaim, OrderId,
    Store, StoreOptions, WriteOp, WriteResult,
};

#[derive(Debug, Clone, Copy)]
enum Backend {
    Sqlite,
    Postgres,
}

fn postgres_admin_url() -> String {
    std::env::var("CLAIMCHECK_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A migrated store on a database that exists for one test.
struct TestStore {
    store: Store,
    postgres: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

impl TestStore {
    async fn open(backend: Backend) -> TestStore {
        let (url, postgres, dir) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}/store.db", dir.path().display());
                (url, None, Some(dir))
            }
            Backend::Postgres => {
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let name = format!(
                    "claimcheck_core_test_{}_{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                );
                admin(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
                admin(&format!("CREATE DATABASE {name}")).await;
                let admin_url = postgres_admin_url();
                let (base, _) = admin_url.rsplit_once('/').unwrap();
                (format!("{base}/{name}"), Some(name), None)
            }
        };
        let url: DatabaseUrl = url.parse().unwrap();
        let store = Store::connect(&url, &StoreOptions::default())
            .await
            .unwrap();
        store.migrate().await.unwrap();
        TestStore {
            store,
            postgres,
            _dir: dir,
        }
    }

    async fn close(self) {
        self.store.close().await;
        if let Some(name) = &self.postgres {
            admin(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
        }
    }
}

async fn admin(sql: &str) {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect(&postgres_admin_url())
        .await
        .expect("PostgreSQL for tests on 127.0.0.1:5432");
    sqlx::raw_sql(sql).execute(&mut connection).await.unwrap();
}

/// A paid `checkout.session.completed` for `order` (40 credits), as event `event_id`.
fn paid_session(event_id: &str, order: &str) -> String {
    serde_json::json!({
        "id": event_id,
        "object": "event",
        "created": 1_764_400_000,
        "livemode": false,
        "type": "checkout.session.completed",
        "data": {"object": {
            "id": format!("cs_test_{order}"),
            "object": "checkout.session",
            "payment_status": "paid",
            "payment_intent": format!("pi_{order}"),
            "amount_total": 4900,
            "currency": "chf",
            "customer": "cus_1",
            "customer_details": {"email": "lea@example.ch"},
            "metadata": {"order_id": order, "credits": "40"}
        }}
    })
    .to_string()
}

fn claim_op(payload: &str, received_at: i64) -> WriteOp {
    let envelope = Envelope::parse(payload.as_bytes()).unwrap();
    WriteOp::Claim {
        object_id: envelope.object_id.clone().unwrap(),
        action_key: envelope.action_key.clone().unwrap(),
        envelope,
        payload: payload.to_owned(),
        received_at,
        source: ClaimSource::Webhook,
    }
}

async fn claim(store: &Store, payload: &str, received_at: i64) -> ClaimOutcome {
    let op = claim_op(payload, received_at);
    match store.claims().apply_writes(&[&op]).await.unwrap().pop() {
        Some(WriteResult::Claim(outcome)) => outcome,
        other => panic!("a claim write answered {other:?}"),
    }
}

fn plan_of(claim: &LeasedClaim) -> Plan {
    plan(&claim.event_type, &claim.payload, &Packages::default()).unwrap()
}

async fn unlocks(store: &Store, order: &str) -> i64 {
    let order = store
        .orders()
        .get(&OrderId::parse(order).unwrap())
        .await
        .unwrap()
        .expect("the order exists");
    order
        .ledger
        .iter()
        .filter(|entry| entry.kind == LedgerKind::Unlock)
        .count() as i64
}

/// One test per backend for each named `async fn(Backend)`.
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(super::Backend::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(super::Backend::Postgres).await;
            }
        }
    )+};
}

on_both_backends!(
    an_event_and_an_action_are_claimed_once,
    a_lease_belongs_to_one_worker_until_it_expires,
    a_claim_commits_only_while_its_lease_is_held,
    a_batch_with_one_lease_lost_writes_nothing,
    redrive_is_a_compare_and_set,
    failures_end_in_failed_after_the_last_attempt,
    audit_entries_keep_their_fields,
    the_redrivable_rule_is_the_same_in_sql,
);

async fn an_event_and_an_action_are_claimed_once(backend: Backend) {
    let db = TestStore::open(backend).await;
    let store = &db.store;
    let first = paid_session("evt_once_1", "ord_once");
    assert_eq!(claim(store, &first, 1).await, ClaimOutcome::Claimed);
    assert_eq!(claim(store, &first, 2).await, ClaimOutcome::DuplicateEvent);
    // Another Event object for the same action (same session, same type) is its twin.
    let twin = paid_session("evt_once_2", "ord_once");
    assert_eq!(
        claim(store, &twin, 3).await,
        ClaimOutcome::DuplicateAction {
            original: EventId::parse("evt_once_1").unwrap()
        }
    );
    // A batch holding the same event twice claims it once.
    let other = paid_session("evt_once_3", "ord_other");
    let (a, b) = (claim_op(&other, 4), claim_op(&other, 4));
    let results = store.claims().apply_writes(&[&a, &b]).await.unwrap();
    assert_eq!(
        results,
        vec![
            WriteResult::Claim(ClaimOutcome::Claimed),
            WriteResult::Claim(ClaimOutcome::DuplicateEvent)
        ]
    );
    let counts = store.claims().counts(10).await.unwrap();
    assert_eq!(counts.total(), 2);
    db.close().await;
}

async fn a_lease_belongs_to_one_worker_until_it_expires(backend: Backend) {
    let db = TestStore::open(backend).await;
    let store = &db.store;
    claim(store, &paid_session("evt_lease_1", "ord_lease"), 1).await;
    let leased = store
        .claims()
        .lease_due("a", 100, 1_000, true, 8, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].attempts, 1);
    // Held: nobody else gets it, with or without rescue.
    assert!(
        store
            .claims()
            .lease_due("b", 500, 1_000, true, 8, 10)
            .await
            .unwrap()
            .is_empty()
    );
    // Expired: only a worker that rescues stale claims takes it.
    assert!(
        store
            .claims()
            .lease_due("b", 2_000, 1_000, false, 8, 10)
            .await
            .unwrap()
            .is_empty()
    );
    let rescued = store
        .claims()
        .lease_due("b", 2_000, 1_000, true, 8, 10)
        .await
        .unwrap();
    assert_eq!(rescued.len(), 1);
    assert_eq!(rescued[0].attempts, 2);
    // Stale on its last allowed attempt: failed, not rescued again.
    assert!(
        store
            .claims()
            .lease_due("c", 4_000, 1_000, true, 2, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.claims().fail_exhausted_stale(4_000, 2).await.unwrap(),
        1
    );
    assert_eq!(store.claims().counts(4_000).await.unwrap().failed, 1);
    db.close().await;
}

async fn a_claim_commits_only_while_its_lease_is_held(backend: Backend) {
    let db = TestStore::open(backend).await;
    let store = &db.store;
    claim(store, &paid_session("evt_commit_1", "ord_commit"), 1).await;
    let slow = store
        .claims()
        .lease_next("slow", 100, 1_000, true, 8)
        .await
        .unwrap()
        .unwrap();
    // The slow worker overran its lease; another one rescued the claim.
    let fast = store
        .claims()
        .lease_next("fast", 2_000, 1_000, true, 8)
        .await
        .unwrap()
        .unwrap();
    let lost = store
        .claims()
        .fulfil(&slow, "slow", &plan_of(&slow), 2_100)
        .await
        .unwrap();
    assert_eq!(lost, Fulfilled::LeaseLost);
    assert!(
        store
            .orders()
            .get(&OrderId::parse("ord_commit").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    let done = store
        .claims()
        .fulfil(&fast, "fast", &plan_of(&fast), 2_200)
        .await
        .unwrap();
    assert_eq!(done, Fulfilled::Processed);
    // Fulfilling again (a late retry of the same plan) grants nothing more.
    assert_eq!(
        store
            .claims()
            .fulfil(&fast, "fast", &plan_of(&fast), 2_300)
            .await
            .unwrap(),
        Fulfilled::LeaseLost
    );
    assert_eq!(unlocks(store, "ord_commit").await, 1);
    assert_eq!(store.claims().counts(3_000).await.unwrap().processed, 1);
    db.close().await;
}

async fn a_batch_with_one_lease_lost_writes_nothing(backend: Backend) {
    let db = TestStore::open(backend).await;
    let store = &db.store;
    for i in 0..5 {
        claim(
            store,
            &paid_session(&format!("evt_batch_{i}"), &format!("ord_batch_{i}")),
            i,
        )
        .await;
    }
    let leased = store
        .claims()
        .lease_due("batcher", 100, 1_000, true, 8, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 5);
    // One of them is rescued by another worker after the batch's lease ran out.
    let taken = store
        .claims()
        .lease_next("rescuer", 2_000, 60_000, true, 8)
        .await
        .unwrap()
        .unwrap();
    let plans: Vec<Plan> = leased.iter().map(plan_of).collect();
    let batch: Vec<(&LeasedClaim, &Plan)> = leased.iter().zip(&plans).collect();
    assert_eq!(
        store
            .claims()
            .fulfil_batch(&batch, "batcher", 2_100)
            .await
            .unwrap(),
        None
    );
    for i in 0..5 {
        let order = OrderId::parse(format!("ord_batch_{i}")).unwrap();
        assert!(
            store.orders().get(&order).await.unwrap().is_none(),
            "order {i} written"
        );
    }
    // The rescuer completes its one; the batch's worker goes one by one and loses only that.
    let mine = store
        .claims()
        .fulfil(&taken, "rescuer", &plan_of(&taken), 2_200)
        .await
        .unwrap();
    assert_eq!(mine, Fulfilled::Processed);
    let releases = store
        .claims()
        .lease_due("batcher", 70_000, 1_000, true, 8, 10)
        .await
        .unwrap();
    assert_eq!(releases.len(), 4);
    let plans: Vec<Plan> = releases.iter().map(plan_of).collect();
    let batch: Vec<(&LeasedClaim, &Plan)> = releases.iter().zip(&plans).collect();
    let done = store
        .claims()
        .fulfil_batch(&batch, "batcher", 70_100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done, vec![Fulfilled::Processed; 4]);
    for i in 0..5 {
        assert_eq!(unlocks(store, &format!("ord_batch_{i}")).await, 1);
    }
    db.close().await;
}

async fn redrive_is_a_compare_and_set(backend: Backend) {
    let db = TestStore::open(backend).await;
    let store = &db.store;
    claim(store, &paid_session("evt_cas_1", "ord_cas"), 1).await;
    let id = EventId::parse("evt_cas_1").unwrap();
    // Two operators at once: one takes the lease, the other is refused.
    let (a, b) = tokio::join!(
        store.claims().take_for_redrive(&id, "op-a", 100, 60_000),
        store.claims().take_for_redrive(&id, "op-b", 100, 60_000)
    );
    let winners = [a.unwrap(), b.unwrap()].into_iter().flatten().count();
    assert_eq!(winners, 1);
    // A worker cannot take it while the re-drive holds it either.
    assert!(
        store
            .claims()
            .lease_next("w", 200, 1_000, true, 8)
            .await
            .unwrap()
            .is_none()
    );
    db.close().await;
}

async fn failures_end_in_failed_after_the_last_attempt(backend: Backend) {
    let db = TestStore::open(backend).await;
    let store = &db.store;
    claim(store, &paid_session("evt_fail_1", "ord_fail"), 1).await;
    let id = EventId::parse("evt_fail_1").unwrap();
    let first = store
        .claims()
        .lease_next("w", 100, 1_000, true, 2)
        .await
        .unwrap()
        .unwrap();
    let failed = store
        .claims()
        .record_failure(&first.event_id, "w", "boom", 150, 2)
        .await
        .unwrap();
    assert_eq!(failed, Some(false));
    // Not due before its backoff.
    assert!(
        store
            .claims()
            .lease_next("w", 120, 1_000, true, 2)
            .await
            .unwrap()
            .is_none()
    );
    let second = store
        .claims()
        .lease_next("w", 200, 1_000, true, 2)
        .await
        .unwrap()
        .unwrap();
    // Someone else's failure report changes nothing.
    assert_eq!(
        store
            .claims()
            .record_failure(&id, "x", "no", 300, 2)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .claims()
            .record_failure(&second.event_id, "w", "boom", 300, 2)
            .await
            .unwrap(),
        Some(true)
    );
    assert_eq!(store.claims().counts(400).await.unwrap().failed, 1);
    // A failed claim waits for an operator: no worker takes it, a re-drive may.
    assert!(
        store
            .claims()
            .lease_next("w", 10_000, 1_000, true, 8)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .claims()
            .take_for_redrive(&id, "op", 10_000, 1_000)
            .await
            .unwrap()
            .is_some()
    );
    db.close().await;
}

async fn audit_entries_keep_their_fields(backend: Backend) {
    let db = TestStore::open(backend).await;
    let store = &db.store;
    let actor = Actor::Dashboard("ana".into());
    store
        .audit()
        .record(
            &AuditRecord {
                actor: &actor,
                action: AuditAction::Redrive,
                target: "evt_x",
                reason: "stuck since the outage",
                outcome: "processed",
            },
            42,
        )
        .await
        .unwrap();
    let entries = store.audit().about("evt_x").await.unwrap();
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    assert_eq!(
        (
            entry.at,
            entry.actor.as_str(),
            entry.action.as_str(),
            entry.reason.as_str(),
            entry.outcome.as_str()
        ),
        (
            42,
            "dashboard:ana",
            "redrive",
            "stuck since the outage",
            "processed"
        )
    );
    db.close().await;
}

/// `ClaimState::is_redrivable` and the store's SQL agree, state by state: the bulk selection
/// picks exactly the re-drivable claims, and re-drive's compare-and-set takes exactly those.
async fn the_redrivable_rule_is_the_same_in_sql(backend: Backend) {
    let db = TestStore::open(backend).await;
    let store = &db.store;
    let id = |name: &str| EventId::parse(format!("evt_rd_{name}")).unwrap();
    // Running: leased for long. Stale: leased for 10 ms. Failed: its one attempt failed.
    // Pending: never leased.
    for (i, name) in ["running", "stale", "failed", "pending"].iter().enumerate() {
        let at = i as i64 + 1;
        claim(
            store,
            &paid_session(&format!("evt_rd_{name}"), &format!("ord_rd_{name}")),
            at,
        )
        .await;
        let lease = match *name {
            "running" => 1_000_000,
            "pending" => continue,
            _ => 10,
        };
        let leased = store
            .claims()
            .lease_next("w", 100, lease, false, 1)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(leased.event_id, id(name));
        if *name == "failed" {
            let done = store
                .claims()
                .record_failure(&leased.event_id, "w", "boom", 101, 1)
                .await
                .unwrap();
            assert_eq!(done, Some(true));
        }
    }
    let now = 1_000;
    let counts = store.claims().counts(now).await.unwrap();
    assert_eq!(
        (counts.pending, counts.running, counts.stale, counts.failed),
        (1, 1, 1, 1)
    );

    let state_of = |event: &str| match event.trim_start_matches("evt_rd_") {
        "running" => ClaimState::Running,
        "stale" => ClaimState::Stale,
        "failed" => ClaimState::Failed,
        _ => ClaimState::Pending,
    };
    let selected = |filter: BulkFilter| async move {
        let rows = store
            .bulk_redrives()
            .select(&filter, now, 100)
            .await
            .unwrap();
        let mut ids: Vec<String> = rows.into_iter().map(|r| r.claim.event_id).collect();
        ids.sort();
        ids
    };
    let any = selected(BulkFilter::default()).await;
    let mut expected: Vec<String> = ["running", "stale", "failed", "pending"]
        .iter()
        .map(|n| format!("evt_rd_{n}"))
        .filter(|e| state_of(e).is_redrivable())
        .collect();
    expected.sort();
    assert_eq!(any, expected);
    for state in ClaimState::ALL.into_iter().filter(|s| s.is_redrivable()) {
        let only = selected(BulkFilter {
            state: Some(state),
            ..BulkFilter::default()
        })
        .await;
        assert_eq!(
            only.iter().map(|e| state_of(e)).collect::<Vec<_>>(),
            [state],
            "{state}"
        );
    }
    for name in ["running", "stale", "failed", "pending"] {
        let event = id(name);
        let taken = store
            .claims()
            .take_for_redrive(&event, "op", now, 60_000)
            .await
            .unwrap();
        assert_eq!(
            taken.is_some(),
            state_of(event.as_str()).is_redrivable(),
            "{name}"
        );
    }
    db.close().await;
}
