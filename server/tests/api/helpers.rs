//! Spawns the application the way `main` does and gives each endpoint a helper.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use std::time::Duration;

use claimcheck_core::auth::Role;
use claimcheck_core::now_ms;
use claimcheck_core::webhook::{SignatureVerifier, SigningSecret};
use claimcheck_core::worker::WorkerConfig;
use claimcheck_server::{Application, ServeConfig, WebhookConfig};
use tokio::sync::oneshot;

/// Where the PostgreSQL tests create their throw-away databases.
fn postgres_admin_url() -> String {
    std::env::var("CLAIMCHECK_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A database that exists for one test and is removed after it.
pub enum TestDb {
    Sqlite {
        _dir: tempfile::TempDir,
        url: String,
    },
    Postgres {
        name: String,
        url: String,
    },
}

impl TestDb {
    pub async fn create(backend: Backend) -> TestDb {
        crate::statements::record();
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = format!("sqlite://{}/claimcheck.db", dir.path().display());
                TestDb::Sqlite { _dir: dir, url }
            }
            Backend::Postgres => {
                static NEXT: AtomicU32 = AtomicU32::new(0);
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos();
                let name = format!(
                    "claimcheck_test_{}_{}_{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed),
                    nanos
                );
                let admin = postgres_admin_url();
                sqlx::raw_sql(&format!("CREATE DATABASE {name}"))
                    .execute(&mut admin_connection(&admin).await)
                    .await
                    .unwrap();
                let (base, _) = admin.rsplit_once('/').unwrap();
                let url = format!("{base}/{name}");
                TestDb::Postgres { name, url }
            }
        }
    }

    pub fn url(&self) -> &str {
        match self {
            TestDb::Sqlite { url, .. } | TestDb::Postgres { url, .. } => url,
        }
    }

    /// A PostgreSQL database whose tables live in a tablespace of their own at `location`
    /// (an empty folder the server's user owns).
    pub async fn create_in_tablespace(space: &str, location: &std::path::Path) -> TestDb {
        crate::statements::record();
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "claimcheck_test_ts_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let admin = postgres_admin_url();
        let mut connection = admin_connection(&admin).await;
        sqlx::raw_sql(&format!(
            "CREATE TABLESPACE {space} LOCATION '{}'",
            location.display()
        ))
        .execute(&mut connection)
        .await
        .unwrap();
        sqlx::raw_sql(&format!("CREATE DATABASE {name} TABLESPACE {space}"))
            .execute(&mut connection)
            .await
            .unwrap();
        let (base, _) = admin.rsplit_once('/').unwrap();
        let url = format!("{base}/{name}");
        TestDb::Postgres { name, url }
    }

    /// Adds an admin `username` (password `PASSWORD`) straight to the database, for a server
    /// running in another process.
    pub async fn add_operator(&self, username: &str) {
        let store = claimcheck_core::Store::connect(
            &self.url().parse().unwrap(),
            &claimcheck_core::StoreOptions::default(),
        )
        .await
        .unwrap();
        assert!(
            store
                .operators()
                .add(username, &operator_hash(), Role::Admin, now_ms())
                .await
                .unwrap()
        );
        store.close().await;
    }

    /// An API token in this database (migrated first), for a server process of its own.
    pub async fn api_token(&self) -> String {
        let store = claimcheck_core::Store::connect(
            &self.url().parse().unwrap(),
            &claimcheck_core::StoreOptions::default(),
        )
        .await
        .unwrap();
        store.migrate().await.unwrap();
        let token = claimcheck_core::token::NewToken::generate().unwrap();
        store
            .tokens()
            .insert(&token, "shop", now_ms())
            .await
            .unwrap();
        store.close().await;
        token.token
    }

    /// This PostgreSQL database's name.
    pub fn postgres_name(&self) -> &str {
        match self {
            TestDb::Postgres { name, .. } => name,
            TestDb::Sqlite { .. } => panic!("a SQLite database has no name"),
        }
    }

    /// Drops a tablespace made by [`TestDb::create_in_tablespace`], once its database
    /// (`database`) is gone too.
    pub async fn drop_tablespace(space: &str, database: &str) {
        drop_postgres_database(database).await;
        sqlx::raw_sql(&format!("DROP TABLESPACE IF EXISTS {space}"))
            .execute(&mut admin_connection(&postgres_admin_url()).await)
            .await
            .unwrap();
    }

    /// Runs a query that returns one integer, straight against the database.
    pub async fn count(&self, sql: &str) -> i64 {
        match self {
            TestDb::Sqlite { url, .. } => {
                let pool = sqlx::SqlitePool::connect(url).await.unwrap();
                let n = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
                pool.close().await;
                n
            }
            TestDb::Postgres { url, .. } => {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                let n = sqlx::query_scalar(sql).fetch_one(&pool).await.unwrap();
                pool.close().await;
                n
            }
        }
    }

    /// Runs a query that returns one text column, straight against the database.
    pub async fn texts(&self, sql: &str) -> Vec<String> {
        match self {
            TestDb::Sqlite { url, .. } => {
                let pool = sqlx::SqlitePool::connect(url).await.unwrap();
                let rows = sqlx::query_scalar(sql).fetch_all(&pool).await.unwrap();
                pool.close().await;
                rows
            }
            TestDb::Postgres { url, .. } => {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                let rows = sqlx::query_scalar(sql).fetch_all(&pool).await.unwrap();
                pool.close().await;
                rows
            }
        }
    }

    /// Runs SQL straight against the database, around the application.
    pub async fn execute(&self, sql: &str) {
        match self {
            TestDb::Sqlite { url, .. } => {
                let pool = sqlx::SqlitePool::connect(url).await.unwrap();
                sqlx::raw_sql(sql).execute(&pool).await.unwrap();
                pool.close().await;
            }
            TestDb::Postgres { url, .. } => {
                let pool = sqlx::PgPool::connect(url).await.unwrap();
                sqlx::raw_sql(sql).execute(&pool).await.unwrap();
                pool.close().await;
            }
        }
    }

    /// Runs SQL on the PostgreSQL server's maintenance database; `{db}` stands for this
    /// test's database name.
    pub async fn admin_execute(&self, sql: &str) {
        let TestDb::Postgres { name, .. } = self else {
            panic!("admin_execute is for PostgreSQL");
        };
        sqlx::raw_sql(&sql.replace("{db}", name))
            .execute(&mut admin_connection(&postgres_admin_url()).await)
            .await
            .unwrap();
    }

    /// PostgreSQL refuses new connections to this database and ends its sessions, waiting
    /// until none is left: a session whose start-up passed the check before the refusal was
    /// committed shows up only afterwards, and ending a session is a signal it acts on later.
    pub async fn refuse_connections(&self) {
        self.admin_execute("ALTER DATABASE {db} WITH ALLOW_CONNECTIONS false")
            .await;
        let TestDb::Postgres { name, .. } = self else {
            unreachable!("admin_execute is for PostgreSQL");
        };
        let mut admin = admin_connection(&postgres_admin_url()).await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut quiet_checks = 0;
        while quiet_checks < 3 {
            let left: i64 = sqlx::query_scalar(
                "SELECT COUNT(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
            )
            .bind(name)
            .fetch_one(&mut admin)
            .await
            .unwrap();
            quiet_checks = if left == 0 { quiet_checks + 1 } else { 0 };
            assert!(
                std::time::Instant::now() < deadline,
                "sessions of {name} still there 10 s after connections were refused"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// PostgreSQL takes connections to this database again.
    pub async fn allow_connections(&self) {
        self.admin_execute("ALTER DATABASE {db} WITH ALLOW_CONNECTIONS true")
            .await;
    }

    /// Removes a PostgreSQL database while the application still uses it.
    pub async fn drop_now(&self) {
        if let TestDb::Postgres { name, .. } = self {
            drop_postgres_database(name).await;
        }
    }
}

async fn admin_connection(admin_url: &str) -> sqlx::PgConnection {
    use sqlx::Connection;
    sqlx::PgConnection::connect(admin_url)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL for tests at {admin_url}: {e}"))
}

async fn drop_postgres_database(name: &str) {
    let mut admin = admin_connection(&postgres_admin_url()).await;
    sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&mut admin)
        .await
        .unwrap();
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let TestDb::Postgres { name, .. } = self {
            let name = name.clone();
            // Drop runs inside the test's runtime, which cannot be blocked on: use a thread.
            let _ = std::thread::spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(drop_postgres_database(&name));
            })
            .join();
        }
    }
}

/// A running server and the database behind it.
pub struct TestApp {
    pub addr: SocketAddr,
    /// The application's own store, for driving a worker directly.
    pub store: claimcheck_core::Store,
    pub client: reqwest::Client,
    pub db: TestDb,
    shutdown: Option<oneshot::Sender<()>>,
}

/// The signing secret test apps are configured with: the one the shared signature vectors
/// were made with.
pub const WEBHOOK_SECRET: &str = "whsec_pub_fixture_secret_0123456789abcdef";

pub fn verifier(secrets: &[&str], tolerance: Duration) -> SignatureVerifier {
    let secrets = secrets
        .iter()
        .map(|s| SigningSecret::new(*s).unwrap())
        .collect();
    SignatureVerifier::new(secrets, tolerance).unwrap()
}

pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, |_| {}).await
}

/// Starts the app with the default test configuration changed by `customize`.
/// The configuration every test app starts from, on `database_url`.
pub fn test_config(database_url: &str) -> ServeConfig {
    ServeConfig {
        database_url: database_url.parse().unwrap(),
        bind: "127.0.0.1:0".parse().unwrap(),
        webhook: WebhookConfig {
            verifier: Some(verifier(&[WEBHOOK_SECRET], Duration::from_secs(300))),
            ..WebhookConfig::default()
        },
        worker: WorkerConfig {
            base_backoff: Duration::from_millis(20),
            poll_interval: Duration::from_millis(50),
            ..WorkerConfig::default()
        },
        // Tests of ingestion and pages see claims as the webhook left them; fulfilment
        // tests start workers themselves.
        workers: 0,
        // Reconciliation tests run the reconciler themselves.
        reconcile: claimcheck_server::config::ReconcileSchedule {
            interval: Duration::ZERO,
            ..Default::default()
        },
        // Alert tests turn the checks on themselves (or drive them with a chosen time).
        alerts: claimcheck_server::config::AlertsConfig {
            check_interval: Duration::ZERO,
            ..Default::default()
        },
        // Tests read the claims by state right after changing them; the one-read-per-interval
        // test sets its own interval.
        metrics: claimcheck_server::config::MetricsConfig {
            database_every: Duration::ZERO,
            ..Default::default()
        },
        // An instance a test stops stops at once (no balancer to tell); the grace itself is
        // tested through the binary.
        limits: claimcheck_server::config::HttpLimits {
            shutdown_grace: Duration::ZERO,
            ..Default::default()
        },
        // Tests write lots dated in the past and expire them at a time they choose; the
        // server's own upkeep is tested on its own.
        credit_upkeep: Duration::ZERO,
        ..ServeConfig::default()
    }
}

/// Another instance on the database `app` uses (a second process of a cluster); it stops
/// when the returned sender is dropped.
pub async fn spawn_instance(
    app: &TestApp,
    customize: impl FnOnce(&mut ServeConfig),
) -> (SocketAddr, oneshot::Sender<()>) {
    let mut config = test_config(app.db.url());
    customize(&mut config);
    let instance = Application::build(config).await.unwrap();
    let addr = instance.local_addr();
    let (shutdown, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = instance
            .run_until(async {
                let _ = stopped.await;
            })
            .await;
    });
    (addr, shutdown)
}

pub async fn spawn_app_with(backend: Backend, customize: impl FnOnce(&mut ServeConfig)) -> TestApp {
    let db = TestDb::create(backend).await;
    let mut config = test_config(db.url());
    customize(&mut config);
    let app = Application::build(config).await.unwrap();
    let addr = app.local_addr();
    let store = app.store().clone();
    let (shutdown, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        app.run_until(async {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    TestApp {
        addr,
        store,
        client: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap(),
        db,
        shutdown: Some(shutdown),
    }
}

impl TestApp {
    /// Runs the `claimcheck` binary on this app's database, as operator `support-sam`:
    /// exit code, stdout, stderr.
    pub async fn cli(&self, args: &[&str]) -> (i32, String, String) {
        self.cli_with(args, &[]).await
    }

    /// [`TestApp::cli`] with more of the environment set (`STRIPE_API_KEY`…).
    pub async fn cli_with(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_claimcheck"))
            .args(args)
            .envs(env.iter().copied())
            .env("DATABASE_URL", self.db.url())
            .env("RUST_LOG", "warn")
            .env("USER", "support-sam")
            .output()
            .await
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// Runs `worker` until every claim is processed (money that came before its order is
    /// retried once the order is known), for at most ten seconds.
    pub async fn settle(&self, worker: &claimcheck_core::worker::Worker) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            while !worker.run_once().await.unwrap().is_empty() {}
            let open = self
                .db
                .count("SELECT COUNT(*) FROM processed_stripe_events WHERE status <> 'processed'")
                .await;
            if open == 0 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "claims left: {:?}",
                self.db
                    .texts(
                        "SELECT event_id || ' ' || status || ' ' || COALESCE(last_error, '') \
                         FROM processed_stripe_events WHERE status <> 'processed'"
                    )
                    .await
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// [`TestApp::cli`] that must succeed, its stdout read as JSON.
    pub async fn cli_json(&self, args: &[&str]) -> serde_json::Value {
        let (code, stdout, stderr) = self.cli(args).await;
        assert_eq!(code, 0, "{args:?}: {stderr}");
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"))
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    pub async fn get_healthz(&self) -> reqwest::Response {
        self.get("/healthz").await
    }

    pub async fn get_readyz(&self) -> reqwest::Response {
        self.get("/readyz").await
    }

    /// Posts a raw webhook delivery with the given `Stripe-Signature` header.
    pub async fn post_webhook(&self, body: &[u8], signature: Option<&str>) -> reqwest::Response {
        let mut request = self
            .client
            .post(self.url("/webhooks/stripe"))
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(signature) = signature {
            request = request.header("stripe-signature", signature);
        }
        request.send().await.unwrap()
    }

    /// Delivers `body` signed now with the test secret, as Stripe would.
    pub async fn deliver(&self, body: &[u8]) -> reqwest::Response {
        self.deliver_signed_at(body, now_ms() / 1000).await
    }

    pub async fn deliver_signed_at(&self, body: &[u8], timestamp: i64) -> reqwest::Response {
        let header = SigningSecret::new(WEBHOOK_SECRET)
            .unwrap()
            .sign(timestamp, body);
        self.post_webhook(body, Some(&header)).await
    }

    pub async fn get_metrics(&self) -> String {
        self.get("/metrics").await.text().await.unwrap()
    }

    /// Calls the dashboard's overview server function the way the browser does.
    /// Adds an operator `username` with `role` (password `PASSWORD`) and returns a client
    /// signed in as them (its own cookie jar).
    pub async fn sign_in_as(&self, username: &str, role: Role) -> reqwest::Client {
        self.add_operator(username, role).await;
        let client = Self::browser();
        let response = client
            .post(self.url("/login"))
            .form(&[
                ("username", username),
                ("password", PASSWORD),
                ("next", "/"),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 303);
        assert_eq!(
            response.headers()["location"],
            "/",
            "signed in as {username}"
        );
        client
    }

    pub async fn add_operator(&self, username: &str, role: Role) {
        let hash = operator_hash();
        assert!(
            self.store
                .operators()
                .add(username, &hash, role, now_ms())
                .await
                .unwrap(),
            "{username} added"
        );
    }

    /// A client with a cookie jar that does not follow redirects.
    pub fn browser() -> reqwest::Client {
        reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    }

    /// Calls a dashboard server function the way the browser does.
    pub async fn call(
        &self,
        client: &reqwest::Client,
        endpoint: &str,
        form: &[(&str, &str)],
    ) -> reqwest::Response {
        client
            .post(self.url(&format!("/dashboard/fn/{endpoint}")))
            .header("accept", "application/json")
            .form(form)
            .send()
            .await
            .unwrap()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

/// The password of every operator the tests add.
pub const PASSWORD: &str = "correct horse battery staple";

/// One argon2id hash of `PASSWORD`, computed once: hashing is slow on purpose.
pub fn operator_hash() -> String {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| claimcheck_core::auth::hash_password(PASSWORD).unwrap())
        .clone()
}

/// A paid `checkout.session.completed` for `order` (40 credits, CHF 49.00, the customer
/// `<order>@example.ch`) through `session`, as Stripe sends it.
pub fn paid_session(event_id: &str, session: &str, order: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "id": event_id,
        "object": "event",
        "created": 1_764_400_000,
        "livemode": false,
        "type": "checkout.session.completed",
        "data": {"object": {
            "id": session,
            "object": "checkout.session",
            "payment_status": "paid",
            "payment_intent": format!("pi_{session}"),
            "amount_total": 4900,
            "currency": "chf",
            "customer_details": {"email": format!("{order}@example.ch")},
            "metadata": {"order_id": order, "credits": "40"}
        }}
    }))
    .unwrap()
}

/// A Stripe event from `fixtures/stripe/events/`, byte for byte.
pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../fixtures/stripe/events/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Declares one test per backend for each named `async fn(TestApp)` or, after `backend =>`,
/// each `async fn(Backend)` that starts its own app.
macro_rules! on_both_backends {
    (backend => $($name:ident),+ $(,)?) => {$(
        mod $name {
            use crate::helpers::Backend;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(Backend::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(Backend::Postgres).await;
            }
        }
    )+};
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            use crate::helpers::{spawn_app, Backend};

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(spawn_app(Backend::Sqlite).await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(spawn_app(Backend::Postgres).await).await;
            }
        }
    )+};
}
pub(crate) use on_both_backends;

/// The decoded value of one query parameter of a redirect's location (`+` and `%20` alike).
pub fn query_value(location: &str, name: &str) -> Option<String> {
    let url = reqwest::Url::parse("http://localhost")
        .ok()?
        .join(location)
        .ok()?;
    url.query_pairs()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// The outcome a form post's redirect carries in the flash cookie, decoded.
pub fn flash(response: &reqwest::Response) -> Option<app::flash::Flash> {
    let cookies = response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default());
    app::flash::Flash::from_cookies(cookies)
}

/// Where a form post's redirect lands and what it carries, written as one string for the
/// assertions: the location, then `notice=<text>` or `error=<text>` (the flash cookie,
/// percent-encoded as a query value) joined as a query would be. The location itself never
/// carries either (support_desk tests that).
pub fn landing(response: &reqwest::Response) -> String {
    let location = response
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let Some(flash) = flash(response) else {
        return location;
    };
    let (key, text) = match flash {
        app::flash::Flash::Notice(text) => ("notice", text),
        app::flash::Flash::Error(text) => ("error", text),
        app::flash::Flash::Form(form) => ("error", form.summary),
    };
    let joiner = if location.contains('?') { '&' } else { '?' };
    format!("{location}{joiner}{key}={}", app::links::encode(&text))
}

/// Where `GET /search/go?q=term` sends `client`.
pub async fn search_go(app: &TestApp, client: &reqwest::Client, term: &str) -> String {
    let response = client
        .get(app.url("/search/go"))
        .query(&[("q", term)])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 303, "search for {term}");
    crate::helpers::landing(&response)
}

/// SIGTERM to a server process; its exit status, which must come within 30 s (the most a
/// stop may take).
pub fn stop_with_sigterm(child: &mut std::process::Child) -> std::process::ExitStatus {
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit 30 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
