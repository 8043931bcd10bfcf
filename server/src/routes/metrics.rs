//! `GET /metrics`: the Prometheus exposition. This process's counters, and the claims by
//! state and open alerts as the database has them.
//!
//! Anyone who can reach it can scrape it, so a scrape must not be a cost a stranger can
//! impose: the database's figures (a count over the whole claims table) are read at most once
//! per interval however many scrape at once (the others wait for that read and share it), and
//! a bearer token (`CLAIMCHECK_METRICS_TOKEN`) or a listener of its own
//! (`CLAIMCHECK_METRICS_BIND`) keeps strangers out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use claimcheck_core::alert::AlertCondition;
use claimcheck_core::{ClaimCounts, Store, StoreError, Writes, now_ms};
use tokio::sync::Mutex;

use crate::config::{MetricsConfig, MetricsToken};
use crate::metrics::{Metrics, Snapshot};

/// How long a scrape waits for the database's figures before leaving them out.
const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(2);

/// What `/metrics` serves from.
#[derive(Clone)]
struct Scrape {
    metrics: Arc<Metrics>,
    store: Store,
    token: Option<MetricsToken>,
    figures: Arc<DatabaseFigures>,
}

/// The database's figures, read at most once per `every`.
struct DatabaseFigures {
    every: Duration,
    last: Mutex<Option<(Instant, Figures)>>,
}

#[derive(Clone)]
struct Figures {
    claims: Option<ClaimCounts>,
    open_alerts: Option<Vec<AlertCondition>>,
}

/// The `/metrics` route with its own state, to merge into the main router or serve alone
/// on the metrics listener.
pub(crate) fn router(metrics: Arc<Metrics>, store: Store, config: &MetricsConfig) -> Router {
    let scrape = Scrape {
        metrics,
        store,
        token: config.token.clone(),
        figures: Arc::new(DatabaseFigures {
            every: config.database_every,
            last: Mutex::new(None),
        }),
    };
    Router::new()
        .route("/metrics", get(exposition))
        .with_state(scrape)
}

async fn exposition(State(scrape): State<Scrape>, headers: HeaderMap) -> Response {
    if let Some(token) = &scrape.token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if !given.is_some_and(|given| token.matches(given)) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "/metrics needs Authorization: Bearer <CLAIMCHECK_METRICS_TOKEN>\n",
            )
                .into_response();
        }
    }
    let figures = scrape.figures.read(&scrape.store, &scrape.metrics).await;
    let snapshot = Snapshot {
        claims: figures.claims,
        open_alerts: figures.open_alerts,
        writable: scrape.store.write_health().writes() == Writes::Accepted,
    };
    (
        [(
            header::CONTENT_TYPE,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        )],
        scrape.metrics.render(&snapshot),
    )
        .into_response()
}

impl DatabaseFigures {
    /// The figures of the last read if it is recent enough, else a new read. Scrapes that
    /// arrive while one reads wait for it (the lock is held across the read), so sixteen
    /// scrapers at once cost one read.
    async fn read(&self, store: &Store, metrics: &Metrics) -> Figures {
        let mut last = self.last.lock().await;
        if let Some((at, figures)) = last.as_ref()
            && at.elapsed() < self.every
        {
            return figures.clone();
        }
        metrics.database_read();
        // A database that is away must not cost the scrape the rest: the counters are what
        // tells an operator what the outage did. Each part is read on its own.
        let (claims, open_alerts) = tokio::join!(
            part("claims by state", async {
                store.claims().counts(now_ms()).await
            }),
            part("open alerts", async {
                let open = store.alerts().open().await?;
                Ok(open.into_iter().map(|alert| alert.condition).collect())
            }),
        );
        let figures = Figures {
            claims,
            open_alerts,
        };
        if !self.every.is_zero() {
            *last = Some((Instant::now(), figures.clone()));
        }
        figures
    }
}

/// What `query` reads, or `None` (logged) when the database fails or does not answer in time.
async fn part<T>(what: &str, query: impl Future<Output = Result<T, StoreError>>) -> Option<T> {
    match tokio::time::timeout(SNAPSHOT_TIMEOUT, query).await {
        Ok(Ok(value)) => Some(value),
        Ok(Err(error)) => {
            tracing::warn!(
                error = &error as &dyn std::error::Error,
                "metrics: {what} could not be read; left out of this scrape"
            );
            None
        }
        Err(_) => {
            tracing::warn!("metrics: the database did not answer in time; {what} left out");
            None
        }
    }
}
