//! Alerts: conditions read from the database, one alert per condition across instances,
//! reminders at most every interval, one resolution, messages through a real SMTP server and
//! a real chat webhook, and an SMTP server that hangs holding nothing else up.

pub(crate) mod sinks;

use std::sync::Arc;
use std::time::{Duration, Instant};

use claimcheck_core::alert::{AlertChannel, AlertCondition, MessageKind};
use claimcheck_core::alert_check::{AlertPolicy, AlertThresholds, Queued, check};
use claimcheck_core::auth::Role;
use claimcheck_core::now_ms;
use claimcheck_server::ServeConfig;
use claimcheck_server::alerts::{Channels, RetryPolicy, deliver_due};
use claimcheck_server::config::AlertsConfig;
use claimcheck_server::config::alerts::AlertChannelArgs;
use serde_json::Value;
use sinks::{ChatHook, SmtpSink, black_hole};

use crate::helpers::{Backend, TestApp, fixture, on_both_backends, spawn_app_with, spawn_instance};

const MIN: i64 = 60_000;
pub(crate) const PUBLIC_URL: &str = "https://pay.shop.test";

pub(crate) fn channels(smtp: Option<String>, hook: Option<String>, timeout: Duration) -> Channels {
    let email = smtp.is_some();
    AlertChannelArgs {
        smtp_url: smtp,
        email_to: if email {
            vec!["ops@shop.test".into(), "Oncall <oncall@shop.test>".into()]
        } else {
            Vec::new()
        },
        email_from: email.then(|| "Claimcheck <alerts@shop.test>".into()),
        webhook_url: hook,
        timeout: claimcheck_server::config::span::Span(timeout),
    }
    .channels()
    .unwrap()
}

pub(crate) fn quick_retries() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 2,
        base_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(1),
    }
}

/// Alerting on, checked every `interval`, to `channels`.
pub(crate) fn alerting(config: &mut ServeConfig, channels: Channels, interval: Duration) {
    config.alerts = AlertsConfig {
        check_interval: interval,
        channels,
        retry: quick_retries(),
        ..AlertsConfig::default()
    };
    config.dashboard.public_url = Some(PUBLIC_URL.parse().unwrap());
}

fn policy(channels: &Channels) -> AlertPolicy {
    AlertPolicy {
        thresholds: AlertThresholds::default(),
        repeat: Some(Duration::from_secs(30 * 60)),
        channels: channels.configured(),
        dashboard_url: PUBLIC_URL.into(),
        wording: english(),
    }
}

/// What `serve` writes alerts in by default (CLAIMCHECK_LANGUAGE=en).
pub(crate) fn english() -> std::sync::Arc<dyn claimcheck_core::alert_check::AlertWording> {
    std::sync::Arc::new(app::i18n::AlertWords::messages_in(
        claimcheck_core::language::Language::English,
    ))
}

/// A paid Checkout Session event of its own (event, session, order and payment intent `i`).
pub(crate) fn paid_session(i: usize) -> Vec<u8> {
    String::from_utf8(fixture("checkout.session.completed.paid"))
        .unwrap()
        .replace("evt_pub0001paid", &format!("evt_alert{i:04}"))
        .replace(
            "cs_test_pub0001a1YS1URlnyQCN5fUUduORoQ7Pw41PJ",
            &format!("cs_test_alert{i:04}"),
        )
        .replace("ord_pub_0001", &format!("ord_alert_{i:04}"))
        .replace("pi_pub00013Mxc9vLkdIwHu7ix", &format!("pi_alert{i:04}"))
        .into_bytes()
}

pub(crate) async fn fail_claim(app: &TestApp, event_id: &str) {
    app.db
        .execute(&format!(
            "UPDATE processed_stripe_events SET status = 'failed', attempts = 8, \
             last_error = 'metadata.credits ''lots'' is not a number' WHERE event_id = '{event_id}'"
        ))
        .await;
}

pub(crate) async fn mark_processed(app: &TestApp, event_id: &str) {
    app.db
        .execute(&format!(
            "UPDATE processed_stripe_events SET status = 'processed', processed_at = 1 \
             WHERE event_id = '{event_id}'"
        ))
        .await;
}

fn opened(condition: AlertCondition) -> Vec<Queued> {
    vec![Queued {
        condition,
        kind: MessageKind::Opened,
    }]
}

async fn an_alert_opens_once_repeats_after_the_interval_and_resolves_once(backend: Backend) {
    let smtp = SmtpSink::start().await;
    let hook = ChatHook::start().await;
    let channels = Arc::new(channels(
        Some(smtp.url()),
        Some(hook.url()),
        Duration::from_secs(5),
    ));
    // The server's own checks stay off: this test chooses the time of every check.
    let app = spawn_app_with(backend, |_| {}).await;
    assert_eq!(app.deliver(&paid_session(1)).await.status(), 200);
    fail_claim(&app, "evt_alert0001").await;
    let (store, policy, retry) = (&app.store, policy(&channels), quick_retries());
    let t0 = now_ms();

    // Eight instances check at the same moment: one alert, one message per channel.
    let checks: Vec<_> = (0..8).map(|_| check(store, &policy, t0)).collect();
    let queued: Vec<Queued> = futures::future::join_all(checks)
        .await
        .into_iter()
        .flat_map(|r| r.unwrap())
        .collect();
    assert_eq!(queued, opened(AlertCondition::FailedClaims));
    let sent = deliver_due(store, &channels, &retry, t0).await.unwrap();
    assert_eq!((sent.sent(), sent.failed()), (2, 0));

    let mails = smtp.mails.wait_for(1).await;
    let mail = &mails[0];
    assert_eq!(mail.subject(), "[Claimcheck] Claims failed (1)");
    assert_eq!(mail.from, "alerts@shop.test");
    assert_eq!(mail.to, ["ops@shop.test", "oncall@shop.test"]);
    for needle in [
        "1 claim failed",
        "evt_alert0001",
        "Since: ",
        "https://pay.shop.test/claims?status=failed",
    ] {
        assert!(mail.text().contains(needle), "{needle} in {}", mail.data);
    }
    let texts = hook.texts();
    assert_eq!(texts.len(), 1);
    assert!(
        texts[0].starts_with("*[Claimcheck] Claims failed (1)*"),
        "{}",
        texts[0]
    );
    assert!(texts[0].contains("https://pay.shop.test/claims?status=failed"));

    // A minute later, and from a restarted instance: nothing new.
    assert_eq!(check(store, &policy, t0 + MIN).await.unwrap(), []);
    let restarted = claimcheck_core::Store::connect(
        &app.db.url().parse().unwrap(),
        &claimcheck_core::StoreOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(check(&restarted, &policy, t0 + 2 * MIN).await.unwrap(), []);
    let idle = deliver_due(store, &channels, &retry, t0 + 2 * MIN)
        .await
        .unwrap();
    assert_eq!(idle.sent(), 0);

    // A second failed claim is counted, not announced.
    assert_eq!(app.deliver(&paid_session(2)).await.status(), 200);
    fail_claim(&app, "evt_alert0002").await;
    assert_eq!(check(store, &policy, t0 + 3 * MIN).await.unwrap(), []);
    assert_eq!(app.db.count("SELECT count FROM alerts").await, 2);

    // Past the repeat interval: one reminder, with today's figures.
    let reminded = check(store, &policy, t0 + 31 * MIN).await.unwrap();
    assert_eq!(reminded[0].kind, MessageKind::Reminder);
    assert_eq!(check(store, &policy, t0 + 32 * MIN).await.unwrap(), []);
    deliver_due(store, &channels, &retry, t0 + 32 * MIN)
        .await
        .unwrap();
    let mails = smtp.mails.wait_for(2).await;
    assert_eq!(
        mails[1].subject(),
        "[Claimcheck] Still open: Claims failed (2)"
    );
    assert_eq!(hook.posts.wait_for(2).await.len(), 2);

    // Both re-driven: resolved, once.
    mark_processed(&app, "evt_alert0001").await;
    mark_processed(&app, "evt_alert0002").await;
    let resolved = check(store, &policy, t0 + 33 * MIN).await.unwrap();
    assert_eq!(
        resolved,
        [Queued {
            condition: AlertCondition::FailedClaims,
            kind: MessageKind::Resolved
        }]
    );
    assert_eq!(check(&restarted, &policy, t0 + 34 * MIN).await.unwrap(), []);
    deliver_due(store, &channels, &retry, t0 + 34 * MIN)
        .await
        .unwrap();
    let mails = smtp.mails.wait_for(3).await;
    assert_eq!(mails[2].subject(), "[Claimcheck] Resolved: Claims failed");
    assert!(
        hook.posts.wait_for(3).await[2]["text"]
            .as_str()
            .unwrap()
            .contains("Resolved: Claims failed")
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM alert_deliveries WHERE status = 'sent'")
            .await,
        6
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM alerts WHERE resolved_at IS NOT NULL")
            .await,
        1
    );
    // Nothing more is sent, however often it is asked.
    deliver_due(store, &channels, &retry, t0 + 60 * MIN)
        .await
        .unwrap();
    assert_eq!((smtp.mails.len(), hook.posts.len()), (3, 3));
    restarted.close().await;
}

/// Messages nobody managed to send yet: a reminder replaces the opening still waiting, a
/// resolution the reminder, unless that one is being sent at that moment. What goes out is
/// the news, not the backlog.
async fn a_newer_message_replaces_one_still_waiting(backend: Backend) {
    let hook = ChatHook::start().await;
    let channels = Arc::new(channels(None, Some(hook.url()), Duration::from_secs(5)));
    let app = spawn_app_with(backend, |_| {}).await;
    assert_eq!(app.deliver(&paid_session(1)).await.status(), 200);
    fail_claim(&app, "evt_alert0001").await;
    let (store, policy, retry) = (&app.store, policy(&channels), quick_retries());
    let t0 = now_ms();
    let statuses = || async {
        app.db
            .texts("SELECT kind || ':' || status FROM alert_deliveries ORDER BY id")
            .await
    };

    // The opening is queued and never sent (the sender was down); the reminder replaces it.
    assert_eq!(
        check(store, &policy, t0).await.unwrap(),
        opened(AlertCondition::FailedClaims)
    );
    let reminded = check(store, &policy, t0 + 31 * MIN).await.unwrap();
    assert_eq!(reminded[0].kind, MessageKind::Reminder);
    assert_eq!(statuses().await, ["opened:superseded", "reminder:pending"]);

    // A sender takes the reminder; while it is on its way the claim is re-driven and the
    // alert resolves: the reminder being sent is not replaced.
    let due = store
        .alerts()
        .due(&channels.configured(), t0 + 31 * MIN, 50)
        .await
        .unwrap();
    assert_eq!(due.len(), 1);
    assert!(
        due[0]
            .message
            .subject
            .starts_with("[Claimcheck] Still open"),
        "{:?}",
        due[0].message
    );
    assert!(
        store
            .alerts()
            .take(due[0].id, t0 + 31 * MIN, 10 * MIN)
            .await
            .unwrap()
    );
    mark_processed(&app, "evt_alert0001").await;
    let resolved = check(store, &policy, t0 + 32 * MIN).await.unwrap();
    assert_eq!(resolved[0].kind, MessageKind::Resolved);
    assert_eq!(
        statuses().await,
        ["opened:superseded", "reminder:pending", "resolved:pending"]
    );

    // Another sender meanwhile sends what is due: the resolution, not the reminder in
    // flight, and never the superseded opening.
    let sent = deliver_due(store, &channels, &retry, t0 + 33 * MIN)
        .await
        .unwrap();
    assert_eq!((sent.sent(), sent.failed()), (1, 0));
    let texts = hook.texts();
    assert_eq!(texts.len(), 1);
    assert!(texts[0].contains("Resolved: Claims failed"), "{texts:?}");
    store.alerts().sent(due[0].id, t0 + 33 * MIN).await.unwrap();
    assert_eq!(
        statuses().await,
        ["opened:superseded", "reminder:sent", "resolved:sent"]
    );
    // Nothing is left to send, later or from another instance.
    let idle = deliver_due(store, &channels, &retry, t0 + 90 * MIN)
        .await
        .unwrap();
    assert_eq!(idle.attempts, []);
}

async fn every_condition_is_read_from_the_database(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    let now = now_ms();
    for i in 1..=2 {
        assert_eq!(app.deliver(&paid_session(i)).await.status(), 200);
    }
    fail_claim(&app, "evt_alert0001").await;
    // A worker took the second and died.
    app.db
        .execute(&format!(
            "UPDATE processed_stripe_events SET lease_owner = 'i_dead/w0', attempts = 1, \
             lease_expires_at = {now} WHERE event_id = 'evt_alert0002'"
        ))
        .await;
    // After the last delivery (now): orders opened through the order API, one of whose
    // requests got no answer, signature failures, and a reconcile run that recovered events.
    let later = now + MIN;
    app.db
        .execute(&format!(
            "INSERT INTO orders (order_id, credits, status, payment_status, created_at, updated_at) \
             VALUES ('ord_quiet_1', 40, 'awaiting_payment', 'unpaid', {later}, {later}), \
                    ('ord_quiet_2', 40, 'awaiting_payment', 'unpaid', {later}, {later}); \
             INSERT INTO stripe_requests (idempotency_key, operation, order_id, params_hash, \
                                          status, created_at, updated_at) \
             VALUES ('checkout-session:ord_quiet_1', 'checkout_session', 'ord_quiet_1', 'h', \
                     'succeeded', {later}, {later}), \
                    ('checkout-session:ord_quiet_2', 'checkout_session', 'ord_quiet_2', 'h', \
                     'indeterminate', {later}, {later}); \
             INSERT INTO reconcile_runs (started_at, finished_at, since, actor, dry_run, listed, \
                                         already_claimed, claimed, error) \
             VALUES ({later}, {later}, 0, 'reconciler', FALSE, 5, 2, 3, NULL), \
                    ({later}, {later}, 0, 'dashboard:ada', TRUE, 5, 5, 0, NULL);"
        ))
        .await;
    app.store
        .alerts()
        .record_signature_failures(4, later)
        .await
        .unwrap();
    app.store
        .alerts()
        .record_signature_failures(3, later + 1000)
        .await
        .unwrap();

    // Seven hours on, every condition holds.
    let at = now + 7 * 60 * MIN;
    // Ten holds ran out within the last hour (six released by the upkeep, four still waiting
    // for it), one ran out before the window; a refund took back 10 credits of which 4 were
    // spent.
    let mut holds = String::new();
    for i in 0..11 {
        let (status, expired) = match i {
            0..=5 => ("expired", at - (20 + i) * MIN),
            6..=9 => ("active", at - i * MIN),
            _ => ("expired", at - 2 * 60 * MIN),
        };
        holds.push_str(&format!(
            "INSERT INTO credit_holds (hold_id, customer_email, credits, reference, status, \
                                       expires_at, created_at) \
             VALUES ('hold_{i:02}', 'hana@example.ch', 1, 'run-{i}', '{status}', {expired}, {now});"
        ));
    }
    app.db.execute(&holds).await;
    app.db
        .execute(&format!(
            "INSERT INTO orders (order_id, credits, status, payment_status, customer_email, \
                                 created_at, updated_at) \
             VALUES ('ord_owed', 10, 'refunded', 'paid', 'olga@example.ch', {now}, {later}); \
             INSERT INTO credit_ledger (order_id, kind, delta, customer_email, event_id, created_at) \
             VALUES ('ord_owed', 'unlock', 10, 'olga@example.ch', 'evt_owed_1', {now}), \
                    ('ord_owed', 'revoke', -10, 'olga@example.ch', 'evt_owed_2', {later}); \
             INSERT INTO credit_movements (movement_id, customer_email, kind, delta, created_at) \
             VALUES ('sp_owed', 'olga@example.ch', 'spend', -4, {now});"
        ))
        .await;
    // A newer version claimed a `quote.accepted` (a type this version does not fulfil) and
    // is gone.
    app.db
        .execute(&format!(
            "INSERT INTO processed_stripe_events (event_id, event_type, object_id, action_key, \
                 status, attempts, next_attempt_at, stripe_created, livemode, received_at, \
                 payload, source, terms_indexed) \
             VALUES ('evt_newer', 'quote.accepted', 'qt_1', '', 'processing', 0, {now}, 0, \
                     FALSE, {now}, '{{}}', 'webhook', TRUE)"
        ))
        .await;
    // Renewals that failed (Stripe's seconds): four days ago, one day ago, and five days ago
    // on a subscription canceled since or never completed; one paid.
    let day = 86_400;
    let secs = now / 1000;
    app.db
        .execute(&format!(
            "INSERT INTO subscriptions (subscription_id, customer_email, status, unpaid_invoice, \
                                        unpaid_since, created_at, updated_at) \
             VALUES ('sub_late', 'pia@example.ch', 'past_due', 'in_late', {late}, {now}, {now}), \
                    ('sub_recent', 'rea@example.ch', 'past_due', 'in_recent', {recent}, {now}, {now}), \
                    ('sub_gone', 'gil@example.ch', 'canceled', 'in_gone', {gone}, {now}, {now}), \
                    ('sub_never', 'ned@example.ch', 'incomplete_expired', 'in_never', {gone}, \
                     {now}, {now}), \
                    ('sub_paid', 'pam@example.ch', 'active', NULL, NULL, {now}, {now})",
            late = secs - 4 * day,
            recent = secs - day,
            gone = secs - 5 * day,
        ))
        .await;
    let thresholds = AlertThresholds::default();
    let observed = app.store.alerts().observe(&thresholds, at).await.unwrap();
    assert_eq!(observed.failed_claims.count, 1);
    assert_eq!(observed.failed_claims.samples, ["evt_alert0001"]);
    assert_eq!(observed.stale_claims.count, 1);
    assert_eq!(observed.stale_claims.oldest, Some(now));
    assert_eq!(observed.orders_since_delivery.count, 2);
    assert_eq!(observed.signature_failures.count, 7);
    assert_eq!(observed.indeterminate_requests.count, 1);
    assert_eq!(
        observed.indeterminate_requests.samples,
        ["checkout-session:ord_quiet_2"]
    );
    assert_eq!(observed.last_reconcile.as_ref().unwrap().claimed, 3);
    assert_eq!(observed.expired_holds.count, 10);
    assert_eq!(observed.expired_holds.oldest, Some(at - 25 * MIN));
    assert_eq!(
        observed.expired_holds.samples,
        ["hold_06", "hold_07", "hold_08", "hold_09", "hold_00"]
    );
    assert_eq!(
        observed.expired_holds_customer.as_deref(),
        Some("hana@example.ch")
    );
    assert_eq!(observed.owing_customers.count, 1);
    assert_eq!(observed.owing_customers.samples, ["olga@example.ch"]);
    assert_eq!(observed.owing_customers.oldest, Some(later));
    assert_eq!(observed.credits_owed, 4);
    assert_eq!(observed.newer_version_claims.count, 1);
    assert_eq!(observed.newer_version_claims.samples, ["evt_newer"]);
    assert_eq!(
        observed.newer_version_type.as_deref(),
        Some("quote.accepted")
    );
    assert_eq!(observed.past_due_subscriptions.count, 1);
    assert_eq!(observed.past_due_subscriptions.samples, ["sub_late"]);
    assert_eq!(
        observed.past_due_subscriptions.oldest,
        Some((secs - 4 * day) * 1000)
    );
    assert_eq!(
        observed.past_due_customer.as_deref(),
        Some("pia@example.ch")
    );
    let policy = AlertPolicy {
        thresholds,
        repeat: None,
        channels: vec![AlertChannel::Email],
        dashboard_url: PUBLIC_URL.into(),
        wording: english(),
    };
    let queued = check(&app.store, &policy, at).await.unwrap();
    let conditions: Vec<AlertCondition> = queued.iter().map(|q| q.condition).collect();
    // Every condition the database can show (a full disk is this process's own observation:
    // `disk_full.rs`).
    let from_the_database: Vec<AlertCondition> = AlertCondition::ALL
        .into_iter()
        .filter(|c| *c != AlertCondition::StorageFull)
        .collect();
    assert_eq!(conditions, from_the_database);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM alert_deliveries WHERE channel = 'email' AND status = 'pending'")
            .await,
        10
    );
    // An alert a newer version opened (a condition this one does not know) is that
    // version's: left out here, never an error.
    app.db
        .execute(
            "UPDATE alerts SET condition = 'from_a_newer_version' WHERE condition = 'credits_owed'",
        )
        .await;
    let open = app.store.alerts().open().await.unwrap();
    assert_eq!(open.len(), 9);
    assert!(
        open.iter()
            .all(|a| a.condition != AlertCondition::CreditsOwed)
    );
    // Before the thresholds are reached, only the failed claim, the reconcile run, the
    // debt and the renewal unpaid for four days hold (the holds have not run out yet).
    let early = app
        .store
        .alerts()
        .observe(&AlertThresholds::default(), now + 2 * MIN)
        .await
        .unwrap();
    let held: Vec<AlertCondition> =
        claimcheck_core::alert_check::evaluate(&early, &AlertThresholds::default())
            .into_iter()
            .map(|f| f.condition)
            .collect();
    assert_eq!(
        held,
        [
            AlertCondition::FailedClaims,
            AlertCondition::ReconcileFindings,
            AlertCondition::CreditsOwed,
            AlertCondition::PastDueSubscriptions
        ]
    );
}

async fn the_server_checks_sends_and_shows_alerts_on_its_own(backend: Backend) {
    let smtp = SmtpSink::start().await;
    // The chat refuses the first post: it is retried, and the refusal stays visible.
    let hook = ChatHook::failing_first(1).await;
    let alert_channels = channels(Some(smtp.url()), Some(hook.url()), Duration::from_secs(5));
    let app = spawn_app_with(backend, |c| {
        alerting(c, alert_channels, Duration::from_millis(100))
    })
    .await;
    let viewer = app.sign_in_as("vic", Role::Viewer).await;
    let badge = |client: reqwest::Client| {
        let app = &app;
        async move {
            let response = app.call(&client, "alert_badge", &[]).await;
            assert_eq!(response.status(), 200);
            response.json::<Value>().await.unwrap()["open"]
                .as_u64()
                .unwrap()
        }
    };
    assert_eq!(badge(viewer.clone()).await, 0);

    // Signature failures are counted in the database, whichever instance refused them.
    for _ in 0..3 {
        let refused = app.post_webhook(b"{}", Some("t=1,v1=00")).await;
        assert_eq!(refused.status(), 400);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while app
        .db
        .count("SELECT CAST(COALESCE(SUM(failures), 0) AS BIGINT) FROM webhook_signature_failures")
        .await
        != 3
    {
        assert!(
            Instant::now() < deadline,
            "signature failures never counted"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    assert_eq!(app.deliver(&paid_session(1)).await.status(), 200);
    fail_claim(&app, "evt_alert0001").await;
    let mails = smtp.mails.wait_for(1).await;
    assert_eq!(mails[0].subject(), "[Claimcheck] Claims failed (1)");
    let posts = hook.posts.wait_for(1).await;
    assert!(posts[0]["text"].as_str().unwrap().contains("evt_alert0001"));
    assert_eq!(badge(viewer.clone()).await, 1);

    // The Alerts page, for a viewer: the alert and how its messages went (the sender marks
    // the chat message sent once it has read the hook's answer, a moment after the post).
    let deadline = Instant::now() + Duration::from_secs(10);
    let history = loop {
        let history = app.call(&viewer, "alerts", &[]).await;
        assert_eq!(history.status(), 200);
        let history: Value = history.json().await.unwrap();
        let sent = history["alerts"][0]["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["channel"] == "webhook" && m["status"] == "sent");
        if sent || Instant::now() >= deadline {
            break history;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let alert = &history["alerts"][0];
    assert_eq!(alert["condition"], "failed_claims");
    assert_eq!(alert["open"], true);
    let messages = alert["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m["channel"] == "webhook" && m["status"] == "sent" && m["attempts"] == 2),
        "{messages:?}"
    );
    let page = viewer.get(app.url("/alerts")).send().await.unwrap();
    let html = page.text().await.unwrap();
    assert!(html.contains("Claims failed"), "{html}");
    assert!(html.contains("data-testid=\"alert-badge\""), "{html}");
    // The e-mail went out in English (CLAIMCHECK_LANGUAGE); a reader of Swiss German reads
    // the same alert in theirs, from the detail it keeps.
    assert_eq!(
        alert["summary"]
            .as_str()
            .unwrap()
            .split(' ')
            .take(3)
            .collect::<Vec<_>>(),
        ["1", "claim", "failed"]
    );
    let german: Value = viewer
        .post(app.url("/dashboard/fn/alerts"))
        .header("accept", "application/json")
        .header("accept-language", "de-CH")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let summary = german["alerts"][0]["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("1 Claim ist nach seinem letzten Versuch fehlgeschlagen"),
        "{summary}"
    );
    // Signed out: nothing.
    let anonymous = TestApp::browser();
    assert_eq!(app.call(&anonymous, "alert_badge", &[]).await.status(), 401);
    assert_eq!(app.call(&anonymous, "alerts", &[]).await.status(), 401);

    mark_processed(&app, "evt_alert0001").await;
    let mails = smtp.mails.wait_for(2).await;
    assert_eq!(mails[1].subject(), "[Claimcheck] Resolved: Claims failed");
    hook.posts.wait_for(2).await;
    assert_eq!(badge(viewer.clone()).await, 0);
    // A few more checks change nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!((smtp.mails.len(), hook.posts.len()), (2, 2));
}

/// Two instances of a cluster check the same database every 50 ms: one message per change.
async fn two_instances_send_one_alert(backend: Backend) {
    let smtp = SmtpSink::start().await;
    let hook = ChatHook::start().await;
    let every = Duration::from_millis(50);
    let (url, hook_url) = (smtp.url(), hook.url());
    let app = spawn_app_with(backend, |c| {
        alerting(
            c,
            channels(
                Some(url.clone()),
                Some(hook_url.clone()),
                Duration::from_secs(5),
            ),
            every,
        )
    })
    .await;
    let (_second, _stop) = spawn_instance(&app, |c| {
        alerting(
            c,
            channels(Some(url), Some(hook_url), Duration::from_secs(5)),
            every,
        )
    })
    .await;
    assert_eq!(app.deliver(&paid_session(1)).await.status(), 200);
    fail_claim(&app, "evt_alert0001").await;
    smtp.mails.wait_for(1).await;
    hook.posts.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!((smtp.mails.len(), hook.posts.len()), (1, 1));
    assert_eq!(app.db.count("SELECT COUNT(*) FROM alerts").await, 1);

    mark_processed(&app, "evt_alert0001").await;
    smtp.mails.wait_for(2).await;
    hook.posts.wait_for(2).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!((smtp.mails.len(), hook.posts.len()), (2, 2));
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM alert_deliveries WHERE status = 'sent'")
            .await,
        4
    );
}

async fn two_instances_on_postgres_send_one_alert() {
    two_instances_send_one_alert(Backend::Postgres).await;
}

/// An SMTP server that accepts and never answers: deliveries are still answered at once,
/// claims still fulfilled, the chat still told; the e-mail fails after its timeout, is
/// retried, and the failure is there to see.
async fn an_smtp_server_that_never_answers_delays_nothing_else(backend: Backend) {
    let hole = black_hole().await;
    let hook = ChatHook::start().await;
    let alert_channels = channels(
        Some(format!("smtp://127.0.0.1:{hole}")),
        Some(hook.url()),
        Duration::from_secs(6),
    );
    let app = spawn_app_with(backend, |c| {
        alerting(c, alert_channels, Duration::from_millis(50));
        c.workers = 1;
    })
    .await;
    assert_eq!(app.deliver(&paid_session(1)).await.status(), 200);
    // Fulfilled, then made failed by hand: the alert's e-mail now hangs.
    let deadline = Instant::now() + Duration::from_secs(10);
    while app
        .db
        .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'")
        .await
        != 1
    {
        assert!(
            Instant::now() < deadline,
            "the first claim was never fulfilled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fail_claim(&app, "evt_alert0001").await;
    hook.posts.wait_for(1).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while app
        .db
        .count(
            "SELECT COUNT(*) FROM alert_deliveries \
             WHERE channel = 'email' AND attempts = 1 AND status = 'pending'",
        )
        .await
        != 1
    {
        assert!(Instant::now() < deadline, "the e-mail was never tried");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // While it hangs: twenty deliveries, each answered well within the SMTP timeout, all
    // fulfilled before the e-mail's first attempt has even timed out.
    for i in 2..=21 {
        let sent = Instant::now();
        assert_eq!(app.deliver(&paid_session(i)).await.status(), 200);
        assert!(
            sent.elapsed() < Duration::from_secs(3),
            "delivery {i} took {:?}",
            sent.elapsed()
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while app
        .db
        .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'")
        .await
        != 20
    {
        assert!(Instant::now() < deadline, "claims were not fulfilled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM alert_deliveries \
                 WHERE channel = 'email' AND attempts = 1 AND status = 'pending' \
                   AND last_error IS NULL",
            )
            .await,
        1,
        "fulfilment waited for the SMTP server"
    );

    // The e-mail gives up after its attempts, with the reason.
    let deadline = Instant::now() + Duration::from_secs(40);
    while app
        .db
        .count(
            "SELECT COUNT(*) FROM alert_deliveries \
             WHERE channel = 'email' AND status = 'failed' AND attempts = 2",
        )
        .await
        != 1
    {
        assert!(Instant::now() < deadline, "the e-mail never gave up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let errors = app
        .db
        .texts("SELECT last_error FROM alert_deliveries WHERE channel = 'email'")
        .await;
    assert!(
        errors[0].contains(&format!("127.0.0.1:{hole}")),
        "{errors:?}"
    );
}

/// Sixty messages waiting for a channel this instance no longer has (the chat webhook was
/// removed from its configuration), older than anything else: they never crowd out the
/// e-mail that is due.
async fn messages_for_a_removed_channel_never_starve_the_others(backend: Backend) {
    let app = spawn_app_with(backend, |_| {}).await;
    let now = now_ms();
    app.db
        .execute(&format!(
            "INSERT INTO alerts (condition, count, since, summary, opened_at, last_notified_at, \
             checked_at) VALUES ('failed_claims', 1, {now}, 'one failed claim', {now}, {now}, {now})"
        ))
        .await;
    let alert = app.db.count("SELECT MAX(id) FROM alerts").await;
    for i in 0..60 {
        app.db
            .execute(&format!(
                "INSERT INTO alert_deliveries (alert_id, kind, channel, subject, body, status, \
                 attempts, next_attempt_at, created_at) \
                 VALUES ({alert}, 'opened', 'webhook', 'chat {i}', 'b', 'pending', 0, {at}, {at})",
                at = now - 60_000 + i
            ))
            .await;
    }
    app.db
        .execute(&format!(
            "INSERT INTO alert_deliveries (alert_id, kind, channel, subject, body, status, \
             attempts, next_attempt_at, created_at) \
             VALUES ({alert}, 'opened', 'email', 'mail', 'b', 'pending', 0, {now}, {now})"
        ))
        .await;
    let due = app
        .store
        .alerts()
        .due(&[AlertChannel::Email], now, 50)
        .await
        .unwrap();
    assert_eq!(
        due.iter()
            .map(|d| d.message.subject.as_str())
            .collect::<Vec<_>>(),
        ["mail"]
    );
    assert!(
        app.store
            .alerts()
            .due(&[], now, 50)
            .await
            .unwrap()
            .is_empty()
    );
}

on_both_backends!(
    backend => an_alert_opens_once_repeats_after_the_interval_and_resolves_once,
    a_newer_message_replaces_one_still_waiting,
    messages_for_a_removed_channel_never_starve_the_others,
    every_condition_is_read_from_the_database,
    the_server_checks_sends_and_shows_alerts_on_its_own,
    an_smtp_server_that_never_answers_delays_nothing_else
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_postgres() {
    two_instances_on_postgres_send_one_alert().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_sqlite_send_one_alert() {
    two_instances_send_one_alert(Backend::Sqlite).await;
}

/// `claimcheck alerts test` and `alerts list`, through the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_test_and_list_through_the_binary() {
    let smtp = SmtpSink::start().await;
    let hook = ChatHook::start().await;
    let app = spawn_app_with(Backend::Sqlite, |_| {}).await;
    let claimcheck = |args: &[&str]| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"));
        command
            .args(args)
            .env("DATABASE_URL", app.db.url())
            .env("CLAIMCHECK_PUBLIC_URL", PUBLIC_URL)
            .env("CLAIMCHECK_ALERT_EMAIL_FROM", "alerts@shop.test")
            .env("CLAIMCHECK_ALERT_EMAIL_TO", "ops@shop.test")
            .env("CLAIMCHECK_SMTP_URL", smtp.url())
            .env("CLAIMCHECK_ALERT_WEBHOOK_URL", hook.url())
            .env("RUST_LOG", "warn");
        command
    };

    let output = claimcheck(&["alerts", "test", "--json"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let results: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(results[0]["channel"], "email");
    assert_eq!(results[0]["ok"], true);
    assert_eq!(results[1]["channel"], "webhook");
    assert_eq!(results[1]["ok"], true);
    assert_eq!(
        smtp.mails.wait_for(1).await[0].subject(),
        "[Claimcheck] Test message"
    );
    assert!(hook.texts()[0].contains("https://pay.shop.test/alerts"));

    // A chat that is not there: the e-mail still goes, the failure is reported, exit 1.
    let gone = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let output = claimcheck(&["alerts", "test"])
        .env(
            "CLAIMCHECK_ALERT_WEBHOOK_URL",
            format!("http://127.0.0.1:{gone}/hooks/x"),
        )
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("email    sent"), "{stdout}");
    assert!(stdout.contains("webhook  FAILED"), "{stdout}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("1 of 2 channel(s) failed"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(smtp.mails.wait_for(2).await.len(), 2);

    // A setting that does not parse stops the command, naming it (and hiding the password).
    let output = claimcheck(&["alerts", "test"])
        .env("CLAIMCHECK_SMTP_URL", "mailto://ops:s3cret@shop.test")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("CLAIMCHECK_SMTP_URL"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
    let output = claimcheck(&["serve"])
        .env("CLAIMCHECK_ALERT_REPEAT", "soon")
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("CLAIMCHECK_ALERT_REPEAT"));

    // An alert, then the listing.
    assert_eq!(app.deliver(&paid_session(1)).await.status(), 200);
    fail_claim(&app, "evt_alert0001").await;
    let policy = AlertPolicy {
        channels: vec![AlertChannel::Email],
        ..policy(&Channels::default())
    };
    assert_eq!(
        check(&app.store, &policy, now_ms()).await.unwrap(),
        opened(AlertCondition::FailedClaims)
    );
    let output = claimcheck(&["alerts", "list", "--json"])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(listed[0]["condition"], "failed_claims");
    assert_eq!(listed[0]["open"], true);
    assert_eq!(listed[0]["count"], 1);
    assert_eq!(listed[0]["samples"][0], "evt_alert0001");
    assert_eq!(listed[0]["deliveries"][0]["channel"], "email");
    assert_eq!(listed[0]["deliveries"][0]["status"], "pending");
    let output = claimcheck(&["alerts", "list"]).output().await.unwrap();
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("OPEN") && table.contains("failed_claims"),
        "{table}"
    );
    assert!(table.contains("opened email pending"), "{table}");
}

/// A stale claim raises `stale_claims` as `CLAIMCHECK_ALERT_*` configure it, end to end: a
/// real `claimcheck serve` (no workers, checks every second, stale after 2 s, a chat
/// webhook) and a `claims redrive` whose process dies holding the lease.
#[cfg(feature = "failpoints")]
async fn a_stale_claim_raises_its_alert_as_configured(backend: Backend) {
    use tokio::io::AsyncBufReadExt;

    use crate::helpers::TestDb;
    use crate::process::{Launch, Server};

    let db = TestDb::create(backend).await;
    let hook = ChatHook::start().await;
    let server = Server::launch(
        &db,
        Launch {
            env: vec![
                ("CLAIMCHECK_WORKERS", "0".into()),
                ("CLAIMCHECK_ALERT_CHECK_INTERVAL", "1s".into()),
                ("CLAIMCHECK_ALERT_STALE_AFTER", "2s".into()),
                ("CLAIMCHECK_ALERT_WEBHOOK_URL", hook.url()),
                ("CLAIMCHECK_PUBLIC_URL", PUBLIC_URL.into()),
            ],
            ..Launch::default()
        },
    );
    server.deliver("checkout.session.completed.paid").await;

    // A re-drive from the command line takes the one-second lease and dies there.
    let mut doomed = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args(["claims", "redrive", "evt_pub0001paid", "--reason", "doomed"])
        .env("DATABASE_URL", db.url())
        .env("CLAIMCHECK_FAILPOINT", "after-lease")
        .env("CLAIMCHECK_LEASE_SECS", "1")
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(doomed.stderr.take().unwrap()).lines();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the re-drive never reached its failpoint")
            .unwrap()
            .expect("the re-drive ended before its failpoint");
        if line.contains("failpoint after-lease reached") {
            break;
        }
    }
    doomed.kill().await.unwrap();

    let posts = hook.posts.wait_for(1).await;
    let text = posts[0]["text"].as_str().unwrap();
    for needle in [
        "*[Claimcheck] Claims stuck stale (1)*",
        "1 claim has been stale for more than 2 s",
        "evt_pub0001paid",
        "https://pay.shop.test/claims?status=stale",
    ] {
        assert!(text.contains(needle), "{needle} in {text}");
    }
    // Not before the threshold: the claim was stale for the configured two seconds first.
    let waited = db
        .count(
            "SELECT a.opened_at - c.lease_expires_at FROM alerts a, processed_stripe_events c \
             WHERE a.condition = 'stale_claims' AND c.event_id = 'evt_pub0001paid'",
        )
        .await;
    assert!(waited >= 2000, "opened {waited} ms after the lease expired");
    drop(server);
}

#[cfg(feature = "failpoints")]
on_both_backends!(backend => a_stale_claim_raises_its_alert_as_configured);
