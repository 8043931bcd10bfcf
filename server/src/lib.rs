//! The `claimcheck` binary's library half: configuration, the HTTP application and its
//! start-up, shared by `main` and the integration tests.
#![forbid(unsafe_code)]

pub mod bench;
pub mod bench_dashboard;
pub mod cli;
pub mod commands;
pub mod demo;
pub mod error;
pub mod metrics;
mod routes;
pub use routes::TrustedProxies;
pub mod sessions;
pub mod shutdown;
pub mod simulate;
pub mod startup;
pub mod stripe_sim;
pub mod telemetry;

pub use error::ServerError;
pub use startup::{Application, DashboardConfig, ServeConfig, WebhookConfig};
