//! `/healthz` and `/readyz`.

use serde_json::Value;

use crate::helpers::{TestApp, on_both_backends};

on_both_backends!(
    healthz_answers_ok,
    readyz_is_ready_once_migrated,
    readyz_is_unavailable_while_a_migration_is_missing,
);

async fn healthz_answers_ok(app: TestApp) {
    let response = app.get_healthz().await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "ok");
}

async fn readyz_is_ready_once_migrated(app: TestApp) {
    let response = app.get_readyz().await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "ready");
}

async fn readyz_is_unavailable_while_a_migration_is_missing(app: TestApp) {
    app.db.execute("DELETE FROM _sqlx_migrations").await;
    let response = app.get_readyz().await;
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "unavailable");
    assert!(
        body["reason"]
            .as_str()
            .unwrap()
            .contains("claimcheck migrate"),
        "{body}"
    );
}

/// PostgreSQL gone from under a running server: not ready, and the process stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_unavailable_when_postgres_is_gone() {
    let app = crate::helpers::spawn_app(crate::helpers::Backend::Postgres).await;
    app.db.drop_now().await;
    let response = app.get_readyz().await;
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["reason"], "the database is unreachable");
    assert_eq!(app.get_healthz().await.status(), 200);
}
