//! No event lost across versions: a delivery a version recorded as `ignored` (its type unknown
//! to it) keeps its payload, and a version that acts on the type adopts it when it starts:
//! claimed and fulfilled once, a later twin of it stays a twin, instances starting together
//! adopt it once, and types this version ignores too wait for a version that knows them.

use claimcheck_core::alert::{AlertCondition, AlertDetail};
use claimcheck_core::alert_check::{AlertThresholds, evaluate};
use claimcheck_core::auth::Role;
use claimcheck_core::now_ms;
use claimcheck_core::worker::{Worker, WorkerConfig};

use crate::helpers::{Backend, TestApp, fixture, on_both_backends, spawn_app_with, spawn_instance};

on_both_backends!(
    backend => a_delivery_an_older_version_ignored_is_adopted_once_when_this_one_starts,
    instances_starting_together_adopt_once,
    ignored_types_keep_their_payload_and_old_ones_are_left,
    a_claim_of_a_type_this_version_does_not_know_waits_for_one_that_does
);

const PAID: &str = "checkout.session.completed.paid";

/// Records `body` as a version that does not act on its type records it: `ignored`, no
/// object id, the payload kept.
async fn recorded_as_ignored(app: &TestApp, body: &[u8], received_at: i64) {
    let event: serde_json::Value = serde_json::from_slice(body).unwrap();
    let payload = String::from_utf8(body.to_vec())
        .unwrap()
        .replace('\'', "''");
    app.db
        .execute(&format!(
            "INSERT INTO webhook_deliveries (event_id, event_type, outcome, received_at, source, \
                                             payload) \
             VALUES ('{}', '{}', 'ignored', {received_at}, 'webhook', '{payload}')",
            event["id"].as_str().unwrap(),
            event["type"].as_str().unwrap(),
        ))
        .await;
}

async fn claims(app: &TestApp) -> i64 {
    app.db
        .count("SELECT COUNT(*) FROM processed_stripe_events")
        .await
}

async fn unlocks(app: &TestApp) -> i64 {
    app.db
        .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
        .await
}

async fn a_delivery_an_older_version_ignored_is_adopted_once_when_this_one_starts(
    backend: Backend,
) {
    let app = spawn_app_with(backend, |_| {}).await;
    recorded_as_ignored(&app, &fixture(PAID), now_ms() - 3_600_000).await;
    assert_eq!(claims(&app).await, 0);
    // This version starts (a second process on the database).
    let (_instance, _stop) = spawn_instance(&app, |_| {}).await;
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM processed_stripe_events WHERE event_id = 'evt_pub0001paid'"
            )
            .await,
        1
    );
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM webhook_deliveries WHERE outcome = 'ignored' \
                 AND adopted_at IS NOT NULL AND payload IS NULL"
            )
            .await,
        1
    );
    let worker = Worker::new(app.store.clone(), "w", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
    assert_eq!(unlocks(&app).await, 1);
    // Stripe's twin of the same action arrives later: a twin.
    let answer = app
        .deliver(&fixture("checkout.session.completed.paid.twin"))
        .await;
    assert_eq!(answer.status(), 200);
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM webhook_deliveries WHERE event_id = 'evt_pub0001twin' \
                 AND outcome = 'duplicate_action'"
            )
            .await,
        1
    );
    // Another start adopts nothing more.
    let (_again, _stop_again) = spawn_instance(&app, |_| {}).await;
    while !worker.run_once().await.unwrap().is_empty() {}
    assert_eq!(unlocks(&app).await, 1);
    assert_eq!(claims(&app).await, 1);
}

async fn instances_starting_together_adopt_once(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    recorded_as_ignored(&app, &fixture(PAID), now_ms() - 60_000).await;
    let (first, second) = tokio::join!(spawn_instance(&app, |_| {}), spawn_instance(&app, |_| {}));
    drop((first, second));
    assert_eq!(claims(&app).await, 1);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM webhook_deliveries WHERE outcome = 'claimed'")
            .await,
        1
    );
}

async fn ignored_types_keep_their_payload_and_old_ones_are_left(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    // A type this version ignores too: recorded with its payload, for a version that knows it.
    let unknown = fixture("customer.discount.created");
    assert_eq!(app.deliver(&unknown).await.status(), 200);
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM webhook_deliveries WHERE outcome = 'ignored' \
                 AND payload IS NOT NULL"
            )
            .await,
        1
    );
    // An acting type ignored longer ago than 30 days: past adoption (reconciliation's job).
    recorded_as_ignored(&app, &fixture(PAID), now_ms() - 31 * 86_400_000).await;
    let (_instance, _stop) = spawn_instance(&app, |_| {}).await;
    assert_eq!(claims(&app).await, 0);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM webhook_deliveries WHERE adopted_at IS NOT NULL")
            .await,
        0
    );
    // Housekeeping (at the instance's start, and here again) lets payloads older than 30
    // days go; the recent one stays.
    app.store
        .claims()
        .forget_ignored_payloads(now_ms() - 30 * 86_400_000, 100)
        .await
        .unwrap();
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM webhook_deliveries WHERE payload IS NOT NULL \
                 AND event_id = 'evt_pub0004disc'"
            )
            .await,
        1
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM webhook_deliveries WHERE payload IS NOT NULL")
            .await,
        1
    );
}

async fn a_claim_of_a_type_this_version_does_not_know_waits_for_one_that_does(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    let t = now_ms() - 3_600_000;
    // A newer version claimed two `quote.accepted`: one due, one whose worker died on its last
    // attempt.
    app.db
        .execute(&format!(
            "INSERT INTO processed_stripe_events (event_id, event_type, object_id, action_key, \
                 status, attempts, next_attempt_at, stripe_created, livemode, received_at, \
                 payload, source, terms_indexed, lease_owner, lease_expires_at) \
             VALUES ('evt_newer_due', 'quote.accepted', 'qt_1', '', 'processing', 0, {t}, 0, \
                     FALSE, {t}, '{{}}', 'webhook', TRUE, NULL, NULL), \
                    ('evt_newer_stale', 'quote.accepted', 'qt_2', '', 'processing', 8, {t}, 0, \
                     FALSE, {t}, '{{}}', 'webhook', TRUE, 'i_newer/w0', {t}), \
                    ('evt_newer_fresh', 'quote.accepted', 'qt_3', '', 'processing', 0, {now}, 0, \
                     FALSE, {now}, '{{}}', 'webhook', TRUE, NULL, NULL)",
            now = now_ms()
        ))
        .await;
    let worker = Worker::new(app.store.clone(), "w", WorkerConfig::default());
    assert!(worker.run_once().await.unwrap().is_empty());
    assert_eq!(
        app.store
            .claims()
            .fail_exhausted_stale(now_ms(), 8)
            .await
            .unwrap(),
        0
    );
    let redrive = app
        .store
        .claims()
        .take_for_redrive(
            &claimcheck_core::EventId::parse("evt_newer_due".to_owned()).unwrap(),
            "support",
            now_ms(),
            60_000,
        )
        .await
        .unwrap();
    assert!(redrive.is_none());
    // Untouched: no attempt spent, nothing failed, waiting for a version that knows the type.
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processing' \
                 AND ((event_id = 'evt_newer_due' AND attempts = 0) \
                      OR (event_id = 'evt_newer_stale' AND attempts = 8))"
            )
            .await,
        2
    );

    // Visibly: the claim page says so and offers no re-drive.
    let support = app.sign_in_as("sam", Role::Support).await;
    let page = support
        .get(app.url("/events/evt_newer_stale"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let notice = page
        .split("data-testid=\"newer-version\"")
        .nth(1)
        .and_then(|rest| rest.split("</p>").next())
        .unwrap_or_else(|| panic!("no newer-version notice: {page}"));
    assert!(
        notice.contains("waiting for a newer version: this version does not fulfil")
            && notice.contains("quote.accepted"),
        "{notice}"
    );
    assert!(!page.contains("/events/evt_newer_stale/redrive"), "{page}");
    let list = support
        .get(app.url("/claims?status=pending"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(list.contains("evt_newer_due"), "{list}");
    assert!(list.contains("data-testid=\"newer-version\""), "{list}");

    // The alert: the two claims older than 10 minutes, the oldest linked; the one received
    // now is not yet a concern.
    let obs = app
        .store
        .alerts()
        .observe(&AlertThresholds::default(), now_ms())
        .await
        .unwrap();
    assert_eq!(obs.newer_version_claims.count, 2);
    assert_eq!(obs.newer_version_type.as_deref(), Some("quote.accepted"));
    let found = evaluate(&obs, &AlertThresholds::default());
    let waiting = found
        .iter()
        .find(|f| f.condition == AlertCondition::NewerVersionWaiting)
        .expect("the alert holds");
    assert_eq!(waiting.count, 2);
    let AlertDetail::NewerVersionWaiting { event_id, .. } = &waiting.detail else {
        panic!("{:?}", waiting.detail);
    };
    assert!(
        ["evt_newer_due", "evt_newer_stale"].contains(&event_id.as_deref().unwrap()),
        "{event_id:?}"
    );
}
