//! `claimcheck claims|orders|customers` against the database a running server writes to.

use claimcheck_core::audit::Actor;
use claimcheck_core::worker::{Worker, WorkerConfig};

use crate::helpers::{TestApp, fixture, on_both_backends};

on_both_backends!(
    claims_orders_and_customers_answer_the_operators_questions,
    redrive_runs_a_failed_claim_once_and_is_audited,
);

async fn drain(app: &TestApp, config: WorkerConfig) {
    let worker = Worker::new(app.store.clone(), "test-worker", config);
    while !worker.run_once().await.unwrap().is_empty() {}
}

async fn claims_orders_and_customers_answer_the_operators_questions(app: TestApp) {
    for name in [
        "checkout.session.completed.paid",
        "checkout.session.completed.paid.twin",
        "checkout.session.completed.unpaid",
    ] {
        assert_eq!(app.deliver(&fixture(name)).await.status(), 200);
    }
    let pending = app
        .cli_json(&["claims", "list", "--status", "pending", "--json"])
        .await;
    assert_eq!(pending.as_array().unwrap().len(), 2, "{pending}");
    for claim in pending.as_array().unwrap() {
        for field in [
            "event_id",
            "event_type",
            "object_id",
            "status",
            "attempts",
            "last_error",
        ] {
            assert!(claim.get(field).is_some(), "{field} missing in {claim}");
        }
        assert_eq!(claim["status"], "pending");
    }
    drain(&app, WorkerConfig::default()).await;

    let processed = app
        .cli_json(&["claims", "list", "--status", "processed", "--json"])
        .await;
    assert_eq!(processed.as_array().unwrap().len(), 2);
    let shown = app
        .cli_json(&["claims", "show", "evt_pub0001paid", "--json"])
        .await;
    assert_eq!(shown["status"], "processed");
    assert_eq!(shown["delivery_log"][0]["outcome"], "claimed");

    let order = app
        .cli_json(&["orders", "show", "ord_pub_0001", "--json"])
        .await;
    assert_eq!(order["order_id"], "ord_pub_0001");
    assert_eq!(order["status"], "paid");
    assert_eq!(order["payment_status"], "paid");
    assert_eq!(order["credits_granted"], 40);
    let ledger = order["ledger"].as_array().unwrap();
    assert_eq!(ledger.len(), 1);
    assert_eq!(ledger[0]["kind"], "unlock");
    assert_eq!(ledger[0]["delta"], 40);
    assert_eq!(ledger[0]["event_id"], "evt_pub0001paid");
    assert!(ledger[0]["created_at"].as_i64().unwrap() > 0);

    let waiting = app
        .cli_json(&["orders", "show", "ord_pub_0002", "--json"])
        .await;
    assert_eq!(waiting["status"], "awaiting_payment");
    assert_eq!(waiting["credits_granted"], 0);

    let customer = app
        .cli_json(&["customers", "show", "Student1@Example.ch", "--json"])
        .await;
    assert_eq!(customer["balance"], 40);
    assert_eq!(customer["orders"].as_array().unwrap().len(), 1);
    let by_id = app
        .cli_json(&["customers", "show", "cus_pub0001Q4vWm8", "--json"])
        .await;
    assert_eq!(by_id["balance"], 40);

    // Tables for people, and clear errors for what does not exist.
    let (code, table, _) = app.cli(&["orders", "show", "ord_pub_0001"]).await;
    assert_eq!(code, 0);
    assert!(table.contains("credits granted  40 (of 40)"), "{table}");
    let (code, _, stderr) = app.cli(&["orders", "show", "ord_nope"]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("no order ord_nope"), "{stderr}");
    let (code, _, stderr) = app.cli(&["claims", "list", "--status", "weird"]).await;
    assert_eq!(code, 2);
    assert!(
        stderr.contains("pending, running, stale, failed, processed"),
        "{stderr}"
    );
}

async fn redrive_runs_a_failed_claim_once_and_is_audited(app: TestApp) {
    // No credits anywhere: the claim fails until an operator fixes the package table.
    let body = String::from_utf8(fixture("checkout.session.completed.paid"))
        .unwrap()
        .replace(",\"credits\":\"40\"", "");
    assert_eq!(app.deliver(body.as_bytes()).await.status(), 200);
    drain(
        &app,
        WorkerConfig {
            max_attempts: 1,
            ..WorkerConfig::default()
        },
    )
    .await;
    let failed = app
        .cli_json(&["claims", "list", "--status", "failed", "--json"])
        .await;
    assert_eq!(failed[0]["event_id"], "evt_pub0001paid");
    assert!(
        failed[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("no credit amount"),
        "{failed}"
    );

    let (code, _, stderr) = app
        .cli(&["claims", "redrive", "evt_pub0001paid", "--reason", ""])
        .await;
    assert_eq!(code, 1, "{stderr}");

    let redriven = app
        .cli_json(&[
            "claims",
            "redrive",
            "evt_pub0001paid",
            "--reason",
            "package table fixed",
            "--packages",
            "thesis-40=40",
            "--json",
        ])
        .await;
    assert_eq!(redriven["result"], "processed", "{redriven}");
    let order = app
        .cli_json(&["orders", "show", "ord_pub_0001", "--json"])
        .await;
    assert_eq!(order["credits_granted"], 40);

    // Again: refused, nothing granted twice.
    let (code, stdout, _) = app
        .cli(&[
            "claims",
            "redrive",
            "evt_pub0001paid",
            "--reason",
            "again",
            "--json",
        ])
        .await;
    assert_eq!(code, 1);
    assert!(stdout.contains("\"refused\""), "{stdout}");
    assert_eq!(app.db.count("SELECT COUNT(*) FROM credit_ledger").await, 1);
    let audited = app
        .db
        .count(
            "SELECT COUNT(*) FROM audit_log WHERE actor = 'cli:support-sam' \
             AND action = 'redrive' AND target = 'evt_pub0001paid'",
        )
        .await;
    // The re-drive that ran and the one refused; a request without a reason never starts.
    assert_eq!(audited, 2);
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM audit_log WHERE reason = 'package table fixed' AND outcome = 'processed'")
            .await,
        1
    );
}

/// A re-drive racing the worker loop: exactly one of them fulfils.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_racing_workers_unlocks_once() {
    for backend in [
        crate::helpers::Backend::Sqlite,
        crate::helpers::Backend::Postgres,
    ] {
        let app = crate::helpers::spawn_app(backend).await;
        assert_eq!(
            app.deliver(&fixture("checkout.session.completed.paid"))
                .await
                .status(),
            200
        );
        let store = app.store.clone();
        let workers = (0..3).map(|i| {
            let worker = Worker::new(store.clone(), format!("w{i}"), WorkerConfig::default());
            tokio::spawn(async move { worker.run_once().await.unwrap() })
        });
        let redrive = {
            let worker = Worker::new(store.clone(), "operator", WorkerConfig::default());
            let id = "evt_pub0001paid".parse().unwrap();
            tokio::spawn(async move {
                worker
                    .redrive(&id, &Actor::Cli("ops".into()), "race")
                    .await
                    .unwrap()
            })
        };
        for worker in workers {
            worker.await.unwrap();
        }
        redrive.await.unwrap().ok();
        assert_eq!(
            app.db.count("SELECT COUNT(*) FROM credit_ledger").await,
            1,
            "{backend:?}"
        );
    }
}

on_both_backends!(operators_are_added_listed_and_disabled_from_the_command_line);

async fn operators_are_added_listed_and_disabled_from_the_command_line(app: TestApp) {
    use tokio::io::AsyncWriteExt;

    // The password from stdin.
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args(["operator", "add", "--username", "sam", "--role", "support"])
        .env("DATABASE_URL", app.db.url())
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("{}\n", crate::helpers::PASSWORD).as_bytes())
        .await
        .unwrap();
    drop(stdin);
    let output = child.wait_with_output().await.unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stored = app
        .store
        .operators()
        .credentials("sam")
        .await
        .unwrap()
        .unwrap();
    assert!(
        stored
            .password_hash
            .starts_with("$argon2id$v=19$m=19456,t=2,p=1$")
    );
    assert!(claimcheck_core::auth::verify_password(
        crate::helpers::PASSWORD,
        Some(&stored.password_hash)
    ));

    // A generated password, printed once, signs in.
    let (code, stdout, stderr) = app
        .cli(&[
            "operator",
            "add",
            "--username",
            "ada",
            "--role",
            "admin",
            "--generate-password",
        ])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let password = stdout.lines().next().unwrap().trim().to_owned();
    let client = TestApp::browser();
    let signed_in = client
        .post(app.url("/login"))
        .form(&[("username", "ada"), ("password", password.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.headers()["location"], "/");

    // A short password, an unknown role and a taken name are refused with the reason.
    let (code, _, stderr) = app
        .cli(&[
            "operator",
            "add",
            "--username",
            "bob",
            "--role",
            "root",
            "--generate-password",
        ])
        .await;
    assert_ne!(code, 0);
    assert!(stderr.contains("unknown role"), "{stderr}");
    let (code, _, stderr) = app
        .cli(&[
            "operator",
            "add",
            "--username",
            "ada",
            "--role",
            "viewer",
            "--generate-password",
        ])
        .await;
    assert_ne!(code, 0);
    assert!(stderr.contains("exists already"), "{stderr}");

    let (code, _, stderr) = app.cli(&["operator", "disable", "sam"]).await;
    assert_eq!(code, 0, "{stderr}");
    let listed = app.cli_json(&["operator", "list", "--json"]).await;
    let sam = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["username"] == "sam")
        .unwrap()
        .clone();
    assert_eq!(sam["role"], "support");
    assert!(sam["disabled_at"].is_i64());
    assert!(
        !listed.to_string().contains("argon2"),
        "no hash in the listing"
    );
    let (code, _, _) = app.cli(&["operator", "remove", "nobody"]).await;
    assert_ne!(code, 0);
}
