//! The `claimcheck` binary's library half: configuration, the HTTP application and its
//! start-up, shared by `main` and the integration tests.
#![forbid(unsafe_code)]

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
mod tasks;
pub mod telemetry;

pub use client_ip::{ClientAddress, ClientIpHeader, TrustedProxies};
pub use config::{DashboardConfig, ServeConfig, WebhookConfig};
pub use error::ServerError;
pub use startup::Application;
