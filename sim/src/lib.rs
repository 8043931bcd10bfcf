//! Claimcheck's rehearsal tools: a Stripe API simulator, a simulated day of a shop's traffic,
//! the demo and the benchmarks. The `claimcheck` binary carries them behind its default
//! `rehearsal` feature; a production build leaves them out.
//!
//! Nothing here depends on the server: a rehearsal that needs a running Claimcheck asks the
//! [`Host`] (the binary) to start one with `claimcheck serve`'s own command line.
#![forbid(unsafe_code)]

pub mod bench_dashboard;
pub mod bench_ingest;
pub mod bench_spend;
mod credit_audit;
pub mod demo;
mod error;
mod host;
pub mod simulate;
pub mod stripe_sim;
mod subscription_lives;
mod synthetic;

use std::net::SocketAddr;

use clap::Subcommand;

pub use error::SimError;
pub use host::{Host, Instance, ServeFuture};

/// The rehearsal commands, flattened into `claimcheck`'s own.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Load-test a webhook endpoint with freshly signed deliveries and report throughput and
    /// latency (starts its own server on a fresh database unless --target is given).
    BenchIngest(bench_ingest::BenchArgs),
    /// What a spend through the spend API costs beside a webhook delivery: a pass of
    /// deliveries, then a pass of spends, on one in-process server, and their ratio.
    BenchSpend(bench_spend::SpendBenchArgs),
    /// Seed a large synthetic history (a million claims by default) and time the dashboard's
    /// server-rendered pages on it.
    BenchDashboard(bench_dashboard::DashboardBenchArgs),
    /// A living system in one command: SQLite in a local folder, the server, the Stripe
    /// simulator and a day of a small shop played against it.
    Demo(demo::DemoArgs),
    /// Send a simulated day of a shop's Stripe traffic (duplicates, twins, out of order,
    /// retries) to one or more Claimcheck instances and check the exactly-once verdict.
    Simulate(simulate::SimulateArgs),
    /// Run the Stripe API simulator (tests and the demo point STRIPE_API_BASE at it).
    StripeSim {
        /// Address and port to listen on.
        #[arg(long, default_value = "127.0.0.1:12111")]
        bind: SocketAddr,
        /// Deliver every event to this webhook URL (repeatable; pair each with
        /// --webhook-secret).
        #[arg(long = "webhook", value_name = "URL")]
        webhooks: Vec<String>,
        /// The signing secret (whsec_…) of the --webhook at the same position.
        #[arg(long = "webhook-secret", value_name = "SECRET")]
        webhook_secrets: Vec<String>,
        /// Simulated seconds per real second: 4320 plays Stripe's three days of retries in
        /// a minute (and the 30 days events stay listable in about ten).
        #[arg(long = "time-scale", default_value_t = 1.0)]
        time_scale: f64,
    },
}

/// Runs one rehearsal command; `host` starts Claimcheck where one is needed.
pub async fn run(command: Command, host: &dyn Host) -> Result<(), SimError> {
    match command {
        Command::BenchIngest(args) => bench_ingest::run(args, host).await,
        Command::BenchDashboard(args) => bench_dashboard::run(args, host).await,
        Command::BenchSpend(args) => bench_spend::run(args, host).await,
        Command::Demo(args) => demo::run(args, host).await,
        Command::Simulate(args) => simulate::run(args).await,
        Command::StripeSim {
            bind,
            webhooks,
            webhook_secrets,
            time_scale,
        } => {
            if webhooks.len() != webhook_secrets.len() {
                return Err(SimError::Config(
                    "give one --webhook-secret for each --webhook".into(),
                ));
            }
            let options = stripe_sim::SimOptions {
                webhooks: webhooks.into_iter().zip(webhook_secrets).collect(),
                time_scale,
            };
            let stop = host.stop_signal();
            let sim = stripe_sim::StripeSim::start_with(bind, options).await?;
            tracing::info!("Stripe simulator at {}", sim.base_url());
            sim.run_until(stop).await
        }
    }
}
