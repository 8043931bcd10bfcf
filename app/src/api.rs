//! Data the dashboard pages show, and the server functions that fetch it.
//!
//! Types here cross the wire between server and browser, so they are plain serde structs;
//! the engine's own types stay on the server.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The overview page's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// "sqlite" or "postgres".
    pub backend: String,
    /// When the server read these figures, as text in UTC.
    pub checked_at: String,
    /// Claims per state, in the order operators read them.
    pub claims: Vec<StateCount>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateCount {
    pub state: String,
    pub count: i64,
}

/// Claims per state and when they were counted.
#[server(prefix = "/dashboard/fn", endpoint = "overview")]
pub async fn get_overview() -> Result<Overview, ServerFnError> {
    use claimcheck_core::{ClaimState, Store, now_ms};

    let store = use_context::<Store>()
        .ok_or_else(|| ServerFnError::new("The dashboard is not connected to a database."))?;
    let now = now_ms();
    let counts = store.claim_counts(now).await.map_err(|error| {
        tracing::error!(
            error = &error as &dyn std::error::Error,
            "overview: reading claim counts failed"
        );
        ServerFnError::new("The database is unavailable. Try again in a moment.")
    })?;
    let checked_at = chrono::DateTime::from_timestamp_millis(now)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
        .unwrap_or_default();
    Ok(Overview {
        backend: store.backend().as_str().to_owned(),
        checked_at,
        claims: ClaimState::ALL
            .into_iter()
            .map(|state| StateCount {
                state: state.as_str().to_owned(),
                count: counts.get(state),
            })
            .collect(),
    })
}
