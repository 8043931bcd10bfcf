//! The Leptos dashboard: server-rendered pages, their server functions and static assets.

use std::net::SocketAddr;
use std::path::PathBuf;

use std::sync::Arc;

use app::api::{AckLatency, ServerHealth};
use app::{App, shell};
use claimcheck_core::Store;
use leptos::config::LeptosOptions;
use leptos::prelude::provide_context;
use leptos_axum::{LeptosRoutes, generate_route_list};

use super::AppState;
use crate::assets::EmbeddedSite;
use crate::config::ServeConfig;

/// The bundle's file names (`pkg/claimcheck.js`, `.wasm`, `.css`) as cargo-leptos writes them.
const OUTPUT_NAME: &str = "claimcheck";

/// Where the dashboard's files come from.
#[derive(Debug, Clone)]
pub(super) enum Site {
    /// The binary's own, under content-hashed names.
    Embedded(&'static EmbeddedSite),
    /// A folder cargo-leptos wrote (development, tests).
    Folder(PathBuf),
}

impl Site {
    /// The folder if one is named, else what the binary carries, else `target/site`.
    pub(super) fn of(config: &ServeConfig) -> Site {
        match (&config.site_root, crate::assets::embedded()) {
            (Some(root), _) => Site::Folder(root.clone()),
            (None, Some(site)) => Site::Embedded(site),
            (None, None) => Site::Folder(PathBuf::from("target/site")),
        }
    }
}

pub(super) fn leptos_options(site: &Site, local_addr: SocketAddr) -> LeptosOptions {
    let (output_name, site_root) = match site {
        Site::Embedded(site) => (site.output_name, String::new()),
        Site::Folder(root) => (OUTPUT_NAME, root.to_string_lossy().into_owned()),
    };
    LeptosOptions::builder()
        .output_name(output_name)
        .site_root(site_root)
        .site_pkg_dir("pkg")
        .site_addr(local_addr)
        .build()
}

/// The pages and their server functions; with a site folder, its files too (the embedded
/// site is served apart, in front of the sessions: see `routes::router`).
pub(super) fn router(state: &AppState, site: &Site) -> axum::Router<AppState> {
    // Listed once per process: listing runs the app with resource loading suppressed by a
    // process-wide flag, and a page whose resource first polls during that window (another
    // server in the same process, as in the tests) would wait forever (leptos #4773).
    static ROUTES: std::sync::OnceLock<Vec<leptos_axum::AxumRouteListing>> =
        std::sync::OnceLock::new();
    let routes = ROUTES.get_or_init(|| generate_route_list(App)).clone();
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
    let adjust_limit = state.adjust_limit;
    let language = app::i18n::DefaultLanguage(state.auth.language);
    let pages = axum::Router::new().leptos_routes_with_context(
        state,
        routes,
        move || {
            provide_context(store.clone());
            provide_context(latency.clone());
            provide_context(health.clone());
            provide_context(std::sync::Arc::clone(&worker));
            provide_context(adjust_limit);
            provide_context(language);
        },
        move || shell(options.clone()),
    );
    // What is not a page is a file of the site folder, or the not-found page.
    let context = {
        let store = state.store.clone();
        move || {
            provide_context(store.clone());
            provide_context(language);
        }
    };
    match site {
        Site::Folder(_) => pages.fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(context, shell)),
        Site::Embedded(_) => {
            let options = state.leptos_options.clone();
            pages.fallback(leptos_axum::render_app_to_stream_with_context(
                context,
                move || shell(options.clone()),
            ))
        }
    }
}
