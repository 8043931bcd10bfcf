//! Hardening: a sign-out that holds, a sign-in that cannot be used to lock anyone out or to
//! exhaust memory, the client's address behind trusted proxies only, security headers and
//! request limits, storage faults that do not burn attempts, backups and retention.

use std::time::Duration;

use claimcheck_core::auth::Role;
use claimcheck_core::worker::{Attempt, Worker, WorkerConfig};
use claimcheck_core::{EventId, now_ms};
use claimcheck_server::sessions::DbSessionStore;
use serde_json::{Value, json};
use tower_sessions::SessionStore;

use crate::helpers::{
    Backend, PASSWORD, TestApp, fixture, on_both_backends, query_value, spawn_app, spawn_app_with,
};

on_both_backends!(
    a_request_that_loaded_the_session_cannot_bring_it_back_after_sign_out,
    sign_out_holds_against_parallel_requests,
    signing_out_everywhere_and_disabling_end_every_session_of_the_operator,
    anonymous_and_refused_requests_leave_no_session_behind,
    a_database_that_stays_away_for_a_while_costs_no_attempt,
    retention_prunes_logs_and_payloads_but_a_late_retry_still_dedupes,
);

async fn sessions_of(app: &TestApp, username: &str) -> i64 {
    app.db
        .count(&format!(
            "SELECT COUNT(*) FROM dashboard_sessions WHERE username = '{username}'"
        ))
        .await
}

/// The race behind "sign-out can be undone", step by step: a request loads the session,
/// the operator signs out, the request finishes and saves what it loaded.
async fn a_request_that_loaded_the_session_cannot_bring_it_back_after_sign_out(app: TestApp) {
    let _viewer = app.sign_in_as("vera", Role::Viewer).await;
    let id = app
        .db
        .texts("SELECT id FROM dashboard_sessions WHERE username = 'vera'")
        .await
        .pop()
        .unwrap();
    let store = DbSessionStore::new(app.store.clone());
    let session_id: tower_sessions::session::Id = id.parse().unwrap();
    let loaded = store.load(&session_id).await.unwrap().unwrap();
    store.delete(&session_id).await.unwrap();
    store.save(&loaded).await.unwrap();
    assert!(store.load(&session_id).await.unwrap().is_none());
    assert_eq!(sessions_of(&app, "vera").await, 0);
}

async fn sign_out_holds_against_parallel_requests(app: TestApp) {
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let pages: Vec<_> = (0..16)
        .map(|_| {
            let viewer = viewer.clone();
            let url = app.url("/events");
            tokio::spawn(async move { viewer.get(url).send().await.map(|r| r.status()) })
        })
        .collect();
    let out = viewer.post(app.url("/logout")).send().await.unwrap();
    assert_eq!(out.status(), 303);
    for page in pages {
        let _ = page.await.unwrap();
    }
    // Whatever finished after the sign-out, the cookie opens nothing any more.
    let page = viewer.get(app.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 303);
    assert_eq!(app.call(&viewer, "me", &[]).await.status(), 401);
    assert_eq!(sessions_of(&app, "vera").await, 0);
}

async fn signing_out_everywhere_and_disabling_end_every_session_of_the_operator(app: TestApp) {
    let laptop = app.sign_in_as("sam", Role::Support).await;
    let phone = TestApp::browser();
    let signed_in = phone
        .post(app.url("/login"))
        .form(&[("username", "sam"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 303);
    assert_eq!(sessions_of(&app, "sam").await, 2);
    let out = laptop
        .post(app.url("/logout"))
        .form(&[("everywhere", "1")])
        .send()
        .await
        .unwrap();
    assert!(crate::helpers::landing(&out).contains("everywhere"));
    assert_eq!(app.call(&phone, "me", &[]).await.status(), 401);
    assert_eq!(sessions_of(&app, "sam").await, 0);

    // Disabling an operator deletes their sessions at once (not at their next request).
    let _vera = app.sign_in_as("vera", Role::Viewer).await;
    assert_eq!(sessions_of(&app, "vera").await, 1);
    app.store
        .operators()
        .set_disabled("vera", true, now_ms())
        .await
        .unwrap();
    assert_eq!(sessions_of(&app, "vera").await, 0);
}

async fn anonymous_and_refused_requests_leave_no_session_behind(app: TestApp) {
    app.add_operator("anna", Role::Viewer).await;
    let stranger = TestApp::browser();
    for path in ["/", "/login", "/events", "/orders/ord_x"] {
        stranger.get(app.url(path)).send().await.unwrap();
    }
    for _ in 0..3 {
        stranger
            .post(app.url("/login"))
            .form(&[("username", "anna"), ("password", "wrong")])
            .send()
            .await
            .unwrap();
    }
    stranger.post(app.url("/logout")).send().await.unwrap();
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM dashboard_sessions")
            .await,
        0
    );
}

/// The database refuses writes while claims are leased and being fulfilled (SQLite: another
/// connection holds the write lock past the busy timeout; PostgreSQL: connections are
/// refused and the pool's are terminated). The worker waits it out within the lease: every
/// claim ends processed, each on its first attempt.
async fn a_database_that_stays_away_for_a_while_costs_no_attempt(app: TestApp) {
    for name in [
        "checkout.session.completed.paid",
        "checkout.session.completed.free",
    ] {
        assert_eq!(app.deliver(&fixture(name)).await.status(), 200);
    }
    let worker = Worker::new(app.store.clone(), "patient", WorkerConfig::default());
    let leased = worker.lease().await.unwrap();
    assert_eq!(leased.claims.len(), 2);

    let outage = Outage::begin(&app).await;
    let work = tokio::spawn({
        let worker = worker.clone();
        async move { worker.work_leased(leased).await }
    });
    outage.hold(&app).await;
    outage.end(&app).await;
    let attempts = work.await.unwrap().unwrap();
    assert!(
        attempts
            .iter()
            .all(|a| matches!(a, Attempt::Processed { .. })),
        "{attempts:?}"
    );
    assert_eq!(
        app.db
            .count(
                "SELECT COUNT(*) FROM processed_stripe_events \
                 WHERE status = 'processed' AND attempts = 1"
            )
            .await,
        2
    );
    assert_eq!(app.db.count("SELECT COUNT(*) FROM credit_ledger").await, 2);
}

/// How each backend is made to refuse writes for a while.
enum Outage {
    Sqlite(sqlx::SqliteConnection),
    Postgres,
}

impl Outage {
    async fn begin(app: &TestApp) -> Outage {
        use sqlx::Connection;
        if app.db.url().starts_with("sqlite") {
            let mut lock = sqlx::SqliteConnection::connect(app.db.url()).await.unwrap();
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut lock)
                .await
                .unwrap();
            Outage::Sqlite(lock)
        } else {
            app.db.refuse_connections().await;
            Outage::Postgres
        }
    }

    /// Long enough for the worker to meet the outage more than once: past SQLite's busy
    /// timeout (5 s), past the pool's acquire timeout (3 s) on PostgreSQL.
    async fn hold(&self, _app: &TestApp) {
        let wait = match self {
            Outage::Sqlite(_) => Duration::from_secs(7),
            Outage::Postgres => Duration::from_secs(4),
        };
        tokio::time::sleep(wait).await;
    }

    async fn end(self, app: &TestApp) {
        match self {
            Outage::Sqlite(mut lock) => {
                sqlx::query("ROLLBACK").execute(&mut lock).await.unwrap();
            }
            Outage::Postgres => app.db.allow_connections().await,
        }
    }
}

async fn retention_prunes_logs_and_payloads_but_a_late_retry_still_dedupes(app: TestApp) {
    let paid = fixture("checkout.session.completed.paid");
    assert_eq!(app.deliver(&paid).await.status(), 200);
    let worker = Worker::new(app.store.clone(), "w", WorkerConfig::default());
    while !worker.run_once().await.unwrap().is_empty() {}
    // A month passes.
    let month = 31 * 24 * 3600 * 1000_i64;
    app.db
        .execute(&format!(
            "UPDATE processed_stripe_events SET received_at = received_at - {month}"
        ))
        .await;
    app.db
        .execute(&format!(
            "UPDATE webhook_deliveries SET received_at = received_at - {month}"
        ))
        .await;
    let (deliveries, payloads) = app
        .store
        .prune(now_ms() - 30 * 86_400_000, 1)
        .await
        .unwrap();
    assert_eq!((deliveries, payloads), (1, 1));
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM webhook_deliveries")
            .await,
        0
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM processed_stripe_events WHERE payload = ''")
            .await,
        1
    );
    // Stripe resends the event a month later: still a duplicate, nothing granted again.
    let again: Value = app.deliver(&paid).await.json().await.unwrap();
    assert_eq!(again["outcome"], "duplicate_event");
    while !worker.run_once().await.unwrap().is_empty() {}
    assert_eq!(app.db.count("SELECT COUNT(*) FROM credit_ledger").await, 1);
    // The event's page says the payload is gone rather than failing.
    let viewer = app.sign_in_as("vera", Role::Viewer).await;
    let page = viewer
        .get(app.url("/events/evt_pub0001paid"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("pruned"));
    let claim = app
        .store
        .claims()
        .get(&EventId::parse("evt_pub0001paid").unwrap(), now_ms())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim.status, claimcheck_core::ClaimState::Processed);
}

async fn form_login(
    client: &reqwest::Client,
    app: &TestApp,
    username: &str,
    password: &str,
) -> reqwest::Response {
    client
        .post(app.url("/login"))
        .form(&[("username", username), ("password", password)])
        .send()
        .await
        .unwrap()
}

fn location(response: &reqwest::Response) -> String {
    crate::helpers::landing(response)
}

/// Huge sign-in forms are refused unread; long names are refused before the throttle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_forms_are_small_and_bounded() {
    let app = spawn_app(Backend::Sqlite).await;
    // The server closes a connection whose upload it refused: no connection is reused.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let huge = "u".repeat(1024 * 1024);
    for _ in 0..20 {
        // Refused before it is read: a 413, or the connection closed under the upload.
        let sent = client
            .post(app.url("/login"))
            .form(&[("username", huge.as_str()), ("password", "x")])
            .send()
            .await;
        match sent {
            Ok(response) => assert_eq!(response.status(), 413),
            Err(error) => assert!(error.is_request(), "{error}"),
        }
    }
    let long = form_login(&TestApp::browser(), &app, &"u".repeat(100), "x").await;
    assert!(query_value(&location(&long), "error").is_some_and(|e| e.contains("at most")));
    let server = app.get_healthz().await;
    assert_eq!(server.status(), 200);
}

/// A stranger's wrong passwords from another address do not lock the operator out of their
/// own; forwarding headers count only from a trusted proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_cannot_lock_out_an_operator_and_only_trusted_proxies_name_the_client() {
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.dashboard.client_address.trusted = "127.0.0.1".parse().unwrap();
    })
    .await;
    app.add_operator("admin", Role::Admin).await;
    let via = |client: &str| {
        let http = TestApp::browser();
        let url = app.url("/login");
        let client = client.to_owned();
        move |password: &'static str| {
            let http = http.clone();
            let url = url.clone();
            let client = client.clone();
            async move {
                http.post(url)
                    .header("x-forwarded-for", format!("{client}, 127.0.0.1"))
                    .form(&[("username", "admin"), ("password", password)])
                    .send()
                    .await
                    .unwrap()
            }
        }
    };
    let stranger = via("203.0.113.9");
    for _ in 0..5 {
        stranger("guess").await;
    }
    let blocked = stranger(PASSWORD).await;
    assert!(location(&blocked).contains("Too"), "{}", location(&blocked));
    let operator = via("198.51.100.7");
    let signed_in = operator(PASSWORD).await;
    assert_eq!(
        location(&signed_in),
        "/",
        "the operator's own address is not locked"
    );

    // Without trusted proxies the same headers are ignored: every guess counts against the
    // peer itself, whatever address it claims.
    let plain = spawn_app(Backend::Sqlite).await;
    plain.add_operator("admin", Role::Admin).await;
    let client = TestApp::browser();
    for i in 0..5 {
        client
            .post(plain.url("/login"))
            .header("x-forwarded-for", format!("192.0.2.{i}"))
            .form(&[("username", "admin"), ("password", "guess")])
            .send()
            .await
            .unwrap();
    }
    let spoofed = client
        .post(plain.url("/login"))
        .header("x-forwarded-for", "192.0.2.77")
        .form(&[("username", "admin"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert!(location(&spoofed).contains("Too"), "{}", location(&spoofed));
}

/// Behind a TLS proxy on the same machine the server listens on loopback, yet its public
/// URL is https: the cookie is Secure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cookie_follows_the_public_urls_scheme() {
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.dashboard.public_url = Some("https://pay.shop.example".parse().unwrap());
    })
    .await;
    app.add_operator("anna", Role::Viewer).await;
    let response = form_login(&TestApp::browser(), &app, "anna", PASSWORD).await;
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.contains("Secure"), "{cookie}");
}

/// Every dashboard response carries the security headers; a page's policy names the nonce
/// its hydration script carries. Oversized headers are refused on every route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_responses_carry_security_headers_and_huge_headers_are_refused() {
    let app = spawn_app(Backend::Sqlite).await;
    let login = app.get("/login").await;
    let policy = login.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    assert!(policy.contains("object-src 'none'"), "{policy}");
    let nonce = policy
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap()
        .to_owned();
    assert_eq!(login.headers()["x-frame-options"], "DENY");
    assert_eq!(login.headers()["x-content-type-options"], "nosniff");
    assert!(login.headers().contains_key("referrer-policy"));
    let html = login.text().await.unwrap();
    assert!(html.contains(&format!("nonce=\"{nonce}\"")), "{html}");
    // Another response, another nonce.
    let again = app.get("/login").await;
    assert!(
        !again.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains(&nonce)
    );
    // A redirect gets the default policy.
    let redirect = app.get("/").await;
    assert_eq!(redirect.status(), 303);
    assert!(redirect.headers().contains_key("content-security-policy"));

    let big = "x".repeat(20 * 1024);
    for path in ["/login", "/healthz", "/api/orders/ord_1"] {
        let refused = app
            .client
            .get(app.url(path))
            .header("x-padding", big.as_str())
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 431, "{path}");
    }
}

fn assert_no_store(answer: &reqwest::Response, path: &str) {
    assert_eq!(
        answer
            .headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap()),
        Some("no-store"),
        "{path}: {}",
        answer.status()
    );
}

/// What the dashboard and the API answer about customers and money is never kept by a
/// browser or a proxy: `Cache-Control: no-store` on pages, exports, searches and the
/// balance and ledger answers; the site's own files keep their caching.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn customer_and_money_answers_are_never_stored_by_a_cache() {
    let app = spawn_app(Backend::Sqlite).await;
    assert_eq!(
        app.deliver(&fixture("checkout.session.completed.paid"))
            .await
            .status(),
        200
    );
    let support = app.sign_in_as("sam", Role::Support).await;
    for path in [
        "/",
        "/events",
        "/orders",
        "/orders.csv",
        "/search?q=student1",
        "/search/go?q=student1",
        "/audit",
        "/customers/student1@example.ch",
        "/requests",
    ] {
        let answer = support.get(app.url(path)).send().await.unwrap();
        assert_no_store(&answer, path);
    }
    let token = app.db.api_token().await;
    for path in [
        "/api/customers/student1@example.ch/balance",
        "/api/customers/student1@example.ch/ledger",
        "/api/orders/ord_nope",
        "/api/nope",
    ] {
        let answer = app
            .client
            .get(app.url(path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_no_store(&answer, path);
    }
}

/// `claimcheck backup` copies a live SQLite database while deliveries keep arriving; the copy
/// holds exactly the ledger of one moment (the ledger is append-only: a prefix of the
/// source's), and PostgreSQL is pointed to pg_dump.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_load_restores_the_ledger_of_one_moment() {
    let app = spawn_app_with(Backend::Sqlite, |config| config.workers = 2).await;
    let load = tokio::spawn({
        let url = app.url("/webhooks/stripe");
        let client = app.client.clone();
        async move {
            for i in 0..300 {
                let body = serde_json::to_vec(&json!({
                    "id": format!("evt_load_{i}"),
                    "object": "event",
                    "type": "checkout.session.completed",
                    "created": now_ms() / 1000,
                    "livemode": false,
                    "data": { "object": {
                        "id": format!("cs_load_{i}"),
                        "object": "checkout.session",
                        "payment_status": "paid",
                        "metadata": { "order_id": format!("ord_load_{i}"), "credits": "3" },
                    }},
                }))
                .unwrap();
                let signature =
                    claimcheck_core::webhook::SigningSecret::new(crate::helpers::WEBHOOK_SECRET)
                        .unwrap()
                        .sign(now_ms() / 1000, &body);
                client
                    .post(&url)
                    .header("stripe-signature", signature)
                    .body(body)
                    .send()
                    .await
                    .unwrap();
            }
        }
    });
    // Wait until the load is well under way.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while app.db.count("SELECT COUNT(*) FROM credit_ledger").await < 50 {
        assert!(std::time::Instant::now() < deadline, "no load arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("backup.db");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args(["backup", "--to"])
        .arg(&copy)
        .env("DATABASE_URL", app.db.url())
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("to restore"));
    load.await.unwrap();

    let restored = crate::helpers::TestDb::Sqlite {
        url: format!("sqlite://{}", copy.display()),
        _dir: dir,
    };
    async fn rows(db: &crate::helpers::TestDb, limit: i64) -> Vec<String> {
        db.texts(&format!(
            "SELECT CAST(id AS TEXT) || ':' || order_id || ':' || kind || ':' || CAST(delta AS TEXT) \
             FROM credit_ledger WHERE id <= {limit} ORDER BY id"
        ))
        .await
    }
    let in_copy = restored.count("SELECT COUNT(*) FROM credit_ledger").await;
    let max_id = restored
        .count("SELECT COALESCE(MAX(id), 0) FROM credit_ledger")
        .await;
    assert!(in_copy > 0);
    assert_eq!(rows(&restored, max_id).await, rows(&app.db, max_id).await);
    // Every claim the copy holds as processed has its unlock in the copy: one moment.
    assert_eq!(
        restored
            .count(
                "SELECT COUNT(*) FROM processed_stripe_events c WHERE c.status = 'processed' \
                 AND NOT EXISTS (SELECT 1 FROM credit_ledger l WHERE l.event_id = c.event_id)"
            )
            .await,
        0
    );
    // A second backup never overwrites the first.
    let again = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args(["backup", "--to"])
        .arg(&copy)
        .env("DATABASE_URL", app.db.url())
        .output()
        .await
        .unwrap();
    assert!(!again.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_backup_points_to_pg_dump() {
    let app = spawn_app(Backend::Postgres).await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
        .args(["backup", "--to", "/tmp/claimcheck-never-written.db"])
        .env("DATABASE_URL", app.db.url())
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("pg_dump"));
}

/// Hostile or broken input to the webhook: random bytes, random JSON, events of every shape,
/// signed right, wrong, late or not at all, and bodies over the limit. Every answer is one of
/// the four the contract names, and the server stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_input_to_the_webhook_gets_only_the_answers_of_the_contract() {
    use claimcheck_core::webhook::SigningSecret;

    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.webhook.max_body_bytes = 64 * 1024;
    })
    .await;
    let secret = SigningSecret::new(crate::helpers::WEBHOOK_SECRET).unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let kinds = [
        "checkout.session.completed",
        "charge.refunded",
        "refund.failed",
        "charge.dispute.closed",
        "customer.created",
        "",
    ];
    for i in 0..300 {
        let body: Vec<u8> = match next() % 5 {
            0 => (0..next() % 300).map(|_| next() as u8).collect(),
            1 => format!("{{\"id\": {}, \"type\": [{}]}}", next(), next()).into_bytes(),
            2 => vec![b'{'; 70 * 1024],
            _ => {
                let kind = kinds[(next() % kinds.len() as u64) as usize];
                let mut object = json!({ "id": format!("obj_{}", next() % 50), "object": "x" });
                if next() % 2 == 0 {
                    object["amount_refunded"] = json!(next() % 5000);
                }
                if next() % 3 == 0 {
                    object["metadata"] = json!({ "order_id": "", "credits": "-1" });
                }
                serde_json::to_vec(&json!({
                    "id": format!("evt_rand_{}", next() % 200),
                    "type": kind,
                    "created": next() % 2_000_000_000,
                    "livemode": next() % 5 == 0,
                    "data": { "object": object },
                }))
                .unwrap()
            }
        };
        let now = now_ms() / 1000;
        let signature = match next() % 5 {
            0 => None,
            1 => Some(format!("t={},v1={:x}", now, next())),
            2 => Some(secret.sign(now - 3600, &body)),
            _ => Some(secret.sign(now, &body)),
        };
        let response = app.post_webhook(&body, signature.as_deref()).await;
        let status = response.status().as_u16();
        assert!(
            [200, 400, 413, 503].contains(&status),
            "request {i}: {status} for {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        );
    }
    assert_eq!(app.get_healthz().await.status(), 200);
}

/// Behind nginx (`X-Forwarded-For`, the default header), a client's own `Forwarded` header
/// is only text: eight wrong passwords, each claiming another address, are throttled at the
/// sixth, and the log names the address the proxy gave, never the invented ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_forwarded_header_neither_escapes_the_throttle_nor_reaches_the_log() {
    use crate::process::{Launch, Server};
    let db = crate::helpers::TestDb::create(Backend::Sqlite).await;
    let mut server = Server::launch(
        &db,
        Launch {
            env: vec![("CLAIMCHECK_TRUSTED_PROXIES", "127.0.0.1".into())],
            ..Launch::default()
        },
    );
    db.add_operator("admin").await;
    let client = TestApp::browser();
    let mut answers = Vec::new();
    for i in 0..8 {
        let response = client
            .post(format!("http://{}/login", server.addr))
            .header("forwarded", format!("for=198.51.100.{i}"))
            .header("x-forwarded-for", "203.0.113.9")
            .form(&[("username", "admin"), ("password", "guess")])
            .send()
            .await
            .unwrap();
        answers.push(location(&response));
    }
    assert!(
        answers[..5].iter().all(|l| !l.contains("Too")),
        "{answers:#?}"
    );
    assert!(answers[5].contains("Too"), "{answers:#?}");
    let log = server.logged(Duration::from_millis(300));
    let refused: Vec<_> = log
        .iter()
        .filter(|l| l.contains("sign-in refused") || l.contains("sign-in throttled"))
        .collect();
    assert_eq!(refused.len(), 8, "{log:#?}");
    assert!(
        refused.iter().all(|l| l.contains("address=203.0.113.9")),
        "{refused:#?}"
    );
    assert!(!log.iter().any(|l| l.contains("198.51.100.")), "{log:#?}");
}

/// On a dual-stack listener (`[::]`) every IPv4 client arrives as `::ffff:a.b.c.d`: five
/// wrong passwords from one of them lock out that one only, and a proxy on 127.0.0.1 is
/// recognised as the trusted proxy it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipv4_clients_on_a_dual_stack_listener_are_told_apart() {
    /// Signs in as admin at `port` from 127.0.0.`from`, through a proxy that says the client
    /// is `forwarded_for`; where the answer sends the browser.
    async fn sign_in(port: u16, from: u8, forwarded_for: &str, password: &str) -> String {
        let client = reqwest::Client::builder()
            .local_address(std::net::IpAddr::from([127, 0, 0, from]))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let mut request = client.post(format!("http://127.0.0.1:{port}/login"));
        if !forwarded_for.is_empty() {
            request = request.header("x-forwarded-for", forwarded_for);
        }
        let response = request
            .form(&[("username", "admin"), ("password", password)])
            .send()
            .await
            .unwrap();
        location(&response)
    }
    let direct = spawn_app_with(Backend::Sqlite, |config| {
        config.bind = "[::]:0".parse().unwrap();
    })
    .await;
    let proxied = spawn_app_with(Backend::Sqlite, |config| {
        config.bind = "[::]:0".parse().unwrap();
        config.dashboard.client_address.trusted = "127.0.0.1".parse().unwrap();
    })
    .await;
    // (app, the address the guesses come from, the other client's, the header they carry)
    for (app, guesser, other, header) in [
        (&direct, (2, ""), (3, ""), "none"),
        (
            &proxied,
            (1, "203.0.113.9"),
            (1, "198.51.100.7"),
            "x-forwarded-for",
        ),
    ] {
        app.add_operator("admin", Role::Admin).await;
        let port = app.addr.port();
        for _ in 0..5 {
            sign_in(port, guesser.0, guesser.1, "guess").await;
        }
        let locked = sign_in(port, guesser.0, guesser.1, PASSWORD).await;
        assert!(locked.contains("Too"), "{header}: {locked}");
        let other = sign_in(port, other.0, other.1, PASSWORD).await;
        assert_eq!(other, "/", "{header}: another client is not locked out");
    }
}

/// A username typed with a line break and a forged log line in it is logged as one line,
/// escaped: the log shows no sign-in that did not happen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_username_with_a_line_break_is_logged_as_one_line() {
    use crate::process::{Launch, Server};
    let db = crate::helpers::TestDb::create(Backend::Sqlite).await;
    let mut server = Server::launch(&db, Launch::default());
    // At most 64 characters, so that it reaches the log (longer names are refused first).
    let forged = "x\n2026-12-03T10:00:00Z INFO signed in username=\"admin\"\u{1b}[2K";
    TestApp::browser()
        .post(format!("http://{}/login", server.addr))
        .form(&[("username", forged), ("password", "guess")])
        .send()
        .await
        .unwrap();
    let log = server.logged(Duration::from_millis(300));
    let refused: Vec<_> = log
        .iter()
        .filter(|l| l.contains("sign-in refused"))
        .collect();
    assert_eq!(refused.len(), 1, "{log:#?}");
    assert!(refused[0].contains(r"\n"), "{}", refused[0]);
    assert!(
        !log.iter().any(|l| l.starts_with("2026-12-03T10:00:00Z")),
        "{log:#?}"
    );
    assert!(!log.iter().any(|l| l.contains('\u{1b}')), "{log:#?}");
}

/// Text that would mislead whoever reads it later is refused where it comes in: invisible
/// formatting in order ids and e-mails, look-alike and mixed-script usernames, reasons longer
/// than a page, passwords no sign-in would take; a return address with a line break is a
/// plain 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misleading_text_is_refused_where_it_comes_in() {
    let app = spawn_app(Backend::Sqlite).await;
    let admin = app.sign_in_as("ada", Role::Admin).await;
    let add = |username: &str, password: &str| {
        let form = [
            ("username", username.to_owned()),
            ("role", "viewer".to_owned()),
            ("password", password.to_owned()),
        ];
        let admin = admin.clone();
        let url = app.url("/dashboard/actions/operators");
        async move { location(&admin.post(url).form(&form).send().await.unwrap()) }
    };
    let good = "a long enough password";
    for name in ["\u{0430}dmin", "ad\u{200B}min", "adm\u{202E}in", "ad\nmin"] {
        let answer = add(name, good).await;
        assert!(answer.contains("error="), "{name:?}: {answer}");
    }
    // "adrnin" looks like "admin" on screen: refused once "admin" exists.
    assert!(add("admin", good).await.contains("notice="));
    let look_alike = add("adrnin", good).await;
    assert!(look_alike.contains("error="), "{look_alike}");
    assert!(add("ADMlN", good).await.contains("error="));
    // A password sign-in would refuse is refused at creation too.
    let huge = add("carla", &"p".repeat(1025)).await;
    assert!(huge.contains("error="), "{huge}");
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM operators WHERE username <> 'ada'")
            .await,
        1
    );
    // Full-width letters are the plain ones: "ａｎｎａ" signs in as "anna".
    app.add_operator("anna", Role::Viewer).await;
    let wide = form_login(&TestApp::browser(), &app, "ａｎｎａ", PASSWORD).await;
    assert_eq!(location(&wide), "/");

    // A reason longer than 1,000 characters is refused, and the audit log stays small.
    assert_eq!(
        app.deliver(&fixture("checkout.session.completed.paid"))
            .await
            .status(),
        200
    );
    let redrive = admin
        .post(app.url("/dashboard/actions/redrive"))
        .form(&[
            ("event_id", "evt_pub0001paid"),
            ("reason", &"r".repeat(5000)),
        ])
        .send()
        .await
        .unwrap();
    assert!(
        location(&redrive).contains("error="),
        "{}",
        location(&redrive)
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM audit_log WHERE action = 'redrive'")
            .await,
        0
    );
    // A megabyte of reason does not even reach the dashboard.
    let megabyte = admin
        .post(app.url("/dashboard/actions/redrive"))
        .form(&[
            ("event_id", "evt_pub0001paid"),
            ("reason", &"r".repeat(1 << 20)),
        ])
        .send()
        .await;
    assert!(megabyte.is_err() || megabyte.unwrap().status() == 413);

    let back = admin
        .post(app.url("/dashboard/actions/bulk-redrive"))
        .form(&[
            ("status", "pending"),
            ("back", "/claims/redrive?status=pending\r\nSet-Cookie: x=1"),
            ("reason", "r"),
            ("confirm", "1"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(back.status(), 400);
}
