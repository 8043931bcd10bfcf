//! The `claimcheck` binary's library half: configuration, the HTTP application and its
//! start-up, shared by `main` and the integration tests.
#![forbid(unsafe_code)]
// The dashboard's pages are laid out here for the release build (no erase_components):
// the overview's view needs more than the default 128.
#![recursion_limit = "256"]

pub mod alerts;
mod assets;
mod bulk_runs;
pub mod cli;
pub mod client_ip;
pub mod commands;
pub mod config;
pub mod error;
pub mod metrics;
mod routes;
mod serve;
pub mod sessions;
pub mod shutdown;
pub mod startup;
mod systemd;
mod tasks;
pub mod telemetry;

pub use client_ip::{ClientAddress, ClientIpHeader, TrustedProxies};
pub use config::{DashboardConfig, ServeConfig, WebhookConfig};
pub use error::ServerError;
pub use startup::Application;
