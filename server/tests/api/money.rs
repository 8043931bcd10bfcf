//! Money after the purchase, through the webhook and the worker: partial and several refunds
//! per charge, refunds out of order, failed refunds, disputes won and lost, and any order and
//! duplication of one order's events converging on the same credits.

use std::time::Duration;

use claimcheck_core::Fulfilled;
use claimcheck_core::fulfilment::{Packages, plan};
use claimcheck_core::money::{LedgerKind, OrderStatus};
use claimcheck_core::worker::{Worker, WorkerConfig};
use claimcheck_core::{OrderId, now_ms};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, on_both_backends, spawn_app};

on_both_backends!(
    a_partial_refund_then_the_rest_leaves_no_credits,
    the_rest_before_the_partial_refund_converges_too,
    three_partial_refunds_delivered_twice_with_twins_revoke_in_proportion,
    a_refund_that_fails_gives_its_credits_back_once,
    a_dispute_holds_the_credits_and_a_win_restores_them,
    a_lost_dispute_is_a_chargeback_without_credits,
    any_order_and_duplication_of_an_orders_events_ends_the_same,
    payments_unlocked_together_settle_what_their_money_did_before,
);

/// One order's events, with ids unique to `case`.
struct Order {
    case: String,
}

impl Order {
    fn new(case: &str) -> Order {
        Order { case: case.into() }
    }

    fn id(&self) -> String {
        format!("ord_{}", self.case)
    }

    fn pi(&self) -> String {
        format!("pi_{}", self.case)
    }

    fn event(&self, id: &str, kind: &str, object: Value) -> Value {
        json!({
            "id": format!("evt_{}_{id}", self.case),
            "object": "event",
            "type": kind,
            "created": now_ms() / 1000,
            "livemode": false,
            "data": { "object": object },
        })
    }

    /// Paid: 40 credits for CHF 49.00.
    fn paid(&self) -> Value {
        self.event(
            "paid",
            "checkout.session.completed",
            json!({
                "id": format!("cs_{}", self.case),
                "object": "checkout.session",
                "payment_status": "paid",
                "amount_total": 4900,
                "currency": "chf",
                "payment_intent": self.pi(),
                "customer_email": "lea@example.ch",
                "metadata": { "order_id": self.id(), "credits": "40" },
            }),
        )
    }

    /// The session completed with `payment_status` `unpaid` (a SEPA debit on its way), or its
    /// async payment succeeded.
    fn session(&self, kind: &str, payment_status: &str) -> Value {
        let mut event = self.paid();
        event["id"] = json!(format!("evt_{}_{kind}", self.case));
        event["type"] = json!(kind);
        event["data"]["object"]["payment_status"] = json!(payment_status);
        event
    }

    /// A refund that leaves `total` refunded on the charge.
    fn refunded(&self, total: i64) -> Value {
        self.event(
            &format!("refunded_{total}"),
            "charge.refunded",
            json!({
                "id": format!("ch_{}", self.case),
                "object": "charge",
                "amount": 4900,
                "amount_refunded": total,
                "refunded": total >= 4900,
                "currency": "chf",
                "payment_intent": self.pi(),
            }),
        )
    }

    fn refund_failed(&self, refund: &str, amount: i64) -> Value {
        self.event(
            &format!("failed_{refund}"),
            "refund.failed",
            json!({
                "id": format!("re_{}_{refund}", self.case),
                "object": "refund",
                "amount": amount,
                "status": "failed",
                "charge": format!("ch_{}", self.case),
                "payment_intent": self.pi(),
            }),
        )
    }

    fn dispute(&self, kind: &str, status: &str) -> Value {
        self.event(
            &format!("dispute_{status}"),
            kind,
            json!({
                "id": format!("dp_{}", self.case),
                "object": "dispute",
                "amount": 4900,
                "status": status,
                "charge": format!("ch_{}", self.case),
                "payment_intent": self.pi(),
            }),
        )
    }
}

/// A second Event object for the same action (another id, the same object).
fn twin(event: &Value) -> Value {
    let mut twin = event.clone();
    twin["id"] = json!(format!("{}_twin", event["id"].as_str().unwrap()));
    twin
}

async fn deliver(app: &TestApp, event: &Value) -> Value {
    let response = app.deliver(&serde_json::to_vec(event).unwrap()).await;
    assert_eq!(response.status(), 200, "{event}");
    response.json().await.unwrap()
}

fn worker(app: &TestApp) -> Worker {
    Worker::new(
        app.store.clone(),
        "money-worker",
        WorkerConfig {
            base_backoff: Duration::from_millis(5),
            max_attempts: 1000,
            ..WorkerConfig::default()
        },
    )
}

/// Works until every claim is processed (refunds that came before their order are retried
/// once it is known).
async fn settle(app: &TestApp) {
    app.settle(&worker(app)).await;
}

async fn order(app: &TestApp, order: &Order) -> claimcheck_core::OrderView {
    app.store
        .orders()
        .get(&OrderId::parse(order.id()).unwrap())
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no order {}", order.id()))
}

async fn rows(app: &TestApp, order: &Order, kind: &str) -> i64 {
    app.db
        .count(&format!(
            "SELECT COUNT(*) FROM credit_ledger WHERE order_id = '{}' AND kind = '{kind}'",
            order.id()
        ))
        .await
}

async fn a_partial_refund_then_the_rest_leaves_no_credits(app: TestApp) {
    let o = Order::new("halves");
    deliver(&app, &o.paid()).await;
    settle(&app).await;
    // Half of the money back: half of the credits.
    let first = deliver(&app, &o.refunded(2450)).await;
    assert_eq!(first["outcome"], "claimed", "{first}");
    settle(&app).await;
    let half = order(&app, &o).await;
    assert_eq!(half.credits_granted, 20);
    assert_eq!(half.status, OrderStatus::PartiallyRefunded);
    assert_eq!(half.amount_refunded, 2450);
    // The rest: a second charge.refunded on the same charge is its own action.
    let rest = deliver(&app, &o.refunded(4900)).await;
    assert_eq!(rest["outcome"], "claimed", "{rest}");
    settle(&app).await;
    let done = order(&app, &o).await;
    assert_eq!(done.credits_granted, 0);
    assert_eq!(done.status, OrderStatus::Refunded);
    assert_eq!(rows(&app, &o, "revoke").await, 2);
    let steps: Vec<(i64, Option<i64>)> = done
        .ledger
        .iter()
        .filter(|e| e.kind == LedgerKind::Revoke)
        .map(|e| (e.delta, e.amount))
        .collect();
    assert_eq!(steps, vec![(-20, Some(2450)), (-20, Some(4900))]);
    assert!(
        done.ledger
            .iter()
            .filter(|e| e.kind == LedgerKind::Revoke)
            .all(|e| e.event_id.is_some()),
        "each step names its event"
    );
}

async fn the_rest_before_the_partial_refund_converges_too(app: TestApp) {
    let o = Order::new("reversed");
    deliver(&app, &o.paid()).await;
    deliver(&app, &o.refunded(4900)).await;
    settle(&app).await;
    deliver(&app, &o.refunded(2450)).await;
    settle(&app).await;
    let done = order(&app, &o).await;
    assert_eq!(done.credits_granted, 0);
    assert_eq!(done.status, OrderStatus::Refunded);
    // The late partial refund found its money already taken back: no second revoke.
    assert_eq!(rows(&app, &o, "revoke").await, 1);

    // Both refunds before the payment itself: they wait for the order, then settle.
    let early = Order::new("early");
    deliver(&app, &early.refunded(2450)).await;
    deliver(&app, &early.refunded(4900)).await;
    let w = worker(&app);
    while !w.run_once().await.unwrap().is_empty() {}
    deliver(&app, &early.paid()).await;
    settle(&app).await;
    let done = order(&app, &early).await;
    assert_eq!(done.credits_granted, 0);
    assert_eq!(done.status, OrderStatus::Refunded);
}

async fn three_partial_refunds_delivered_twice_with_twins_revoke_in_proportion(app: TestApp) {
    let o = Order::new("thirds");
    deliver(&app, &o.paid()).await;
    settle(&app).await;
    // CHF 10, then 15 more (25 in all), then 14.50 more (39.50 in all), of 49.
    for (total, credits) in [(1000, 32), (2500, 20), (3950, 8)] {
        let refund = o.refunded(total);
        assert_eq!(deliver(&app, &refund).await["outcome"], "claimed");
        assert_eq!(deliver(&app, &refund).await["outcome"], "duplicate_event");
        let twin = deliver(&app, &twin(&refund)).await;
        assert_eq!(twin["outcome"], "duplicate_action", "{twin}");
        settle(&app).await;
        // floor(40 × refunded ÷ 4900) revoked so far.
        assert_eq!(order(&app, &o).await.credits_granted, credits, "{total}");
    }
    assert_eq!(rows(&app, &o, "revoke").await, 3);
    assert_eq!(order(&app, &o).await.status, OrderStatus::PartiallyRefunded);
}

async fn a_refund_that_fails_gives_its_credits_back_once(app: TestApp) {
    let o = Order::new("bounced");
    deliver(&app, &o.paid()).await;
    deliver(&app, &o.refunded(2450)).await;
    settle(&app).await;
    assert_eq!(order(&app, &o).await.credits_granted, 20);
    let failed = o.refund_failed("1", 2450);
    assert_eq!(deliver(&app, &failed).await["outcome"], "claimed");
    assert_eq!(deliver(&app, &failed).await["outcome"], "duplicate_event");
    assert_eq!(
        deliver(&app, &twin(&failed)).await["outcome"],
        "duplicate_action"
    );
    settle(&app).await;
    let back = order(&app, &o).await;
    assert_eq!(back.credits_granted, 40);
    assert_eq!(back.status, OrderStatus::Paid);
    assert_eq!(back.amount_refunded, 0);
    assert_eq!(back.refund_failed, 2450);
    assert_eq!(rows(&app, &o, "restore").await, 1);
    // A later refund of the rest still counts in full.
    deliver(&app, &o.refunded(7350)).await;
    settle(&app).await;
    let refunded = order(&app, &o).await;
    assert_eq!(refunded.credits_granted, 0);
    assert_eq!(refunded.status, OrderStatus::Refunded);
}

async fn a_dispute_holds_the_credits_and_a_win_restores_them(app: TestApp) {
    let o = Order::new("won");
    deliver(&app, &o.paid()).await;
    deliver(&app, &o.refunded(1000)).await;
    deliver(&app, &o.dispute("charge.dispute.created", "needs_response")).await;
    settle(&app).await;
    let held = order(&app, &o).await;
    assert_eq!(held.status, OrderStatus::Disputed);
    assert_eq!(held.credits_granted, 0, "what the refund left is held");
    assert_eq!(held.dispute_status.as_deref(), Some("open"));
    deliver(&app, &o.dispute("charge.dispute.closed", "won")).await;
    settle(&app).await;
    let won = order(&app, &o).await;
    assert_eq!(won.status, OrderStatus::PartiallyRefunded);
    assert_eq!(won.credits_granted, 32);
    assert_eq!(rows(&app, &o, "dispute_hold").await, 1);
    assert_eq!(rows(&app, &o, "dispute_release").await, 1);
}

async fn a_lost_dispute_is_a_chargeback_without_credits(app: TestApp) {
    let o = Order::new("lost");
    deliver(&app, &o.paid()).await;
    // The close arrives before the opening; the opening then changes nothing.
    deliver(&app, &o.dispute("charge.dispute.closed", "lost")).await;
    settle(&app).await;
    deliver(&app, &o.dispute("charge.dispute.created", "needs_response")).await;
    settle(&app).await;
    let lost = order(&app, &o).await;
    assert_eq!(lost.status, OrderStatus::Chargeback);
    assert_eq!(lost.credits_granted, 0);
    assert_eq!(lost.dispute_status.as_deref(), Some("lost"));
    assert_eq!(rows(&app, &o, "dispute_hold").await, 1);
    assert_eq!(rows(&app, &o, "dispute_release").await, 0);
}

/// A small deterministic generator (xorshift), so a failing case can be replayed by its seed.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The property behind invariant 3: however the events of one order are ordered, repeated
/// or doubled by twins, its ledger ends with the same credits per cause and the same status.
/// Each case is one order with its own ids: paid; CHF 10, then 25 in all refunded; the
/// second refund (CHF 15) fails; a dispute opened and closed, won or lost.
async fn any_order_and_duplication_of_an_orders_events_ends_the_same(app: TestApp) {
    const CASES: u64 = 48;
    let mut expected = Vec::new();
    for case in 0..CASES {
        let mut dice = Dice(0x9e37_79b9_7f4a_7c15 ^ (case + 1));
        let o = Order::new(&format!("perm{case}"));
        let won = case % 2 == 0;
        let mut events = vec![
            o.paid(),
            o.refunded(1000),
            o.refunded(2500),
            o.refund_failed("2", 1500),
            o.dispute("charge.dispute.created", "needs_response"),
            o.dispute("charge.dispute.closed", if won { "won" } else { "lost" }),
        ];
        // Fisher–Yates, then some repeats and twins.
        for i in (1..events.len()).rev() {
            let j = (dice.next() % (i as u64 + 1)) as usize;
            events.swap(i, j);
        }
        let mut deliveries = Vec::new();
        for event in events {
            match dice.next() % 4 {
                0 => deliveries.extend([event.clone(), event]),
                1 => deliveries.extend([twin(&event), event]),
                _ => deliveries.push(event),
            }
        }
        for event in &deliveries {
            deliver(&app, event).await;
        }
        expected.push((o, won));
    }
    settle(&app).await;
    for (o, won) in &expected {
        let done = order(&app, o).await;
        // CHF 10 refunded for good: floor(40 × 1000 ÷ 4900) = 8 revoked; a won dispute
        // holds nothing, a lost one the remaining 32.
        let (status, credits, held) = if *won {
            ("partially_refunded", 32, 0)
        } else {
            ("chargeback", 0, -32)
        };
        let sum = |kinds: &[&str]| -> i64 {
            done.ledger
                .iter()
                .filter(|e| kinds.contains(&e.kind.as_str()))
                .map(|e| e.delta)
                .sum()
        };
        let case = &o.case;
        assert_eq!(done.status.as_str(), status, "{case}: {:?}", done.ledger);
        assert_eq!(done.credits_granted, credits, "{case}: {:?}", done.ledger);
        assert_eq!(sum(&["unlock"]), 40, "{case}");
        assert_eq!(sum(&["revoke", "restore"]), -8, "{case}: {:?}", done.ledger);
        assert_eq!(
            sum(&["dispute_hold", "dispute_release"]),
            held,
            "{case}: {:?}",
            done.ledger
        );
    }
}

/// SEPA payments whose money moved before they cleared (a refund, a dispute, a full refund
/// half of which then failed), all cleared in one batch: the set-based batch unlock settles
/// each order against its own facts, and leaves the others alone.
async fn payments_unlocked_together_settle_what_their_money_did_before(app: TestApp) {
    let orders: Vec<Order> = [
        "sepa_refunded",
        "sepa_disputed",
        "sepa_bounced",
        "sepa_plain",
    ]
    .into_iter()
    .map(Order::new)
    .collect();
    for o in &orders {
        deliver(&app, &o.session("checkout.session.completed", "unpaid")).await;
    }
    settle(&app).await;
    deliver(&app, &orders[0].refunded(2450)).await;
    deliver(
        &app,
        &orders[1].dispute("charge.dispute.created", "needs_response"),
    )
    .await;
    deliver(&app, &orders[2].refunded(4900)).await;
    deliver(&app, &orders[2].refund_failed("1", 2450)).await;
    settle(&app).await;
    for o in &orders {
        assert_eq!(order(&app, o).await.credits_granted, 0, "{}", o.case);
        deliver(
            &app,
            &o.session("checkout.session.async_payment_succeeded", "paid"),
        )
        .await;
    }
    // One lease, one batch of four distinct orders, through the set-based path (not the
    // claim-by-claim one a worker falls back to).
    let leased = app
        .store
        .claims()
        .lease_due("batcher", now_ms(), 60_000, true, 8, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 4);
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
        .expect("every lease held");
    assert!(
        results.iter().all(|r| *r == Fulfilled::Processed),
        "{results:?}"
    );
    let expected = [
        (OrderStatus::PartiallyRefunded, 20),
        (OrderStatus::Disputed, 0),
        (OrderStatus::PartiallyRefunded, 20),
        (OrderStatus::Paid, 40),
    ];
    for (o, (status, credits)) in orders.iter().zip(expected) {
        let done = order(&app, o).await;
        assert_eq!(
            (done.status, done.credits_granted),
            (status, credits),
            "{}: {:?}",
            o.case,
            done.ledger
        );
        assert_eq!(rows(&app, o, "unlock").await, 1, "{}", o.case);
    }
}

/// On PostgreSQL, a refund fulfilled while the async-payment unlock of its order is still
/// in its transaction waits for that transaction (the order's row lock) before it reads the
/// ledger, so it sees the unlock and revokes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refund_racing_the_async_unlock_waits_for_it_on_postgres() {
    use sqlx::Connection;

    let app = spawn_app(Backend::Postgres).await;
    let o = Order::new("race");
    let mut unpaid = o.paid();
    unpaid["data"]["object"]["payment_status"] = json!("unpaid");
    deliver(&app, &unpaid).await;
    settle(&app).await;
    assert_eq!(order(&app, &o).await.status, OrderStatus::AwaitingPayment);

    // The async payment's fulfilment, held open from another connection: the order is
    // paid and unlocked inside a transaction that has not committed.
    let mut held = sqlx::PgConnection::connect(app.db.url()).await.unwrap();
    sqlx::query("BEGIN").execute(&mut held).await.unwrap();
    sqlx::query("UPDATE orders SET status = 'paid' WHERE order_id = $1")
        .bind(o.id())
        .execute(&mut held)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO credit_ledger (order_id, kind, delta, event_id, created_at) \
         VALUES ($1, 'unlock', 40, 'evt_race_async', 0)",
    )
    .bind(o.id())
    .execute(&mut held)
    .await
    .unwrap();

    deliver(&app, &o.refunded(4900)).await;
    let refund = tokio::spawn({
        let worker = worker(&app);
        async move { worker.run_once().await.unwrap() }
    });
    // Wait until the refund's transaction is blocked on the order's row lock.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let waiting = app
            .db
            .count(
                "SELECT COUNT(*) FROM pg_stat_activity \
                 WHERE wait_event_type = 'Lock' AND datname = current_database()",
            )
            .await;
        if waiting > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the refund never waited"
        );
        assert!(
            !refund.is_finished(),
            "the refund did not wait for the unlock"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    sqlx::query("COMMIT").execute(&mut held).await.unwrap();
    let attempts = refund.await.unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let done = order(&app, &o).await;
    assert_eq!(done.credits_granted, 0, "{:?}", done.ledger);
    assert_eq!(done.status, OrderStatus::Refunded);
}
