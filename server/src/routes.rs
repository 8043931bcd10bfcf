//! The HTTP surface: one module per area, each with its own `router()`.

mod api;
mod dashboard;
mod health;
mod webhook;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::FromRef;
use claimcheck_core::Store;
use leptos::config::LeptosOptions;

use crate::metrics::Metrics;
use crate::startup::ServeConfig;

pub(crate) use api::ApiState;
pub(crate) use webhook::WebhookState;

/// What every handler can reach.
#[derive(Clone, FromRef)]
pub(crate) struct AppState {
    pub store: Store,
    pub leptos_options: LeptosOptions,
    pub webhook: WebhookState,
    pub api: ApiState,
}

pub(crate) fn router(
    store: Store,
    config: &ServeConfig,
    local_addr: SocketAddr,
    metrics: Arc<Metrics>,
    new_claim: Arc<tokio::sync::Notify>,
) -> axum::Router {
    let leptos_options = dashboard::leptos_options(config, local_addr);
    let ingestion = config.webhook.verifier.clone().map(|verifier| {
        claimcheck_core::webhook::Ingestion::new(
            store.clone(),
            verifier,
            config.webhook.mode,
            Arc::clone(&new_claim),
        )
    });
    let state = AppState {
        store,
        leptos_options,
        webhook: WebhookState {
            ingestion,
            metrics,
            max_body_bytes: config.webhook.max_body_bytes,
        },
        api: ApiState {
            stripe: config.stripe.clone(),
            checkout_urls: config.checkout_urls.clone(),
            packages: Arc::new(config.worker.packages.clone()),
        },
    };
    axum::Router::new()
        .merge(webhook::router(config.webhook.max_body_bytes))
        .merge(api::router())
        .merge(health::router())
        .merge(dashboard::router(&state))
        .with_state(state)
}
