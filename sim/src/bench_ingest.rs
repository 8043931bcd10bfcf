//! `claimcheck bench-ingest`: a load generator that signs fresh Stripe deliveries, sends them
//! to a webhook endpoint and reports throughput, latency and outcomes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use claimcheck_core::webhook::SigningSecret;
use claimcheck_core::{DatabaseUrl, Store, StoreOptions, now_ms};
use clap::{Args, ValueEnum};
use tokio::sync::Semaphore;

use crate::{Host, Instance, SimError};

/// A real Checkout Session event (3.3 KB); ids are replaced per delivery.
const TEMPLATE: &str =
    include_str!("../../fixtures/stripe/events/checkout.session.completed.paid.json");
const TEMPLATE_EVENT: &str = "evt_pub0001paid";
const TEMPLATE_SESSION: &str = "cs_test_pub0001a1YS1URlnyQCN5fUUduORoQ7Pw41PJ";
const TEMPLATE_ORDER: &str = "ord_pub_0001";
const TEMPLATE_PAYMENT: &str = "pi_pub00013Mxc9vLkdIwHu7ix";

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Base URL of a running Claimcheck. Without it, one is started in this process.
    #[arg(long, value_name = "URL")]
    pub target: Option<String>,
    /// Database of the in-process server (default: a fresh SQLite file in a temporary folder).
    #[arg(long = "database-url", value_name = "DATABASE_URL")]
    pub database_url: Option<DatabaseUrl>,
    /// Signing secret; with --target it must be one the target accepts.
    #[arg(
        long,
        env = "STRIPE_WEBHOOK_SECRET",
        hide_env_values = true,
        default_value = "whsec_bench"
    )]
    pub secret: String,
    /// Deliveries in flight at once (closed loop).
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Deliveries to send in all.
    #[arg(long, default_value_t = 10_000)]
    pub requests: usize,
    /// `unique`: every delivery is a new event. `storm`: `--events` events, each delivered
    /// again and again.
    #[arg(long, value_enum, default_value = "unique")]
    pub workload: Workload,
    /// Distinct events in a storm.
    #[arg(long, default_value_t = 10)]
    pub events: usize,
    /// Send at this many deliveries per second (open loop) instead of as fast as possible.
    #[arg(long)]
    pub rate: Option<u32>,
    /// Fulfilment workers in the in-process server, as many as `serve` runs by default; 0
    /// measures ingestion alone. With workers, the run also waits until every claim is
    /// processed and reports end-to-end throughput, the time from receipt to credits granted
    /// and how long after the last delivery the last claim was done.
    #[arg(long, default_value_t = claimcheck_core::worker::DEFAULT_WORKERS)]
    pub workers: usize,
    /// Scrapers of /metrics: the run is made twice, without and then with this many
    /// scraping as fast as they can, and the latencies are compared (a scrape must not be a
    /// cost that slows Stripe's deliveries).
    #[arg(long, default_value_t = 0)]
    pub scrapers: usize,
    /// The in-process server's CLAIMCHECK_METRICS_DATABASE_INTERVAL (`0`: the database is
    /// read at every scrape, as before it was cached).
    #[arg(long = "metrics-database-interval", value_name = "SPAN")]
    pub metrics_database_interval: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Workload {
    Unique,
    Storm,
}

pub async fn run(args: BenchArgs, host: &dyn Host) -> Result<(), SimError> {
    let secret = SigningSecret::new(args.secret.clone())
        .map_err(|e| SimError::Config(format!("--secret: {e}")))?;
    let mut local = None;
    let (target, backend) = match &args.target {
        Some(url) => (url.trim_end_matches('/').to_owned(), "remote".to_owned()),
        None => {
            let server = LocalServer::start(&args, host).await?;
            let target = server.instance.base_url();
            let backend = server.backend.clone();
            local = Some(server);
            (target, backend)
        }
    };
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency.max(1) * 2)
        .build()
        .map_err(|e| SimError::Config(format!("HTTP client: {e}")))?;
    let run_id = now_ms();
    let shared = Arc::new(Shared {
        client,
        url: format!("{target}/webhooks/stripe"),
        secret,
        run_id,
        workload: args.workload,
        events: args.events.max(1),
    });

    report_configuration(&args, &backend);
    let started = now_ms();
    let clock = Instant::now();
    let samples = send(&shared, &args, 0).await;
    let answered = now_ms();
    report(&args, &backend, &samples, clock.elapsed());
    if args.scrapers > 0 {
        // The same load again, now with the scrapers: one pass after the other, so the two
        // figures come from the same machine in the same minute.
        let scrapes = Arc::new(AtomicUsize::new(0));
        let scrapers: Vec<_> = (0..args.scrapers)
            .map(|_| {
                tokio::spawn(scrape(
                    shared.client.clone(),
                    format!("{target}/metrics"),
                    Arc::clone(&scrapes),
                ))
            })
            .collect();
        let clock = Instant::now();
        let scraped = send(&shared, &args, args.requests).await;
        let elapsed = clock.elapsed();
        for scraper in scrapers {
            scraper.abort();
        }
        #[allow(clippy::print_stdout)]
        {
            println!(
                "with {} scrapers of /metrics ({} scrapes, {:.0}/s):",
                args.scrapers,
                scrapes.load(Ordering::Relaxed),
                scrapes.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64()
            );
        }
        report(&args, &backend, &scraped, elapsed);
        let p99 = |samples: &[Sample]| percentile(samples, 0.99).as_secs_f64();
        #[allow(clippy::print_stdout)]
        {
            println!(
                "p99 with scrapers / without: {:.2}",
                p99(&scraped) / p99(&samples).max(f64::MIN_POSITIVE)
            );
        }
    }
    if let Some(server) = local {
        if args.workers > 0 && args.scrapers == 0 {
            let claims = match args.workload {
                Workload::Unique => args.requests,
                Workload::Storm => args.events.max(1).min(args.requests),
            };
            report_fulfilment(&server, claims, run_id, (started, answered)).await?;
        }
        server.stop().await?;
    }
    Ok(())
}

/// One pass of the load, deliveries numbered from `first`.
pub(crate) async fn send(shared: &Arc<Shared>, args: &BenchArgs, first: usize) -> Vec<Sample> {
    let numbers = first..first + args.requests;
    match args.rate {
        None => closed_loop(shared, args.concurrency.max(1), numbers).await,
        Some(rate) => open_loop(shared, rate.max(1), numbers).await,
    }
}

/// Scrapes `url` as fast as it answers, counting the scrapes, until aborted.
async fn scrape(client: reqwest::Client, url: String, scrapes: Arc<AtomicUsize>) {
    loop {
        if let Ok(response) = client.get(&url).send().await {
            let _ = response.bytes().await;
            scrapes.fetch_add(1, Ordering::Relaxed);
        } else {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// The latency below which a share `q` of the samples answered.
pub(crate) fn percentile(samples: &[Sample], q: f64) -> Duration {
    let mut latencies: Vec<Duration> = samples.iter().map(|s| s.latency).collect();
    latencies.sort();
    let index = ((latencies.len() as f64 - 1.0) * q).round() as usize;
    latencies.get(index).copied().unwrap_or_default()
}

pub(crate) struct Shared {
    client: reqwest::Client,
    url: String,
    secret: SigningSecret,
    run_id: i64,
    workload: Workload,
    events: usize,
}

pub(crate) struct Sample {
    pub(crate) latency: Duration,
    /// HTTP status and the `outcome` field, or the transport error.
    pub(crate) result: String,
}

impl Shared {
    /// Deliveries of fresh events to `target`'s webhook, signed with `secret`.
    pub(crate) fn unique(client: reqwest::Client, target: &str, secret: SigningSecret) -> Shared {
        Shared {
            client,
            url: format!("{target}/webhooks/stripe"),
            secret,
            run_id: now_ms(),
            workload: Workload::Unique,
            events: 1,
        }
    }

    fn body(&self, i: usize) -> String {
        let n = match self.workload {
            Workload::Unique => i,
            Workload::Storm => i % self.events,
        };
        TEMPLATE
            .replace(TEMPLATE_EVENT, &format!("evt_bench{}x{n}", self.run_id))
            .replace(TEMPLATE_SESSION, &format!("cs_bench{}x{n}", self.run_id))
            .replace(TEMPLATE_ORDER, &format!("ord_bench{}x{n}", self.run_id))
            .replace(TEMPLATE_PAYMENT, &format!("pi_bench{}x{n}", self.run_id))
    }

    async fn deliver(&self, i: usize, started: Instant) -> Sample {
        let body = self.body(i);
        let header = self.secret.sign(now_ms() / 1000, body.as_bytes());
        let sent = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("stripe-signature", header)
            .body(body)
            .send()
            .await;
        let result = match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                let text = response.text().await.unwrap_or_default();
                let outcome = text
                    .split("\"outcome\":\"")
                    .nth(1)
                    .and_then(|rest| rest.split('"').next())
                    .unwrap_or("?");
                format!("{status} {outcome}")
            }
            Err(error) => format!("error {}", error.without_url()),
        };
        Sample {
            latency: started.elapsed(),
            result,
        }
    }
}

async fn closed_loop(
    shared: &Arc<Shared>,
    concurrency: usize,
    numbers: std::ops::Range<usize>,
) -> Vec<Sample> {
    let requests = numbers.end;
    let next = Arc::new(AtomicUsize::new(numbers.start));
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let shared = Arc::clone(shared);
        let next = Arc::clone(&next);
        workers.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    break samples;
                }
                samples.push(shared.deliver(i, Instant::now()).await);
            }
        }));
    }
    let mut samples = Vec::with_capacity(requests - numbers.start);
    for worker in workers {
        if let Ok(mut part) = worker.await {
            samples.append(&mut part);
        }
    }
    samples
}

/// Sends on a fixed schedule; latency counts from the scheduled time, so a slow answer
/// cannot hide the deliveries queued behind it.
async fn open_loop(
    shared: &Arc<Shared>,
    rate: u32,
    numbers: std::ops::Range<usize>,
) -> Vec<Sample> {
    let in_flight = Arc::new(Semaphore::new(4096));
    let period = Duration::from_secs_f64(1.0 / f64::from(rate));
    let start = Instant::now();
    let requests = numbers.len();
    let first = numbers.start;
    let mut tasks = Vec::with_capacity(requests);
    for i in numbers {
        let scheduled = start + period.mul_f64((i - first) as f64);
        tokio::time::sleep_until(scheduled.into()).await;
        let shared = Arc::clone(shared);
        let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
            break;
        };
        tasks.push(tokio::spawn(async move {
            let sample = shared.deliver(i, scheduled).await;
            drop(permit);
            sample
        }));
    }
    let mut samples = Vec::with_capacity(requests);
    for task in tasks {
        if let Ok(sample) = task.await {
            samples.push(sample);
        }
    }
    samples
}

fn report(args: &BenchArgs, backend: &str, samples: &[Sample], elapsed: Duration) {
    let pick = |q: f64| percentile(samples, q);
    let mut outcomes: BTreeMap<&str, usize> = BTreeMap::new();
    for sample in samples {
        *outcomes.entry(sample.result.as_str()).or_default() += 1;
    }
    let load = match args.rate {
        Some(rate) => format!("open loop at {rate}/s"),
        None => format!("concurrency {}", args.concurrency),
    };
    let workload = match args.workload {
        Workload::Unique => "unique events".to_owned(),
        Workload::Storm => format!("duplicate storm over {} events", args.events.max(1)),
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let summary = format!(
        "bench-ingest {backend}, {workload}, {load}: {} deliveries in {:.2} s = {:.0}/s; \
         latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms\noutcomes: {}",
        samples.len(),
        elapsed.as_secs_f64(),
        samples.len() as f64 / elapsed.as_secs_f64(),
        ms(pick(0.50)),
        ms(pick(0.99)),
        ms(pick(1.0)),
        outcomes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    // The report is the command's output, not a log line.
    #[allow(clippy::print_stdout)]
    {
        println!("{summary}");
    }
}

/// What the run measures, printed before it starts: the server's configuration matters as
/// much as the load.
fn report_configuration(args: &BenchArgs, backend: &str) {
    let server = match (&args.target, args.workers) {
        (Some(url), _) => format!("the running server at {url}"),
        (None, 0) => format!("claimcheck serve on {backend}, ingestion only (--workers 0)"),
        (None, n) if n == claimcheck_core::worker::DEFAULT_WORKERS => {
            format!("claimcheck serve on {backend}, default configuration ({n} workers)")
        }
        (None, n) => format!("claimcheck serve on {backend}, {n} workers"),
    };
    let load = match args.rate {
        Some(rate) => format!("{rate}/s open loop"),
        None => format!("{} in flight", args.concurrency),
    };
    #[allow(clippy::print_stdout)]
    {
        println!(
            "configuration: {server}; {} deliveries, {load}, release build: {}",
            args.requests,
            !cfg!(debug_assertions)
        );
    }
}

/// Waits until the in-process server has processed every claim of the run, then prints
/// end-to-end throughput, receipt-to-processed percentiles and how long after the last
/// delivery was answered the last claim was processed. `(started, answered)`: when the
/// first delivery went out and the last answer came back (unix ms).
async fn report_fulfilment(
    server: &LocalServer,
    claims: usize,
    since: i64,
    (started, answered): (i64, i64),
) -> Result<(), SimError> {
    let store_error = |source| SimError::Store {
        url: "bench database".to_owned(),
        source,
    };
    let deadline = Instant::now() + Duration::from_secs(600);
    let times = loop {
        let times = server
            .store
            .claims()
            .processing_times(since)
            .await
            .map_err(store_error)?;
        if times.len() >= claims {
            break times;
        }
        if Instant::now() > deadline {
            return Err(SimError::Failed(format!(
                "only {} of {claims} claims processed after 10 minutes",
                times.len()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let last = times.iter().map(|(_, at)| *at).max().unwrap_or(answered);
    let done = Duration::from_millis(u64::try_from(last - started).unwrap_or(0).max(1));
    let pick = |q: f64| {
        let index = ((times.len() as f64 - 1.0) * q).round() as usize;
        times
            .get(index)
            .map(|(waited, _)| *waited)
            .unwrap_or_default()
    };
    let summary = format!(
        "fulfilment: {} claims processed {:.2} s after the first delivery = {:.0}/s, the last \
         {} ms after the last delivery was answered; receipt to credits p50 {} ms, p99 {} ms, \
         max {} ms",
        times.len(),
        done.as_secs_f64(),
        times.len() as f64 / done.as_secs_f64(),
        (last - answered).max(0),
        pick(0.50),
        pick(0.99),
        times.last().map(|(waited, _)| *waited).unwrap_or_default(),
    );
    #[allow(clippy::print_stdout)]
    {
        println!("{summary}");
    }
    Ok(())
}

/// A Claimcheck started inside the benchmark process.
pub(crate) struct LocalServer {
    pub(crate) instance: Instance,
    /// The benchmark's own handle on the server's database, to watch fulfilment.
    pub(crate) store: Store,
    pub(crate) backend: String,
    _dir: Option<tempfile::TempDir>,
}

impl LocalServer {
    pub(crate) async fn start(args: &BenchArgs, host: &dyn Host) -> Result<LocalServer, SimError> {
        let (database_url, dir) = match &args.database_url {
            Some(url) => (url.clone(), None),
            None => {
                let dir = tempfile::tempdir()
                    .map_err(|e| SimError::Config(format!("temporary folder: {e}")))?;
                let url = format!("sqlite://{}/bench.db", dir.path().display());
                let url = url.parse().map_err(|e| SimError::Config(format!("{e}")))?;
                (url, Some(dir))
            }
        };
        let instance = host
            .serve(
                vec![
                    format!("--database-url={}", database_url.expose()),
                    "--bind=127.0.0.1:0".into(),
                    format!("--webhook-secret={}", args.secret),
                    // Without --workers the figures are ingestion's alone.
                    format!("--workers={}", args.workers),
                    "--reconcile-interval=0".into(),
                ]
                .into_iter()
                .chain(
                    args.metrics_database_interval
                        .iter()
                        .map(|span| format!("--metrics-database-interval={span}")),
                )
                .collect(),
            )
            .await?;
        let store = Store::connect(&database_url, &StoreOptions::default())
            .await
            .map_err(|source| SimError::Store {
                url: database_url.to_string(),
                source,
            })?;
        Ok(LocalServer {
            instance,
            backend: store.backend().as_str().to_owned(),
            store,
            _dir: dir,
        })
    }

    pub(crate) async fn stop(self) -> Result<(), SimError> {
        self.store.close().await;
        self.instance.stop().await
    }
}
