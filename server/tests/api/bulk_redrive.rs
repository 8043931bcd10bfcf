//! Bulk re-drive on both backends: hundreds of failed claims re-driven once each under one
//! batch id, two batches over the same claims, a cancel midway, an interrupted batch
//! resumed, the preview's figures, and the command line's confirmation.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use claimcheck_core::auth::Role;
use claimcheck_core::bulk::{BatchState, BulkFilter};
use claimcheck_core::observe::Unobserved;
use claimcheck_core::ops::Actor;
use claimcheck_core::ops::bulk_redrive::{self, BulkError};
use claimcheck_core::webhook::Envelope;
use claimcheck_core::worker::{Worker, WorkerConfig};
use claimcheck_core::{BatchId, BatchView, ClaimSource, ClaimState, WriteOp, now_ms};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::helpers::{TestApp, on_both_backends, query_value};

on_both_backends!(
    five_hundred_failed_claims_are_redriven_once_each_under_one_batch,
    two_batches_over_the_same_claims_run_each_claim_once,
    a_cancel_stops_between_claims_and_leaves_the_rest_untouched,
    an_interrupted_batch_shows_so_and_resumes,
    support_cancels_a_running_batch_and_resumes_an_interrupted_one_from_the_dashboard,
    the_preview_counts_orders_and_the_credits_they_have,
    the_command_line_previews_confirms_and_refuses,
);

/// [`crate::helpers::paid_session`] as text.
fn paid_session(event_id: &str, session: &str, order: &str) -> String {
    String::from_utf8(crate::helpers::paid_session(event_id, session, order)).unwrap()
}

/// Claims `payloads` in one transaction, as the batch writer would.
async fn claim_all(app: &TestApp, payloads: &[String]) {
    let now = now_ms();
    let ops: Vec<WriteOp> = payloads
        .iter()
        .map(|payload| {
            let envelope = Envelope::parse(payload.as_bytes()).unwrap();
            WriteOp::Claim {
                object_id: envelope.object_id.clone().unwrap(),
                action_key: envelope.action_key.clone().unwrap(),
                envelope,
                payload: payload.clone(),
                received_at: now - 60_000,
                source: ClaimSource::Webhook,
            }
        })
        .collect();
    let refs: Vec<&WriteOp> = ops.iter().collect();
    app.store.claims().apply_writes(&refs).await.unwrap();
}

/// `n` failed claims, one order each (`ord_<prefix>_<i>`), their last error `error`.
async fn seed_failed(app: &TestApp, prefix: &str, n: usize, error: &str) {
    let payloads: Vec<String> = (0..n)
        .map(|i| {
            paid_session(
                &format!("evt_{prefix}_{i:04}"),
                &format!("cs_{prefix}_{i:04}"),
                &format!("ord_{prefix}_{i:04}"),
            )
        })
        .collect();
    claim_all(app, &payloads).await;
    app.db
        .execute(&format!(
            "UPDATE processed_stripe_events SET status = 'failed', attempts = 8, \
             last_error = '{error}' WHERE event_id LIKE 'evt_{prefix}_%'"
        ))
        .await;
}

fn failed() -> BulkFilter {
    BulkFilter {
        state: Some(ClaimState::Failed),
        ..BulkFilter::default()
    }
}

fn config() -> WorkerConfig {
    WorkerConfig {
        base_backoff: Duration::from_millis(20),
        ..WorkerConfig::default()
    }
}

fn never() -> tokio::sync::watch::Receiver<bool> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    // Kept alive for the test's length: a dropped sender would read as "no stop".
    std::mem::forget(stop);
    stopped
}

async fn five_hundred_failed_claims_are_redriven_once_each_under_one_batch(app: TestApp) {
    seed_failed(&app, "five", 500, "no credit amount").await;
    let support = app.sign_in_as("sam", Role::Support).await;

    // A count that is not the preview's starts nothing.
    let wrong = support
        .post(app.url("/dashboard/actions/bulk-redrive"))
        .form(&[
            ("status", "failed"),
            ("reason", "package table fixed"),
            ("confirm", "499"),
            ("back", "/claims/redrive?status=failed&preview=1"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 303);
    let location = crate::helpers::landing(&wrong);
    assert!(
        location.starts_with("/claims/redrive?status=failed&preview=1&error="),
        "{location}"
    );
    assert!(
        query_value(&location, "error").is_some_and(|e| e.contains("500 claims match now")),
        "{location}"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM bulk_redrives").await, 0);

    // The preview the page shows.
    let preview: Value = app
        .call(
            &support,
            "bulk_preview",
            &[
                ("status", "failed"),
                ("event_type", ""),
                ("from", ""),
                ("to", ""),
                ("older_than", "30s"),
                ("error_contains", "CREDIT amount"),
                ("search", ""),
            ],
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(preview["claims"], 500, "{preview}");
    assert_eq!(preview["orders"], 500);
    assert_eq!(preview["orders_credited"], 0);
    assert_eq!(preview["rows"].as_array().unwrap().len(), 10);
    assert_eq!(preview["rows"][0]["claim"]["event_id"], "evt_five_0000");

    let started = support
        .post(app.url("/dashboard/actions/bulk-redrive"))
        .form(&[
            ("status", "failed"),
            ("error_contains", "credit amount"),
            (
                "received_before",
                &preview["filter"]["received_before"].to_string(),
            ),
            ("reason", "package table fixed"),
            ("confirm", "500"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 303);
    let location = crate::helpers::landing(&started);
    assert!(location.starts_with("/claims/redrive/bulk_"), "{location}");
    let batch_id = location
        .trim_start_matches("/claims/redrive/")
        .split('?')
        .next()
        .unwrap()
        .to_owned();

    // Progress is visible while it runs, to anyone signed in, from the database.
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let mut seen_midway = false;
    let done = loop {
        let batch: Value = app
            .call(&viewer, "bulk_batch", &[("batch_id", &batch_id)])
            .await
            .json()
            .await
            .unwrap();
        let done = batch["done"].as_i64().unwrap();
        assert_eq!(batch["total"], 500);
        if batch["state"] == "running" && done > 0 && done < 500 {
            seen_midway = true;
        }
        if batch["state"] != "running" {
            break batch;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(seen_midway, "progress seen while it ran");
    assert_eq!(done["state"], "finished", "{done}");
    assert_eq!(done["processed"], 500);
    assert_eq!(done["failed"], 0);
    assert_eq!(done["skipped"], 0);
    assert_eq!(done["done"], 500);

    // Each order credited exactly once.
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        500
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(DISTINCT order_id) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        500
    );
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM processed_stripe_events \
                 WHERE status = 'processed' AND event_id LIKE 'evt_five_%'"
            )
            .await,
        500
    );
    // 500 audit entries of their own under the batch id, and the batch's own (start, end).
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT COUNT(DISTINCT target) FROM audit_log WHERE batch_id = '{batch_id}' \
                 AND action = 'redrive' AND outcome = 'processed' \
                 AND actor = 'dashboard:sam' AND reason = 'package table fixed'"
            ))
            .await,
        500
    );
    let batch_entries = app
        .db
        .texts(&format!(
            "SELECT outcome FROM audit_log WHERE batch_id = '{batch_id}' \
             AND action = 'bulk_redrive' AND target = '{batch_id}' \
             AND reason = 'package table fixed' ORDER BY id"
        ))
        .await;
    assert_eq!(batch_entries.len(), 2, "{batch_entries:?}");
    assert!(
        batch_entries[0].starts_with("started: 500 claims"),
        "{batch_entries:?}"
    );
    assert_eq!(
        batch_entries[1],
        "finished: 500 processed, 0 failed, 0 skipped"
    );
    // The claim's own timeline names the batch's re-drive.
    let timeline = app
        .db
        .count(
            "SELECT COUNT(*) FROM audit_log WHERE target = 'evt_five_0042' AND action = 'redrive'",
        )
        .await;
    assert_eq!(timeline, 1);

    // The progress page, rendered on the server (no WASM needed).
    let html = viewer
        .get(app.url(&format!("/claims/redrive/{batch_id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("500 / 500"), "{html}");
    assert!(html.contains("finished"), "{html}");
    // A viewer sees no cancel button and no bulk form.
    assert!(!html.contains("Cancel batch"));
    let html = viewer
        .get(app.url("/claims/redrive?status=failed&preview=1"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!html.contains("/dashboard/actions/bulk-redrive"), "{html}");
    assert!(html.contains(&batch_id), "the recent batches list it");
    // The batch's attempts are in this instance's metrics like any worker's.
    let metrics = app.get_metrics().await;
    assert!(
        metrics.contains(r#"claimcheck_fulfilment_attempts_total{result="processed"} 500"#),
        "{metrics}"
    );
}

async fn two_batches_over_the_same_claims_run_each_claim_once(app: TestApp) {
    seed_failed(&app, "twice", 200, "boom").await;
    let ana = Actor::Dashboard("ana".into());
    let ben = Actor::Dashboard("ben".into());
    let a = bulk_redrive::start(&app.store, &ana, failed(), "first", 200)
        .await
        .unwrap();
    let b = bulk_redrive::start(&app.store, &ben, failed(), "second", 200)
        .await
        .unwrap();
    let config = config();
    let (ra, rb) = tokio::join!(
        bulk_redrive::run(&app.store, &config, Arc::new(Unobserved), &a, &ana, never()),
        bulk_redrive::run(&app.store, &config, Arc::new(Unobserved), &b, &ben, never()),
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.state, BatchState::Finished);
    assert_eq!(rb.state, BatchState::Finished);
    assert_eq!(ra.failed + rb.failed, 0, "{ra:?} {rb:?}");
    assert_eq!(ra.processed + rb.processed, 200, "{ra:?} {rb:?}");
    assert_eq!(ra.skipped + rb.skipped, 200, "{ra:?} {rb:?}");
    assert_eq!(ra.done(), 200);
    assert_eq!(rb.done(), 200);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        200
    );
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'redrive' AND outcome = 'processed'"
            )
            .await,
        200
    );
    // Nothing matches any more.
    let again = bulk_redrive::start(&app.store, &ana, failed(), "third", 200).await;
    assert!(
        matches!(again, Err(BulkError::NothingSelected)),
        "{again:?}"
    );
}

async fn a_cancel_stops_between_claims_and_leaves_the_rest_untouched(app: TestApp) {
    seed_failed(&app, "stop", 300, "boom").await;
    let ana = Actor::Dashboard("ana".into());
    let started = bulk_redrive::start(&app.store, &ana, failed(), "try them", 300)
        .await
        .unwrap();
    let store = app.store.clone();
    let run = {
        let started = started.clone();
        let ana = ana.clone();
        tokio::spawn(async move {
            bulk_redrive::run(
                &store,
                &config(),
                Arc::new(Unobserved),
                &started,
                &ana,
                never(),
            )
            .await
        })
    };
    batch_when(&app, &started.batch_id, |b| b.done() >= 20).await;
    let ben = Actor::Dashboard("ben".into());
    let asked = bulk_redrive::cancel(&app.store, &ben, &started.batch_id)
        .await
        .unwrap();
    assert_eq!(asked.cancel_requested_by.as_deref(), Some("dashboard:ben"));
    let batch = run.await.unwrap().unwrap();
    assert_eq!(batch.state, BatchState::Cancelled);
    assert!(
        batch.done() >= 20 && batch.done() < 300,
        "stopped midway: {batch:?}"
    );
    assert_eq!(batch.processed, batch.done());
    // The claims it did not reach are as they were.
    let still_failed = app
        .db
        .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'failed'")
        .await;
    assert_eq!(still_failed, 300 - batch.done());
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        batch.processed
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM bulk_redrive_items WHERE outcome IS NULL")
            .await,
        batch.remaining()
    );
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT COUNT(*) FROM audit_log WHERE batch_id = '{}' AND action = 'redrive'",
                started.batch_id
            ))
            .await,
        batch.done()
    );
    let ended = app
        .db
        .texts(&format!(
            "SELECT outcome FROM audit_log WHERE batch_id = '{}' AND action = 'bulk_redrive' \
             ORDER BY id",
            started.batch_id
        ))
        .await;
    assert_eq!(
        ended.last().unwrap(),
        &format!(
            "cancelled by dashboard:ben after {} of 300: {} processed, 0 failed, 0 skipped; \
             {} claims left untouched",
            batch.done(),
            batch.processed,
            batch.remaining()
        )
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM audit_log WHERE action = 'bulk_redrive_cancel' AND actor = 'dashboard:ben'")
            .await,
        1
    );
    // Over is over.
    let again = bulk_redrive::cancel(&app.store, &ben, &started.batch_id).await;
    assert!(
        matches!(again, Err(BulkError::Over(BatchState::Cancelled))),
        "{again:?}"
    );
}

async fn an_interrupted_batch_shows_so_and_resumes(app: TestApp) {
    seed_failed(&app, "died", 40, "boom").await;
    let ana = Actor::Cli("ops".into());
    let started = bulk_redrive::start(&app.store, &ana, failed(), "after the outage", 40)
        .await
        .unwrap();
    // Its process dies before it runs anything: the heartbeat lapses.
    app.db
        .execute(&format!(
            "UPDATE bulk_redrives SET lease_until = 1 WHERE batch_id = '{}'",
            started.batch_id
        ))
        .await;
    let batch = app
        .store
        .bulk_redrives()
        .get(&started.batch_id, now_ms())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(batch.state, BatchState::Interrupted);
    // The dead runner cannot write any more once another took over.
    let sam = Actor::Dashboard("sam".into());
    let resumed = bulk_redrive::resume(&app.store, &sam, &started.batch_id, "picking it up")
        .await
        .unwrap();
    assert_ne!(resumed.runner, started.runner);
    assert_eq!(resumed.reason, "after the outage");
    let twice = bulk_redrive::resume(&app.store, &sam, &started.batch_id, "again").await;
    assert!(matches!(twice, Err(BulkError::StillRunning)), "{twice:?}");
    let old = bulk_redrive::run(
        &app.store,
        &config(),
        Arc::new(Unobserved),
        &started,
        &ana,
        never(),
    )
    .await
    .unwrap();
    assert_eq!(old.done(), 0, "the old runner writes nothing");
    let batch = bulk_redrive::run(
        &app.store,
        &config(),
        Arc::new(Unobserved),
        &resumed,
        &sam,
        never(),
    )
    .await
    .unwrap();
    assert_eq!(batch.state, BatchState::Finished);
    assert_eq!(batch.processed, 40);
    assert_eq!(batch.done(), 40);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        40
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM audit_log WHERE action = 'bulk_redrive_resume'")
            .await,
        1
    );

    // A graceful stop leaves a batch interrupted at once, its claims untouched.
    seed_failed(&app, "stopped", 5, "boom").await;
    let next = bulk_redrive::start(&app.store, &ana, failed(), "later", 5)
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(true);
    let batch = bulk_redrive::run(
        &app.store,
        &config(),
        Arc::new(Unobserved),
        &next,
        &ana,
        stopped,
    )
    .await
    .unwrap();
    drop(stop);
    assert_eq!(batch.state, BatchState::Interrupted);
    assert_eq!(batch.done(), 0);
    // Cancelling an interrupted batch ends it at once.
    let cancelled = bulk_redrive::cancel(&app.store, &sam, &next.batch_id)
        .await
        .unwrap();
    assert_eq!(cancelled.state, BatchState::Cancelled);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE event_id LIKE 'evt_stopped_%' AND status = 'failed'")
            .await,
        5
    );
    let unknown = BatchId::parse("bulk_nope").unwrap();
    assert!(matches!(
        bulk_redrive::cancel(&app.store, &sam, &unknown).await,
        Err(BulkError::NoBatch(_))
    ));
}

async fn batch_now(app: &TestApp, batch_id: &BatchId) -> BatchView {
    app.store
        .bulk_redrives()
        .get(batch_id, now_ms())
        .await
        .unwrap()
        .unwrap()
}

/// Waits (at most a minute) until `done` holds for the batch, and returns it then.
async fn batch_when(
    app: &TestApp,
    batch_id: &BatchId,
    done: impl Fn(&BatchView) -> bool,
) -> BatchView {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let batch = batch_now(app, batch_id).await;
        if done(&batch) {
            return batch;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the batch never got there: {batch:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The batch once it has finished, been cancelled or stopped.
async fn until_over(app: &TestApp, batch_id: &BatchId) -> BatchView {
    batch_when(app, batch_id, |b| b.state.is_over()).await
}

/// The batch page's two buttons, as the browser posts them: a cancel while the batch runs in
/// the server's background, and a resume of a batch whose runner died.
async fn support_cancels_a_running_batch_and_resumes_an_interrupted_one_from_the_dashboard(
    app: TestApp,
) {
    seed_failed(&app, "dash", 1000, "boom").await;
    let sam = app.sign_in_as("sam", Role::Support).await;
    let post = |path: &'static str, form: Vec<(&'static str, String)>| {
        let request = sam.post(app.url(path)).form(&form);
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 303, "{path}");
            crate::helpers::landing(&response)
        }
    };
    let location = post(
        "/dashboard/actions/bulk-redrive",
        vec![
            ("status", "failed".into()),
            ("reason", "package table fixed".into()),
            ("confirm", "1000".into()),
        ],
    )
    .await;
    let batch_id = BatchId::parse(
        location
            .trim_start_matches("/claims/redrive/")
            .split('?')
            .next()
            .unwrap(),
    )
    .unwrap();
    batch_when(&app, &batch_id, |b| b.done() >= 20).await;

    // Without the tick box nothing stops.
    let unticked = post(
        "/dashboard/actions/bulk-redrive/cancel",
        vec![("batch_id", batch_id.to_string())],
    )
    .await;
    assert!(unticked.contains("error="), "{unticked}");
    assert!(
        batch_now(&app, &batch_id)
            .await
            .cancel_requested_by
            .is_none()
    );
    let cancelled = post(
        "/dashboard/actions/bulk-redrive/cancel",
        vec![
            ("batch_id", batch_id.to_string()),
            ("confirm", "yes".into()),
        ],
    )
    .await;
    assert!(
        cancelled.starts_with(&format!("/claims/redrive/{batch_id}?notice=")),
        "{cancelled}"
    );
    let ended = until_over(&app, &batch_id).await;
    assert_eq!(ended.state, BatchState::Cancelled);
    assert_eq!(ended.cancel_requested_by.as_deref(), Some("dashboard:sam"));
    assert!(
        ended.done() >= 20 && ended.done() < 1000,
        "stopped midway: {ended:?}"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'failed'")
            .await,
        1000 - ended.done()
    );
    let page = sam
        .get(app.url(&format!("/claims/redrive/{batch_id}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(&format!("{} / 1000", ended.done())), "{page}");
    assert!(page.contains("dashboard:sam"), "who cancelled it: {page}");

    // What the cancel left is started again as a batch whose runner then dies.
    let left = 1000 - ended.done();
    let cli = Actor::Cli("ops".into());
    let started = bulk_redrive::start(&app.store, &cli, failed(), "after the outage", left)
        .await
        .unwrap();
    app.db
        .execute(&format!(
            "UPDATE bulk_redrives SET lease_until = 1 WHERE batch_id = '{}'",
            started.batch_id
        ))
        .await;
    let resumed = post(
        "/dashboard/actions/bulk-redrive/resume",
        vec![
            ("batch_id", started.batch_id.to_string()),
            ("reason", "picking it up".into()),
        ],
    )
    .await;
    assert!(resumed.contains("notice="), "{resumed}");
    let finished = until_over(&app, &started.batch_id).await;
    assert_eq!(finished.state, BatchState::Finished);
    assert_eq!(finished.processed, left);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        1000,
        "every order credited once, across the two batches"
    );
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'bulk_redrive_resume' \
                 AND actor = 'dashboard:sam' AND reason = 'picking it up'"
            )
            .await,
        1
    );
    // Over is over: resuming it again is refused in words.
    let again = post(
        "/dashboard/actions/bulk-redrive/resume",
        vec![
            ("batch_id", started.batch_id.to_string()),
            ("reason", "again".into()),
        ],
    )
    .await;
    assert!(again.contains("error="), "{again}");
}

async fn the_preview_counts_orders_and_the_credits_they_have(app: TestApp) {
    // Order A: two sessions (the first expired, the second paid), both failed.
    // Order B: paid and credited already; a second session's claim failed.
    // Order C: a stale claim (its worker died).
    // A refund for a payment no order is known for; a session without any credit amount.
    claim_all(
        &app,
        &[
            paid_session("evt_b_paid", "cs_b_1", "ord_b"),
            paid_session("evt_a_1", "cs_a_1", "ord_a"),
            paid_session("evt_a_2", "cs_a_2", "ord_a"),
            paid_session("evt_b_2", "cs_b_2", "ord_b"),
            paid_session("evt_c_1", "cs_c_1", "ord_c"),
            paid_session("evt_n_1", "cs_n_1", "ord_n").replace("\"credits\":\"40\",", ""),
            serde_json::json!({
                "id": "evt_r_1", "object": "event", "created": 1_764_400_000,
                "livemode": false, "type": "charge.refunded",
                "data": {"object": {"id": "ch_r_1", "object": "charge",
                    "payment_intent": "pi_unknown", "amount": 4900, "amount_refunded": 4900}}
            })
            .to_string(),
        ],
    )
    .await;
    let worker = Worker::new(app.store.clone(), "w", config());
    assert!(matches!(
        worker
            .redrive(
                &"evt_b_paid".parse().unwrap(),
                &Actor::Cli("t".into()),
                "seed"
            )
            .await
            .unwrap(),
        Ok(claimcheck_core::worker::Attempt::Processed { .. })
    ));
    app.db
        .execute(
            "UPDATE processed_stripe_events SET status = 'failed', last_error = 'boom' \
             WHERE event_id IN ('evt_a_1', 'evt_a_2', 'evt_b_2', 'evt_n_1', 'evt_r_1'); \
             UPDATE processed_stripe_events SET lease_owner = 'dead', lease_expires_at = 1 \
             WHERE event_id = 'evt_c_1'; \
             UPDATE processed_stripe_events SET last_error = 'No credit amount for 100%_sure' \
             WHERE event_id = 'evt_n_1'",
        )
        .await;
    let now = now_ms();
    let preview = |filter: BulkFilter| {
        let store = app.store.clone();
        async move {
            bulk_redrive::preview(&store, &config(), filter, now)
                .await
                .unwrap()
        }
    };
    let all = preview(BulkFilter::default()).await;
    assert_eq!(all.claims, 6, "{all:?}");
    assert_eq!(all.orders, 3, "ord_a, ord_b, ord_c: {all:?}");
    assert_eq!(all.orders_credited, 1, "ord_b: {all:?}");
    assert_eq!(all.without_order, 1, "the refund");
    assert_eq!(all.unplannable, 1, "no credit amount");
    let credited: Vec<_> = all
        .first
        .iter()
        .filter(|r| r.credited)
        .map(|r| r.claim.event_id.as_str())
        .collect();
    assert_eq!(credited, ["evt_b_2"]);

    let failed_only = preview(failed()).await;
    assert_eq!(failed_only.claims, 5);
    assert_eq!(failed_only.orders, 2);
    let stale = preview(BulkFilter {
        state: Some(ClaimState::Stale),
        ..BulkFilter::default()
    })
    .await;
    assert_eq!(stale.claims, 1);
    assert_eq!(stale.first[0].claim.event_id, "evt_c_1");
    // The error text is matched literally and in any case.
    let by_error = preview(BulkFilter {
        error_contains: Some("100%_SURE".into()),
        ..BulkFilter::default()
    })
    .await;
    assert_eq!(by_error.claims, 1);
    let not_wild = preview(BulkFilter {
        error_contains: Some("100%%".into()),
        ..BulkFilter::default()
    })
    .await;
    assert_eq!(not_wild.claims, 0);
    let by_order = preview(BulkFilter {
        search: Some("ord_a@example.ch".into()),
        ..BulkFilter::default()
    })
    .await;
    // The e-mail finds ord_a's claims through what their payloads name, although ord_a has
    // no order row yet (never fulfilled).
    assert_eq!(by_order.claims, 2, "{by_order:?}");
    let by_session = preview(BulkFilter {
        search: Some("cs_a_2".into()),
        ..BulkFilter::default()
    })
    .await;
    assert_eq!(by_session.claims, 1);
    let by_type = preview(BulkFilter {
        event_type: Some("charge.refunded".into()),
        ..BulkFilter::default()
    })
    .await;
    assert_eq!(by_type.claims, 1);
    let none_yet = preview(BulkFilter {
        received_after: Some(now),
        ..BulkFilter::default()
    })
    .await;
    assert_eq!(none_yet.claims, 0);
    // A running claim is never selected, and asking for them is refused.
    let running = bulk_redrive::preview(
        &app.store,
        &config(),
        BulkFilter {
            state: Some(ClaimState::Running),
            ..BulkFilter::default()
        },
        now,
    )
    .await;
    assert!(matches!(running, Err(BulkError::Filter(_))), "{running:?}");
    // No reason, no batch.
    let no_reason = bulk_redrive::start(
        &app.store,
        &Actor::Cli("t".into()),
        BulkFilter::default(),
        "  ",
        6,
    )
    .await;
    assert!(matches!(
        no_reason,
        Err(BulkError::Reason(
            claimcheck_core::audit::ReasonError::Missing
        ))
    ));
}

async fn claimcheck(app: &TestApp, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args(args)
        .env("DATABASE_URL", app.db.url())
        .env("RUST_LOG", "warn")
        .env("USER", "support-sam")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        let mut input = child.stdin.take().unwrap();
        input.write_all(text.as_bytes()).await.unwrap();
        drop(input);
    }
    let output = child.wait_with_output().await.unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn the_command_line_previews_confirms_and_refuses(app: TestApp) {
    seed_failed(&app, "typed", 15, "first outage").await;
    seed_failed(&app, "yes", 12, "second outage").await;
    let first = [
        "claims",
        "redrive",
        "--status",
        "failed",
        "--error-contains",
        "first",
        "--older-than",
        "10s",
        "--reason",
        "outage over",
    ];

    // A dry run shows the preview and changes nothing; it needs no reason.
    let (code, stdout, stderr) = claimcheck(
        &app,
        &[
            "claims",
            "redrive",
            "--status",
            "failed",
            "--dry-run",
            "--json",
        ],
        None,
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let preview: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(preview["claims"], 27);
    assert_eq!(preview["orders"], 27);
    let (code, stdout, _) = claimcheck(&app, &[&first[..], &["--dry-run"]].concat(), None).await;
    assert_eq!(code, 0);
    assert!(stdout.contains("15 claims selected"), "{stdout}");
    assert!(
        stdout.contains("15 distinct orders; 0 already have"),
        "{stdout}"
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM bulk_redrives").await, 0);

    // No stdin and no --yes: refused, nothing run.
    let (code, _, stderr) = claimcheck(&app, &first, None).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("refused"), "{stderr}");
    assert!(stderr.contains("--yes"), "{stderr}");
    // The wrong count: refused too.
    let (code, _, stderr) = claimcheck(&app, &first, Some("14\n")).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("'14' is not 15"), "{stderr}");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM bulk_redrives").await, 0);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'failed'")
            .await,
        27
    );

    // The count typed on stdin runs it.
    let (code, stdout, stderr) = claimcheck(&app, &first, Some("15\n")).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("state      finished"), "{stdout}");
    assert!(
        stdout.contains("15/15 (15 processed, 0 failed, 0 skipped)"),
        "{stdout}"
    );

    // --yes confirms without typing; --json prints the batch.
    let (code, stdout, stderr) = claimcheck(
        &app,
        &[
            "claims",
            "redrive",
            "--type",
            "checkout.session.completed",
            "--status",
            "failed",
            "--reason",
            "second outage over",
            "--yes",
            "--json",
        ],
        None,
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    let batch: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(batch["state"], "finished");
    assert_eq!(batch["processed"], 12);
    assert_eq!(batch["actor"], "cli:support-sam");
    let batch_id = batch["batch_id"].as_str().unwrap().to_owned();
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'")
            .await,
        27
    );
    assert_eq!(
        app.db
            .count(&format!(
                "SELECT COUNT(*) FROM audit_log WHERE batch_id = '{batch_id}' AND action = 'redrive' \
                 AND actor = 'cli:support-sam'"
            ))
            .await,
        12
    );

    // The batches, and one of them.
    let (code, stdout, _) = claimcheck(&app, &["claims", "batches"], None).await;
    assert_eq!(code, 0);
    assert!(stdout.contains(&batch_id), "{stdout}");
    let (code, stdout, _) = claimcheck(&app, &["claims", "batch", &batch_id, "--json"], None).await;
    assert_eq!(code, 0);
    let shown: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(shown["total"], 12);
    let (code, _, stderr) =
        claimcheck(&app, &["claims", "batch", &batch_id, "--cancel"], None).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("finished already"), "{stderr}");

    // Nothing left: a clear refusal.
    let (code, _, stderr) = claimcheck(
        &app,
        &[
            "claims", "redrive", "--status", "failed", "--reason", "x", "--yes",
        ],
        None,
    )
    .await;
    assert_eq!(code, 1);
    assert!(
        stderr.contains("no pending, stale or failed claim"),
        "{stderr}"
    );
    // An event id and a filter together are refused by the parser.
    let (code, _, _) = claimcheck(
        &app,
        &[
            "claims",
            "redrive",
            "evt_typed_0001",
            "--status",
            "failed",
            "--reason",
            "x",
        ],
        None,
    )
    .await;
    assert_eq!(code, 2);
    // The single re-drive still works as it did.
    let (code, stdout, _) = claimcheck(
        &app,
        &["claims", "redrive", "evt_typed_0001", "--reason", "x"],
        None,
    )
    .await;
    assert_eq!(code, 1, "it is processed already");
    assert!(stdout.contains("refused"), "{stdout}");
}
