//! Start-up: open the store, migrate, bind, build the router. `main` and the integration
//! tests go through the same `Application::build`.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use claimcheck_core::observe::Observer;
use claimcheck_core::stripe::StripeApi;
use claimcheck_core::worker::{Worker, WorkerConfig};
use claimcheck_core::{Store, StoreOptions};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};

use crate::alerts::AlertRuntime;
use crate::bulk_runs::BulkRuns;
use crate::config::{MigrateMode, ReconcileSchedule, ServeConfig};
use crate::error::ServerError;
use crate::metrics::Metrics;
use crate::routes;
use crate::shutdown::Stopping;
use crate::tasks::{housekeeping, reconcile_periodically};

/// A bound, migrated, ready-to-run server.
pub struct Application {
    listener: TcpListener,
    router: axum::Router,
    /// `/metrics` on a listener of its own (`CLAIMCHECK_METRICS_BIND`).
    metrics_listener: Option<(TcpListener, axum::Router)>,
    limits: crate::config::HttpLimits,
    store: Store,
    local_addr: SocketAddr,
    workers: Vec<Worker>,
    new_claim: Arc<Notify>,
    retention: Option<Duration>,
    /// How long each package's credits last, for the lots the upkeep expires.
    packages: Arc<claimcheck_core::fulfilment::Packages>,
    credit_upkeep: Duration,
    reconciler: Option<(StripeApi, ReconcileSchedule)>,
    metrics: Arc<Metrics>,
    bulk: BulkRuns,
    alerts: Option<AlertRuntime>,
    stopping: Stopping,
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
        match config.migrate {
            MigrateMode::Auto => store.migrate().await.map_err(store_error)?,
            MigrateMode::Off => {
                let pending: Vec<String> = store
                    .migrations()
                    .await
                    .map_err(store_error)?
                    .into_iter()
                    .filter(|m| m.applied_on.is_none())
                    .map(|m| format!("{:04} {}", m.version, m.description))
                    .collect();
                if !pending.is_empty() {
                    return Err(ServerError::Config(format!(
                        "CLAIMCHECK_MIGRATE=off and the database lacks {} migration(s) this \
                         version needs: {}; run `claimcheck migrate` first",
                        pending.len(),
                        pending.join(", ")
                    )));
                }
            }
        }

        crate::tasks::adopt_ignored(&store).await;

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
        let metrics_listener = match config.metrics.bind {
            Some(addr) => {
                let listener = TcpListener::bind(addr)
                    .await
                    .map_err(|source| ServerError::Bind { addr, source })?;
                let router = routes::metrics_only(Arc::clone(&metrics), store.clone(), &config);
                Some((listener, router))
            }
            None => None,
        };
        // The workers and the Stripe client report to this application's metrics.
        let observer: Arc<dyn Observer> = metrics.clone();
        let stripe = config
            .stripe
            .map(|api| api.with_observer(Arc::clone(&observer)));
        // The workers read a subscription from Stripe when an invoice names no customer.
        let worker = WorkerConfig {
            stripe: stripe.clone(),
            ..config.worker
        };
        let config = ServeConfig {
            stripe,
            worker,
            ..config
        };
        let bulk = BulkRuns::new(store.clone(), config.worker.clone(), Arc::clone(&observer));
        let stopping = Stopping::default();
        let router = routes::router(
            store.clone(),
            &config,
            local_addr,
            Arc::clone(&metrics),
            Arc::clone(&new_claim),
            bulk.clone(),
            stopping.clone(),
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
            metrics_listener,
            limits: config.limits.clone(),
            store,
            local_addr,
            workers,
            new_claim,
            retention: config.retention,
            packages: Arc::new(config.worker.packages.clone()),
            credit_upkeep: config.credit_upkeep,
            reconciler: config
                .stripe
                .clone()
                .filter(|_| !config.reconcile.interval.is_zero())
                .map(|api| (api, config.reconcile.clone())),
            metrics,
            bulk,
            stopping,
            alerts: alert_runtime(&config, local_addr),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Where `/metrics` is served when it has a listener of its own.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|(listener, _)| listener.local_addr().ok())
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Serves until `shutdown` completes; then `/readyz` answers 503 while requests are still
    /// answered for the grace period, no new connection is taken, requests in flight and the
    /// workers' claims in hand finish, and the database is closed: all within
    /// [`crate::shutdown::STOP_WITHIN`] of the signal.
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
            workers.push(tokio::spawn(crate::tasks::check_alerts_periodically(
                self.store.clone(),
                runtime.clone(),
                Arc::clone(&self.metrics),
                Arc::clone(&queued),
                stopped.clone(),
            )));
            workers.push(tokio::spawn(crate::tasks::send_alerts_periodically(
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
        if !self.credit_upkeep.is_zero() {
            workers.push(tokio::spawn(crate::tasks::expire_credits_periodically(
                self.store.clone(),
                self.packages,
                self.credit_upkeep,
                stopped.clone(),
            )));
        }
        // At the signal `/readyz` answers 503 and requests are still answered for the grace
        // period (the balancer takes this instance out); then both listeners stop taking
        // connections together and requests in flight finish.
        // READY first, then the watchdog's pings.
        crate::systemd::ready();
        workers.push(tokio::spawn(crate::systemd::feed_watchdog(stopped.clone())));
        let grace = self.limits.shutdown_grace;
        let stopping = self.stopping.clone();
        let (stop_serving, serving) = watch::channel(false);
        let signal = tokio::spawn(async move {
            shutdown.await;
            stopping.set();
            crate::systemd::stopping();
            tracing::info!(
                grace_ms = grace.as_millis() as u64,
                "stopping: /readyz answers 503; requests are answered for the grace period"
            );
            tokio::time::sleep(grace).await;
            tracing::info!("taking no new connection; finishing requests in flight");
            let _ = stop_serving.send(true);
        });
        let metrics_server = self.metrics_listener.map(|(listener, router)| {
            let limits = self.limits.clone();
            let serving = serving.clone();
            tokio::spawn(
                async move { crate::serve::serve(listener, router, &limits, serving).await },
            )
        });
        let mut stopped_serving = serving.clone();
        let main_server = crate::serve::serve(self.listener, self.router, &self.limits, serving);
        // Requests still in flight when their part of the stop's time is up are dropped
        // (the workers keep 5 s of it).
        let time_up = async {
            let _ = stopped_serving.wait_for(|stopped| *stopped).await;
            tokio::time::sleep_until(self.stopping.deadline(Duration::from_secs(5))).await;
        };
        tokio::select! {
            () = main_server => {}
            () = time_up => {
                tracing::warn!("requests still in flight at the end of the stop's time; dropping them");
            }
        }
        if let Some(metrics_server) = metrics_server {
            let deadline = self.stopping.deadline(Duration::from_secs(5));
            let _ = tokio::time::timeout_at(deadline, metrics_server).await;
        }
        signal.abort();
        // Workers finish the claims in hand (their effects are one transaction each); a lease
        // a worker cannot complete in time expires and the next instance takes its claim.
        let _ = stop.send(true);
        let deadline = self.stopping.deadline(Duration::from_secs(1));
        // Bulk re-drives stop between two claims and are left interrupted (resumable).
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        self.bulk.stop(left.min(Duration::from_secs(10))).await;
        let finishing = async {
            for worker in workers {
                let _ = worker.await;
            }
        };
        if tokio::time::timeout_at(deadline, finishing).await.is_err() {
            tracing::warn!(
                "a worker is still busy; its lease expires and another instance takes its claim"
            );
        }
        self.store.close().await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// The alert tasks' settings, unless alerting is off (a zero check interval).
fn alert_runtime(config: &ServeConfig, local_addr: SocketAddr) -> Option<AlertRuntime> {
    let alerts = &config.alerts;
    if alerts.check_interval.is_zero() {
        return None;
    }
    Some(AlertRuntime {
        policy: alert_policy(config, local_addr),
        channels: Arc::new(alerts.channels.clone()),
        retry: alerts.retry.clone(),
        check_interval: alerts.check_interval,
    })
}

/// How this instance words alerts and where their messages go: for its checks, and for an
/// admin's resolution on its dashboard (whether or not it checks itself). Links in messages
/// point to the public URL, else to the address this instance serves on.
pub(crate) fn alert_policy(
    config: &ServeConfig,
    local_addr: SocketAddr,
) -> claimcheck_core::alert_check::AlertPolicy {
    let alerts = &config.alerts;
    let dashboard_url = config
        .dashboard
        .public_url
        .as_ref()
        .map(|url| url.as_str().to_owned())
        .unwrap_or_else(|| format!("http://{local_addr}"));
    claimcheck_core::alert_check::AlertPolicy {
        thresholds: alerts.thresholds.clone(),
        repeat: alerts.repeat,
        channels: alerts.channels.configured(),
        dashboard_url,
        wording: Arc::new(app::i18n::AlertWords::messages_in(
            config.dashboard.language,
        )),
    }
}
