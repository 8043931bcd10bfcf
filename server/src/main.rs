//! `claimcheck`: serve the webhook endpoint and dashboard, or run an operator command.

use std::process::ExitCode;

use claimcheck_server::cli::{Cli, Command};
use claimcheck_server::{Application, ServerError, commands, shutdown, telemetry};
use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(
                error = &error as &dyn std::error::Error,
                "claimcheck stopped"
            );
            eprintln!("error: {}", telemetry::error_chain(&error));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), ServerError> {
    match cli.command {
        Command::Serve(args) => {
            let stop = shutdown::signal();
            let app = Application::build((*args).into_config()?).await?;
            tracing::info!("serving the dashboard at http://{}", app.local_addr());
            app.run_until(stop).await
        }
        Command::Migrate(args) => claimcheck_server::cli::migrate(&args).await,
        Command::BenchIngest(args) => claimcheck_server::bench::run(args).await,
        Command::BenchDashboard(args) => claimcheck_server::bench_dashboard::run(args).await,
        Command::Simulate(args) => claimcheck_server::simulate::run(args).await,
        Command::Demo(args) => claimcheck_server::demo::run(args).await,
        Command::Claims { command } => commands::claims(command).await,
        Command::Orders { command } => commands::orders(command).await,
        Command::Customers { command } => commands::customers(command).await,
        Command::Backup { to, database } => commands::backup(&to, &database).await,
        Command::Reconcile(args) => commands::reconcile(args).await,
        Command::Tokens { command } => commands::tokens(command).await,
        Command::Operator { command } => commands::operator(command).await,
        Command::StripeSim {
            bind,
            webhooks,
            webhook_secrets,
            time_scale,
        } => {
            if webhooks.len() != webhook_secrets.len() {
                return Err(claimcheck_server::error::ServerError::Config(
                    "give one --webhook-secret for each --webhook".into(),
                ));
            }
            let options = claimcheck_server::stripe_sim::SimOptions {
                webhooks: webhooks.into_iter().zip(webhook_secrets).collect(),
                time_scale,
            };
            let stop = shutdown::signal();
            let sim = claimcheck_server::stripe_sim::StripeSim::start_with(bind, options).await?;
            tracing::info!("Stripe simulator at {}", sim.base_url());
            sim.run_until(stop).await
        }
    }
}
