//! `claimcheck demo` for a short scripted day: the invariants hold at the end, the crashed
//! worker's claim is stale and re-drivable, and a second run resumes.

use serde_json::Value;

use crate::helpers::TestDb;

async fn claimcheck(args: &[&str], database_url: &str) -> (bool, String, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args(args)
        .env("DATABASE_URL", database_url)
        .env("RUST_LOG", "warn")
        .env_remove("CLAIMCHECK_BIND")
        .env_remove("CLAIMCHECK_FAILPOINT")
        .output()
        .await
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn report(stdout: &str) -> Value {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no report in {stdout}"));
    serde_json::from_str(line).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demo_day_keeps_every_invariant_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo").to_str().unwrap().to_owned();
    let data = data.as_str();
    let url = format!("sqlite://{data}/claimcheck.db");
    let demo = [
        "demo",
        "--data-dir",
        data,
        "--bind",
        "127.0.0.1:0",
        "--orders",
        "40",
        "--rate",
        "0",
        "--exit-after-day",
    ];
    let (ok, stdout, stderr) = claimcheck(&demo, &url).await;
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("sign in as demo / pw_"), "{stdout}");
    // The day plays events out of order on purpose: a refund waiting for its payment's event
    // is no warning (the log is read at `warn`).
    assert!(
        !stderr.contains("may still be on the way"),
        "an expected wait logged as a warning:\n{stderr}"
    );
    let day = report(&stdout);
    assert_eq!(day["exactly_once"], true, "{stdout}");
    assert_eq!(day["stale_claim_state"], "stale");
    assert_eq!(day["api_refunds"], 3);
    assert_eq!(day["money_wrong"], serde_json::json!([]), "{stdout}");
    // The day's four subscriptions, one of each life: 4 + 4 + 3 + 2 paid periods of 40.
    assert_eq!(day["subscriptions"], 4, "{stdout}");
    assert_eq!(day["subscription_credits"], 40 * 13, "{stdout}");
    assert_eq!(day["outage_recovered"], 2, "{stdout}");
    assert!(stdout.contains("reconciliation recovered 2"), "{stdout}");
    // The shop spent its customers' credits: two runs and two captures, every request
    // retried under its key and answered once, a run too large refused, and the ledgers sum.
    assert_eq!(day["spends"], 4, "{stdout}");
    assert_eq!(day["spend_replays"], 12, "{stdout}");
    assert_eq!(day["spends_refused"], 2, "{stdout}");
    assert_eq!(day["credits_wrong"], serde_json::json!([]), "{stdout}");

    // The invariants, read from the database the demo wrote.
    let db = TestDb::Sqlite {
        url: url.clone(),
        _dir: dir,
    };
    let doubled = db
        .count(
            "SELECT COUNT(*) FROM (SELECT order_id FROM credit_ledger WHERE kind = 'unlock' \
             GROUP BY order_id HAVING COUNT(*) > 1) AS d",
        )
        .await;
    assert_eq!(doubled, 0, "one unlock per order");
    let unpaid_with_credits = db
        .count(
            "SELECT COUNT(*) FROM orders o WHERE o.status IN ('payment_failed', 'awaiting_payment') \
             AND EXISTS (SELECT 1 FROM credit_ledger l WHERE l.order_id = o.order_id)",
        )
        .await;
    assert_eq!(unpaid_with_credits, 0, "failed payments unlocked nothing");
    let paid_without_unlock = db
        .count(
            "SELECT COUNT(*) FROM orders o WHERE o.status = 'paid' AND o.order_id NOT LIKE 'ord_demo_crash%' \
             AND NOT EXISTS (SELECT 1 FROM credit_ledger l WHERE l.order_id = o.order_id AND l.kind = 'unlock')",
        )
        .await;
    assert_eq!(paid_without_unlock, 0, "every paid order unlocked");
    let refunds_not_revoked = db
        .count(
            "SELECT COUNT(*) FROM orders o WHERE o.status IN ('refunded', 'chargeback') \
             AND (SELECT SUM(delta) FROM credit_ledger l WHERE l.order_id = o.order_id) <> 0",
        )
        .await;
    assert_eq!(
        refunds_not_revoked, 0,
        "refunded and charged-back orders keep no credits"
    );
    assert!(
        db.count("SELECT COUNT(*) FROM orders WHERE status = 'chargeback'")
            .await
            >= 1
    );
    assert!(
        db.count("SELECT COUNT(*) FROM orders WHERE status = 'refunded'")
            .await
            >= 2
    );

    // The stale claim's customer is found by e-mail before any order exists.
    assert_eq!(
        db.count(
            "SELECT COUNT(*) FROM claim_terms \
             WHERE term = 'crash@demo.example' AND event_id = 'evt_demo_crash_d1'"
        )
        .await,
        1
    );
    // The stale claim is visible and re-drivable, once.
    let (ok, stale, _) = claimcheck(&["claims", "list", "--status", "stale", "--json"], &url).await;
    assert!(ok);
    let stale: Value = serde_json::from_str(&stale).unwrap();
    assert_eq!(stale[0]["event_id"], "evt_demo_crash_d1", "{stale}");
    let (ok, out, err) = claimcheck(
        &[
            "claims",
            "redrive",
            "evt_demo_crash_d1",
            "--reason",
            "worker crashed",
        ],
        &url,
    )
    .await;
    assert!(ok, "{out}{err}");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM credit_ledger WHERE order_id = 'ord_demo_crash_d1'")
            .await,
        1
    );
    // The re-driven order knows what was paid for, so it can be refunded.
    assert_eq!(
        db.count(
            "SELECT COUNT(*) FROM orders WHERE order_id = 'ord_demo_crash_d1' \
             AND package = 'thesis-40' AND amount = 4900 AND currency = 'chf'"
        )
        .await,
        1
    );

    // Again: the same login, the next day, the data of the first kept.
    let (ok, again, stderr) = claimcheck(&demo, &url).await;
    assert!(ok, "{again}\n{stderr}");
    let first_login = stdout.lines().find(|l| l.contains("sign in as")).unwrap();
    assert!(again.contains(first_login.trim()), "{again}");
    let next = report(&again);
    assert_eq!(next["day"], 2);
    assert_eq!(next["exactly_once"], true);
    assert!(db.count("SELECT COUNT(*) FROM orders").await >= 2 * 40);

    // A folder that lost its demo.json gets a new password that works.
    std::fs::remove_file(format!("{data}/demo.json")).unwrap();
    let (ok, third, stderr) = claimcheck(&demo, &url).await;
    assert!(ok, "{third}\n{stderr}");
    // It goes on with the next day rather than replaying the first one's orders.
    assert_eq!(report(&third)["day"], 3, "{third}");
    assert_eq!(report(&third)["exactly_once"], true, "{third}");
    let password = third
        .lines()
        .find_map(|l| l.trim().strip_prefix("sign in as demo / "))
        .unwrap()
        .to_owned();
    let store = claimcheck_core::Store::connect(
        &url.parse().unwrap(),
        &claimcheck_core::StoreOptions::default(),
    )
    .await
    .unwrap();
    let hash = store
        .operators()
        .credentials("demo")
        .await
        .unwrap()
        .unwrap()
        .password_hash;
    assert!(claimcheck_core::auth::verify_password(
        &password,
        Some(&hash)
    ));
    store.close().await;
}

/// The demo keeps serving after its day and stops cleanly on Ctrl-C (SIGINT).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_stops_cleanly_on_ctrl_c() {
    use tokio::io::{AsyncBufReadExt, BufReader};

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("demo");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args([
            "demo",
            "--bind",
            "127.0.0.1:0",
            "--orders",
            "10",
            "--rate",
            "0",
        ])
        .arg("--data-dir")
        .arg(&data)
        .env("RUST_LOG", "warn")
        .env_remove("CLAIMCHECK_BIND")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let waiting = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("Ctrl-C stops it") {
                return;
            }
        }
        panic!("the demo ended before serving");
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), waiting)
        .await
        .expect("the demo played its day");
    let pid = child.id().unwrap().to_string();
    let sent = tokio::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .await
        .unwrap();
    assert!(sent.success());
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait())
        .await
        .expect("stopped within 20 s")
        .unwrap();
    assert!(status.success(), "{status:?}");
}
