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
}

/// Operator sessions on the dashboard.
#[derive(Debug, Clone)]
pub struct DashboardConfig {
    /// A session ends after this long without a request.
    pub idle_timeout: Duration,
    /// A session ends this long after sign-in, however busy.
    pub absolute_timeout: Duration,
    /// `Secure` session cookie; `None`: secure unless bound to a loopback address (plain
    /// HTTP on this machine only).
    pub secure_cookie: Option<bool>,
}

impl Default for DashboardConfig {
    fn default() -> Self {
        DashboardConfig {
            idle_timeout: Duration::from_secs(30 * 60),
            absolute_timeout: Duration::from_secs(12 * 3600),
            secure_cookie: None,
        }
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

/// A bound, migrated, ready-to-run server.
pub struct Application {
    listener: TcpListener,
    router: axum::Router,
    store: Store,
    local_addr: SocketAddr,
    workers: Vec<Worker>,
    new_claim: Arc<Notify>,
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
        let router = routes::router(
            store.clone(),
            &config,
            local_addr,
            Arc::new(Metrics::default()),
            Arc::clone(&new_claim),
        );
        let instance = format!("{}:{}", local_addr, std::process::id());
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
        let workers: Vec<_> = self
            .workers
            .into_iter()
            .map(|worker| tokio::spawn(worker.run(Arc::clone(&self.new_claim), stopped.clone())))
            .collect();
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
