//! The HTTP surface: one module per area, each with its own `router()`.

mod actions;
mod alert_actions;
mod api;
mod auth;
mod bulk_redrive;
mod claim_actions;
mod credit_actions;
mod dashboard;
mod health;
mod language;
mod limits;
mod metrics;
mod orders_csv;
mod redirect;
mod request_log;
mod search;
pub(crate) mod spends;
mod subscription_api;
mod throttle;
mod two_factor;
mod webhook;
mod words;

use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Duration;

use axum::extract::FromRef;
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, SessionManagerLayer};

use crate::sessions::DbSessionStore;
use claimcheck_core::Store;
use leptos::config::LeptosOptions;

use crate::config::ServeConfig;
use crate::metrics::Metrics;

pub(crate) use api::ApiState;
pub(crate) use webhook::WebhookState;

/// What every handler can reach.
#[derive(Clone, FromRef)]
pub(crate) struct AppState {
    pub store: Store,
    pub leptos_options: LeptosOptions,
    pub webhook: WebhookState,
    pub api: ApiState,
    pub auth: Arc<auth::AuthState>,
    pub worker: Arc<claimcheck_core::worker::WorkerConfig>,
    pub reconcile: claimcheck_core::reconcile::ReconcileConfig,
    pub bulk: crate::bulk_runs::BulkRuns,
    /// Where an admin's resolution of an alert is announced, in which words.
    pub alert_policy: claimcheck_core::alert_check::AlertPolicy,
    /// The most credits support may adjust at once.
    pub adjust_limit: app::api::AdjustLimit,
    /// Set once the process is stopping: `/readyz` answers 503.
    pub stopping: crate::shutdown::Stopping,
}

pub(crate) fn router(
    store: Store,
    config: &ServeConfig,
    local_addr: SocketAddr,
    metrics: Arc<Metrics>,
    new_claim: Arc<tokio::sync::Notify>,
    bulk: crate::bulk_runs::BulkRuns,
    stopping: crate::shutdown::Stopping,
) -> axum::Router {
    let site = dashboard::Site::of(config);
    let leptos_options = dashboard::leptos_options(&site, local_addr);
    let ingestion = config.webhook.verifier.clone().map(|verifier| {
        claimcheck_core::webhook::Ingestion::new(
            store.clone(),
            verifier,
            config.webhook.mode,
            Arc::clone(&new_claim),
        )
    });
    let scrape = metrics::router(Arc::clone(&metrics), store.clone(), &config.metrics);
    let packages = Arc::new(config.worker.packages.clone());
    let credits = claimcheck_core::CreditWriter::start(store.clone(), Arc::clone(&packages));
    let state = AppState {
        store,
        leptos_options,
        webhook: WebhookState {
            ingestion,
            metrics,
            max_body_bytes: config.webhook.max_body_bytes,
            in_flight: Arc::new(tokio::sync::Semaphore::new(
                config.limits.webhook_concurrency,
            )),
            // Never less than one delivery of the largest size accepted.
            body_bytes: Arc::new(tokio::sync::Semaphore::new(
                config
                    .limits
                    .webhook_memory_bytes
                    .max(config.webhook.max_body_bytes),
            )),
            body_timeout: config.limits.body_timeout,
        },
        api: ApiState {
            stripe: config.stripe.clone(),
            checkout_urls: config.checkout_urls.clone(),
            packages: Arc::clone(&packages),
            plans: Arc::new(config.worker.plans.clone()),
            credits,
        },
        auth: Arc::new(auth::AuthState {
            throttle: throttle::LoginThrottle::new(Duration::from_secs(15 * 60), 5, 30),
            policy: auth::SessionPolicy {
                idle: config.dashboard.idle_timeout,
                absolute: config.dashboard.absolute_timeout,
                secure: config.dashboard.secure_cookie(local_addr),
            },
            client_address: config.dashboard.client_address.clone(),
            two_factor: config.dashboard.require_two_factor,
            language: config.dashboard.language,
        }),
        worker: Arc::new(config.worker.clone()),
        adjust_limit: app::api::AdjustLimit(config.dashboard.support_adjust_limit),
        reconcile: config.reconcile.config.clone(),
        bulk,
        alert_policy: crate::startup::alert_policy(config, local_addr),
        stopping,
    };
    // Everything an operator uses sits behind the session layer and the guard; the webhook,
    // the order API, health and metrics do not (their callers are Stripe, the shop and
    // monitoring).
    let policy = state.auth.policy;
    let sessions = SessionManagerLayer::new(DbSessionStore::new(state.store.clone()))
        .with_name("claimcheck_session")
        .with_http_only(true)
        // Every request moves the idle expiry forward (a record is otherwise saved only
        // when the session changes, and an active operator would be signed out).
        .with_always_save(true)
        .with_same_site(SameSite::Strict)
        .with_secure(policy.secure)
        .with_path("/")
        .with_expiry(Expiry::OnInactivity(
            time::Duration::try_from(policy.idle).unwrap_or(time::Duration::minutes(30)),
        ));
    let operator_routes = axum::Router::new()
        // A sign-in form is a few hundred bytes: anything larger is refused unread.
        .route(
            "/login",
            axum::routing::post(auth::login).layer(axum::extract::DefaultBodyLimit::max(4096)),
        )
        .route("/logout", axum::routing::post(auth::logout))
        .merge(actions::router())
        .merge(alert_actions::router())
        .merge(language::router())
        .merge(bulk_redrive::router())
        .merge(claim_actions::router())
        .merge(credit_actions::router())
        .merge(two_factor::router())
        .merge(search::router())
        .merge(orders_csv::router())
        .merge(dashboard::router(&state, &site))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::guard,
        ))
        .layer(sessions)
        .layer(limits::security_headers())
        .layer(limits::no_store())
        // Pages and server functions' answers compressed as the browser accepts; bodies
        // already encoded (the site's files) pass as they are.
        .layer(
            tower_http::compression::CompressionLayer::new()
                .br(true)
                .gzip(true),
        )
        .layer(limits::bounded(DASHBOARD_CONCURRENCY, DASHBOARD_TIMEOUT))
        // Outside the limit: a body that arrives slowly holds no place in it.
        .layer(axum::middleware::from_fn_with_state(
            limits::BodyRule::new(DASHBOARD_MAX_BODY, config.limits.body_timeout),
            limits::bodies_within,
        ));
    // The files a release binary carries are public and session-less (no session record is
    // read or touched for them).
    let site_files = match site {
        dashboard::Site::Embedded(files) => files.router().layer(limits::security_headers()),
        dashboard::Site::Folder(_) => axum::Router::new(),
    };
    let api_routes = api::router()
        .layer(limits::no_store())
        .layer(axum::extract::DefaultBodyLimit::max(API_MAX_BODY))
        .layer(limits::bounded(API_CONCURRENCY, API_TIMEOUT))
        .layer(axum::middleware::from_fn_with_state(
            limits::BodyRule::new(API_MAX_BODY, config.limits.body_timeout),
            limits::bodies_within,
        ));
    // The webhook keeps its own body limit and a concurrency limit shared with nothing: a
    // busy dashboard or API can never hold Stripe's deliveries back.
    let mut router = axum::Router::new()
        .merge(webhook::router())
        .merge(api_routes)
        .merge(health::router());
    // `/metrics` here, unless it has a listener of its own.
    if config.metrics.bind.is_none() {
        router = router.route_service("/metrics", scrape);
    }
    let router = router
        .merge(site_files)
        .merge(operator_routes)
        .layer(axum::middleware::from_fn(limits::header_size))
        .with_state(state);
    // Outermost: every request, refused ones included, has its id and its span.
    request_log::traced(router)
}

/// `/metrics` alone, for its own listener (`CLAIMCHECK_METRICS_BIND`).
pub(crate) fn metrics_only(
    metrics: Arc<Metrics>,
    store: Store,
    config: &ServeConfig,
) -> axum::Router {
    request_log::traced(metrics::router(metrics, store, &config.metrics))
}

/// Requests the dashboard serves at once (more wait), and how long one may take.
const DASHBOARD_CONCURRENCY: usize = 64;
const DASHBOARD_TIMEOUT: Duration = Duration::from_secs(30);
/// The dashboard's forms and server functions' arguments are small.
const DASHBOARD_MAX_BODY: usize = 64 * 1024;
/// The order API: the same, and its bodies are small JSON.
const API_CONCURRENCY: usize = 64;
const API_TIMEOUT: Duration = Duration::from_secs(60);
const API_MAX_BODY: usize = 16 * 1024;
