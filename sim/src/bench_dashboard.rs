//! `claimcheck bench-dashboard`: seeds a large synthetic history (one million claims by
//! default, one order each, spread over 50,000 customers) and times the dashboard's pages as
//! the server renders them for a signed-in operator: the events list, a later page of it, a
//! search by email, the orders search by email, the support desk's customer page, the
//! header search by an order-id prefix, the orders list (all, and one status), the
//! claims page with its counted tabs, and the subscriptions (the list, past due, one plan,
//! one subscription's page with its year of grants).

use std::time::{Duration, Instant};

use claimcheck_core::auth::{Role, hash_password};
use claimcheck_core::{DatabaseUrl, Store, StoreOptions, now_ms};
use clap::Args;

use crate::synthetic::{self, CLAIMS_PER_SUBSCRIPTION, SYNTHETIC_CUSTOMERS};
use crate::{Host, SimError};

#[derive(Debug, Clone, Args)]
pub struct DashboardBenchArgs {
    /// Database to seed and read (default: a fresh SQLite file in a temporary folder). A
    /// database seeded before is topped up, not seeded again.
    #[arg(long = "database-url", value_name = "DATABASE_URL")]
    pub database_url: Option<DatabaseUrl>,
    /// Claims in the synthetic history.
    #[arg(long, default_value_t = 1_000_000)]
    pub claims: i64,
    /// Timed renders of each page.
    #[arg(long, default_value_t = 200)]
    pub requests: usize,
}

const PASSWORD: &str = "bench password, long enough";

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// Writes the figures to stdout: they are the command's output.
#[allow(clippy::print_stdout)]
fn report(line: &str) {
    println!("{line}");
}

pub async fn run(args: DashboardBenchArgs, host: &dyn Host) -> Result<(), SimError> {
    let dir = tempfile::tempdir().map_err(|e| SimError::Failed(e.to_string()))?;
    let database_url = match &args.database_url {
        Some(url) => url.clone(),
        None => format!("sqlite://{}/bench.db", dir.path().display())
            .parse()
            .map_err(|e| SimError::Config(format!("{e}")))?,
    };
    let wrap = |source| SimError::Store {
        url: database_url.to_string(),
        source,
    };
    let store = Store::connect(&database_url, &StoreOptions::default())
        .await
        .map_err(wrap)?;
    store.migrate().await.map_err(wrap)?;
    let started = Instant::now();
    let since = now_ms() - args.claims * 10 - 60_000;
    let seeded = synthetic::seed(&database_url, args.claims, since)
        .await
        .map_err(SimError::Seed)?;
    report(&format!(
        "seeded {} claims and orders ({} in all; {} subscriptions) in {:.1} s on {}",
        seeded.claims,
        args.claims,
        seeded.subscriptions,
        started.elapsed().as_secs_f64(),
        store.backend().as_str()
    ));
    let hash = tokio::task::spawn_blocking(|| hash_password(PASSWORD))
        .await
        .map_err(|e| SimError::Failed(e.to_string()))?
        .map_err(|e| SimError::Failed(e.to_string()))?;
    store
        .operators()
        .add("bench", &hash, Role::Viewer, now_ms())
        .await
        .map_err(wrap)?;
    store.close().await;

    let server = host
        .serve(vec![
            format!("--database-url={}", database_url.expose()),
            "--bind=127.0.0.1:0".into(),
            "--workers=0".into(),
            "--reconcile-interval=0".into(),
        ])
        .await?;
    let base = server.base_url();

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| SimError::Failed(e.to_string()))?;
    let login = client
        .post(format!("{base}/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!(
            "username=bench&password={}",
            PASSWORD.replace(' ', "+").replace(',', "%2C")
        ))
        .send()
        .await
        .map_err(|e| SimError::Failed(format!("sign-in: {e}")))?;
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .ok_or_else(|| SimError::Failed("sign-in gave no session cookie".into()))?
        .to_owned();

    // A page in the middle of the history, found through the list's own cursor format.
    let middle = since + (args.claims / 2) * 10;
    // A customer the history has, however small it is (one per claim, up to the 50,000).
    let customer = format!(
        "customer{}@example.ch",
        args.claims.min(SYNTHETIC_CUSTOMERS) / 3
    );
    // A subscription halfway through the history (the first, in a small one).
    let subscription = (args.claims / 2 / CLAIMS_PER_SUBSCRIPTION).max(1) * CLAIMS_PER_SUBSCRIPTION;
    let pages = [
        ("events list", "/events".to_owned()),
        (
            "events, a page deep in the history",
            format!("/events?after={middle}%3Aevt_syn_{}", args.claims / 2),
        ),
        ("events, failed only", "/events?status=failed".to_owned()),
        ("events, search by email", format!("/events?q={customer}")),
        ("orders, search by email", format!("/orders?q={customer}")),
        ("customer page", format!("/customers/{customer}")),
        (
            "search, order-id prefix",
            format!("/search?q=ord_syn_{}", args.claims / 20),
        ),
        ("orders list", "/orders".to_owned()),
        (
            "orders list, refunded only",
            "/orders?status=refunded".to_owned(),
        ),
        (
            "claims page, failed tab",
            "/claims?status=failed".to_owned(),
        ),
        ("subscriptions list", "/subscriptions".to_owned()),
        (
            "subscriptions, past due",
            "/subscriptions?past_due=1".to_owned(),
        ),
        (
            "subscriptions, one plan",
            "/subscriptions?plan=thesis-monthly".to_owned(),
        ),
        (
            "subscription page",
            format!("/subscriptions/sub_syn_{subscription}"),
        ),
    ];
    report(&format!(
        "{} renders of each page, signed in, server-side (HTML complete):",
        args.requests
    ));
    for (name, path) in pages {
        let mut times = Vec::with_capacity(args.requests);
        let mut bytes = 0;
        for _ in 0..args.requests {
            let started = Instant::now();
            let response = client
                .get(format!("{base}{path}"))
                .header("cookie", &cookie)
                .send()
                .await
                .map_err(|e| SimError::Failed(format!("{path}: {e}")))?;
            if response.status() != 200 {
                return Err(SimError::Failed(format!(
                    "{path}: HTTP {}",
                    response.status()
                )));
            }
            let body = response
                .text()
                .await
                .map_err(|e| SimError::Failed(format!("{path}: {e}")))?;
            times.push(started.elapsed());
            bytes = body.len();
        }
        times.sort();
        report(&format!(
            "  {name:<36} p50 {}  p95 {}  max {}  ({} KiB)",
            ms(percentile(&times, 50.0)),
            ms(percentile(&times, 95.0)),
            ms(*times.last().unwrap_or(&Duration::ZERO)),
            bytes / 1024
        ));
    }
    server.stop().await
}
