//! The Leptos dashboard: server-rendered pages, their server functions and static assets.

use std::net::SocketAddr;

use std::sync::Arc;

use app::api::{AckLatency, ServerHealth};
use app::{App, shell};
use claimcheck_core::Store;
use leptos::config::LeptosOptions;
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, generate_route_list};

use super::AppState;
use crate::config::ServeConfig;

/// The bundle's file names (`pkg/claimcheck.js`, `.wasm`, `.css`) as cargo-leptos writes them.
const OUTPUT_NAME: &str = "claimcheck";

pub(super) fn leptos_options(config: &ServeConfig, local_addr: SocketAddr) -> LeptosOptions {
    LeptosOptions::builder()
        .output_name(OUTPUT_NAME)
        .site_root(config.site_root.to_string_lossy().into_owned())
        .site_pkg_dir("pkg")
        .site_addr(local_addr)
        .build()
}

pub(super) fn router(state: &AppState) -> axum::Router<AppState> {
    let routes = generate_route_list(App);
    let store: Store = state.store.clone();
    let options = state.leptos_options.clone();
    let metrics = state.webhook.metrics.clone();
    let latency = AckLatency(Arc::new(move |q| metrics.ack_quantile(q)));
    let metrics = state.webhook.metrics.clone();
    let health = ServerHealth {
        bad_signatures_in_a_row: Arc::new(move || metrics.bad_signatures_in_a_row()),
        stripe: state.api.stripe.clone(),
        reconcile: state.reconcile.clone(),
    };
    let worker = std::sync::Arc::clone(&state.worker);
    axum::Router::new()
        .leptos_routes_with_context(
            state,
            routes,
            move || {
                provide_context(store.clone());
                provide_context(latency.clone());
                provide_context(health.clone());
                provide_context(std::sync::Arc::clone(&worker));
            },
            move || shell(options.clone()),
        )
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(
            {
                let store = state.store.clone();
                move || provide_context(store.clone())
            },
            shell,
        ))
}
