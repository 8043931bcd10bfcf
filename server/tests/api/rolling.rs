//! The rolling-restart drill: two instances (the `claimcheck` binary) on one PostgreSQL
//! database behind a small balancer that, like a real one, sends requests only to instances
//! whose `/readyz` says 200. `simulate` sends a day's traffic at a steady rate through the
//! balancer while each instance in turn is stopped (SIGTERM) and started again, twice each:
//! the sender sees no 5xx and no refused connection, the day is exactly once, and no claim
//! spent an attempt on the restarts.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use claimcheck_sim::simulate::{SimulateArgs, run_day};
use http_body_util::{Either, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::helpers::{Backend, TestDb, WEBHOOK_SECRET};

/// How often the balancer asks each instance's `/readyz`.
const PROBE_EVERY: Duration = Duration::from_millis(50);

/// One `claimcheck serve` process, its address, and its log drained on a thread of its own.
struct Instance {
    child: Child,
    addr: SocketAddr,
}

impl Instance {
    fn start(database_url: &str) -> Instance {
        let mut child = Command::new(env!("CARGO_BIN_EXE_claimcheck"))
            .arg("serve")
            .env("DATABASE_URL", database_url)
            .env("CLAIMCHECK_BIND", "127.0.0.1:0")
            .env("STRIPE_WEBHOOK_SECRET", WEBHOOK_SECRET)
            // Long enough for the balancer to see /readyz turn 503 (it asks every 50 ms,
            // on a machine busy with the rest of the suite).
            .env("CLAIMCHECK_SHUTDOWN_GRACE", "3s")
            .env("CLAIMCHECK_WORKERS", "2")
            .env("CLAIMCHECK_LOG_FORMAT", "text")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| {
                line.split("serving the dashboard at http://")
                    .nth(1)
                    .map(|a| a.trim().parse().unwrap())
            })
            .expect("the instance never listened");
        std::thread::spawn(move || lines.for_each(drop));
        Instance { child, addr }
    }

    /// SIGTERM; the exit status, within 30 s.
    fn stop(mut self) -> std::process::ExitStatus {
        crate::helpers::stop_with_sigterm(&mut self.child)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The balancer's view of one backend slot.
#[derive(Clone, Copy, Default)]
struct Slot {
    addr: Option<SocketAddr>,
    ready: bool,
}

/// Round robin over the slots whose `/readyz` last answered 200; a request that finds none,
/// or whose instance fails to answer, gets 502 (the sender would see it).
struct Balancer {
    slots: Mutex<Vec<Slot>>,
    next: AtomicUsize,
    forwarded: AtomicUsize,
    failed: AtomicUsize,
    client: Client<HttpConnector, Incoming>,
}

type Answer = Response<Either<Incoming, Full<Bytes>>>;

impl Balancer {
    fn pick(&self) -> Option<SocketAddr> {
        let slots = self.slots.lock().unwrap();
        let ready: Vec<SocketAddr> = slots
            .iter()
            .filter(|s| s.ready)
            .filter_map(|s| s.addr)
            .collect();
        (!ready.is_empty()).then(|| ready[self.next.fetch_add(1, Ordering::Relaxed) % ready.len()])
    }

    async fn forward(
        self: Arc<Self>,
        mut request: Request<Incoming>,
    ) -> Result<Answer, Infallible> {
        let Some(addr) = self.pick() else {
            self.failed.fetch_add(1, Ordering::Relaxed);
            return Ok(bad_gateway("no instance is ready"));
        };
        let path = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_owned())
            .unwrap_or_else(|| "/".into());
        *request.uri_mut() = format!("http://{addr}{path}").parse().unwrap();
        match self.client.request(request).await {
            Ok(response) => {
                self.forwarded.fetch_add(1, Ordering::Relaxed);
                Ok(response.map(Either::Left))
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                Ok(bad_gateway(&format!("{addr}: {e}")))
            }
        }
    }

    /// Asks every slot's `/readyz`, for ever.
    async fn probe(self: Arc<Self>) {
        let client: Client<HttpConnector, Empty<Bytes>> =
            Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        loop {
            let slots: Vec<Slot> = self.slots.lock().unwrap().clone();
            for (i, slot) in slots.iter().enumerate() {
                let Some(addr) = slot.addr else { continue };
                let uri: hyper::Uri = format!("http://{addr}/readyz").parse().unwrap();
                let ready = matches!(
                    tokio::time::timeout(Duration::from_secs(1), client.get(uri)).await,
                    Ok(Ok(response)) if response.status() == StatusCode::OK
                );
                let mut slots = self.slots.lock().unwrap();
                if slots[i].addr == Some(addr) {
                    slots[i].ready = ready;
                }
            }
            tokio::time::sleep(PROBE_EVERY).await;
        }
    }

    fn set(&self, i: usize, addr: Option<SocketAddr>) {
        self.slots.lock().unwrap()[i] = Slot { addr, ready: false };
    }

    fn ready(&self, i: usize) -> bool {
        self.slots.lock().unwrap()[i].ready
    }
}

fn bad_gateway(why: &str) -> Answer {
    Response::builder()
        .status(StatusCode::BAD_GATEWAY)
        .body(Either::Right(Full::new(Bytes::from(why.to_owned()))))
        .unwrap()
}

/// Starts the balancer on a free port; its address.
async fn balance(balancer: Arc<Balancer>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(balancer.clone().probe());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let balancer = balancer.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |request| balancer.clone().forward(request));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

async fn until(what: &str, within: Duration, check: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "{what} not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restarts_behind_a_balancer_lose_nothing_and_refuse_nothing() {
    let db = TestDb::create(Backend::Postgres).await;
    let token = db.api_token().await;

    let balancer = Arc::new(Balancer {
        slots: Mutex::new(vec![Slot::default(); 2]),
        next: AtomicUsize::new(0),
        forwarded: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        client: Client::builder(TokioExecutor::new()).build(HttpConnector::new()),
    });
    let front = balance(balancer.clone()).await;
    let mut instances: Vec<Option<Instance>> = Vec::new();
    let start = || {
        let url = db.url().to_owned();
        async move {
            tokio::task::spawn_blocking(move || Instance::start(&url))
                .await
                .unwrap()
        }
    };
    for i in 0..2 {
        let instance = start().await;
        balancer.set(i, Some(instance.addr));
        instances.push(Some(instance));
    }
    until("both instances ready", Duration::from_secs(30), || {
        balancer.ready(0) && balancer.ready(1)
    })
    .await;

    // A steady day's traffic through the balancer, spends included.
    let args = SimulateArgs {
        targets: vec![format!("http://{front}")],
        secret: WEBHOOK_SECRET.into(),
        api_token: token,
        orders: 160,
        rate: 15,
        duplicates: 0.3,
        twins: 0.2,
        // In order: a refund that comes before its payment waits out a backoff, which
        // would spend an attempt that is not the restarts'.
        reorder: 0.0,
        run: Some("rolling".into()),
        settle_secs: 60,
        stripe_sim: None,
        package: "thesis-40".into(),
        spends: 40,
        subscriptions: 0,
        plan: "thesis-monthly".into(),
        upgrade_plan: None,
    };
    let day = tokio::spawn(async move { run_day(&args).await });

    // Each instance in turn stopped and started again, twice each, while the traffic flows.
    let mut restarts = 0;
    for i in [0, 1, 0, 1] {
        tokio::time::sleep(Duration::from_millis(800)).await;
        let instance = instances[i].take().unwrap();
        let exited = tokio::task::spawn_blocking(move || instance.stop())
            .await
            .unwrap();
        assert!(exited.success(), "instance {i} exited {exited:?}");
        balancer.set(i, None);
        let instance = start().await;
        balancer.set(i, Some(instance.addr));
        instances[i] = Some(instance);
        until(
            "the restarted instance ready",
            Duration::from_secs(30),
            || balancer.ready(i),
        )
        .await;
        restarts += 1;
    }
    assert!(
        !day.is_finished(),
        "the traffic ended before the restarts did"
    );
    let verdict = day.await.unwrap().unwrap();
    assert_eq!(restarts, 4);
    assert!(
        verdict.exactly_once,
        "{:#?} {:#?}",
        verdict.wrong, verdict.credits_wrong
    );
    // Nothing refused: every delivery answered 200 the first time, no spend sent again.
    let statuses: Vec<u16> = verdict.delivery_statuses.keys().copied().collect();
    assert_eq!(statuses, [200], "{:?}", verdict.delivery_statuses);
    assert_eq!(verdict.spends_resent, 0);
    assert_eq!(balancer.failed.load(Ordering::Relaxed), 0);
    assert!(balancer.forwarded.load(Ordering::Relaxed) > verdict.deliveries);
    // No attempt spent by the restarts: every claim fulfilled on its first.
    assert_eq!(
        db.count("SELECT COUNT(*) FROM processed_stripe_events WHERE status <> 'processed'")
            .await,
        0
    );
    let retried = db
        .texts(
            "SELECT event_type || ' ' || event_id || ': ' || attempts || ' attempts' \
             FROM processed_stripe_events WHERE attempts <> 1",
        )
        .await;
    assert!(retried.is_empty(), "{retried:#?}");
    for instance in instances.into_iter().flatten() {
        assert!(instance.stop().success());
    }
}
