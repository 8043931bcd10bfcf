//! Start-up: open the store, migrate, bind, build the router. `main` and the integration
//! tests go through the same `Application::build`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use claimcheck_core::observe::Observer;
use claimcheck_core::stripe::StripeApi;
use claimcheck_core::worker::Worker;
use claimcheck_core::{Store, StoreOptions};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

use crate::alerts::AlertRuntime;
use crate::bulk_runs::BulkRuns;
use crate::config::{ReconcileSchedule, ServeConfig};
use crate::error::ServerError;
use crate::metrics::Metrics;
use crate::routes;
use crate::tasks::{housekeeping, reconcile_periodically};

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
    bulk: BulkRuns,
    alerts: Option<AlertRuntime>,
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
        // The workers and the Stripe client report to this application's metrics.
        let observer: Arc<dyn Observer> = metrics.clone();
        let config = ServeConfig {
            stripe: config
                .stripe
                .map(|api| api.with_observer(Arc::clone(&observer))),
            ..config
        };
        let bulk = BulkRuns::new(store.clone(), config.worker.clone(), Arc::clone(&observer));
        let router = routes::router(
            store.clone(),
            &config,
            local_addr,
            Arc::clone(&metrics),
            Arc::clone(&new_claim),
            bulk.clone(),
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
                .with_observer(Arc::clone(&observer))
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
            bulk,
            alerts: alert_runtime(&config, local_addr),
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
                stopped.clone(),
            )));
        }
        if let Some(runtime) = self.alerts {
            let queued = Arc::new(Notify::new());
            workers.push(tokio::spawn(crate::alerts::check_periodically(
                self.store.clone(),
                runtime.clone(),
                Arc::clone(&self.metrics),
                Arc::clone(&queued),
                stopped.clone(),
            )));
            workers.push(tokio::spawn(crate::alerts::send_periodically(
                self.store.clone(),
                runtime,
                Arc::clone(&self.metrics),
                queued,
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
        // Bulk re-drives stop between two claims and are left interrupted (resumable).
        self.bulk.stop(Duration::from_secs(10)).await;
        for worker in workers {
            let _ = worker.await;
        }
        self.store.close().await;
        tracing::info!("stopped");
        served.map_err(ServerError::Serve)
    }
}

/// The alert tasks' settings, unless alerting is off (a zero check interval). Links in
/// messages point to the public URL, else to the address this instance serves on.
fn alert_runtime(config: &ServeConfig, local_addr: SocketAddr) -> Option<AlertRuntime> {
    let alerts = &config.alerts;
    if alerts.check_interval.is_zero() {
        return None;
    }
    let dashboard_url = config
        .dashboard
        .public_url
        .as_ref()
        .map(|url| url.as_str().to_owned())
        .unwrap_or_else(|| format!("http://{local_addr}"));
    Some(AlertRuntime {
        policy: claimcheck_core::alerts::AlertPolicy {
            thresholds: alerts.thresholds.clone(),
            repeat: alerts.repeat,
            channels: alerts.channels.configured(),
            dashboard_url,
            wording: Arc::new(app::i18n::AlertWords::messages_in(
                config.dashboard.language,
            )),
        },
        channels: Arc::new(alerts.channels.clone()),
        retry: alerts.retry.clone(),
        check_interval: alerts.check_interval,
    })
}
