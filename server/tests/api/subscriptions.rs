//! Subscriptions through the webhook and the worker: a paid invoice grants its period's
//! credits once, whatever the order, twins and resends of Stripe's Billing events; a renewal,
//! a failed payment paid on retry and an upgrade each grant what they pay for; a period never
//! passes its highest plan; a subscription's state never moves back.

use std::time::Duration;

use claimcheck_core::Store;
use claimcheck_core::billing::Plans;
use claimcheck_core::fulfilment::Packages;
use claimcheck_core::worker::{Attempt, Worker, WorkerConfig};

use crate::helpers::{Backend, TestApp, on_both_backends, spawn_app_with};

on_both_backends!(
    the_creation_events_in_every_order_grant_the_first_period_once,
    renewals_and_a_paid_retry_grant_each_period_once,
    an_upgrade_grants_its_share_and_a_period_never_passes_its_highest_plan,
    a_late_older_state_never_overwrites_a_newer_one,
    a_renewal_paid_late_never_moves_an_upgraded_plan_back,
    a_period_paid_after_its_upgrade_before_any_status_event_keeps_the_upgrade,
    a_plan_change_at_the_period_s_end_is_shown_as_scheduled,
    a_renewal_at_a_price_no_plan_has_is_told_before_it_comes,
    a_refund_of_a_paid_invoice_revokes_from_its_grant,
    money_that_came_before_the_invoice_was_paid_settles_on_its_grant,
    a_reset_plan_lapses_at_the_end_of_its_period,
    without_plans_billing_events_are_recorded_and_grant_nothing,
    an_invoice_without_an_email_is_the_customer_its_session_named,
    an_invoice_paid_by_another_invoice_s_payment_fails_once_and_says_why,
);
on_both_backends!(backend => the_server_s_upkeep_lapses_a_period_s_lot_on_its_own);

pub(crate) const PLANS: &str = "thesis-monthly=40:3900:chf:month, thesis-pro=100:8900:chf:month";

/// A Billing fixture (`fixtures/stripe/events/billing/`), its ids and customer made its own
/// by `tag` ("Qfix" in every Stripe id, the customer's email), so that many subscriptions live
/// in one database.
pub(crate) fn billing(name: &str, tag: &str) -> Vec<u8> {
    let path = format!(
        "{}/../fixtures/stripe/events/billing/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.replace("Qfix", &format!("Q{tag}"))
        .replace("abo1@example.ch", &format!("abo-{tag}@example.ch"))
        .into_bytes()
}

/// The Checkout Session in `subscription` mode that started the subscription of `tag`.
fn subscription_session(tag: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": format!("evt_1Q{tag}0000Session"),
        "object": "event",
        "type": "checkout.session.completed",
        "created": 1_764_400_008,
        "livemode": false,
        "data": { "object": {
            "id": format!("cs_1Q{tag}0001"),
            "object": "checkout.session",
            "mode": "subscription",
            "payment_status": "paid",
            "subscription": format!("sub_1Q{tag}0001Plan"),
            "customer": format!("cus_Q{tag}0001"),
            "customer_details": { "email": format!("Abo-{tag}@example.ch") },
            "metadata": { "subscription_ref": "subref_0001" },
        }},
    }))
    .unwrap()
}

/// The charge of the first invoice: telemetry.
fn charge_succeeded(tag: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": format!("evt_1Q{tag}0000Charge"),
        "object": "event",
        "type": "charge.succeeded",
        "created": 1_764_400_005,
        "livemode": false,
        "data": { "object": {
            "id": format!("ch_1Q{tag}0001"),
            "object": "charge",
            "amount": 3900,
            "payment_intent": format!("pi_1Q{tag}0001"),
        }},
    }))
    .unwrap()
}

pub(crate) fn worker(store: &Store) -> Worker {
    Worker::new(
        store.clone(),
        "billing-worker",
        WorkerConfig {
            base_backoff: Duration::from_millis(10),
            plans: PLANS.parse::<Plans>().unwrap(),
            ..WorkerConfig::default()
        },
    )
}

/// Runs `worker` until nothing is due; every attempt must have processed its claim.
pub(crate) async fn drain(worker: &Worker) {
    loop {
        let batch = worker.run_once().await.unwrap();
        if batch.is_empty() {
            return;
        }
        for attempt in batch {
            assert!(matches!(attempt, Attempt::Processed { .. }), "{attempt:?}");
        }
    }
}

async fn deliver(app: &TestApp, body: &[u8]) {
    let response = app.deliver(body).await;
    assert_eq!(
        response.status(),
        200,
        "{}",
        String::from_utf8_lossy(&body[..80])
    );
}

/// The credits `email` holds from the ledger (unlocks and revokes).
async fn credits(app: &TestApp, email: &str) -> i64 {
    app.db
        .count(&format!(
            "SELECT CAST(COALESCE(SUM(delta), 0) AS BIGINT) FROM credit_ledger \
             WHERE customer_email = '{email}'"
        ))
        .await
}

/// What the grants of `subscription` gave the period ending at `period_end`.
pub(crate) async fn period_grants(app: &TestApp, subscription: &str, period_end: i64) -> i64 {
    period_grants_in(&app.db, subscription, period_end).await
}

/// Likewise, in `db`.
pub(crate) async fn period_grants_in(
    db: &crate::helpers::TestDb,
    subscription: &str,
    period_end: i64,
) -> i64 {
    db.count(&format!(
        "SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT) FROM subscription_grants \
         WHERE subscription_id = '{subscription}' AND period_end = {period_end}"
    ))
    .await
}

async fn subscription_text(app: &TestApp, subscription: &str, column: &str) -> String {
    app.db
        .texts(&format!(
            "SELECT COALESCE(CAST({column} AS TEXT), '-') FROM subscriptions \
             WHERE subscription_id = '{subscription}'"
        ))
        .await
        .join(",")
}

/// The subscription's recorded status, plan and current period's end.
async fn assert_state(app: &TestApp, subscription: &str, status: &str, plan: &str, end: i64) {
    assert_eq!(subscription_text(app, subscription, "status").await, status);
    assert_eq!(subscription_text(app, subscription, "plan").await, plan);
    assert_eq!(
        subscription_text(app, subscription, "current_period_end").await,
        end.to_string()
    );
}

/// Every ordering of `n` items, in lexicographic order.
fn orderings(n: usize) -> Vec<Vec<usize>> {
    let mut current: Vec<usize> = (0..n).collect();
    let mut all = vec![current.clone()];
    loop {
        let Some(i) = (1..n).rev().find(|&i| current[i - 1] < current[i]) else {
            return all;
        };
        let j = (i..n).rev().find(|&j| current[j] > current[i - 1]).unwrap();
        current.swap(i - 1, j);
        current[i..].reverse();
        all.push(current.clone());
    }
}

pub(crate) const FIRST_PERIOD_END: i64 = 1_766_992_000;
pub(crate) const SECOND_PERIOD_END: i64 = 1_769_584_000;
const THIRD_PERIOD_END: i64 = 1_772_176_000;

async fn the_creation_events_in_every_order_grant_the_first_period_once(app: TestApp) {
    let worker = worker(&app.store);
    let all = orderings(5);
    assert_eq!(all.len(), 120);
    for (n, ordering) in all.iter().enumerate() {
        let tag = format!("o{n:03}");
        let creation: [Vec<Vec<u8>>; 5] = [
            vec![billing("customer.subscription.created", &tag)],
            vec![billing("invoice.created.subscription_create", &tag)],
            // invoice.paid with its twin (another Event object for the same payment) and a
            // resend of the first.
            vec![
                billing("invoice.paid.subscription_create", &tag),
                billing("invoice.paid.subscription_create.twin", &tag),
                billing("invoice.paid.subscription_create", &tag),
                billing("invoice.payment_succeeded.subscription_create", &tag),
            ],
            vec![charge_succeeded(&tag)],
            vec![subscription_session(&tag)],
        ];
        for (step, &which) in ordering.iter().enumerate() {
            for body in &creation[which] {
                deliver(&app, body).await;
            }
            // The worker runs between some deliveries and not others.
            if (n + step) % 2 == 0 {
                drain(&worker).await;
            }
        }
        drain(&worker).await;
    }
    for (n, ordering) in all.iter().enumerate() {
        let tag = format!("o{n:03}");
        let subscription = format!("sub_1Q{tag}0001Plan");
        assert_eq!(
            credits(&app, &format!("abo-{tag}@example.ch")).await,
            40,
            "ordering {n}: {ordering:?}"
        );
        assert_eq!(
            period_grants(&app, &subscription, FIRST_PERIOD_END).await,
            40
        );
        assert_eq!(
            subscription_text(&app, &subscription, "status").await,
            "active"
        );
        assert_eq!(
            subscription_text(&app, &subscription, "subscription_ref").await,
            "subref_0001"
        );
        assert_eq!(
            subscription_text(&app, &subscription, "customer_email").await,
            format!("abo-{tag}@example.ch")
        );
    }
    // One grant per subscription, one order per paid invoice, no package order from the
    // subscription's Checkout Session.
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM subscription_grants")
            .await,
        120
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM orders").await, 120);
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM orders \
                 WHERE substr(order_id, 1, 3) = 'in_' AND credits = 40"
            )
            .await,
        120
    );
    // What was claimed: per subscription its creation, its paid invoice (once: the twin is
    // a duplicate action, the resend a duplicate event) and its Checkout Session; the
    // telemetry (`invoice.created`, `invoice.payment_succeeded`, `charge.succeeded`) never.
    let claimed = |event_type: &str| {
        format!("SELECT COUNT(*) FROM processed_stripe_events WHERE event_type = '{event_type}'")
    };
    assert_eq!(app.db.count(&claimed("invoice.paid")).await, 120);
    assert_eq!(
        app.db
            .count(&claimed("customer.subscription.created"))
            .await,
        120
    );
    assert_eq!(
        app.db.count(&claimed("checkout.session.completed")).await,
        120
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        360
    );
    let outcome = |outcome: &str| {
        format!("SELECT COUNT(*) FROM webhook_deliveries WHERE outcome = '{outcome}'")
    };
    assert_eq!(app.db.count(&outcome("duplicate_action")).await, 120);
    assert_eq!(app.db.count(&outcome("duplicate_event")).await, 120);
    assert_eq!(app.db.count(&outcome("ignored")).await, 3 * 120);
}

async fn renewals_and_a_paid_retry_grant_each_period_once(app: TestApp) {
    let worker = worker(&app.store);
    let tag = "cyc";
    let subscription = "sub_1Qcyc0001Plan";
    // `invoice.payment_succeeded` alone grants nothing: it is telemetry.
    deliver(
        &app,
        &billing("invoice.payment_succeeded.subscription_create", tag),
    )
    .await;
    drain(&worker).await;
    assert_eq!(credits(&app, "abo-cyc@example.ch").await, 0);
    for name in [
        "invoice.paid.subscription_create",
        "invoice.paid.subscription_cycle",
    ] {
        deliver(&app, &billing(name, tag)).await;
    }
    drain(&worker).await;
    assert_eq!(
        period_grants(&app, subscription, FIRST_PERIOD_END).await,
        40
    );
    assert_eq!(
        period_grants(&app, subscription, SECOND_PERIOD_END).await,
        40
    );
    // The third renewal's card fails: the period is unpaid, nothing is granted.
    deliver(
        &app,
        &billing("invoice.payment_failed.subscription_cycle", tag),
    )
    .await;
    drain(&worker).await;
    assert_eq!(
        subscription_text(&app, subscription, "unpaid_invoice").await,
        "in_1Qcyc0004Invoice"
    );
    assert_eq!(
        subscription_text(&app, subscription, "unpaid_since").await,
        "1769587600"
    );
    assert_eq!(period_grants(&app, subscription, THIRD_PERIOD_END).await, 0);
    // Stripe's retry is paid: the period is granted once (at the plan of that invoice), and
    // the subscription is paid again; a resend and a late failure change nothing.
    deliver(&app, &billing("invoice.paid.subscription_cycle.retry", tag)).await;
    drain(&worker).await;
    deliver(&app, &billing("invoice.paid.subscription_cycle.retry", tag)).await;
    drain(&worker).await;
    assert_eq!(
        period_grants(&app, subscription, THIRD_PERIOD_END).await,
        100
    );
    assert_eq!(
        subscription_text(&app, subscription, "unpaid_invoice").await,
        "-"
    );
    // Another subscription whose retry is paid before the failure arrives: a failure that
    // arrives after its invoice was paid never marks it unpaid.
    deliver(
        &app,
        &billing("invoice.paid.subscription_cycle.retry", "lat"),
    )
    .await;
    drain(&worker).await;
    deliver(
        &app,
        &billing("invoice.payment_failed.subscription_cycle", "lat"),
    )
    .await;
    drain(&worker).await;
    assert_eq!(
        subscription_text(&app, "sub_1Qlat0001Plan", "unpaid_invoice").await,
        "-"
    );
    assert_eq!(credits(&app, "abo-cyc@example.ch").await, 40 + 40 + 100);

    // Support reads it from the command line: by id or by the shop's reference.
    let shown = app
        .cli_json(&["subscriptions", "show", subscription, "--json"])
        .await;
    assert_eq!(shown["subscription"]["credits_granted"], 180);
    assert_eq!(shown["subscription"]["subscription_ref"], "subref_0001");
    let grants = shown["grants"].as_array().unwrap();
    assert_eq!(grants.len(), 3);
    assert_eq!(grants[0]["period_end"], THIRD_PERIOD_END);
    assert_eq!(grants[0]["plan"], "thesis-pro");
    let (code, table, _) = app.cli(&["subscriptions", "show", subscription]).await;
    assert_eq!(code, 0);
    assert!(table.contains("credits granted  180"), "{table}");
    assert!(table.contains("in_1Qcyc0004Invoice"), "{table}");
    let unpaid = app
        .cli_json(&["subscriptions", "list", "--past-due", "--json"])
        .await;
    assert_eq!(unpaid.as_array().unwrap().len(), 0, "{unpaid}");
    // Without status events, the plan is the one of the latest period paid for.
    let pro = app
        .cli_json(&["subscriptions", "list", "--plan", "thesis-pro", "--json"])
        .await;
    assert_eq!(pro.as_array().unwrap().len(), 2, "{pro}");
    let (code, _, stderr) = app.cli(&["subscriptions", "show", "sub_nope"]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("no subscription sub_nope"), "{stderr}");
}

/// The fixtures' upgrade invoice with its id, event id, lines and amount made over: a change
/// inside the second period from `from` to `to` (each `(unit amount, credits)`), `paid` paid.
fn change_invoice(n: usize, from: i64, to: i64, paid: i64) -> Vec<u8> {
    let mut event: serde_json::Value =
        serde_json::from_slice(&billing("invoice.paid.subscription_update", "chg")).unwrap();
    event["id"] = format!("evt_1Qchg00Change{n}").into();
    let invoice = &mut event["data"]["object"];
    invoice["id"] = format!("in_1Qchg00Change{n}").into();
    invoice["amount_paid"] = paid.into();
    let lines = invoice["lines"]["data"].as_array_mut().unwrap();
    let start = 1_768_288_000 + i64::try_from(n).unwrap() * 1000;
    for line in lines.iter_mut() {
        line["period"]["start"] = start.into();
    }
    lines[0]["amount"] = (-from / 2).into();
    lines[0]["pricing"]["unit_amount_decimal"] = from.to_string().into();
    lines[1]["amount"] = (to / 2).into();
    lines[1]["pricing"]["unit_amount_decimal"] = to.to_string().into();
    serde_json::to_vec(&event).unwrap()
}

async fn an_upgrade_grants_its_share_and_a_period_never_passes_its_highest_plan(app: TestApp) {
    let worker = worker(&app.store);
    let subscription = "sub_1Qchg0001Plan";
    for name in [
        "invoice.paid.subscription_create",
        "invoice.paid.subscription_cycle",
        "invoice.paid.subscription_update",
    ] {
        deliver(&app, &billing(name, "chg")).await;
    }
    drain(&worker).await;
    // 40 → 100 credits for 39 → 89 francs, half the period left: 2,500 paid of the 5,000
    // difference grants 60 × 2500 / 5000 = 30.
    assert_eq!(
        period_grants(&app, subscription, SECOND_PERIOD_END).await,
        40 + 30
    );
    // Down and up again three times in the same period, each upgrade paid: the period never
    // passes the highest plan's 100 credits; the downgrades grant nothing. Two workers take
    // them at once, one invoice a transaction, as two instances would.
    for round in 0..3 {
        deliver(&app, &change_invoice(2 * round, 8900, 3900, 0)).await;
        deliver(&app, &change_invoice(2 * round + 1, 3900, 8900, 2500)).await;
    }
    let one_at_a_time = |name: &str| {
        Worker::new(
            app.store.clone(),
            name,
            WorkerConfig {
                batch_size: 1,
                plans: PLANS.parse::<Plans>().unwrap(),
                ..WorkerConfig::default()
            },
        )
    };
    let (first, second) = (one_at_a_time("w1"), one_at_a_time("w2"));
    tokio::join!(drain(&first), drain(&second));
    assert_eq!(
        period_grants(&app, subscription, SECOND_PERIOD_END).await,
        100
    );
    assert_eq!(credits(&app, "abo-chg@example.ch").await, 40 + 100);
    // Every change is recorded, what it was entitled to beside what the cap let through.
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM subscription_grants \
                 WHERE step = 'proration' AND entitled > credits"
            )
            .await,
        2
    );
}

async fn a_late_older_state_never_overwrites_a_newer_one(app: TestApp) {
    let worker = worker(&app.store);
    let subscription = "sub_1Qsta0001Plan";
    // Past due (the failed renewal), then the older creation and upgrade arrive late.
    for name in [
        "customer.subscription.updated.past_due",
        "customer.subscription.created",
        "customer.subscription.updated.upgrade",
    ] {
        deliver(&app, &billing(name, "sta")).await;
    }
    drain(&worker).await;
    assert_state(
        &app,
        subscription,
        "past_due",
        "thesis-pro",
        THIRD_PERIOD_END,
    )
    .await;
    // Canceled, then the older "active again" arrives: it stays canceled.
    for name in [
        "customer.subscription.deleted",
        "customer.subscription.updated.active_again",
    ] {
        deliver(&app, &billing(name, "sta")).await;
    }
    drain(&worker).await;
    assert_eq!(
        subscription_text(&app, subscription, "status").await,
        "canceled"
    );
    // Every status event is its own action: none was taken for a twin.
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'")
            .await,
        5
    );
}

/// A period's renewal invoice processed after a prorated upgrade inside that period (its
/// claim retried, or taken late by another instance) grants its credits and leaves the plan
/// the upgrade's status event set.
async fn a_renewal_paid_late_never_moves_an_upgraded_plan_back(app: TestApp) {
    let worker = worker(&app.store);
    let subscription = "sub_1Qlat0001Plan";
    for batch in [
        &[
            "customer.subscription.created",
            "invoice.paid.subscription_create",
        ][..],
        &[
            "customer.subscription.updated.upgrade",
            "invoice.paid.subscription_update",
        ],
        &["invoice.paid.subscription_cycle"],
    ] {
        for name in batch {
            deliver(&app, &billing(name, "lat")).await;
        }
        drain(&worker).await;
    }
    // 40 for the second period, and the upgrade's 30.
    assert_eq!(
        period_grants(&app, subscription, SECOND_PERIOD_END).await,
        40 + 30
    );
    nothing_waits(&subscription_shown(&app, subscription).await, "thesis-pro");
    // Before any status event, a later period's invoice still moves the plan on.
    let only_invoices = "sub_1Qinv0001Plan";
    for name in [
        "invoice.paid.subscription_create",
        "invoice.paid.subscription_cycle",
    ] {
        deliver(&app, &billing(name, "inv")).await;
    }
    drain(&worker).await;
    assert_eq!(
        subscription_text(&app, only_invoices, "current_period_end").await,
        SECOND_PERIOD_END.to_string()
    );
}

/// The two invoices of one period worked out of order before the upgrade's status event: the
/// prorated upgrade's first, then the period's own (its plan holds from the period's start,
/// before the upgrade). The upgraded plan stays, and a late status event from before the
/// upgrade moves the status but neither the plan nor the period back.
async fn a_period_paid_after_its_upgrade_before_any_status_event_keeps_the_upgrade(app: TestApp) {
    let worker = worker(&app.store);
    let subscription = "sub_1Qord0001Plan";
    for batch in [
        &[
            "customer.subscription.created",
            "invoice.paid.subscription_create",
        ][..],
        &["invoice.paid.subscription_update"],
        &["invoice.paid.subscription_cycle"],
    ] {
        for name in batch {
            deliver(&app, &billing(name, "ord")).await;
        }
        drain(&worker).await;
    }
    assert_eq!(
        period_grants(&app, subscription, SECOND_PERIOD_END).await,
        40 + 30
    );
    assert_eq!(
        subscription_text(&app, subscription, "plan").await,
        "thesis-pro"
    );
    assert_eq!(
        subscription_text(&app, subscription, "current_period_end").await,
        SECOND_PERIOD_END.to_string()
    );
    // Sent in the first period (before the renewal and the upgrade), arriving now: at the
    // old price, with the first period's end.
    let before_the_upgrade = 1_766_000_000;
    let mut late: serde_json::Value =
        serde_json::from_slice(&moved_to_price("ord", 1, before_the_upgrade, true, 3900)).unwrap();
    late["data"]["object"]["status"] = "past_due".into();
    deliver(&app, &serde_json::to_vec(&late).unwrap()).await;
    drain(&worker).await;
    assert_state(
        &app,
        subscription,
        "past_due",
        "thesis-pro",
        SECOND_PERIOD_END,
    )
    .await;
    // The upgrade's own status event, later than both, moves everything.
    deliver(
        &app,
        &billing("customer.subscription.updated.upgrade", "ord"),
    )
    .await;
    drain(&worker).await;
    assert_eq!(
        subscription_text(&app, subscription, "status").await,
        "active"
    );
    assert_eq!(
        subscription_text(&app, subscription, "plan").await,
        "thesis-pro"
    );
}

/// The `tag` subscription's first item moved to thesis-pro without proration (Stripe bills it
/// from the next renewal), as a `customer.subscription.updated` of `created`; with
/// `cancel_at_period_end` as given.
fn moved_to_pro(tag: &str, n: u32, created: i64, cancel_at_period_end: bool) -> Vec<u8> {
    moved_to_price(tag, n, created, cancel_at_period_end, 8900)
}

/// As [`moved_to_pro`], to the unit price `amount` (CHF cents).
fn moved_to_price(
    tag: &str,
    n: u32,
    created: i64,
    cancel_at_period_end: bool,
    amount: i64,
) -> Vec<u8> {
    let mut event: serde_json::Value =
        serde_json::from_slice(&billing("customer.subscription.created", tag)).unwrap();
    event["id"] = format!("evt_1Q{tag}00Moved{n}").into();
    event["type"] = "customer.subscription.updated".into();
    event["created"] = created.into();
    let object = &mut event["data"]["object"];
    object["cancel_at_period_end"] = cancel_at_period_end.into();
    let price = &mut object["items"]["data"][0]["price"];
    price["unit_amount"] = amount.into();
    price["unit_amount_decimal"] = amount.to_string().into();
    serde_json::to_vec(&event).unwrap()
}

/// The `tag` subscription's second period billed at thesis-pro.
fn renewal_at_pro(tag: &str) -> Vec<u8> {
    let mut event: serde_json::Value =
        serde_json::from_slice(&billing("invoice.paid.subscription_cycle", tag)).unwrap();
    let invoice = &mut event["data"]["object"];
    for field in ["amount_due", "amount_paid", "subtotal", "total"] {
        if invoice.get(field).is_some() {
            invoice[field] = 8900.into();
        }
    }
    let line = &mut invoice["lines"]["data"][0];
    line["amount"] = 8900.into();
    line["subtotal"] = 8900.into();
    line["metadata"]["plan"] = "thesis-pro".into();
    line["pricing"]["unit_amount_decimal"] = "8900".into();
    serde_json::to_vec(&event).unwrap()
}

/// The subscription as `subscriptions show --json` prints it.
async fn subscription_shown(app: &TestApp, subscription: &str) -> serde_json::Value {
    app.cli_json(&["subscriptions", "show", subscription, "--json"])
        .await["subscription"]
        .clone()
}

/// `shown` is in `plan`, with no change waiting.
fn nothing_waits(shown: &serde_json::Value, plan: &str) {
    assert_eq!(shown["plan"], plan, "{shown}");
    assert!(shown["scheduled_change"].is_null(), "{shown}");
}

/// A change of plan Stripe bills from the next renewal on: its status event names the new plan
/// at once, the period stays paid at the old one. Shown as scheduled (the paid plan in force),
/// whatever the order of arrival; gone once the renewal bills it, or when the subscription is
/// to end at the period's end.
async fn a_plan_change_at_the_period_s_end_is_shown_as_scheduled(app: TestApp) {
    let worker = worker(&app.store);
    let moved_at = 1_765_000_000;
    let orders: [(&str, [usize; 3]); 2] = [("sca", [0, 1, 2]), ("scb", [2, 1, 0])];
    for (tag, order) in orders {
        let events = [
            billing("customer.subscription.created", tag),
            billing("invoice.paid.subscription_create", tag),
            moved_to_pro(tag, 1, moved_at, false),
        ];
        for i in order {
            deliver(&app, &events[i]).await;
            drain(&worker).await;
        }
        let subscription = format!("sub_1Q{tag}0001Plan");
        let shown = subscription_shown(&app, &subscription).await;
        assert_eq!(shown["plan"], "thesis-monthly", "{tag}: {shown}");
        assert_eq!(
            shown["scheduled_change"],
            serde_json::json!({ "from": "thesis-monthly", "to": "thesis-pro",
                                "at": FIRST_PERIOD_END }),
            "{tag}: {shown}"
        );
        assert_eq!(
            period_grants(&app, &subscription, FIRST_PERIOD_END).await,
            40
        );
    }
    let (code, table, _) = app
        .cli(&["subscriptions", "show", "sub_1Qsca0001Plan"])
        .await;
    assert_eq!(code, 0);
    assert!(
        table.contains("scheduled        thesis-pro from "),
        "{table}"
    );
    let (_, list, _) = app.cli(&["subscriptions", "list"]).await;
    assert!(list.contains("thesis-monthly → thesis-pro"), "{list}");
    // Listed under the plan it is paid at and under the one it moves to; not under another.
    for (plan, listed) in [
        ("thesis-monthly", true),
        ("thesis-pro", true),
        ("thesis-max", false),
    ] {
        let found = app
            .cli_json(&["subscriptions", "list", "--plan", plan, "--json"])
            .await;
        let ids = found.to_string();
        assert_eq!(ids.contains("sub_1Qsca0001Plan"), listed, "{plan}: {ids}");
    }

    // The renewal bills thesis-pro: in force, nothing waits.
    deliver(&app, &renewal_at_pro("sca")).await;
    drain(&worker).await;
    let shown = subscription_shown(&app, "sub_1Qsca0001Plan").await;
    nothing_waits(&shown, "thesis-pro");
    assert_eq!(
        period_grants(&app, "sub_1Qsca0001Plan", SECOND_PERIOD_END).await,
        100
    );
    // A prorated upgrade whose invoice is processed before its own status event: never
    // taken for a move back, and in force once its event comes.
    for name in [
        "customer.subscription.created",
        "invoice.paid.subscription_create",
        "invoice.paid.subscription_cycle",
        "invoice.paid.subscription_update",
    ] {
        deliver(&app, &billing(name, "scc")).await;
        drain(&worker).await;
    }
    let shown = subscription_shown(&app, "sub_1Qscc0001Plan").await;
    nothing_waits(&shown, "thesis-pro");
    deliver(
        &app,
        &billing("customer.subscription.updated.upgrade", "scc"),
    )
    .await;
    drain(&worker).await;
    let shown = subscription_shown(&app, "sub_1Qscc0001Plan").await;
    nothing_waits(&shown, "thesis-pro");

    // Set to end at the period's end: it renews at no plan.
    deliver(&app, &moved_to_pro("scb", 2, moved_at + 10, true)).await;
    drain(&worker).await;
    let shown = subscription_shown(&app, "sub_1Qscb0001Plan").await;
    assert!(shown["scheduled_change"].is_null(), "{shown}");
    assert_eq!(shown["cancel_at_period_end"], true, "{shown}");
}

/// A status event whose items' prices are no plan: the renewal it announces would grant
/// nothing, and support reads so on the subscription before it comes (CLI, dashboard); a
/// later event back at a plan clears it, an earlier one never does.
async fn a_renewal_at_a_price_no_plan_has_is_told_before_it_comes(app: TestApp) {
    let worker = worker(&app.store);
    let moved_at = 1_765_000_000;
    for event in [
        billing("customer.subscription.created", "unp"),
        billing("invoice.paid.subscription_create", "unp"),
        moved_to_price("unp", 1, moved_at, false, 5900),
        // A late resend of an older state.
        moved_to_price("unp", 2, moved_at - 100, false, 3900),
    ] {
        deliver(&app, &event).await;
        drain(&worker).await;
    }
    let subscription = "sub_1Qunp0001Plan";
    let shown = subscription_shown(&app, subscription).await;
    assert_eq!(shown["plan"], "thesis-monthly", "{shown}");
    assert!(shown["scheduled_change"].is_null(), "{shown}");
    assert_eq!(
        shown["unplanned_renewal"],
        serde_json::json!({ "amount": 5900, "currency": "chf", "at": FIRST_PERIOD_END }),
        "{shown}"
    );
    let (_, table, _) = app.cli(&["subscriptions", "show", subscription]).await;
    assert!(
        table.contains("scheduled        CHF 59.00 from ") && table.contains("no plan has"),
        "{table}"
    );
    let (_, list, _) = app.cli(&["subscriptions", "list"]).await;
    assert!(
        list.contains("thesis-monthly → CHF 59.00 (no plan)"),
        "{list}"
    );
    let admin = app
        .sign_in_as("ada", claimcheck_core::auth::Role::Admin)
        .await;
    let page = |path: String| {
        let admin = admin.clone();
        let url = app.url(&path);
        async move { admin.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let html = page(format!("/subscriptions/{subscription}")).await;
    assert!(
        html.contains("data-testid=\"subscription-unplanned\""),
        "{html}"
    );
    assert!(html.contains("CHF 59.00"), "{html}");
    let html = page("/subscriptions".into()).await;
    assert!(html.contains("data-testid=\"unplanned-renewal\""), "{html}");

    // Back at thesis-monthly: nothing to tell.
    deliver(&app, &moved_to_price("unp", 3, moved_at + 100, false, 3900)).await;
    drain(&worker).await;
    let shown = subscription_shown(&app, subscription).await;
    assert!(shown["unplanned_renewal"].is_null(), "{shown}");
    nothing_waits(&shown, "thesis-monthly");
}

async fn a_refund_of_a_paid_invoice_revokes_from_its_grant(app: TestApp) {
    let worker = worker(&app.store);
    // The invoice as Stripe includes its payments (`expand[]=payments`).
    let mut paid: serde_json::Value =
        serde_json::from_slice(&billing("invoice.paid.subscription_create", "ref")).unwrap();
    paid["data"]["object"]["payments"] = serde_json::json!({
        "object": "list",
        "data": [{ "object": "invoice_payment", "status": "paid",
                   "payment": { "type": "payment_intent", "payment_intent": "pi_1Qref0001" } }],
    });
    deliver(&app, &serde_json::to_vec(&paid).unwrap()).await;
    drain(&worker).await;
    assert_eq!(credits(&app, "abo-ref@example.ch").await, 40);
    // Half the invoice refunded: half its credits revoked, as for any order.
    let refund = serde_json::json!({
        "id": "evt_1Qref0000Refund",
        "object": "event",
        "type": "charge.refunded",
        "created": 1_764_500_000,
        "livemode": false,
        "data": { "object": {
            "id": "ch_1Qref0001",
            "object": "charge",
            "amount": 3900,
            "amount_refunded": 1950,
            "payment_intent": "pi_1Qref0001",
        }},
    });
    deliver(&app, &serde_json::to_vec(&refund).unwrap()).await;
    drain(&worker).await;
    assert_eq!(credits(&app, "abo-ref@example.ch").await, 20);
}

/// The charge of the `tag` invoice: a `charge.refunded` with `refunded` of its 3900 refunded,
/// or a dispute event of it.
fn invoice_charge(tag: &str, n: u32, kind: &str, object: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": format!("evt_1Q{tag}0000Money{n}"),
        "object": "event",
        "type": kind,
        "created": 1_764_500_000 + i64::from(n),
        "livemode": false,
        "data": { "object": object },
    }))
    .unwrap()
}

async fn money_that_came_before_the_invoice_was_paid_settles_on_its_grant(app: TestApp) {
    let worker = worker(&app.store);
    let pi = "pi_1Qmny0001";
    let charge = |refunded: i64| {
        serde_json::json!({
            "id": "ch_1Qmny0001", "object": "charge", "amount": 3900,
            "amount_refunded": refunded, "payment_intent": pi,
        })
    };
    let dispute = |status: &str| {
        serde_json::json!({
            "id": "dp_1Qmny0001", "object": "dispute", "amount": 1950, "status": status,
            "charge": "ch_1Qmny0001", "payment_intent": pi,
        })
    };
    // Half refunded, then disputed, before `invoice.paid` arrives.
    deliver(
        &app,
        &invoice_charge("mny", 1, "charge.refunded", charge(1950)),
    )
    .await;
    deliver(
        &app,
        &invoice_charge(
            "mny",
            2,
            "charge.dispute.created",
            dispute("needs_response"),
        ),
    )
    .await;
    while !worker.run_once().await.unwrap().is_empty() {}
    assert_eq!(credits(&app, "abo-mny@example.ch").await, 0);
    let mut paid: serde_json::Value =
        serde_json::from_slice(&billing("invoice.paid.subscription_create", "mny")).unwrap();
    paid["data"]["object"]["payments"] = serde_json::json!({
        "object": "list",
        "data": [{ "object": "invoice_payment", "status": "paid",
                   "payment": { "type": "payment_intent", "payment_intent": pi } }],
    });
    deliver(&app, &serde_json::to_vec(&paid).unwrap()).await;
    app.settle(&worker).await;
    // 40 granted, 20 revoked by the refund, the other 20 held by the dispute.
    assert_eq!(credits(&app, "abo-mny@example.ch").await, 0);
    // (The refund and the dispute settle in either order: each kind's sum is what counts.)
    let sum = |kinds: &'static str| {
        let app = &app;
        async move {
            app.db
                .count(&format!(
                    "SELECT CAST(COALESCE(SUM(delta), 0) AS BIGINT) FROM credit_ledger \
                     WHERE order_id = 'in_1Qmny0001Invoice' AND kind IN ({kinds})"
                ))
                .await
        }
    };
    assert_eq!(sum("'unlock'").await, 40);
    assert_eq!(sum("'revoke', 'restore'").await, -20);
    assert_eq!(sum("'dispute_hold', 'dispute_release'").await, -20);
    let invoice = app
        .store
        .orders()
        .get(&claimcheck_core::OrderId::parse("in_1Qmny0001Invoice").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(invoice.dispute_status.as_deref(), Some("open"));
    // Won: the held credits come back, once (a resend changes nothing).
    let won = invoice_charge("mny", 3, "charge.dispute.closed", dispute("won"));
    deliver(&app, &won).await;
    deliver(&app, &won).await;
    app.settle(&worker).await;
    assert_eq!(credits(&app, "abo-mny@example.ch").await, 20);
}

async fn an_invoice_without_an_email_is_the_customer_its_session_named(app: TestApp) {
    let worker = worker(&app.store);
    deliver(&app, &subscription_session("eml")).await;
    let mut paid: serde_json::Value =
        serde_json::from_slice(&billing("invoice.paid.subscription_create", "eml")).unwrap();
    paid["data"]["object"]["customer_email"] = serde_json::Value::Null;
    deliver(&app, &serde_json::to_vec(&paid).unwrap()).await;
    drain(&worker).await;
    assert_eq!(credits(&app, "abo-eml@example.ch").await, 40);
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM credit_lots \
                 WHERE lot_id = 'order:in_1Qeml0001Invoice' AND customer_email = 'abo-eml@example.ch'"
            )
            .await,
        1
    );
}

async fn without_plans_billing_events_are_recorded_and_grant_nothing(app: TestApp) {
    // A shop that sells no plan (its endpoint takes every type, or an upgrade adopts what an
    // earlier version ignored): processed, no subscription, no order, no error.
    let worker = Worker::new(app.store.clone(), "no-plans", WorkerConfig::default());
    for name in [
        "customer.subscription.created",
        "invoice.paid.subscription_create",
        "invoice.payment_failed.subscription_cycle",
    ] {
        deliver(&app, &billing(name, "nop")).await;
    }
    drain(&worker).await;
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'")
            .await,
        3
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM subscriptions").await, 0);
    assert_eq!(app.db.count("SELECT COUNT(*) FROM orders").await, 0);
}

/// A worker whose plan's unused credits lapse at the end of each period.
fn resetting_worker(store: &Store) -> Worker {
    Worker::new(
        store.clone(),
        "reset-worker",
        WorkerConfig {
            plans: "thesis-monthly=40:3900:chf:month:reset".parse().unwrap(),
            ..WorkerConfig::default()
        },
    )
}

async fn a_reset_plan_lapses_at_the_end_of_its_period(app: TestApp) {
    let resetting = resetting_worker(&app.store);
    deliver(&app, &billing("invoice.paid.subscription_create", "rst")).await;
    drain(&resetting).await;
    assert_eq!(
        app.db
            .texts(
                "SELECT CAST(expires_at AS TEXT) FROM credit_lots \
                 WHERE lot_id = 'order:in_1Qrst0001Invoice'"
            )
            .await,
        vec![(FIRST_PERIOD_END * 1000).to_string()]
    );
    // Up to the period's end the customer has the period's credits; at its end what is left
    // lapses, once, under the lot's key (two upkeep runs at once).
    let (email, packages) = ("abo-rst@example.ch", Packages::default());
    let end = FIRST_PERIOD_END * 1000;
    let balance = app
        .store
        .credits()
        .balance(email, &packages, end - 1)
        .await
        .unwrap();
    assert_eq!((balance.balance, balance.available), (40, 40));
    let (a, b) = tokio::join!(
        app.store.credits().expire_due(&packages, end, 500),
        app.store.credits().expire_due(&packages, end, 500),
    );
    assert_eq!(a.unwrap().1 + b.unwrap().1, 1);
    let balance = app
        .store
        .credits()
        .balance(email, &packages, end)
        .await
        .unwrap();
    assert_eq!((balance.balance, balance.available), (0, 0));
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT CAST(SUM(delta) AS BIGINT) FROM credit_movements \
                 WHERE kind = 'expire' AND customer_email = '{email}'"
            ))
            .await,
        -40
    );
    // A plan that carries its credits over writes a lot that never lapses.
    let carried = worker(&app.store);
    deliver(&app, &billing("invoice.paid.subscription_cycle", "rst")).await;
    drain(&carried).await;
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM credit_lots \
                 WHERE lot_id = 'order:in_1Qrst0002Invoice' AND expires_at IS NULL"
            )
            .await,
        1
    );
}

async fn the_server_s_upkeep_lapses_a_period_s_lot_on_its_own(backend: Backend) {
    // The fixture's period ended long ago: the server's own upkeep expires its lot, without
    // a request about the customer.
    let app = spawn_app_with(backend, |config| {
        config.credit_upkeep = Duration::from_millis(50);
    })
    .await;
    deliver(&app, &billing("invoice.paid.subscription_create", "upk")).await;
    drain(&resetting_worker(&app.store)).await;
    let expired = "SELECT COUNT(*) FROM credit_movements \
                   WHERE kind = 'expire' AND lot_id = 'order:in_1Qupk0001Invoice'";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while app.db.count(expired).await == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the upkeep never expired the lot"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let balance = app
        .store
        .credits()
        .balance(
            "abo-upk@example.ch",
            &Packages::default(),
            claimcheck_core::now_ms(),
        )
        .await
        .unwrap();
    assert_eq!((balance.balance, balance.available), (0, 0));
    assert_eq!(app.db.count(expired).await, 1);
}

/// The invoice fixture `name` of `tag`, paid by `payment_intent` (the older payload shape).
fn paid_by(name: &str, tag: &str, payment_intent: &str) -> Vec<u8> {
    let mut event: serde_json::Value = serde_json::from_slice(&billing(name, tag)).unwrap();
    event["data"]["object"]["payment_intent"] = payment_intent.into();
    serde_json::to_vec(&event).unwrap()
}

/// A payment pays one order: an invoice whose payment intent already paid another is the
/// payload's fault. Its claim fails at once with what to do (never `storage error`, never
/// retried), the failed-claims alert sees it, and nothing of it is written.
async fn an_invoice_paid_by_another_invoice_s_payment_fails_once_and_says_why(app: TestApp) {
    let worker = worker(&app.store);
    deliver(
        &app,
        &paid_by("invoice.paid.subscription_create", "pit", "pi_shared"),
    )
    .await;
    drain(&worker).await;
    assert_eq!(credits(&app, "abo-pit@example.ch").await, 40);
    deliver(
        &app,
        &paid_by("invoice.paid.subscription_cycle", "pit", "pi_shared"),
    )
    .await;
    let attempts = worker.run_once().await.unwrap();
    let [Attempt::Failed { error, gave_up, .. }] = attempts.as_slice() else {
        panic!("{attempts:?}");
    };
    assert!(gave_up, "not retried");
    assert!(
        error.contains("payment pi_shared already belongs to order in_1Qpit0001Invoice"),
        "{error}"
    );
    assert!(error.contains("in_1Qpit0002Invoice"), "{error}");
    assert!(!error.contains("storage"), "{error}");
    assert!(worker.run_once().await.unwrap().is_empty(), "nothing due");
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM processed_stripe_events \
                 WHERE event_id = 'evt_1Qpit0006Billing' AND status = 'failed' AND attempts = 1"
            )
            .await,
        1
    );
    assert_eq!(
        credits(&app, "abo-pit@example.ch").await,
        40,
        "nothing granted"
    );
    assert_eq!(
        period_grants(&app, "sub_1Qpit0001Plan", SECOND_PERIOD_END).await,
        0
    );
    let observed = app
        .store
        .alerts()
        .observe(
            &claimcheck_core::alert_check::AlertThresholds::default(),
            claimcheck_core::now_ms(),
        )
        .await
        .unwrap();
    assert_eq!(observed.failed_claims.count, 1);
    assert_eq!(observed.failed_claims.samples, ["evt_1Qpit0006Billing"]);
}
