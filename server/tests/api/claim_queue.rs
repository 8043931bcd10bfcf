//! Claims handled like a job queue: the state tabs count, support re-drives exactly the rows
//! it ticked (through the bulk path, preview and typed count first), and an admin resolves a
//! hopeless failed claim without re-driving it (a reason, audited, once however many click,
//! out of re-drives and the failed count) and can reopen it.

use std::time::Duration;

use claimcheck_core::auth::Role;
use claimcheck_core::{ClaimState, EventId, now_ms};
use serde_json::Value;

use crate::helpers::{TestApp, landing, on_both_backends, paid_session, query_value};

on_both_backends!(
    a_hopeless_claim_is_resolved_once_and_can_be_reopened,
    support_redrives_the_ticked_claims_and_only_those,
);

/// `n` claims named `evt_<prefix>_<i>`, failed after their attempts.
async fn failed_claims(app: &TestApp, prefix: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("evt_{prefix}_{i}");
        let body = paid_session(
            &id,
            &format!("cs_{prefix}_{i}"),
            &format!("ord_{prefix}_{i}"),
        );
        assert_eq!(app.deliver(&body).await.status(), 200);
        ids.push(id);
    }
    app.db
        .execute(&format!(
            "UPDATE processed_stripe_events SET status = 'failed', attempts = 8, \
             last_error = 'boom' WHERE event_id LIKE 'evt_{prefix}_%'"
        ))
        .await;
    ids
}

async fn tabs(app: &TestApp, client: &reqwest::Client) -> Vec<(String, i64)> {
    let tabs: Value = app
        .call(client, "claim_tabs", &[])
        .await
        .json()
        .await
        .unwrap();
    tabs["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|pair| {
            (
                pair[0].as_str().unwrap().to_owned(),
                pair[1].as_i64().unwrap(),
            )
        })
        .collect()
}

fn count(tabs: &[(String, i64)], state: ClaimState) -> i64 {
    tabs.iter()
        .find(|(s, _)| s == state.as_str())
        .map(|(_, n)| *n)
        .unwrap()
}

async fn post(
    app: &TestApp,
    client: &reqwest::Client,
    path: &str,
    form: &[(&str, &str)],
) -> reqwest::Response {
    client.post(app.url(path)).form(form).send().await.unwrap()
}

async fn a_hopeless_claim_is_resolved_once_and_can_be_reopened(app: TestApp) {
    let ids = failed_claims(&app, "hope", 3).await;
    let ada = app.sign_in_as("ada", Role::Admin).await;
    let alan = app.sign_in_as("alan", Role::Admin).await;
    let sam = app.sign_in_as("sam", Role::Support).await;
    let before = tabs(&app, &ada).await;
    assert_eq!(count(&before, ClaimState::Failed), 3, "{before:?}");
    assert_eq!(count(&before, ClaimState::Resolved), 0, "{before:?}");
    assert!(
        !before.iter().any(|(s, _)| s == "processed"),
        "processed claims are not counted for the tabs"
    );

    // Support may not; an admin must say why.
    let form = [("event_id", ids[0].as_str()), ("reason", "test order")];
    let refused = post(&app, &sam, "/dashboard/actions/claims/resolve", &form).await;
    assert_eq!(refused.status(), 403);
    let no_reason = post(
        &app,
        &ada,
        "/dashboard/actions/claims/resolve",
        &[("event_id", ids[0].as_str()), ("reason", " ")],
    )
    .await;
    let location = landing(&no_reason);
    assert!(
        query_value(&location, "error").is_some_and(|e| e.contains("reason")),
        "{location}"
    );

    // Two admins at once: one resolves, the other is told it happened already.
    let (first, second) = tokio::join!(
        post(&app, &ada, "/dashboard/actions/claims/resolve", &form),
        post(&app, &alan, "/dashboard/actions/claims/resolve", &form)
    );
    let outcomes = [landing(&first), landing(&second)];
    let notices = outcomes.iter().filter(|l| l.contains("notice=")).count();
    assert_eq!(notices, 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .any(|l| query_value(l, "error").is_some_and(|e| e.contains("resolved"))),
        "{outcomes:?}"
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM audit_log WHERE action = 'claim_resolve'")
            .await,
        1
    );
    let after = tabs(&app, &sam).await;
    assert_eq!(count(&after, ClaimState::Failed), 2, "{after:?}");
    assert_eq!(count(&after, ClaimState::Resolved), 1, "{after:?}");

    // Out of re-drives: the single one refuses it in words, a bulk preview leaves it out.
    let redrive = post(
        &app,
        &sam,
        "/dashboard/actions/redrive",
        &[("event_id", ids[0].as_str()), ("reason", "try again")],
    )
    .await;
    let location = landing(&redrive);
    assert!(
        query_value(&location, "error").is_some_and(|e| e.contains("reopen it first")),
        "{location}"
    );
    let preview: Value = app
        .call(
            &sam,
            "bulk_preview",
            &[
                ("status", ""),
                ("event_type", ""),
                ("from", ""),
                ("to", ""),
                ("older_than", ""),
                ("error_contains", "boom"),
                ("search", ""),
            ],
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(preview["claims"], 2, "{preview}");
    let claim = app
        .store
        .claims()
        .get(&EventId::parse(ids[0].clone()).unwrap(), now_ms())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim.status, ClaimState::Resolved);
    assert!(
        matches!(
            claim.resolved_by.as_deref(),
            Some("dashboard:ada" | "dashboard:alan")
        ),
        "{claim:?}"
    );
    assert_eq!(claim.resolution.as_deref(), Some("test order"));

    // The resolved tab shows who and why, and the reopen question to an admin.
    let html = ada
        .get(app.url("/claims?status=resolved"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains(&ids[0]), "{html}");
    assert!(html.contains("test order"), "{html}");
    assert!(html.contains("/dashboard/actions/claims/reopen"), "{html}");

    // Reopened: failed again, waiting for an operator.
    let reopened = post(
        &app,
        &ada,
        "/dashboard/actions/claims/reopen",
        &[("event_id", ids[0].as_str()), ("reason", "customer found")],
    )
    .await;
    assert!(
        landing(&reopened).contains("notice="),
        "{}",
        landing(&reopened)
    );
    let last = tabs(&app, &ada).await;
    assert_eq!(count(&last, ClaimState::Failed), 3, "{last:?}");
    assert_eq!(count(&last, ClaimState::Resolved), 0, "{last:?}");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM audit_log WHERE action = 'claim_reopen'")
            .await,
        1
    );
}

async fn support_redrives_the_ticked_claims_and_only_those(app: TestApp) {
    let ids = failed_claims(&app, "tick", 4).await;
    let sam = app.sign_in_as("sam", Role::Support).await;
    let vic = app.sign_in_as("vic", Role::Viewer).await;

    // Support sees a box per row and the form they belong to; a viewer sees neither.
    let page = |client: &reqwest::Client| {
        let request = client.get(app.url("/claims?status=failed"));
        async move { request.send().await.unwrap().text().await.unwrap() }
    };
    let html = page(&sam).await;
    assert!(html.contains("id=\"selection\""), "{html}");
    assert_eq!(html.matches("name=\"id\"").count(), 4, "{html}");
    assert!(
        html.contains("ord_tick_0"),
        "the customer's order is named: {html}"
    );
    assert!(html.contains("CHF 49.00"), "and what was paid: {html}");
    let html = page(&vic).await;
    assert!(!html.contains("name=\"id\""), "{html}");

    // Two ticked: the preview counts those two, whatever else is failed.
    let ticked = format!("{} {}", ids[0], ids[2]);
    let preview: Value = app
        .call(
            &sam,
            "bulk_preview",
            &[
                ("status", ""),
                ("event_type", ""),
                ("from", ""),
                ("to", ""),
                ("older_than", ""),
                ("error_contains", ""),
                ("search", ""),
                ("event_ids", &ticked),
            ],
        )
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(preview["claims"], 2, "{preview}");
    assert_eq!(
        preview["filter"]["event_ids"][1],
        ids[2].as_str(),
        "{preview}"
    );

    let started = post(
        &app,
        &sam,
        "/dashboard/actions/bulk-redrive",
        &[
            ("event_ids", &ticked),
            ("reason", "customer called"),
            ("confirm", "2"),
        ],
    )
    .await;
    let location = landing(&started);
    assert!(location.starts_with("/claims/redrive/bulk_"), "{location}");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let processed = app
            .db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status = 'processed'")
            .await;
        if processed == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{processed} processed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let still_failed = app
        .db
        .texts("SELECT event_id FROM processed_stripe_events WHERE status = 'failed' ORDER BY event_id")
        .await;
    assert_eq!(still_failed, [ids[1].clone(), ids[3].clone()]);
    // A selection that names something that is not an event id starts nothing.
    let refused: Value = app
        .call(
            &sam,
            "bulk_preview",
            &[
                ("status", ""),
                ("event_type", ""),
                ("from", ""),
                ("to", ""),
                ("older_than", ""),
                ("error_contains", ""),
                ("search", ""),
                ("event_ids", "evt\u{202e}x"),
            ],
        )
        .await
        .json()
        .await
        .unwrap_or(Value::Null);
    assert!(refused.get("claims").is_none(), "{refused}");
}
