//! `claimcheck bench-spend`: what a spend costs beside a webhook delivery. One in-process
//! server, one database: first a pass of fresh signed deliveries (ingestion alone, as
//! `bench-ingest --workers 0`), then a pass of spends through the spend API, both closed
//! loops at the same number in flight, so the two figures come from the same machine in the
//! same minute. Prints both, and spends per second over deliveries per second (the target: a
//! spend costs no more than a delivery, a ratio ≥ 1.0). The run ends by checking that the
//! ledger holds every spend that was answered 201, once.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use claimcheck_core::fulfilment::Packages;
use claimcheck_core::spending::{Answer, CreditRequest, IdempotencyKey, KeyScope, Keyed};
use claimcheck_core::token::NewToken;
use claimcheck_core::webhook::SigningSecret;
use claimcheck_core::{DatabaseUrl, now_ms};
use clap::Args;

use crate::bench_ingest::{BenchArgs, LocalServer, Sample, Shared, Workload, percentile, send};
use crate::{Host, SimError};

#[derive(Debug, Clone, Args)]
pub struct SpendBenchArgs {
    /// Database of the in-process server (default: a fresh SQLite file in a temporary folder).
    #[arg(long = "database-url", value_name = "DATABASE_URL")]
    pub database_url: Option<DatabaseUrl>,
    /// Requests in flight at once, in both passes.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Deliveries, then spends, in each pass.
    #[arg(long, default_value_t = 5_000)]
    pub requests: usize,
    /// Customers the spends are spread over (each seeded with plenty of credits).
    #[arg(long, default_value_t = 50)]
    pub customers: usize,
}

const SECRET: &str = "whsec_bench_spend";

pub async fn run(args: SpendBenchArgs, host: &dyn Host) -> Result<(), SimError> {
    let concurrency = args.concurrency.max(1);
    let customers = args.customers.max(1);
    let ingest = BenchArgs {
        target: None,
        database_url: args.database_url.clone(),
        secret: SECRET.to_owned(),
        concurrency,
        requests: args.requests,
        workload: Workload::Unique,
        events: 1,
        rate: None,
        workers: 0,
        scrapers: 0,
        metrics_database_interval: None,
    };
    let server = LocalServer::start(&ingest, host).await?;
    let target = server.instance.base_url();
    let store_error = |source| SimError::Store {
        url: "bench database".to_owned(),
        source,
    };
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency * 2)
        .build()
        .map_err(|e| SimError::Config(format!("HTTP client: {e}")))?;
    #[allow(clippy::print_stdout)]
    {
        println!(
            "configuration: claimcheck serve on {}, {} requests per pass, {concurrency} in \
             flight, spends over {customers} customers, release build: {}",
            server.backend,
            args.requests,
            !cfg!(debug_assertions)
        );
    }

    // Ingestion alone, on this server.
    let secret = SigningSecret::new(SECRET).map_err(|e| SimError::Config(e.to_string()))?;
    let shared = Arc::new(Shared::unique(client.clone(), &target, secret));
    let clock = Instant::now();
    let deliveries = send(&shared, &ingest, 0).await;
    let ingest_elapsed = clock.elapsed();
    let delivery_rate = report("bench-ingest", &server.backend, &deliveries, ingest_elapsed);

    // Credits to spend and a token to spend them with, through the engine itself.
    let token = NewToken::generate().map_err(|e| SimError::Config(e.to_string()))?;
    server
        .store
        .tokens()
        .insert(&token, "bench-spend", now_ms())
        .await
        .map_err(store_error)?;
    let per_customer = i64::try_from(args.requests / customers + 1).unwrap_or(i64::MAX) * 2;
    for c in 0..customers {
        let request = CreditRequest::adjust(
            &email(c),
            per_customer,
            "bench-spend seed",
            "cli:bench",
            None,
        )
        .map_err(|e| SimError::Config(e.to_string()))?;
        let key = IdempotencyKey::parse(&format!("bench-seed-{c}"))
            .map_err(|e| SimError::Config(e.to_string()))?;
        let keyed = server
            .store
            .credits()
            .apply(
                KeyScope::Cli,
                &key,
                &request,
                &Packages::default(),
                now_ms(),
                |_| Answer {
                    status: 201,
                    body: String::new(),
                },
            )
            .await
            .map_err(store_error)?;
        if !matches!(keyed, Keyed::Fresh(_)) {
            return Err(SimError::Failed(format!("seeding {}: {keyed:?}", email(c))));
        }
    }

    // The spends.
    let run = now_ms();
    let next = Arc::new(AtomicUsize::new(0));
    let clock = Instant::now();
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (client, target, token, next) = (
            client.clone(),
            target.clone(),
            token.token.clone(),
            Arc::clone(&next),
        );
        let requests = args.requests;
        workers.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    break samples;
                }
                let started = Instant::now();
                let sent = client
                    .post(format!(
                        "{target}/api/customers/{}/spends",
                        email(i % customers)
                    ))
                    .bearer_auth(&token)
                    .header("Idempotency-Key", format!("bench-{run}-{i}"))
                    .json(&serde_json::json!({ "credits": 1, "reference": format!("run-{i}") }))
                    .send()
                    .await;
                let result = match sent {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let _ = response.bytes().await;
                        status.to_string()
                    }
                    Err(error) => format!("error {}", error.without_url()),
                };
                samples.push(Sample {
                    latency: started.elapsed(),
                    result,
                });
            }
        }));
    }
    let mut spends = Vec::with_capacity(args.requests);
    for worker in workers {
        if let Ok(mut part) = worker.await {
            spends.append(&mut part);
        }
    }
    let spend_elapsed = clock.elapsed();
    let spend_rate = report("bench-spend", &server.backend, &spends, spend_elapsed);

    // Every spend answered 201 is in the ledger, once.
    let made = spends.iter().filter(|s| s.result == "201").count() as i64;
    let mut left = 0;
    for c in 0..customers {
        left += server
            .store
            .credits()
            .balance(&email(c), &Packages::default(), now_ms())
            .await
            .map_err(store_error)?
            .balance;
    }
    let seeded = per_customer * i64::try_from(customers).unwrap_or(i64::MAX);
    #[allow(clippy::print_stdout)]
    {
        println!(
            "spends per second / deliveries per second: {:.2} (target ≥ 1.00)\nledger: {seeded} \
             seeded − {made} spent = {left} left: {}",
            spend_rate / delivery_rate.max(f64::MIN_POSITIVE),
            if seeded - made == left {
                "every spend once"
            } else {
                "MISMATCH"
            }
        );
    }
    server.stop().await?;
    if seeded - made != left {
        return Err(SimError::Failed(format!(
            "the ledger holds {} spends, {made} were answered 201",
            seeded - left
        )));
    }
    Ok(())
}

fn email(c: usize) -> String {
    format!("bench{c}@example.ch")
}

/// Prints one pass's figures; its rate per second.
fn report(name: &str, backend: &str, samples: &[Sample], elapsed: Duration) -> f64 {
    let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
    for sample in samples {
        *outcomes.entry(sample.result.as_str()).or_default() += 1;
    }
    let ms = |q: f64| percentile(samples, q).as_secs_f64() * 1000.0;
    let rate = samples.len() as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    #[allow(clippy::print_stdout)]
    {
        println!(
            "{name} {backend}: {} in {:.2} s = {rate:.0}/s; latency p50 {:.2} ms, p99 {:.2} ms, \
             max {:.2} ms; answers: {}",
            samples.len(),
            elapsed.as_secs_f64(),
            ms(0.5),
            ms(0.99),
            ms(1.0),
            outcomes
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    rate
}
