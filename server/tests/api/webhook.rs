//! `POST /webhooks/stripe`: Stripe's signature contract, the claim, duplicates, twins,
//! concurrency, limits, and a database that fails.

use std::time::Duration;

use claimcheck_core::now_ms;
use serde_json::Value;

use crate::helpers::{Backend, TestApp, fixture, on_both_backends, spawn_app_with, verifier};

on_both_backends!(
    every_fixture_is_answered_with_its_outcome,
    a_retried_event_is_one_claim,
    twins_make_one_claim_and_a_visible_duplicate_action,
    two_hundred_concurrent_deliveries_of_one_event_make_one_claim,
    a_failed_delivery_write_leaves_no_claim_and_the_retry_claims,
    one_failing_claim_does_not_fail_the_deliveries_committed_with_it,
    signed_but_unreadable_payloads_are_refused_and_recorded,
    an_object_that_names_no_kind_is_recorded_and_answered_200,
    events_of_the_other_mode_are_refused_and_recorded,
);

async fn outcome_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    (status, body)
}

async fn every_fixture_is_answered_with_its_outcome(app: TestApp) {
    let expected = [
        ("checkout.session.completed.paid", "claimed"),
        ("checkout.session.completed.paid.twin", "duplicate_action"),
        ("checkout.session.completed.free", "claimed"),
        ("checkout.session.completed.unpaid", "claimed"),
        ("checkout.session.async_payment_succeeded", "claimed"),
        ("checkout.session.completed.unpaid.3", "claimed"),
        ("checkout.session.async_payment_failed", "claimed"),
        ("charge.refunded", "claimed"),
        ("payment_intent.succeeded", "ignored"),
        ("customer.discount.created", "ignored"),
    ];
    for (name, outcome) in expected {
        let (status, body) = outcome_of(app.deliver(&fixture(name)).await).await;
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["outcome"], outcome, "{name}: {body}");
    }
    let claims = app
        .db
        .count("SELECT COUNT(*) FROM processed_stripe_events")
        .await;
    assert_eq!(claims, 7);
    let pending = app
        .db
        .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processing' AND lease_owner IS NULL")
        .await;
    assert_eq!(pending, 7, "ingestion does no fulfilment work");
    let deliveries = app
        .db
        .count("SELECT COUNT(*) FROM webhook_deliveries")
        .await;
    assert_eq!(deliveries, 10);
    // The claim keeps the raw payload byte for byte.
    let stored = app
        .db
        .count("SELECT COUNT(*) FROM processed_stripe_events WHERE event_id = 'evt_pub0001refund' AND livemode = FALSE AND stripe_created > 0")
        .await;
    assert_eq!(stored, 1);
}

async fn a_retried_event_is_one_claim(app: TestApp) {
    let paid = fixture("checkout.session.completed.paid");
    let (_, first) = outcome_of(app.deliver(&paid).await).await;
    assert_eq!(first["outcome"], "claimed");
    assert_eq!(first["event_id"], "evt_pub0001paid");
    // A retry carries a new signature and timestamp but the same event.
    let (status, again) = outcome_of(app.deliver_signed_at(&paid, now_ms() / 1000 - 7).await).await;
    assert_eq!(status, 200);
    assert_eq!(again["outcome"], "duplicate_event");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        1
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM webhook_deliveries WHERE event_id = 'evt_pub0001paid'")
            .await,
        2
    );
}

async fn twins_make_one_claim_and_a_visible_duplicate_action(app: TestApp) {
    let (_, first) = outcome_of(
        app.deliver(&fixture("checkout.session.completed.paid.twin"))
            .await,
    )
    .await;
    assert_eq!(first["outcome"], "claimed");
    let (status, twin) = outcome_of(
        app.deliver(&fixture("checkout.session.completed.paid"))
            .await,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(twin["outcome"], "duplicate_action");
    assert_eq!(twin["duplicate_of"], "evt_pub0001twin");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        1
    );
    let visible = app
        .db
        .count(
            "SELECT COUNT(*) FROM webhook_deliveries WHERE event_id = 'evt_pub0001paid' \
             AND outcome = 'duplicate_action' AND duplicate_of = 'evt_pub0001twin'",
        )
        .await;
    assert_eq!(visible, 1);
}

async fn two_hundred_concurrent_deliveries_of_one_event_make_one_claim(app: TestApp) {
    let body = fixture("checkout.session.completed.paid");
    let deliveries = (0..200).map(|_| app.deliver(&body));
    let answers = futures::future::join_all(deliveries).await;
    let mut claimed = 0;
    for response in answers {
        let (status, outcome) = outcome_of(response).await;
        assert_eq!(status, 200, "{outcome}");
        match outcome["outcome"].as_str().unwrap() {
            "claimed" => claimed += 1,
            "duplicate_event" => {}
            other => panic!("unexpected outcome {other}"),
        }
    }
    assert_eq!(claimed, 1);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        1
    );
    // Replays are answered but logged row by row only up to a cap per event.
    let logged = app
        .db
        .count("SELECT COUNT(*) FROM webhook_deliveries")
        .await;
    assert_eq!(logged, claimcheck_core::DELIVERIES_KEPT_PER_EVENT);
    assert_eq!(
        app.db
            .count("SELECT deliveries FROM processed_stripe_events")
            .await,
        200
    );
    let metrics = app.get_metrics().await;
    assert!(
        metrics.contains("claimcheck_webhook_deliveries_total{outcome=\"claimed\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("claimcheck_webhook_deliveries_total{outcome=\"duplicate_event\"} 199\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("claimcheck_webhook_ack_seconds_count 200\n"),
        "{metrics}"
    );
}

/// The delivery log insert fails after the claim insert: the transaction must take the
/// claim back with it, answer 503, and the retry must claim.
async fn a_failed_delivery_write_leaves_no_claim_and_the_retry_claims(app: TestApp) {
    let sqlite = app.db.url().starts_with("sqlite");
    if sqlite {
        app.db
            .execute(
                "CREATE TRIGGER fail_deliveries BEFORE INSERT ON webhook_deliveries \
                 BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
            )
            .await;
    } else {
        app.db
            .execute(
                "CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'disk full'; END $$; \
                 CREATE TRIGGER fail_deliveries BEFORE INSERT ON webhook_deliveries \
                 FOR EACH ROW EXECUTE FUNCTION fail();",
            )
            .await;
    }
    let body = fixture("checkout.session.completed.paid");
    let response = app.deliver(&body).await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "5");
    let (_, answer) = outcome_of(response).await;
    assert_eq!(answer["outcome"], "storage_error");
    assert!(
        !answer.to_string().contains("disk full"),
        "internals leaked: {answer}"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        0
    );

    let drop_trigger = if sqlite {
        "DROP TRIGGER fail_deliveries"
    } else {
        "DROP TRIGGER fail_deliveries ON webhook_deliveries"
    };
    app.db.execute(drop_trigger).await;
    let (status, retried) = outcome_of(app.deliver(&body).await).await;
    assert_eq!(status, 200);
    assert_eq!(retried["outcome"], "claimed");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        1
    );
}

/// Concurrent deliveries are committed together; one that cannot be written must get its
/// own 503 while every other one is claimed.
async fn one_failing_claim_does_not_fail_the_deliveries_committed_with_it(app: TestApp) {
    if app.db.url().starts_with("sqlite") {
        app.db
            .execute(
                "CREATE TRIGGER poison BEFORE INSERT ON processed_stripe_events \
                 WHEN NEW.event_id = 'evt_poison' BEGIN SELECT RAISE(ABORT, 'poison'); END;",
            )
            .await;
    } else {
        app.db
            .execute(
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS \
                 $$ BEGIN RAISE EXCEPTION 'poison'; END $$; \
                 CREATE TRIGGER poison BEFORE INSERT ON processed_stripe_events \
                 FOR EACH ROW WHEN (NEW.event_id = 'evt_poison') EXECUTE FUNCTION poison();",
            )
            .await;
    }
    let template = String::from_utf8(fixture("checkout.session.completed.paid")).unwrap();
    let bodies: Vec<String> = (0..60)
        .map(|i| {
            let id = if i == 30 {
                "evt_poison".to_owned()
            } else {
                format!("evt_many{i}")
            };
            template.replace("evt_pub0001paid", &id).replace(
                "cs_test_pub0001a1YS1URlnyQCN5fUUduORoQ7Pw41PJ",
                &format!("cs_many{i}"),
            )
        })
        .collect();
    let answers =
        futures::future::join_all(bodies.iter().map(|body| app.deliver(body.as_bytes()))).await;
    for (i, response) in answers.into_iter().enumerate() {
        let expected = if i == 30 { 503 } else { 200 };
        assert_eq!(response.status(), expected, "delivery {i}");
    }
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        59
    );
}

async fn signed_but_unreadable_payloads_are_refused_and_recorded(app: TestApp) {
    for body in [
        &b"{not json"[..],
        br#"{"id":"evt_x","object":"event"}"#,
        &[0xff, 0xfe][..],
    ] {
        let (status, answer) = outcome_of(app.deliver(body).await).await;
        assert_eq!(status, 400);
        assert_eq!(answer["outcome"], "bad_payload");
        assert!(answer["error"].as_str().unwrap().len() > 10, "{answer}");
    }
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM webhook_deliveries WHERE outcome = 'bad_payload'")
            .await,
        3
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        0
    );
}

/// Stripe always sends `data.object.object`; an event without it is still a valid delivery
/// (unknown and missing fields never fail one): recorded, claimed when it acts.
async fn an_object_that_names_no_kind_is_recorded_and_answered_200(app: TestApp) {
    let created = now_ms() / 1000;
    let acting = format!(
        r#"{{"id":"evt_kindless_1","object":"event","type":"checkout.session.completed",
           "created":{created},"livemode":false,
           "data":{{"object":{{"id":"cs_kindless","payment_status":"paid"}}}}}}"#
    );
    let (status, answer) = outcome_of(app.deliver(acting.as_bytes()).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "claimed");
    let other = format!(
        r#"{{"id":"evt_kindless_2","object":"event","type":"brand.new.type",
           "created":{created},"livemode":false,"data":{{"object":{{}}}}}}"#
    );
    let (status, answer) = outcome_of(app.deliver(other.as_bytes()).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "ignored");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE event_id = 'evt_kindless_1'")
            .await,
        1
    );
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM webhook_deliveries \
                 WHERE event_id IN ('evt_kindless_1', 'evt_kindless_2')"
            )
            .await,
        2
    );
}

async fn events_of_the_other_mode_are_refused_and_recorded(app: TestApp) {
    let test_event = String::from_utf8(fixture("checkout.session.completed.paid")).unwrap();
    let live_event = test_event.replace("\"livemode\":false", "\"livemode\":true");
    assert_ne!(test_event, live_event, "the fixture names its mode");
    let (status, answer) = outcome_of(app.deliver(live_event.as_bytes()).await).await;
    assert_eq!(status, 400);
    assert_eq!(answer["outcome"], "livemode_mismatch");
    assert_eq!(
        answer["error"],
        "a live event reached an endpoint configured for test mode"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM webhook_deliveries WHERE outcome = 'livemode_mismatch'")
            .await,
        1
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        0
    );
}

/// Every vector in the shared set gets the verdict Stripe's official SDK gave it. The vectors
/// are signed at a fixed past time, so this app tolerates any age; recency is tested apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signature_vectors_get_the_official_sdks_verdict() {
    let vectors: Value = serde_json::from_slice(
        &std::fs::read(format!(
            "{}/../fixtures/stripe/signature_vectors.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let secret = vectors["secret"].as_str().unwrap().to_owned();
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.webhook.verifier = Some(verifier(
            &[&secret],
            Duration::from_secs(100 * 365 * 86_400),
        ));
    })
    .await;
    for vector in vectors["vectors"].as_array().unwrap() {
        let name = vector["name"].as_str().unwrap();
        let body = match vector["payload"].as_str() {
            Some(payload) => payload.as_bytes().to_vec(),
            None => {
                let file = vector["payload_file"].as_str().unwrap();
                let name = file.trim_start_matches("events/").trim_end_matches(".json");
                fixture(name)
            }
        };
        let header = vector["header"].as_str().unwrap();
        let (status, answer) = outcome_of(app.post_webhook(&body, Some(header)).await).await;
        let accepted = vector["official_sdk_accepts"].as_bool().unwrap();
        if accepted {
            assert_eq!(status, 200, "{name}: {answer}");
        } else {
            assert_eq!(status, 400, "{name}: {answer}");
            assert_eq!(answer["outcome"], "bad_signature", "{name}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_accepts_either_secret() {
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.webhook.verifier = Some(verifier(
            &["whsec_new", "whsec_old"],
            Duration::from_secs(300),
        ));
    })
    .await;
    let now = now_ms() / 1000;
    for (i, secret) in ["whsec_old", "whsec_new"].into_iter().enumerate() {
        let body = fixture("customer.discount.created");
        let header = claimcheck_core::webhook::SigningSecret::new(secret)
            .unwrap()
            .sign(now, &body);
        assert_eq!(
            app.post_webhook(&body, Some(&header)).await.status(),
            200,
            "secret {i}"
        );
    }
    let body = fixture("customer.discount.created");
    let stranger = claimcheck_core::webhook::SigningSecret::new("whsec_other")
        .unwrap()
        .sign(now, &body);
    assert_eq!(app.post_webhook(&body, Some(&stranger)).await.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tolerance_is_kept_at_the_server() {
    let app = crate::helpers::spawn_app(Backend::Sqlite).await;
    // Five seconds either side of the 300 s tolerance: the server reads its own clock a
    // moment later (the exact second is the engine's unit test).
    let now = now_ms() / 1000;
    let body = fixture("customer.discount.created");
    assert_eq!(app.deliver_signed_at(&body, now - 295).await.status(), 200);
    let (status, answer) = outcome_of(app.deliver_signed_at(&body, now - 305).await).await;
    assert_eq!(status, 400);
    assert_eq!(answer["outcome"], "bad_signature");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("300 s tolerance"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_garbled_signatures_are_400_and_store_nothing() {
    let app = crate::helpers::spawn_app(Backend::Sqlite).await;
    let body = fixture("checkout.session.completed.paid");
    let (status, answer) = outcome_of(app.post_webhook(&body, None).await).await;
    assert_eq!(status, 400);
    assert_eq!(answer["error"], "the Stripe-Signature header is missing");
    let (status, _) = outcome_of(app.post_webhook(&body, Some("t=abc,v1=00")).await).await;
    assert_eq!(status, 400);
    let forged = format!("t={},v1={}", now_ms() / 1000, "ab".repeat(32));
    let (status, answer) = outcome_of(app.post_webhook(&body, Some(&forged)).await).await;
    assert_eq!(status, 400);
    assert!(!answer.to_string().contains("whsec_"), "{answer}");
    // A forger cannot grow the database.
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM webhook_deliveries")
            .await,
        0
    );
    let metrics = app.get_metrics().await;
    assert!(
        metrics.contains("claimcheck_webhook_deliveries_total{outcome=\"bad_signature\"} 3\n"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limit_are_413() {
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.webhook.max_body_bytes = 4096
    })
    .await;
    let mut body = fixture("checkout.session.completed.paid");
    assert!(body.len() < 4096);
    assert_eq!(app.deliver(&body).await.status(), 200);
    body.resize(4097, b' ');
    let (status, answer) = outcome_of(app.deliver(&body).await).await;
    assert_eq!(status, 413);
    assert_eq!(answer["outcome"], "too_large");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_secret_deliveries_wait_with_503() {
    let app = spawn_app_with(Backend::Sqlite, |config| config.webhook.verifier = None).await;
    let response = app
        .deliver(&fixture("checkout.session.completed.paid"))
        .await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
}

/// PostgreSQL refuses connections: 503 and nothing written; once it is back, the retry
/// is claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_refusing_connections_is_503_then_the_retry_claims() {
    let app = crate::helpers::spawn_app(Backend::Postgres).await;
    app.db.refuse_connections().await;
    let body = fixture("checkout.session.completed.paid");
    let response = app.deliver(&body).await;
    assert_eq!(response.status(), 503);
    assert!(response.headers().contains_key("retry-after"));
    app.db.allow_connections().await;
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        0
    );
    let (status, answer) = outcome_of(app.deliver(&body).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "claimed");
}

/// Another process holds SQLite's write lock past the busy timeout: 503, then the retry claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_locked_is_503_then_the_retry_claims() {
    use sqlx::Connection;

    let app = crate::helpers::spawn_app(Backend::Sqlite).await;
    let mut locker = sqlx::SqliteConnection::connect(app.db.url()).await.unwrap();
    sqlx::raw_sql("BEGIN EXCLUSIVE")
        .execute(&mut locker)
        .await
        .unwrap();
    let body = fixture("checkout.session.completed.paid");
    let response = app.deliver(&body).await;
    assert_eq!(response.status(), 503);
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut locker)
        .await
        .unwrap();
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events")
            .await,
        0
    );
    let (status, answer) = outcome_of(app.deliver(&body).await).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "claimed");
}
