//! Start-up: open the store, migrate, bind, build the router. `main` and the integration
//! tests go through the same `Application::build`.

use axum::serve::ListenerExt;
use claimcheck_core::payments::CheckoutUrls;
use claimcheck_core::stripe::StripeApi;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use claimcheck_core::webhook::{SignatureVerifier, StripeMode};
use claimcheck_core::worker::{Worker, WorkerConfig};
use claimcheck_core::{DatabaseUrl, Store, StoreOptions};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

use crate::error::ServerError;
use crate::metrics::Metrics;
use crate::routes;

/// Everything `serve` needs to know.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub database_url: DatabaseUrl,
    /// Port 0 picks a free port (tests).
    pub bind: SocketAddr,
    pub site_root: PathBuf,
    pub webhook: WebhookConfig,
    pub worker: WorkerConfig,
    /// Fulfilment workers in this process (0: this instance only ingests).
    pub workers: usize,
    /// Outgoing Stripe calls; `None` without STRIPE_API_KEY.
    pub stripe: Option<StripeApi>,
    /// Where Checkout returns customers; `None`: the order API is not configured.
    pub checkout_urls: Option<CheckoutUrls>,
    pub dashboard: DashboardConfig,
    /// Delivery logs and payloads of processed claims older than this are pruned; `None`
    /// keeps everything.
    pub retention: Option<Duration>,
    /// The reconciler (runs when `stripe` is set and the interval is not zero).
    pub reconcile: ReconcileSchedule,
}

/// How often the reconciler runs, and how.
#[derive(Debug, Clone)]
pub struct ReconcileSchedule {
    /// Zero: never.
    pub interval: Duration,
    pub config: claimcheck_core::reconcile::ReconcileConfig,
}

impl Default for ReconcileSchedule {
    fn default() -> Self {
        ReconcileSchedule {
            interval: Duration::from_secs(15 * 60),
            config: claimcheck_core::reconcile::ReconcileConfig::default(),
        }
    }
}

/// Runs the reconciler every `schedule.interval`, the first time shortly after start. A run
/// another instance holds is skipped; a failed run is logged and changes nothing.
async fn reconcile_periodically(
    store: Store,
    api: StripeApi,
    schedule: ReconcileSchedule,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) {
    let mut wait = Duration::from_secs(5).min(schedule.interval);
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        wait = schedule.interval;
        let outcome = claimcheck_core::reconcile::run(
            &store,
            &api,
            &schedule.config,
            "reconciler",
            None,
            false,
        )
        .await;
        match &outcome {
            Ok(report) => metrics.observe_reconcile(Some((report.listed, report.claimed))),
            Err(claimcheck_core::reconcile::ReconcileError::Busy) => {}
            Err(_) => metrics.observe_reconcile(None),
        }
        match outcome {
            Ok(report) if report.claimed > 0 => tracing::warn!(
                claimed = report.claimed,
                listed = report.listed,
                "reconcile: events Stripe never delivered were claimed"
            ),
            Ok(report) => tracing::debug!(listed = report.listed, "reconcile: nothing missing"),
            Err(claimcheck_core::reconcile::ReconcileError::Busy) => {
                tracing::debug!("reconcile: another instance is running it")
            }
            Err(error) => tracing::error!(
                error = &error as &dyn std::error::Error,
                "reconcile run failed; the cursor stays where it was"
            ),
        }
    }
}

/// Operator sessions on the dashboard.
#[derive(Debug, Clone)]
pub struct DashboardConfig {
    /// A session ends after this long without a request.
    pub idle_timeout: Duration,
    /// A session ends this long after sign-in, however busy.
    pub absolute_timeout: Duration,
    /// `Secure` session cookie; `None`: as `public_url`'s scheme says, else secure unless
    /// bound to a loopback address (plain HTTP on this machine only).
    pub secure_cookie: Option<bool>,
    /// Where people reach the dashboard (`https://pay.shop.ch`), e.g. through a TLS proxy.
    pub public_url: Option<PublicUrl>,
    /// Reverse proxies whose `X-Forwarded-For` / `Forwarded` name the client.
    pub trusted_proxies: crate::TrustedProxies,
    /// Who must sign in with a second factor.
    pub require_two_factor: claimcheck_core::two_factor::TwoFactorPolicy,
}

impl DashboardConfig {
    /// Whether the session cookie is `Secure` for a server bound to `local_addr`.
    pub fn secure_cookie(&self, local_addr: SocketAddr) -> bool {
        self.secure_cookie
            .or(self.public_url.as_ref().map(PublicUrl::is_https))
            .unwrap_or(!local_addr.ip().is_loopback())
    }
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig {
            idle_timeout: Duration::from_secs(30 * 60),
            absolute_timeout: Duration::from_secs(12 * 3600),
            secure_cookie: None,
            public_url: None,
            trusted_proxies: crate::TrustedProxies::default(),
            require_two_factor: Default::default(),
        }
    }
}

/// The dashboard's public address: `http://` or `https://`, a host, no query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl(String);

impl PublicUrl {
    pub fn is_https(&self) -> bool {
        self.0.starts_with("https://")
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for PublicUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let url = s.trim().trim_end_matches('/');
        let host = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .ok_or("the public URL starts with https:// (or http://)")?;
        if host.is_empty() || host.contains(['?', '#', ' ']) {
            return Err("the public URL is https://HOST[:PORT][/PATH], nothing more".into());
        }
        Ok(PublicUrl(url.to_owned()))
    }
}

/// How `POST /webhooks/stripe` checks deliveries.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// `None` without a signing secret: deliveries are answered 503 until one is set.
    pub verifier: Option<SignatureVerifier>,
    pub mode: StripeMode,
    pub max_body_bytes: usize,
}

/// Background upkeep every few minutes: expired dashboard sessions are deleted (a session
/// nobody uses again would otherwise stay in the table), and with a retention period the
/// old delivery logs and payloads are pruned in small batches.
async fn housekeeping(store: Store, retention: Option<Duration>, mut stop: watch::Receiver<bool>) {
    const EVERY: Duration = Duration::from_secs(5 * 60);
    while !*stop.borrow() {
        if let Some(retention) = retention {
            let before = claimcheck_core::now_ms()
                - i64::try_from(retention.as_millis()).unwrap_or(i64::MAX / 2);
            match store.prune(before, 500).await {
                Ok((0, 0)) => {}
                Ok((deliveries, payloads)) => {
                    tracing::info!(deliveries, payloads, "pruned past the retention period")
                }
                Err(error) => tracing::warn!(
                    error = &error as &dyn std::error::Error,
                    "pruning failed; trying again later"
                ),
            }
        }
        match store
            .delete_expired_sessions(claimcheck_core::now_ms())
            .await
        {
            Ok(0) => {}
            Ok(deleted) => tracing::debug!(deleted, "expired dashboard sessions deleted"),
            Err(error) => tracing::warn!(
                error = &error as &dyn std::error::Error,
                "deleting expired sessions failed; trying again later"
            ),
        }
        tokio::select! {
            () = tokio::time::sleep(EVERY) => {}
            _ = stop.changed() => {}
        }
    }
}

/// A bound, migrated, ready-to-run server.
pub struct Application {
    listener: TcpListener,
    router: axum::Router,
    store: Store,
    local_addr: SocketAddr,
    workers: Vec<Worker>,
    new_claim: Arc<Notify>,
    retention: Option<Duration>,
    reconciler: Option<(StripeApi, ReconcileSchedule)>,
    metrics: Arc<Metrics>,
}

impl Application {
    pub async fn build(config: ServeConfig) -> Result<Application, ServerError> {
        let store_error = |source| ServerError::Store {
            url: config.database_url.to_string(),
            source,
        };
        let store = Store::connect(&config.database_url, &StoreOptions::default())
            .await
            .map_err(store_error)?;
        store.migrate().await.map_err(store_error)?;

        let listener =
            TcpListener::bind(config.bind)
                .await
                .map_err(|source| ServerError::Bind {
                    addr: config.bind,
                    source,
                })?;
        let local_addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: config.bind,
            source,
        })?;
        if config.webhook.verifier.is_none() {
            tracing::warn!(
                "STRIPE_WEBHOOK_SECRET is not set: webhook deliveries are answered 503 until it is"
            );
        }
        let new_claim = Arc::new(Notify::new());
        let metrics = Arc::new(Metrics::default());
        let router = routes::router(
            store.clone(),
            &config,
            local_addr,
            Arc::clone(&metrics),
            Arc::clone(&new_claim),
        );
        // Unique per process, whatever the address: two instances (or a restart reusing the
        // address and pid in a container) never share a lease owner.
        let instance = claimcheck_core::token::random_id("i")
            .map_err(|e| ServerError::Config(format!("no randomness for the instance id: {e}")))?;
        let workers = (0..config.workers)
            .map(|i| {
                Worker::new(
                    store.clone(),
                    format!("{instance}/w{i}"),
                    config.worker.clone(),
                )
            })
            .collect();
        Ok(Application {
            listener,
            router,
            store,
            local_addr,
            workers,
            new_claim,
            retention: config.retention,
            reconciler: config
                .stripe
                .clone()
                .filter(|_| !config.reconcile.interval.is_zero())
                .map(|api| (api, config.reconcile.clone())),
            metrics,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Serves until `shutdown` completes, then lets requests in flight finish and closes
    /// the database.
    pub async fn run_until(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let (stop, stopped) = watch::channel(false);
        let mut workers: Vec<_> = self
            .workers
            .into_iter()
            .map(|worker| tokio::spawn(worker.run(Arc::clone(&self.new_claim), stopped.clone())))
            .collect();
        if let Some((api, schedule)) = self.reconciler {
            workers.push(tokio::spawn(reconcile_periodically(
                self.store.clone(),
                api,
                schedule,
                Arc::clone(&self.metrics),
                stopped.clone(),
            )));
        }
        workers.push(tokio::spawn(housekeeping(
            self.store.clone(),
            self.retention,
            stopped.clone(),
        )));
        // Pages stream in several small writes: without TCP_NODELAY each waits for the
        // client's delayed ACK (about 40 ms).
        let listener = self.listener.tap_io(|tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::warn!(%error, "cannot set TCP_NODELAY");
            }
        });
        let served = axum::serve(
            listener,
            self.router
                .into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await;
        // Workers finish the claim in hand; a lease they cannot complete expires and is
        // rescued by the next instance.
        let _ = stop.send(true);
        for worker in workers {
            let _ = worker.await;
        }
        self.store.close().await;
        tracing::info!("stopped");
        served.map_err(ServerError::Serve)
    }
}
