//! `claimcheck`: serve the webhook endpoint and dashboard, or run an operator command.

use std::process::ExitCode;

use claimcheck_server::cli::{Cli, Command};
use claimcheck_server::{Application, ServerError, commands, shutdown, telemetry};
use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    telemetry::init(cli.log_format);
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
            let stop = shutdown::first_of_two();
            let app = Application::build((*args).into_config()?).await?;
            tracing::info!("serving the dashboard at http://{}", app.local_addr());
            app.run_until(stop).await
        }
        Command::Migrate(args) => commands::migrate::run(&args).await,
        Command::Claims { command } => commands::claims::run(command).await,
        Command::Orders { command } => commands::orders::run(command).await,
        Command::Customers { command } => commands::customers::run(command).await,
        Command::Subscriptions { command } => commands::subscriptions::run(command).await,
        Command::Backup { to, database } => commands::backup::run(&to, &database).await,
        Command::Alerts { command } => commands::alerts::run(command).await,
        Command::Reconcile(args) => commands::reconcile::run(args).await,
        Command::Tokens { command } => commands::tokens::run(command).await,
        Command::Operator { command } => commands::operators::run(command).await,
        Command::Healthcheck(args) => commands::healthcheck::run(&args).await,
        #[cfg(feature = "rehearsal")]
        Command::Rehearsal(command) => claimcheck_sim::run(command, &rehearsal::InProcess)
            .await
            .map_err(|e| ServerError::Command(telemetry::error_chain(&e))),
    }
}

/// The rehearsal tools start Claimcheck through this binary's own `serve`, in this process.
#[cfg(feature = "rehearsal")]
mod rehearsal {
    use std::future::Future;
    use std::pin::Pin;

    use claimcheck_server::config::flags::ServeArgs;
    use claimcheck_server::{Application, shutdown};
    use claimcheck_sim::{Host, Instance, ServeFuture, SimError};
    use clap::{Args, FromArgMatches};

    pub struct InProcess;

    impl Host for InProcess {
        fn serve(&self, args: Vec<String>) -> ServeFuture {
            Box::pin(async move {
                let command = ServeArgs::augment_args(clap::Command::new("serve"));
                let matches = command
                    .try_get_matches_from(std::iter::once("serve".to_owned()).chain(args))
                    .map_err(|e| SimError::Serve(e.into()))?;
                let args =
                    ServeArgs::from_arg_matches(&matches).map_err(|e| SimError::Serve(e.into()))?;
                let config = args.into_config().map_err(|e| SimError::Serve(e.into()))?;
                let app = Application::build(config)
                    .await
                    .map_err(|e| SimError::Serve(e.into()))?;
                Ok(Instance::spawn(app.local_addr(), |stopped| async move {
                    app.run_until(async {
                        let _ = stopped.await;
                    })
                    .await
                    .map_err(|e| SimError::Serve(e.into()))
                }))
            })
        }

        fn stop_signal(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
            Box::pin(shutdown::signal())
        }
    }
}
