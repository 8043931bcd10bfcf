//! Spending credits through the spend API: never below zero, never twice, every change in
//! the ledger; holds that resolve once; lots that expire; refunds that leave credits owed.

use std::time::Duration;

use claimcheck_core::alert::AlertCondition;
use claimcheck_core::alert_check::{AlertThresholds, evaluate};
use claimcheck_core::now_ms;
use claimcheck_core::spending::{CreditRequest, IdempotencyKey, KeyScope, Keyed};
use claimcheck_core::token::NewToken;
use claimcheck_core::worker::{Worker, WorkerConfig};
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, landing, on_both_backends, search_go, spawn_app_with};

on_both_backends!(
    backend =>
    three_credits_and_ten_spends_of_three_make_one_spend,
    ten_requests_under_one_key_make_one_spend,
    an_answer_is_replayed_byte_for_byte_and_a_key_serves_one_request,
    bad_spend_requests_get_clear_errors_and_write_nothing,
    an_unknown_or_revoked_token_moves_no_credit_and_claims_no_key,
    a_hold_is_captured_or_released_once,
    holds_past_their_expiry_are_released_once_by_any_number_of_instances,
    spends_draw_the_soonest_to_expire_lot_first_and_lots_expire_once,
    a_refund_of_half_spent_credits_leaves_the_rest_owed_and_spending_stops,
    the_ledger_pages_every_change_and_sums_to_the_balance,
    support_adjusts_a_balance_once_per_key,
    support_moves_credits_from_the_command_line_once_per_key,
    the_customer_page_shows_credits_and_support_adjusts_within_its_limit,
);

/// Packages of the tests: one whose credits last 30 days, one whose credits never expire.
const PACKAGES: &str = "month-10=10:1000:chf:30d,forever-40=40:4900:chf";
const DAY_MS: i64 = 86_400_000;

struct Shop {
    app: TestApp,
    token: String,
}

async fn shop(backend: Backend) -> Shop {
    let app = spawn_app_with(backend, |config| {
        config.worker.packages = PACKAGES.parse().unwrap();
    })
    .await;
    let token = NewToken::generate().unwrap();
    app.store
        .tokens()
        .insert(&token, "test shop", now_ms())
        .await
        .unwrap();
    Shop {
        app,
        token: token.token,
    }
}

/// The customer every test spends for.
const EMAIL: &str = "mia@example.ch";

impl Shop {
    /// Delivers a paid Checkout Session for `order` of `package` (or of `credits`) and
    /// fulfils it.
    async fn unlock(&self, order: &str, package: Option<&str>, credits: Option<i64>) {
        let mut metadata = json!({ "order_id": order });
        if let Some(package) = package {
            metadata["package"] = json!(package);
        }
        if let Some(credits) = credits {
            metadata["credits"] = json!(credits.to_string());
        }
        let event = json!({
            "id": format!("evt_{order}"),
            "object": "event",
            "type": "checkout.session.completed",
            "created": now_ms() / 1000,
            "livemode": false,
            "data": { "object": {
                "id": format!("cs_{order}"),
                "object": "checkout.session",
                "payment_status": "paid",
                "payment_intent": format!("pi_{order}"),
                "amount_total": 4900,
                "currency": "chf",
                "customer_details": { "email": EMAIL },
                "metadata": metadata,
            }},
        });
        self.deliver(&event).await;
    }

    /// Stripe refunds `order`'s CHF 49 charge in full.
    async fn refund_in_full(&self, order: &str) {
        self.deliver(&json!({
            "id": format!("evt_{order}_refunded"),
            "object": "event",
            "type": "charge.refunded",
            "created": now_ms() / 1000,
            "livemode": false,
            "data": { "object": {
                "id": format!("ch_{order}"),
                "object": "charge",
                "amount": 4900,
                "amount_refunded": 4900,
                "refunded": true,
                "currency": "chf",
                "payment_intent": format!("pi_{order}"),
            }},
        }))
        .await;
    }

    async fn deliver(&self, event: &Value) {
        let response = self.app.deliver(&serde_json::to_vec(event).unwrap()).await;
        assert_eq!(response.status(), 200, "{event}");
        self.settle().await;
    }

    /// Works until every claim is processed, for at most ten seconds.
    async fn settle(&self) {
        let worker = Worker::new(
            self.app.store.clone(),
            "spend-worker",
            WorkerConfig {
                base_backoff: Duration::from_millis(5),
                packages: PACKAGES.parse().unwrap(),
                ..WorkerConfig::default()
            },
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            while !worker.run_once().await.unwrap().is_empty() {}
            let open = self
                .app
                .db
                .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status <> 'processed'")
                .await;
            if open == 0 {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "claims left: {open}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn post(&self, path: &str, key: Option<&str>, body: &Value) -> reqwest::Response {
        let mut request = self
            .app
            .client
            .post(self.app.url(path))
            .bearer_auth(&self.token)
            .json(body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        request.send().await.unwrap()
    }

    async fn spend(&self, key: &str, credits: i64) -> (u16, Value) {
        let response = self
            .post(
                &format!("/api/customers/{EMAIL}/spends"),
                Some(key),
                &json!({ "credits": credits, "reference": format!("run-{key}") }),
            )
            .await;
        (response.status().as_u16(), response.json().await.unwrap())
    }

    async fn get(&self, path: &str) -> Value {
        let response = self
            .app
            .client
            .get(self.app.url(path))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.json().await.unwrap()
    }

    async fn balance(&self) -> Value {
        self.get(&format!("/api/customers/{EMAIL}/balance")).await
    }

    async fn spends_written(&self) -> i64 {
        self.app
            .db
            .count("SELECT COUNT(*) FROM credit_movements WHERE kind = 'spend'")
            .await
    }

    /// The sum of every ledger row, read through the API page by page.
    async fn ledger_sum(&self) -> i64 {
        let mut sum = 0;
        let mut cursor = String::new();
        loop {
            let page = self
                .get(&format!("/api/customers/{EMAIL}/ledger?cursor={cursor}"))
                .await;
            sum += page["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["delta"].as_i64().unwrap())
                .sum::<i64>();
            match page["next_cursor"].as_str() {
                Some(next) => cursor = next.to_owned(),
                None => return sum,
            }
        }
    }
}

async fn three_credits_and_ten_spends_of_three_make_one_spend(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_three", None, Some(3)).await;
    let spends = (0..10).map(|i| {
        let shop = &shop;
        async move { shop.spend(&format!("k{i}"), 3).await }
    });
    let answers = futures::future::join_all(spends).await;
    let made: Vec<_> = answers.iter().filter(|(s, _)| *s == 201).collect();
    assert_eq!(made.len(), 1, "{answers:?}");
    assert_eq!(made[0].1["balance_after"], 0);
    for (status, body) in answers.iter().filter(|(s, _)| *s != 201) {
        assert_eq!(*status, 409, "{body}");
        assert_eq!(body["error"], "insufficient_credits");
        assert_eq!(body["available"], 0);
    }
    assert_eq!(shop.spends_written().await, 1);
    let balance = shop.balance().await;
    assert_eq!(balance["balance"], 0);
    assert_eq!(balance["available"], 0);
    assert_eq!(shop.ledger_sum().await, 0);
}

async fn ten_requests_under_one_key_make_one_spend(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_forty", Some("forever-40"), None).await;
    let requests = (0..10).map(|_| {
        let shop = &shop;
        async move {
            let response = shop
                .post(
                    &format!("/api/customers/{EMAIL}/spends"),
                    Some("one-key"),
                    &json!({ "credits": 3, "reference": "run-1" }),
                )
                .await;
            let replayed = response.headers().contains_key("idempotent-replayed");
            (
                response.status().as_u16(),
                replayed,
                response.text().await.unwrap(),
            )
        }
    });
    let answers = futures::future::join_all(requests).await;
    assert_eq!(shop.spends_written().await, 1);
    let first = answers.iter().find(|(_, replayed, _)| !replayed).unwrap();
    assert_eq!(first.0, 201);
    for (status, replayed, body) in &answers {
        // A request that met the first one running waits for it or is told to retry.
        if *status == 409 {
            assert!(body.contains("idempotency_key_in_use"), "{body}");
            continue;
        }
        assert_eq!(*status, 201);
        assert_eq!(body, &first.2, "replayed: {replayed}");
    }
    assert_eq!(
        answers.iter().filter(|(_, replayed, _)| !replayed).count(),
        1
    );
    assert_eq!(shop.balance().await["balance"], 37);
}

async fn an_answer_is_replayed_byte_for_byte_and_a_key_serves_one_request(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_replay", Some("forever-40"), None).await;
    let path = format!("/api/customers/{EMAIL}/spends");
    let body = json!({ "credits": 5, "reference": "run-8812", "metadata": { "thesis": "t-1", "pages": 80 } });
    let first = shop.post(&path, Some("run-8812"), &body).await;
    assert_eq!(first.status(), 201);
    assert!(!first.headers().contains_key("idempotent-replayed"));
    let first_body = first.text().await.unwrap();
    let spend: Value = serde_json::from_str(&first_body).unwrap();
    assert!(spend["spend_id"].as_str().unwrap().starts_with("sp_"));
    assert_eq!(spend["credits"], 5);
    assert_eq!(spend["balance_after"], 35);
    assert_eq!(spend["available_after"], 35);
    assert_eq!(
        spend["lots"],
        json!([{ "lot_id": "order:ord_replay", "credits": 5 }])
    );
    assert_eq!(spend["metadata"]["pages"], 80);

    // The same request again, its metadata's keys in another order: the first answer.
    let again = shop
        .post(
            &path,
            Some("run-8812"),
            &json!({ "reference": "run-8812", "metadata": { "pages": 80, "thesis": "t-1" }, "credits": 5 }),
        )
        .await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.text().await.unwrap(), first_body);

    // Another request under the key.
    let reused = shop
        .post(
            &path,
            Some("run-8812"),
            &json!({ "credits": 6, "reference": "run-8812" }),
        )
        .await;
    assert_eq!(reused.status(), 422);
    let reused: Value = reused.json().await.unwrap();
    assert_eq!(reused["error"], "idempotency_key_reused");
    assert_eq!(shop.spends_written().await, 1);

    // A refusal is an answer too: kept under its key even once credits came.
    let refused = shop.spend("too-much", 100).await;
    assert_eq!(refused.0, 409);
    assert_eq!(refused.1["balance"], 35);
    shop.unlock("ord_more", Some("forever-40"), None).await;
    shop.unlock("ord_more2", Some("forever-40"), None).await;
    let still = shop.spend("too-much", 100).await;
    assert_eq!(still, refused);
    assert_eq!(shop.spend("too-much-2", 100).await.0, 201);
    assert_eq!(shop.balance().await["balance"], 15);

    // Keys are kept 30 days: none of today's is forgotten; once forgotten, a key acts anew.
    let credits = shop.app.store.credits();
    let month = claimcheck_core::spending::KEYS_KEPT_MS;
    assert_eq!(credits.prune_keys(now_ms() - month).await.unwrap(), 0);
    assert_eq!(credits.prune_keys(now_ms() + 1).await.unwrap(), 3);
    assert_eq!(shop.spend("too-much", 100).await.0, 409);
    assert_eq!(shop.spends_written().await, 2);

    // The metrics count each by what it came to.
    let metrics = shop.app.get_metrics().await;
    for (result, n) in [
        ("done", 2),
        ("replayed", 2),
        ("key_reused", 1),
        ("insufficient_credits", 2),
    ] {
        let line = format!(
            r#"claimcheck_credit_requests_total{{operation="spend",result="{result}"}} {n}"#
        );
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
}

async fn bad_spend_requests_get_clear_errors_and_write_nothing(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_bad", Some("forever-40"), None).await;
    let path = format!("/api/customers/{EMAIL}/spends");
    let spend = json!({ "credits": 1, "reference": "r" });
    for (path, key, body, status, code) in [
        (
            path.as_str(),
            None,
            spend.clone(),
            400,
            "idempotency_key_missing",
        ),
        (
            path.as_str(),
            Some("ключ"),
            spend.clone(),
            400,
            "invalid_request",
        ),
        (
            path.as_str(),
            Some("k1"),
            json!({ "credits": 0, "reference": "r" }),
            422,
            "invalid_request",
        ),
        (
            path.as_str(),
            Some("k2"),
            json!({ "credits": -4, "reference": "r" }),
            422,
            "invalid_request",
        ),
        (
            path.as_str(),
            Some("k3"),
            json!({ "credits": 1, "reference": "" }),
            422,
            "invalid_request",
        ),
        (
            path.as_str(),
            Some("k4"),
            json!({ "credits": 1, "reference": "r", "metadata": "x" }),
            422,
            "invalid_request",
        ),
        (
            path.as_str(),
            Some("k5"),
            json!({ "credits": 1, "reference": "r", "metadata": { "x": "y".repeat(5000) } }),
            422,
            "invalid_request",
        ),
        (
            path.as_str(),
            Some("k6"),
            json!({ "credits": "1", "reference": "r" }),
            400,
            "bad_request",
        ),
        (
            path.as_str(),
            Some("k7"),
            json!({ "credits": 1, "reference": "r", "extra": 1 }),
            400,
            "bad_request",
        ),
        (
            "/api/customers/nobody/spends",
            Some("k8"),
            spend.clone(),
            422,
            "invalid_request",
        ),
        (
            &format!("/api/customers/{EMAIL}/holds"),
            Some("k9"),
            json!({ "credits": 1, "reference": "r", "expires_in": "25h" }),
            422,
            "invalid_request",
        ),
        (
            "/api/holds/not-a-hold/capture",
            Some("k10"),
            json!({}),
            422,
            "invalid_request",
        ),
        (
            "/api/holds/hold_00ff/capture",
            Some("k11"),
            json!({}),
            404,
            "not_found",
        ),
    ] {
        let response = shop.post(path, key, &body).await;
        assert_eq!(response.status(), status, "{path} {body}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["error"], code, "{path} {body}");
        assert!(!answer["message"].as_str().unwrap().is_empty());
    }
    // Without a token, nothing at all.
    let anonymous = shop
        .app
        .client
        .post(shop.app.url(&path))
        .header("Idempotency-Key", "k12")
        .json(&spend)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(shop.spends_written().await, 0);
    assert_eq!(shop.balance().await["balance"], 40);
}

async fn an_unknown_or_revoked_token_moves_no_credit_and_claims_no_key(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_token", Some("forever-40"), None).await;
    let spends = format!("/api/customers/{EMAIL}/spends");
    let holds = format!("/api/customers/{EMAIL}/holds");
    let stranger = NewToken::generate().unwrap().token;
    let as_caller = |token: &str, path: &str, key: Option<&str>, body: Value| {
        let mut request = shop
            .app
            .client
            .post(shop.app.url(path))
            .bearer_auth(token)
            .json(&body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        request.send()
    };
    let last_used = || {
        shop.app
            .db
            .count("SELECT COALESCE(MAX(last_used_at), 0) FROM api_tokens")
    };
    assert_eq!(last_used().await, 0);

    // The token is checked inside the spend's own transaction, and its use recorded there.
    assert_eq!(shop.spend("t1", 1).await.0, 201);
    assert!(last_used().await > 0, "the spend recorded the token's use");
    let hold = shop
        .post(
            &holds,
            Some("h1"),
            &json!({ "credits": 2, "reference": "r" }),
        )
        .await;
    assert_eq!(hold.status(), 201);
    let hold: Value = hold.json().await.unwrap();
    let capture = format!("/api/holds/{}/capture", hold["hold_id"].as_str().unwrap());

    // An unknown token gets 401 whatever it sends: a good request, a bad body, no key.
    let spend = json!({ "credits": 1, "reference": "r" });
    for (path, key, body) in [
        (spends.as_str(), Some("t2"), spend.clone()),
        (spends.as_str(), Some("t3"), json!({ "credits": "x" })),
        (spends.as_str(), None, spend.clone()),
        (
            spends.as_str(),
            Some("t4"),
            json!({ "credits": 0, "reference": "r" }),
        ),
        (holds.as_str(), Some("t5"), spend.clone()),
        (capture.as_str(), Some("t6"), json!({})),
        (capture.as_str(), Some("t7"), json!({ "credits": "x" })),
    ] {
        let response = as_caller(&stranger, path, key, body.clone()).await.unwrap();
        assert_eq!(response.status(), 401, "{path} {key:?} {body}");
        let answer: Value = response.json().await.unwrap();
        assert_eq!(answer["error"], "unauthorized", "{path} {body}");
    }

    // Known and unknown tokens at the same moment (one batch, or a few): each on its own.
    let mut racing = Vec::new();
    for i in 0..12 {
        let token = if i % 2 == 0 { &shop.token } else { &stranger };
        racing.push(as_caller(
            token,
            &spends,
            Some(&format!("race-{i}")),
            spend.clone(),
        ));
    }
    let mut statuses: Vec<u16> = futures::future::join_all(racing)
        .await
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, [[201; 6], [401; 6]].concat());

    // Revoked: a new key, the first key again, and the hold's capture are all refused.
    let token_id = shop.app.store.tokens().list().await.unwrap()[0]
        .token_id
        .clone();
    assert!(
        shop.app
            .store
            .tokens()
            .revoke(&token_id, now_ms())
            .await
            .unwrap()
    );
    assert_eq!(shop.post(&spends, Some("t8"), &spend).await.status(), 401);
    let again = shop
        .post(
            &spends,
            Some("t1"),
            &json!({ "credits": 1, "reference": "run-t1" }),
        )
        .await;
    assert_eq!(again.status(), 401, "no replay for a revoked token");
    assert_eq!(
        shop.post(&capture, Some("c1"), &json!({})).await.status(),
        401
    );

    // Nothing written for any refused request, not even its key.
    assert_eq!(shop.spends_written().await, 7);
    let mut keys = shop
        .app
        .db
        .texts("SELECT idempotency_key FROM credit_requests")
        .await;
    keys.sort_unstable();
    let expected: Vec<String> = [
        "h1", "race-0", "race-10", "race-2", "race-4", "race-6", "race-8", "t1",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(keys, expected);
    let held = shop
        .app
        .db
        .count("SELECT COUNT(*) FROM credit_holds WHERE status = 'active'")
        .await;
    assert_eq!(held, 1, "the hold still stands");
}

async fn a_hold_is_captured_or_released_once(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_hold", Some("forever-40"), None).await;
    let holds = format!("/api/customers/{EMAIL}/holds");
    let response = shop
        .post(
            &holds,
            Some("h1"),
            &json!({ "credits": 10, "reference": "check-1" }),
        )
        .await;
    assert_eq!(response.status(), 201);
    let hold: Value = response.json().await.unwrap();
    let hold_id = hold["hold_id"].as_str().unwrap().to_owned();
    assert_eq!(hold["status"], "active");
    assert_eq!(hold["available_after"], 30);
    let expires_in = hold["expires_at"].as_i64().unwrap() - hold["created_at"].as_i64().unwrap();
    assert_eq!(expires_in, 15 * 60 * 1000, "15 minutes by default");
    let balance = shop.balance().await;
    assert_eq!(
        (
            balance["balance"].as_i64(),
            balance["held"].as_i64(),
            balance["available"].as_i64()
        ),
        (Some(40), Some(10), Some(30))
    );

    // More than is available cannot be held or spent while the hold stands.
    assert_eq!(shop.spend("s31", 31).await.0, 409);

    // Capture 4 of the 10: a spend of 4, the rest released.
    let capture = format!("/api/holds/{hold_id}/capture");
    let response = shop
        .post(&capture, Some("c1"), &json!({ "credits": 4 }))
        .await;
    assert_eq!(response.status(), 200);
    let captured: Value = response.json().await.unwrap();
    assert_eq!(captured["hold"]["status"], "captured");
    assert_eq!(captured["hold"]["captured"], 4);
    assert_eq!(captured["spend"]["credits"], 4);
    assert_eq!(captured["spend"]["hold_id"], hold_id.as_str());
    assert_eq!(captured["spend"]["balance_after"], 36);
    assert_eq!(captured["spend"]["available_after"], 36);

    // Settled: a second capture or a release under new keys is refused with the hold.
    for (path, key) in [
        (capture.clone(), "c2"),
        (format!("/api/holds/{hold_id}/release"), "r1"),
    ] {
        let response = shop.post(&path, Some(key), &json!({})).await;
        assert_eq!(response.status(), 409);
        let refused: Value = response.json().await.unwrap();
        assert_eq!(refused["error"], "hold_settled");
        assert_eq!(refused["hold"]["status"], "captured");
    }
    assert_eq!(shop.spends_written().await, 1);

    // A hold released, then captured: 409, nothing spent.
    let second: Value = shop
        .post(
            &holds,
            Some("h2"),
            &json!({ "credits": 6, "reference": "check-2", "expires_in": "2h" }),
        )
        .await
        .json()
        .await
        .unwrap();
    let second_id = second["hold_id"].as_str().unwrap();
    assert_eq!(second["available_after"], 30);
    let release = shop
        .post(
            &format!("/api/holds/{second_id}/release"),
            Some("r2"),
            &Value::Null,
        )
        .await;
    assert_eq!(release.status(), 200);
    let released: Value = release.json().await.unwrap();
    assert_eq!(released["status"], "released");
    assert_eq!(released["available_after"], 36);
    let late = shop
        .post(
            &format!("/api/holds/{second_id}/capture"),
            Some("c3"),
            &json!({}),
        )
        .await;
    assert_eq!(late.status(), 409);
    // Capturing more than is held is refused.
    let third: Value = shop
        .post(
            &holds,
            Some("h3"),
            &json!({ "credits": 2, "reference": "check-3" }),
        )
        .await
        .json()
        .await
        .unwrap();
    let over = shop
        .post(
            &format!("/api/holds/{}/capture", third["hold_id"].as_str().unwrap()),
            Some("c4"),
            &json!({ "credits": 3 }),
        )
        .await;
    assert_eq!(over.status(), 422);
    assert_eq!(shop.spends_written().await, 1);
    assert_eq!(shop.ledger_sum().await, 36);
}

async fn holds_past_their_expiry_are_released_once_by_any_number_of_instances(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_expiry", Some("forever-40"), None).await;
    let holds = format!("/api/customers/{EMAIL}/holds");
    for i in 0..5 {
        let response = shop
            .post(
                &holds,
                Some(&format!("h{i}")),
                &json!({ "credits": 2, "reference": format!("check-{i}"), "expires_in": "1m" }),
            )
            .await;
        assert_eq!(response.status(), 201);
    }
    assert_eq!(shop.balance().await["available"], 30);
    let later = now_ms() + 61_000;
    let packages = PACKAGES.parse().unwrap();
    // Three instances' upkeep at the same moment.
    let runs = (0..3).map(|_| shop.app.store.credits().expire_due(&packages, later, 500));
    let expired: u64 = futures::future::join_all(runs)
        .await
        .into_iter()
        .map(|r| r.unwrap().0)
        .sum();
    assert_eq!(expired, 5);
    // Five holds ran out: the alert holds from five on.
    let thresholds = AlertThresholds {
        expired_holds: 5,
        ..AlertThresholds::default()
    };
    let observed = shop
        .app
        .store
        .alerts()
        .observe(&thresholds, later)
        .await
        .unwrap();
    let found = evaluate(&observed, &thresholds);
    assert_eq!(
        found.iter().map(|f| f.condition).collect::<Vec<_>>(),
        [AlertCondition::ExpiredHolds]
    );
    assert_eq!(observed.expired_holds_customer.as_deref(), Some(EMAIL));
    assert_eq!(
        shop.app
            .db
            .count("SELECT COUNT(*) FROM credit_holds WHERE status = 'expired'")
            .await,
        5
    );
    // A request after the expiry sees the credits free again, even before any upkeep.
    let response = shop
        .post(
            &holds,
            Some("late"),
            &json!({ "credits": 40, "reference": "all", "expires_in": "1s" }),
        )
        .await;
    assert_eq!(response.status(), 201);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(shop.balance().await["available"], 40);
}

async fn spends_draw_the_soonest_to_expire_lot_first_and_lots_expire_once(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_forever", Some("forever-40"), None).await;
    shop.unlock("ord_month", Some("month-10"), None).await;
    let balance = shop.balance().await;
    assert_eq!(balance["balance"], 50);
    let expiring = &balance["expiring"];
    assert_eq!(expiring["credits"], 10);
    let unlocked = balance["lots"][0]["created_at"].as_i64().unwrap();
    assert_eq!(expiring["at"].as_i64().unwrap() - unlocked, 30 * DAY_MS);
    assert_eq!(balance["lots"][0]["lot_id"], "order:ord_month");

    // 12 credits: the month's 10 first, then 2 of the lot that never expires.
    let (status, spend) = shop.spend("s12", 12).await;
    assert_eq!(status, 201);
    assert_eq!(
        spend["lots"],
        json!([
            { "lot_id": "order:ord_month", "credits": 10 },
            { "lot_id": "order:ord_forever", "credits": 2 },
        ])
    );

    // A second month lot, half spent, then past its 30 days: the rest expires, once.
    shop.unlock("ord_month2", Some("month-10"), None).await;
    assert_eq!(
        shop.spend("s4", 4).await.1["lots"][0]["lot_id"],
        "order:ord_month2"
    );
    let packages = PACKAGES.parse().unwrap();
    let later = now_ms() + 31 * DAY_MS;
    let runs = (0..2).map(|_| shop.app.store.credits().expire_due(&packages, later, 500));
    let lots: u64 = futures::future::join_all(runs)
        .await
        .into_iter()
        .map(|r| r.unwrap().1)
        .sum();
    assert_eq!(lots, 2, "both month lots, each once");
    let rows = shop
        .app
        .db
        .texts("SELECT lot_id || ' ' || CAST(delta AS TEXT) FROM credit_movements WHERE kind = 'expire' ORDER BY lot_id")
        .await;
    assert_eq!(
        rows,
        vec!["order:ord_month2 -6".to_owned()],
        "the used-up lot writes no row"
    );
    let view = shop
        .app
        .store
        .credits()
        .balance(EMAIL, &packages, later)
        .await
        .unwrap();
    assert_eq!(view.balance, 38);
    assert_eq!(view.expiring, None);
    assert_eq!(shop.ledger_sum().await, 38);

    // The expired lot's order is refunded: the 6 credits that expired are not taken twice;
    // the 4 that were spent are owed.
    shop.refund_in_full("ord_month2").await;
    let view = shop
        .app
        .store
        .credits()
        .balance(EMAIL, &packages, later)
        .await
        .unwrap();
    let month2 = view
        .lots
        .iter()
        .find(|l| l.lot_id == "order:ord_month2")
        .unwrap();
    assert_eq!((month2.credits, month2.remaining), (0, -4));
    assert_eq!(view.balance, 34);
    assert_eq!(shop.ledger_sum().await, 34);
}

async fn a_refund_of_half_spent_credits_leaves_the_rest_owed_and_spending_stops(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_refund", Some("forever-40"), None).await;
    assert_eq!(shop.spend("half", 20).await.0, 201);
    shop.refund_in_full("ord_refund").await;
    let balance = shop.balance().await;
    assert_eq!(balance["balance"], -20);
    assert_eq!(balance["owed"], 20);
    assert_eq!(balance["available"], 0);
    assert_eq!(balance["lots"][0]["remaining"], -20);
    let (status, refused) = shop.spend("after-refund", 1).await;
    assert_eq!(status, 409);
    assert_eq!(refused["error"], "insufficient_credits");
    // The debt raises its alert, naming the customer, until new credits pay it back.
    let owing = || async {
        let observed = shop
            .app
            .store
            .alerts()
            .observe(&AlertThresholds::default(), now_ms())
            .await
            .unwrap();
        (observed.owing_customers.samples, observed.credits_owed)
    };
    assert_eq!(owing().await, (vec![EMAIL.to_owned()], 20));
    // New credits first pay back what is owed.
    shop.unlock("ord_after", None, Some(25)).await;
    let balance = shop.balance().await;
    assert_eq!(
        (balance["balance"].as_i64(), balance["owed"].as_i64()),
        (Some(5), Some(0))
    );
    assert_eq!(owing().await, (vec![], 0));
    assert_eq!(shop.spend("six", 6).await.0, 409);
    assert_eq!(shop.spend("five", 5).await.0, 201);
    assert_eq!(shop.ledger_sum().await, 0);
}

async fn the_ledger_pages_every_change_and_sums_to_the_balance(backend: Backend) {
    let shop = shop(backend).await;
    for order in ["ord_l1", "ord_l2", "ord_l3", "ord_l4"] {
        shop.unlock(order, Some("forever-40"), None).await;
    }
    for i in 0..130 {
        assert_eq!(shop.spend(&format!("l{i}"), 1).await.0, 201);
    }
    let mut seen = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = shop
            .get(&format!("/api/customers/{EMAIL}/ledger?cursor={cursor}"))
            .await;
        for row in page["rows"].as_array().unwrap() {
            seen.push(row.clone());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen.len(), 134);
    let spends: Vec<_> = seen.iter().filter(|r| r["kind"] == "spend").collect();
    assert_eq!(spends.len(), 130);
    assert!(spends.iter().all(|r| r["cause"] == "spend" && r["movement_id"].as_str().unwrap().starts_with("sp_")));
    let mut ids: Vec<_> = spends
        .iter()
        .map(|r| r["movement_id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 130, "no row twice across pages");
    let unlocks: Vec<_> = seen.iter().filter(|r| r["kind"] == "unlock").collect();
    assert_eq!(unlocks.len(), 4);
    assert!(unlocks.iter().all(|r| r["cause"] == "order"));
    let sum: i64 = seen.iter().map(|r| r["delta"].as_i64().unwrap()).sum();
    assert_eq!(sum, 160 - 130);
    assert_eq!(shop.balance().await["balance"], sum);
    let bad = shop
        .app
        .client
        .get(
            shop.app
                .url(&format!("/api/customers/{EMAIL}/ledger?cursor=nonsense")),
        )
        .bearer_auth(&shop.token)
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
}

async fn support_adjusts_a_balance_once_per_key(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_adj", None, Some(5)).await;
    let store = shop.app.store.credits();
    let packages = PACKAGES.parse().unwrap();
    let goodwill = CreditRequest::adjust(
        EMAIL,
        10,
        "thesis check failed twice",
        "cli:anna",
        Some(90 * DAY_MS),
    )
    .unwrap();
    let key = IdempotencyKey::parse("adjust-1").unwrap();
    let render = answer_of;
    let first = store
        .apply(KeyScope::Cli, &key, &goodwill, &packages, now_ms(), render)
        .await
        .unwrap();
    let again = store
        .apply(KeyScope::Cli, &key, &goodwill, &packages, now_ms(), render)
        .await
        .unwrap();
    let Keyed::Fresh(answer) = first else {
        panic!("{first:?}")
    };
    assert_eq!(again, Keyed::Replayed(answer));
    assert_eq!(shop.balance().await["balance"], 15);
    // A correction takes back only what is there.
    let too_much = CreditRequest::adjust(EMAIL, -16, "wrong grant", "cli:anna", None).unwrap();
    let refused = store
        .apply(
            KeyScope::Cli,
            &IdempotencyKey::parse("adjust-2").unwrap(),
            &too_much,
            &packages,
            now_ms(),
            render,
        )
        .await
        .unwrap();
    assert!(
        matches!(&refused, Keyed::Fresh(a) if a.status == 409),
        "{refused:?}"
    );
    let fix = CreditRequest::adjust(EMAIL, -15, "wrong grant", "cli:anna", None).unwrap();
    store
        .apply(
            KeyScope::Cli,
            &IdempotencyKey::parse("adjust-3").unwrap(),
            &fix,
            &packages,
            now_ms(),
            render,
        )
        .await
        .unwrap();
    assert_eq!(shop.balance().await["balance"], 0);
    let page = shop.get(&format!("/api/customers/{EMAIL}/ledger")).await;
    let adjustments: Vec<_> = page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["cause"] == "adjustment")
        .collect();
    assert_eq!(adjustments.len(), 2);
    assert!(adjustments.iter().all(|r| r["actor"] == "cli:anna"));
    // The audit log has each adjustment once, the refused one too, with who and why; the
    // replay added nothing.
    let audit = shop.app.store.audit().about(EMAIL).await.unwrap();
    let audit: Vec<_> = audit
        .iter()
        .map(|e| {
            (
                e.actor.as_str(),
                e.action.as_str(),
                e.reason.as_str(),
                e.outcome.as_str(),
            )
        })
        .collect();
    assert_eq!(audit.len(), 3, "{audit:?}");
    assert!(
        audit
            .iter()
            .all(|a| a.0 == "cli:anna" && a.1 == "credit_adjust"),
        "{audit:?}"
    );
    assert_eq!(audit[0].2, "thesis check failed twice");
    assert!(audit[0].3.starts_with("+10 credits (adj_"), "{audit:?}");
    assert!(audit[0].3.ends_with("balance 15"), "{audit:?}");
    assert_eq!(audit[1].3, "refused: 15 credits available");
    assert!(audit[2].3.starts_with("-15 credits (adj_"), "{audit:?}");
}

/// An answer for the store to keep: the outcome's status and its debug text (the store
/// replays whatever it was given).
fn answer_of(
    outcome: &claimcheck_core::spending::CreditOutcome,
) -> claimcheck_core::spending::Answer {
    use claimcheck_core::spending::CreditOutcome;
    let status = match outcome {
        CreditOutcome::Insufficient { .. } | CreditOutcome::HoldSettled(_) => 409,
        CreditOutcome::NoSuchHold(_) => 404,
        CreditOutcome::OverCapture(_) => 422,
        CreditOutcome::Captured { .. } | CreditOutcome::Released(_) => 200,
        _ => 201,
    };
    claimcheck_core::spending::Answer {
        status,
        body: format!("{outcome:?}"),
    }
}

/// The binary on the shop's database, with its packages.
async fn cli(shop: &Shop, args: &[&str]) -> (i32, String, String) {
    shop.app
        .cli_with(args, &[("CLAIMCHECK_PACKAGES", PACKAGES)])
        .await
}

async fn support_moves_credits_from_the_command_line_once_per_key(backend: Backend) {
    let shop = shop(backend).await;
    shop.unlock("ord_cli", Some("month-10"), None).await;
    // Goodwill, twice under one key: once.
    for _ in 0..2 {
        let (code, out, err) = cli(
            &shop,
            &[
                "customers",
                "adjust",
                EMAIL,
                "--credits",
                "5",
                "--reason",
                "sorry for the outage",
                "--key",
                "gw-1",
            ],
        )
        .await;
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("adjusted by 5 credits"), "{out}");
    }
    let (code, out, err) = cli(
        &shop,
        &[
            "customers",
            "spend",
            EMAIL,
            "--credits",
            "3",
            "--reference",
            "run-1",
            "--key",
            "s-1",
            "--json",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let spend: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(spend["balance_after"], 12);
    assert_eq!(
        spend["lots"][0]["lot_id"], "order:ord_cli",
        "the expiring lot first"
    );

    let (code, out, err) = cli(
        &shop,
        &[
            "customers",
            "hold",
            EMAIL,
            "--credits",
            "4",
            "--reference",
            "run-2",
            "--expires-in",
            "1h",
            "--json",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let hold: Value = serde_json::from_str(&out).unwrap();
    let hold_id = hold["hold_id"].as_str().unwrap();
    assert_eq!(hold["available_after"], 8);
    let (code, out, err) = cli(&shop, &["customers", "capture", hold_id, "--credits", "1"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("captured 1 credits"), "{out}");
    let (code, _, err) = cli(&shop, &["customers", "release", hold_id]).await;
    assert_eq!(code, 1);
    assert!(err.contains("captured already"), "{err}");

    // Refusals are clear and change nothing.
    let (code, _, err) = cli(
        &shop,
        &[
            "customers",
            "spend",
            EMAIL,
            "--credits",
            "50",
            "--reference",
            "big",
        ],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("11 credits are available"), "{err}");
    let (code, _, err) = cli(
        &shop,
        &[
            "customers",
            "adjust",
            EMAIL,
            "--credits",
            "-2",
            "--reason",
            "fix",
            "--key",
            "gw-1",
        ],
    )
    .await;
    assert_eq!(code, 1);
    assert!(err.contains("used for another change"), "{err}");

    let (code, out, err) = cli(&shop, &["customers", "show", EMAIL]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("available 11") && out.contains("order:ord_cli"),
        "{out}"
    );
    let (code, out, err) = cli(&shop, &["customers", "ledger", EMAIL, "--json"]).await;
    assert_eq!(code, 0, "{err}");
    let page: Value = serde_json::from_str(&out).unwrap();
    let rows = page["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "unlock, adjustment, spend, capture: {page}");
    let adjustment = rows.iter().find(|r| r["kind"] == "adjust").unwrap();
    assert_eq!(adjustment["actor"], "cli:support-sam");
    assert_eq!(adjustment["reason"], "sorry for the outage");
    assert_eq!(
        rows.iter()
            .map(|r| r["delta"].as_i64().unwrap())
            .sum::<i64>(),
        11
    );
}

/// A spend of `credits` for the fixtures' customer through the server at `addr`.
async fn spend_at(addr: &str, token: &str, key: &str, credits: i64) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!(
            "http://{addr}/api/customers/student1@example.ch/spends"
        ))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(&json!({ "credits": credits, "reference": key }))
        .send()
        .await
        .unwrap()
}

/// A paid session of the fixtures' customer for order `i` (40 credits).
fn paid(i: usize) -> Vec<u8> {
    String::from_utf8(crate::helpers::fixture("checkout.session.completed.paid"))
        .unwrap()
        .replace("evt_pub0001paid", &format!("evt_spend{i}"))
        .replace(
            "cs_test_pub0001a1YS1URlnyQCN5fUUduORoQ7Pw41PJ",
            &format!("cs_spend{i}"),
        )
        .replace("ord_pub_0001", &format!("ord_spend{i}"))
        .replace("pi_pub00013Mxc9vLkdIwHu7ix", &format!("pi_spend{i}"))
        .into_bytes()
}

/// A server killed (SIGKILL) while a spend is in flight, inside its transaction; the shop
/// retries the request with its key on a second instance: one debit, and a success.
#[cfg(feature = "failpoints")]
async fn killed_during_a_spend(backend: Backend) {
    use crate::crash::wait_until;
    use crate::process::Server;

    let db = crate::helpers::TestDb::create(backend).await;
    let token = db.api_token().await;
    let mut doomed = Server::start(&db, Some("credits.before_commit"));
    doomed.deliver_body(paid(1)).await;
    wait_until(
        &db,
        "SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'",
        1,
    )
    .await;
    let addr = doomed.addr.clone();
    let (in_flight_token, in_flight_addr) = (token.clone(), addr.clone());
    let in_flight = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!(
                "http://{in_flight_addr}/api/customers/student1@example.ch/spends"
            ))
            .bearer_auth(in_flight_token)
            .header("Idempotency-Key", "run-77")
            .json(&json!({ "credits": 7, "reference": "run-77" }))
            .send()
            .await
    });
    doomed.wait_for("failpoint credits.before_commit reached");
    doomed.kill();
    assert!(in_flight.await.unwrap().is_err(), "the shop saw no answer");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM credit_movements").await
            + db.count("SELECT COUNT(*) FROM credit_requests").await,
        0,
        "uncommitted work survived"
    );

    let survivor = Server::start(&db, None);
    let retry = spend_at(&survivor.addr, &token, "run-77", 7).await;
    assert_eq!(retry.status(), 201);
    assert!(!retry.headers().contains_key("idempotent-replayed"));
    let again = spend_at(&survivor.addr, &token, "run-77", 7).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(
        db.count("SELECT COUNT(*) FROM credit_movements WHERE kind = 'spend'")
            .await,
        1
    );
    assert_eq!(
        db.count("SELECT CAST(SUM(credits) AS BIGINT) FROM credit_draws")
            .await,
        7
    );
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_a_spend_sqlite() {
    killed_during_a_spend(Backend::Sqlite).await;
}

#[cfg(feature = "failpoints")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_a_spend_postgres() {
    killed_during_a_spend(Backend::Postgres).await;
}

/// Two `claimcheck serve` processes on one PostgreSQL database spend for one customer, 32
/// requests in flight: 80 credits, 200 spends of one → exactly 80 go through, the ledger
/// sums to the balance, which never went below zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_spend_for_one_customer_at_32_in_flight_on_postgres() {
    use futures::StreamExt;

    use crate::crash::wait_until;
    use crate::process::Server;

    let db = crate::helpers::TestDb::create(Backend::Postgres).await;
    let token = db.api_token().await;
    let first = Server::start(&db, None);
    let second = Server::start(&db, None);
    first.deliver_body(paid(1)).await;
    second.deliver_body(paid(2)).await;
    wait_until(
        &db,
        "SELECT COUNT(*) FROM credit_ledger WHERE kind = 'unlock'",
        2,
    )
    .await;
    let statuses: Vec<u16> = futures::stream::iter(0..200)
        .map(|i| {
            let addr = if i % 2 == 0 {
                &first.addr
            } else {
                &second.addr
            };
            let token = &token;
            async move {
                spend_at(addr, token, &format!("k{i}"), 1)
                    .await
                    .status()
                    .as_u16()
            }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 80);
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 120);
    let ledger = db
        .count(
            "SELECT CAST((SELECT COALESCE(SUM(delta), 0) FROM credit_ledger) \
             + (SELECT COALESCE(SUM(delta), 0) FROM credit_movements) AS BIGINT)",
        )
        .await;
    assert_eq!(ledger, 0);
    // Never below zero: no lot was drawn beyond what it held.
    assert_eq!(
        db.count(
            "SELECT COUNT(*) FROM credit_lots c WHERE \
             (SELECT SUM(credits) FROM credit_draws d WHERE d.lot_id = c.lot_id) > 40"
        )
        .await,
        0
    );
}

/// The adjustment form's hidden key on a customer page.
fn form_key(html: &str) -> String {
    let at = html
        .find(r#"name="key" value=""#)
        .expect("an adjustment form")
        + r#"name="key" value=""#.len();
    html[at..].split('"').next().unwrap().to_owned()
}

async fn the_customer_page_shows_credits_and_support_adjusts_within_its_limit(backend: Backend) {
    use claimcheck_core::auth::Role;

    let shop = shop(backend).await;
    shop.unlock("ord_page", Some("month-10"), None).await;
    let (_, spend) = shop.spend("page-run", 4).await;
    let spend_id = spend["spend_id"].as_str().unwrap().to_owned();
    let app = &shop.app;
    let support = app.sign_in_as("sam", Role::Support).await;
    let page = format!("/customers/{EMAIL}");
    let html = support
        .get(app.url(&page))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for needle in [
        r#"data-testid="credits-available">6<"#,
        r#"data-lot="order:ord_page""#,
        r#"data-movement=""#,
        "run-page-run",
        "at most 50 credits",
    ] {
        assert!(html.contains(needle), "{needle} missing");
    }
    // The search box finds the customer by the spend's id, reference and key.
    for term in [spend_id.as_str(), "run-page-run", "page-run"] {
        assert_eq!(search_go(app, &support, term).await, page, "{term}");
    }
    // The order page says how much of its lot was spent.
    let order = support
        .get(app.url("/orders/ord_page"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        order
            .replace("<!>", "")
            .contains("4 spent or expired, 6 left"),
        "order page: {}",
        &order[order.find("order-lot").unwrap_or(0)..][..300.min(order.len())]
    );

    let key = form_key(&html);
    let adjust = |credits: &str, key: &str, confirm: bool| {
        let mut form = vec![
            ("customer", EMAIL.to_owned()),
            ("key", key.to_owned()),
            ("credits", credits.to_owned()),
            ("reason", "the check failed twice".to_owned()),
            ("expires", "90d".to_owned()),
        ];
        if confirm {
            form.push(("confirm", "yes".to_owned()));
        }
        support
            .post(app.url("/dashboard/actions/credits/adjust"))
            .form(&form)
            .send()
    };
    // Over support's limit, unconfirmed, not a number: refused, nothing changes.
    for (credits, confirm, error) in [
        ("51", true, "at most 50"),
        ("5", false, "Tick the box"),
        ("five", true, "whole number"),
    ] {
        let refused = adjust(credits, &key, confirm).await.unwrap();
        let landed = landing(&refused);
        assert!(
            landed.contains("error=") && landed.contains(&app::links::encode(error)),
            "{credits}: {landed}"
        );
    }
    let done = adjust("5", &key, true).await.unwrap();
    let landed = landing(&done);
    assert!(
        landed.contains(&app::links::encode(
            "Balance changed by +5 credits: now 11."
        )),
        "{landed}"
    );
    // The same form sent twice: once.
    let again = landing(&adjust("5", &key, true).await.unwrap());
    assert!(
        again.contains(&app::links::encode("made before")),
        "{again}"
    );
    assert_eq!(shop.balance().await["balance"], 11);
    let ledger = shop.get(&format!("/api/customers/{EMAIL}/ledger")).await;
    let adjustment = ledger["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "adjust")
        .unwrap()
        .clone();
    assert_eq!(adjustment["actor"], "dashboard:sam");
    assert_eq!(adjustment["reason"], "the check failed twice");
    let audit = app.store.audit().about(EMAIL).await.unwrap();
    assert_eq!(
        audit.len(),
        1,
        "the form sent twice is audited once: {audit:?}"
    );
    assert_eq!(
        (
            audit[0].actor.as_str(),
            audit[0].action.as_str(),
            audit[0].reason.as_str()
        ),
        ("dashboard:sam", "credit_adjust", "the check failed twice")
    );
    // An admin has no limit; a viewer sees no form and may not post one.
    let admin = app.sign_in_as("ada", Role::Admin).await;
    let admin_page = admin
        .get(app.url(&page))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let admin_key = form_key(&admin_page);
    let big = admin
        .post(app.url("/dashboard/actions/credits/adjust"))
        .form(&[
            ("customer", EMAIL),
            ("key", &admin_key),
            ("credits", "500"),
            ("reason", "bulk goodwill"),
            ("confirm", "yes"),
        ])
        .send()
        .await
        .unwrap();
    assert!(
        landing(&big).contains(&app::links::encode("now 511")),
        "{}",
        landing(&big)
    );
    let viewer = app.sign_in_as("vic", Role::Viewer).await;
    let viewer_page = viewer
        .get(app.url(&page))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!viewer_page.contains(r#"name="key""#));
    let forbidden = viewer
        .post(app.url("/dashboard/actions/credits/adjust"))
        .form(&[
            ("customer", EMAIL),
            ("key", "x1"),
            ("credits", "5"),
            ("reason", "r"),
            ("confirm", "yes"),
        ])
        .send()
        .await
        .unwrap();
    assert_ne!(forbidden.status(), 303);
    assert_eq!(shop.balance().await["balance"], 511);
}

/// A capture and the upkeep's expiry of the same hold, racing on PostgreSQL (SQLite's one
/// writer lets no two run at once): the test holds the customer's lock so that both are
/// waiting for it, the capture having already read the hold as active, then lets go. In
/// either order the hold settles once: the upkeep first → it expires, the capture is
/// refused as settled and spends nothing; the capture first → it captures, the upkeep
/// finds nothing due.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_racing_the_upkeep_settles_the_hold_once_postgres() {
    use sqlx::{Connection, Executor};

    use crate::crash::wait_until;

    const WAITING: &str = "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' \
        AND NOT granted AND database = (SELECT oid FROM pg_database \
        WHERE datname = current_database())";
    for upkeep_first in [true, false] {
        let shop = shop(Backend::Postgres).await;
        shop.unlock("ord_race", Some("forever-40"), None).await;
        let response = shop
            .post(
                &format!("/api/customers/{EMAIL}/holds"),
                Some("race-hold"),
                &json!({ "credits": 10, "reference": "check-race", "expires_in": "1m" }),
            )
            .await;
        assert_eq!(response.status(), 201);
        let hold: Value = response.json().await.unwrap();
        let hold_id = hold["hold_id"].as_str().unwrap().to_owned();
        // The upkeep runs as if the hold's minute were over; the capture runs now.
        let later = now_ms() + 2 * 60_000;

        let mut blocker = sqlx::PgConnection::connect(shop.app.db.url())
            .await
            .unwrap();
        blocker.execute("BEGIN").await.unwrap();
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(EMAIL)
            .execute(&mut blocker)
            .await
            .unwrap();
        let store = shop.app.store.clone();
        let upkeep = move || {
            let store = store.clone();
            tokio::spawn(async move {
                let packages = PACKAGES.parse().unwrap();
                store.credits().expire_due(&packages, later, 500).await
            })
        };
        let store = shop.app.store.clone();
        let capture = move || {
            let (store, hold_id) = (store.clone(), hold_id.clone());
            tokio::spawn(async move {
                let packages = PACKAGES.parse().unwrap();
                let key = IdempotencyKey::parse("race-capture").unwrap();
                let request = CreditRequest::capture(&hold_id, None).unwrap();
                store
                    .credits()
                    .apply(
                        KeyScope::Api,
                        &key,
                        &request,
                        &packages,
                        now_ms(),
                        answer_of,
                    )
                    .await
            })
        };
        let (expired, captured) = if upkeep_first {
            let expired = upkeep();
            wait_until(&shop.app.db, WAITING, 1).await;
            let captured = capture();
            wait_until(&shop.app.db, WAITING, 2).await;
            (expired, captured)
        } else {
            let captured = capture();
            wait_until(&shop.app.db, WAITING, 1).await;
            let expired = upkeep();
            wait_until(&shop.app.db, WAITING, 2).await;
            (expired, captured)
        };
        blocker.execute("COMMIT").await.unwrap();
        let (holds_expired, _) = expired.await.unwrap().unwrap();
        let captured = captured.await.unwrap().unwrap();
        let status = shop.app.db.texts("SELECT status FROM credit_holds").await;
        if upkeep_first {
            assert_eq!(holds_expired, 1);
            assert!(
                matches!(&captured, Keyed::Fresh(a) if a.status == 409 && a.body.contains("HoldSettled")),
                "{captured:?}"
            );
            assert_eq!(status, ["expired"]);
            assert_eq!(shop.spends_written().await, 0);
            assert_eq!(shop.balance().await["available"], 40);
        } else {
            assert_eq!(holds_expired, 0);
            assert!(
                matches!(&captured, Keyed::Fresh(a) if a.status == 200),
                "{captured:?}"
            );
            assert_eq!(status, ["captured"]);
            assert_eq!(shop.spends_written().await, 1);
            assert_eq!(shop.balance().await["available"], 30);
        }
        let balance = shop.balance().await["balance"].as_i64().unwrap();
        assert_eq!(
            shop.ledger_sum().await,
            balance,
            "upkeep first: {upkeep_first}"
        );
    }
}

/// A lane's batch reads its keys and writes each with its answer at the end; a key another
/// transaction takes in between (on PostgreSQL: another lane's batch, another instance) fails
/// the batch's write, and the request is carried out again on its own, claiming its key
/// first: it gets that other request's answer and moves nothing. The test takes the key from
/// its own connection and commits only once the batch is waiting on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_taken_while_its_batch_runs_gets_that_request_s_answer_postgres() {
    use sqlx::{Connection, Executor};

    use crate::crash::wait_until;

    const WAITING: &str = "SELECT COUNT(*) FROM pg_stat_activity \
        WHERE wait_event_type = 'Lock' AND datname = current_database()";
    let shop = shop(Backend::Postgres).await;
    shop.unlock("ord_taken", Some("forever-40"), None).await;
    let first = r#"{"spend_id":"sp_other_request","credits":3}"#;
    let fingerprint = CreditRequest::spend(EMAIL, 3, "run-taken", None)
        .unwrap()
        .fingerprint();
    let mut other = sqlx::PgConnection::connect(shop.app.db.url())
        .await
        .unwrap();
    other.execute("BEGIN").await.unwrap();
    sqlx::query(
        "INSERT INTO credit_requests \
         (scope, idempotency_key, request_hash, status, body, created_at) \
         VALUES ('api', 'taken-key', $1, 201, $2, $3)",
    )
    .bind(&fingerprint)
    .bind(first)
    .bind(now_ms())
    .execute(&mut other)
    .await
    .unwrap();

    let spend = tokio::spawn({
        let (client, url, token) = (
            shop.app.client.clone(),
            shop.app.url(&format!("/api/customers/{EMAIL}/spends")),
            shop.token.clone(),
        );
        async move {
            let response = client
                .post(url)
                .bearer_auth(token)
                .header("Idempotency-Key", "taken-key")
                .json(&json!({ "credits": 3, "reference": "run-taken" }))
                .send()
                .await
                .unwrap();
            let replayed = response.headers().get("idempotent-replayed").cloned();
            (
                response.status().as_u16(),
                replayed,
                response.text().await.unwrap(),
            )
        }
    });
    // The batch has carried the spend out and waits to write the key.
    wait_until(&shop.app.db, WAITING, 1).await;
    other.execute("COMMIT").await.unwrap();
    let (status, replayed, body) = spend.await.unwrap();
    assert_eq!((status, body.as_str()), (201, first));
    assert_eq!(replayed.unwrap(), "true");
    assert_eq!(shop.spends_written().await, 0);
    assert_eq!(shop.balance().await["balance"], 40);
    assert_eq!(shop.ledger_sum().await, 40);
}
