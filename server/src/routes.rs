//! The HTTP surface: one module per area, each with its own `router()`.

mod dashboard;
mod health;

use std::net::SocketAddr;

use axum::extract::FromRef;
use claimcheck_core::Store;
use leptos::config::LeptosOptions;

use crate::startup::ServeConfig;

/// What every handler can reach.
#[derive(Clone, FromRef)]
pub(crate) struct AppState {
    pub store: Store,
    pub leptos_options: LeptosOptions,
}

pub(crate) fn router(store: Store, config: &ServeConfig, local_addr: SocketAddr) -> axum::Router {
    let leptos_options = dashboard::leptos_options(config, local_addr);
    let state = AppState {
        store,
        leptos_options,
    };
    axum::Router::new()
        .merge(health::router())
        .merge(dashboard::router(&state))
        .with_state(state)
}
