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
    url: String,
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
        let parsed: DatabaseUrl = url.parse().unwrap();
        let store = Store::connect(&parsed, &StoreOptions::default())
            .await
            .unwrap();
        store.migrate().await.unwrap();
        TestStore {
            store,
            url,
            postgres,
            _dir: dir,
        }
    }

    /// Runs `statement` on a connection of its own, as another program (or an older
    /// version) writing to the same database would.
    async fn execute(&self, statement: &str) {
        use sqlx::Connection;
        if self.postgres.is_some() {
            let mut connection = sqlx::PgConnection::connect(&self.url).await.unwrap();
            sqlx::raw_sql(statement)
                .execute(&mut connection)
                .await
                .unwrap();
        } else {
            let mut connection = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
            sqlx::raw_sql(statement)
                .execute(&mut connection)
                .await
                .unwrap();
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
    plan(
        &claim.event_type,
        &claim.payload,
        &Packages::default(),
        &Default::default(),
    )
    .unwrap()
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
    the_claim_state_is_the_same_in_sql,
    claims_are_found_by_what_their_payloads_name,
);

/// [`paid_session`] paid by `email`.
fn paid_session_by(event_id: &str, order: &str, email: &str) -> String {
    let mut event: serde_json::Value =
        serde_json::from_str(&paid_session(event_id, order)).unwrap();
    event["data"]["object"]["customer_details"]["email"] = email.into();
    event.to_string()
}

fn ids(claims: &[claimcheck_core::ClaimView]) -> Vec<&str> {
    let mut ids: Vec<&str> = claims.iter().map(|c| c.event_id.as_str()).collect();
    ids.sort_unstable();
    ids
}

async fn claims_are_found_by_what_their_payloads_name(backend: Backend) {
    let db = TestStore::open(backend).await;
    let store = &db.store;
    // One claim written alone, three in one batch (the set-based path): none fulfilled.
    claim(
        store,
        &paid_session_by("evt_t1", "ord_t_0001", "Lea@Example.ch"),
        1,
    )
    .await;
    let batch: Vec<WriteOp> = (2..=4)
        .map(|i| {
            let body = paid_session_by(
                &format!("evt_t{i}"),
                &format!("ord_t_000{i}"),
                "max@example.ch",
            );
            claim_op(&body, i)
        })
        .collect();
    let ops: Vec<&WriteOp> = batch.iter().collect();
    store.claims().apply_writes(&ops).await.unwrap();
    let claims = store.claims();

    // An order id prefix lists every match; a whole id finds one; an e-mail in any case.
    let found = claims.find("ord_t_000", 10, 20).await.unwrap();
    assert_eq!(ids(&found), ["evt_t1", "evt_t2", "evt_t3", "evt_t4"]);
    assert_eq!(
        ids(&claims.find("ord_t_0003", 10, 20).await.unwrap()),
        ["evt_t3"]
    );
    assert_eq!(
        ids(&claims.find(" LEA@example.CH ", 10, 20).await.unwrap()),
        ["evt_t1"]
    );
    assert_eq!(
        ids(&claims.find("pi_ord_t_0002", 10, 20).await.unwrap()),
        ["evt_t2"]
    );
    assert_eq!(claims.find("ord_t_0009", 10, 20).await.unwrap().len(), 0);
    // Prefixes are of ids, not of anything inside them; the limit holds.
    assert_eq!(claims.find("t_000", 10, 20).await.unwrap().len(), 0);
    assert_eq!(claims.find("ord_t", 10, 2).await.unwrap().len(), 2);
    // The customer's claims are exactly those naming them, whatever the case typed.
    assert_eq!(
        ids(&claims.naming("MAX@example.ch", 10, 20).await.unwrap()),
        ["evt_t2", "evt_t3", "evt_t4"]
    );
    assert_eq!(claims.naming("max@example", 10, 20).await.unwrap().len(), 0);
    // The events list's search reads the same index.
    let filter = claimcheck_core::EventFilter {
        search: Some("lea@example.ch".into()),
        ..Default::default()
    };
    assert_eq!(
        ids(&claims.list_events(&filter, None, 10, 50).await.unwrap()),
        ["evt_t1"]
    );

    // A claim an older version wrote (no terms) is indexed later from its payload, once;
    // one whose payload was pruned still by its object's id.
    db.execute(
        "DELETE FROM claim_terms WHERE event_id IN ('evt_t1', 'evt_t2'); \
         UPDATE processed_stripe_events SET terms_indexed = FALSE \
           WHERE event_id IN ('evt_t1', 'evt_t2'); \
         UPDATE processed_stripe_events SET payload = '' WHERE event_id = 'evt_t2'",
    )
    .await;
    assert_eq!(
        claims.find("lea@example.ch", 10, 20).await.unwrap().len(),
        0
    );
    assert_eq!(claims.index_unindexed(1).await.unwrap(), 1);
    assert_eq!(claims.index_unindexed(10).await.unwrap(), 1);
    assert_eq!(claims.index_unindexed(10).await.unwrap(), 0);
    assert_eq!(
        ids(&claims.find("lea@example.ch", 10, 20).await.unwrap()),
        ["evt_t1"]
    );
    assert_eq!(
        ids(&claims.find("cs_test_ord_t_0002", 10, 20).await.unwrap()),
        ["evt_t2"]
    );
    assert_eq!(
        ids(&claims.find("ord_t_0002", 10, 20).await.unwrap()),
        Vec::<&str>::new()
    );
    db.close().await;
}

/// One claim in each [`ClaimState`] at time 1,000, named `evt_cs_<state>`; the pending one
/// is claimed last, so that no lease takes it.
async fn one_claim_per_state(store: &Store) {
    let mut states: Vec<ClaimState> = ClaimState::ALL
        .into_iter()
        .filter(|s| *s != ClaimState::Pending)
        .collect();
    states.push(ClaimState::Pending);
    for (i, state) in states.into_iter().enumerate() {
        let name = format!("evt_cs_{state}");
        claim(
            store,
            &paid_session(&name, &format!("ord_cs_{state}")),
            i as i64 + 1,
        )
        .await;
        let lease = match state {
            ClaimState::Pending => continue,
            ClaimState::Running => 1_000_000,
            _ => 10,
        };
        let leased = store
            .claims()
            .lease_next("w", 100, lease, false, 1)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(leased.event_id.as_str(), name);
        match state {
            ClaimState::Failed | ClaimState::Resolved => {
                let gave_up = store
                    .claims()
                    .record_failure(&leased.event_id, "w", "boom", 101, 1)
                    .await
                    .unwrap();
                assert_eq!(gave_up, Some(true));
                if state == ClaimState::Resolved {
                    let resolved = store
                        .claims()
                        .resolve(&leased.event_id, "cli:ops", "never", 102)
                        .await
                        .unwrap();
                    assert!(resolved);
                }
            }
            ClaimState::Processed => {
                let done = store
                    .claims()
                    .fulfil(&leased, "w", &plan_of(&leased), 105)
                    .await
                    .unwrap();
                assert_eq!(done, Fulfilled::Processed);
            }
            _ => {}
        }
    }
}

/// The state derived in SQL (counts, lists, one claim) and the WHERE condition of each state
/// (the events list's filter) agree with the Rust state machine, state by state.
async fn the_claim_state_is_the_same_in_sql(backend: Backend) {
    let db = TestStore::open(backend).await;
    let store = &db.store;
    one_claim_per_state(store).await;
    let now = 1_000;
    let counts = store.claims().counts(now).await.unwrap();
    for state in ClaimState::ALL {
        let name = format!("evt_cs_{state}");
        assert_eq!(counts.get(state), 1, "{state}");
        let listed = store.claims().list(Some(state), now, 10).await.unwrap();
        assert_eq!(
            listed
                .iter()
                .map(|c| c.event_id.as_str())
                .collect::<Vec<_>>(),
            [name.as_str()],
            "{state}"
        );
        let one = store
            .claims()
            .get(&EventId::parse(name.clone()).unwrap(), now)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(one.status, state);
        let page = store
            .claims()
            .list_events(
                &claimcheck_core::EventFilter {
                    state: Some(state),
                    ..Default::default()
                },
                None,
                now,
                10,
            )
            .await
            .unwrap();
        assert_eq!(
            page.iter().map(|c| c.event_id.as_str()).collect::<Vec<_>>(),
            [name.as_str()],
            "{state}"
        );
    }
    assert_eq!(
        store.claims().list(None, now, 10).await.unwrap().len(),
        ClaimState::ALL.len()
    );
    db.close().await;
}

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
    // Resolved: failed, then set aside. Pending: never leased.
    const NAMES: [&str; 5] = ["running", "stale", "failed", "resolved", "pending"];
    for (i, name) in NAMES.iter().enumerate() {
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
        if matches!(*name, "failed" | "resolved") {
            let done = store
                .claims()
                .record_failure(&leased.event_id, "w", "boom", 101, 1)
                .await
                .unwrap();
            assert_eq!(done, Some(true));
        }
        if *name == "resolved" {
            assert!(
                store
                    .claims()
                    .resolve(&leased.event_id, "cli:ops", "never", 102)
                    .await
                    .unwrap()
            );
            // Once: a second resolve finds nothing to do.
            assert!(
                !store
                    .claims()
                    .resolve(&leased.event_id, "cli:ops", "never", 103)
                    .await
                    .unwrap()
            );
        }
    }
    let now = 1_000;
    let counts = store.claims().counts(now).await.unwrap();
    assert_eq!(
        (
            counts.pending,
            counts.running,
            counts.stale,
            counts.failed,
            counts.resolved
        ),
        (1, 1, 1, 1, 1)
    );

    let state_of = |event: &str| match event.trim_start_matches("evt_rd_") {
        "running" => ClaimState::Running,
        "stale" => ClaimState::Stale,
        "failed" => ClaimState::Failed,
        "resolved" => ClaimState::Resolved,
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
    let mut expected: Vec<String> = NAMES
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
    for name in NAMES {
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

/// What the schema holds, in terms both backends share.
#[derive(Debug, Default, PartialEq, Eq)]
struct Schema {
    /// table → column → (kind, nullable)
    columns: std::collections::BTreeMap<String, std::collections::BTreeMap<String, (String, bool)>>,
    /// (table, columns, partial) of every unique key: primary keys, UNIQUE constraints,
    /// unique indexes.
    unique: std::collections::BTreeSet<(String, Vec<String>, bool)>,
    /// (table, the literals its CHECK constraints allow, sorted)
    checks: std::collections::BTreeSet<(String, Vec<String>)>,
}

/// A column type as a kind both backends mean alike.
fn kind(declared: &str) -> String {
    let t = declared.to_ascii_lowercase();
    if t.contains("int") {
        "integer".into()
    } else if t.contains("bool") {
        "boolean".into()
    } else if t.contains("text") || t.contains("char") {
        "text".into()
    } else {
        t
    }
}

/// The quoted strings and numbers of a CHECK's text: what it allows, whatever the backend's
/// spelling (`IN ('a', 'b')` or `= ANY (ARRAY['a'::text, 'b'::text])`).
fn literals(check: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = check;
    while let Some(start) = rest.find('\'') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('\'') else { break };
        found.push(after[..end].to_owned());
        rest = &after[end + 1..];
    }
    for token in check.split(|c: char| !c.is_ascii_alphanumeric() && c != '\'') {
        if !token.is_empty() && token.chars().all(|c| c.is_ascii_digit()) {
            found.push(token.to_owned());
        }
    }
    found.sort();
    found
}

async fn sqlite_schema(url: &str) -> Schema {
    let pool = sqlx::SqlitePool::connect(url).await.unwrap();
    let mut schema = Schema::default();
    let tables: Vec<(String, String)> = sqlx::query_as(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' \
         AND name NOT IN ('_sqlx_migrations', 'sqlite_sequence') ORDER BY name",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for (table, create) in tables {
        let columns: Vec<(String, String, i64, i64)> =
            sqlx::query_as("SELECT name, type, \"notnull\", pk FROM pragma_table_info($1)")
                .bind(&table)
                .fetch_all(&pool)
                .await
                .unwrap();
        let primary: Vec<String> = {
            let mut pk: Vec<(i64, String)> = columns
                .iter()
                .filter(|c| c.3 > 0)
                .map(|c| (c.3, c.0.clone()))
                .collect();
            pk.sort();
            pk.into_iter().map(|(_, name)| name).collect()
        };
        for (name, declared, not_null, pk) in &columns {
            // Only an INTEGER PRIMARY KEY (the rowid) is never NULL without saying so.
            let rowid = *pk > 0 && primary.len() == 1 && kind(declared) == "integer";
            schema
                .columns
                .entry(table.clone())
                .or_default()
                .insert(name.clone(), (kind(declared), *not_null == 0 && !rowid));
        }
        if !primary.is_empty() {
            schema.unique.insert((table.clone(), primary, false));
        }
        let indexes: Vec<(String, i64, i64)> =
            sqlx::query_as("SELECT name, \"unique\", partial FROM pragma_index_list($1)")
                .bind(&table)
                .fetch_all(&pool)
                .await
                .unwrap();
        for (index, unique, partial) in indexes {
            if unique == 0 {
                continue;
            }
            let mut cols: Vec<(i64, String)> =
                sqlx::query_as("SELECT seqno, name FROM pragma_index_info($1)")
                    .bind(&index)
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            cols.sort();
            let cols: Vec<String> = cols.into_iter().map(|(_, n)| n).collect();
            if cols.is_empty() {
                continue;
            }
            schema.unique.insert((table.clone(), cols, partial != 0));
        }
        // CHECK constraints are only in the table's text (comments and all).
        let text: String = create
            .lines()
            .map(|line| line.split("--").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        let mut rest = text.as_str();
        while let Some(at) = rest.to_ascii_uppercase().find("CHECK") {
            let after = &rest[at..];
            // The keyword, not a name that starts with it (`checkout_url`).
            let keyword = after[5..].trim_start().starts_with('(')
                && !rest[..at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
            if !keyword {
                rest = &after[5..];
                continue;
            }
            let Some(open) = after.find('(') else { break };
            let mut depth = 0;
            let mut end = open;
            for (i, c) in after[open..].char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = open + i;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            schema
                .checks
                .insert((table.clone(), literals(&after[open..=end])));
            rest = &after[end..];
        }
    }
    pool.close().await;
    schema
}

async fn postgres_schema(url: &str) -> Schema {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let mut schema = Schema::default();
    let columns: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text \
         FROM information_schema.columns WHERE table_schema = 'public' \
         AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for (table, name, declared, nullable) in columns {
        schema
            .columns
            .entry(table)
            .or_default()
            .insert(name, (kind(&declared), nullable == "YES"));
    }
    let unique: Vec<(String, Vec<String>, bool)> = sqlx::query_as(
        "SELECT t.relname::text, \
                ARRAY(SELECT a.attname::text FROM unnest(i.indkey) WITH ORDINALITY AS k(n, o) \
                      JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.n ORDER BY k.o), \
                i.indpred IS NOT NULL \
         FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid \
         JOIN pg_namespace s ON s.oid = t.relnamespace \
         WHERE s.nspname = 'public' AND i.indisunique AND t.relname <> '_sqlx_migrations'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    schema.unique.extend(unique);
    let checks: Vec<(String, String)> = sqlx::query_as(
        "SELECT t.relname::text, pg_get_constraintdef(c.oid) FROM pg_constraint c \
         JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace s ON s.oid = t.relnamespace \
         WHERE s.nspname = 'public' AND c.contype = 'c'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    for (table, check) in checks {
        schema.checks.insert((table, literals(&check)));
    }
    pool.close().await;
    schema
}

/// The two migration folders are written by hand: after all of them, SQLite and PostgreSQL
/// hold the same tables, columns (name, kind, nullability), unique keys and checks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_backends_migrate_to_the_same_schema() {
    let sqlite = TestStore::open(Backend::Sqlite).await;
    let postgres = TestStore::open(Backend::Postgres).await;
    let dir = sqlite._dir.as_ref().unwrap().path().display().to_string();
    let name = postgres.postgres.clone().unwrap();
    let admin_url = postgres_admin_url();
    let (base, _) = admin_url.rsplit_once('/').unwrap();
    let lite = sqlite_schema(&format!("sqlite://{dir}/store.db")).await;
    let pg = postgres_schema(&format!("{base}/{name}")).await;
    assert_eq!(
        lite.columns.keys().collect::<Vec<_>>(),
        pg.columns.keys().collect::<Vec<_>>(),
        "tables"
    );
    for (table, columns) in &lite.columns {
        assert_eq!(Some(columns), pg.columns.get(table), "columns of {table}");
    }
    assert_eq!(lite.unique, pg.unique, "unique keys");
    assert_eq!(lite.checks, pg.checks, "checks");
    assert!(lite.checks.len() >= 10, "{:?}", lite.checks);
    sqlite.close().await;
    postgres.close().await;
}
