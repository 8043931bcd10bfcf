//! The command line: `serve` and the production commands (and, with the `rehearsal`
//! feature, the simulator, demo and benches). The flags shared by several commands are in
//! `config::flags`.

use clap::{Parser, Subcommand};

use crate::commands::{alerts, claims, customers, operators, orders, reconcile, tokens};
use crate::config::flags::{DatabaseArgs, ServeArgs};
use crate::telemetry::LogFormat;

#[derive(Debug, Parser)]
#[command(
    name = "claimcheck",
    version,
    about = "Takes Stripe payments safely: every paid order fulfilled exactly once."
)]
pub struct Cli {
    /// How log lines (on stderr) are written: text, or json (one object per line).
    #[arg(
        long = "log-format",
        env = "CLAIMCHECK_LOG_FORMAT",
        value_name = "CLAIMCHECK_LOG_FORMAT",
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Stripe webhook endpoint and the operator dashboard.
    Serve(Box<ServeArgs>),
    /// Apply the database migrations and exit.
    Migrate(DatabaseArgs),
    /// Inspect claims on Stripe events, and re-drive a stuck one.
    Claims {
        #[command(subcommand)]
        command: claims::ClaimsCommand,
    },
    /// Inspect an order: payment status, credits granted, ledger.
    Orders {
        #[command(subcommand)]
        command: orders::OrdersCommand,
    },
    /// Manage dashboard operators (viewer, support, admin).
    Operator {
        #[command(subcommand)]
        command: operators::OperatorCommand,
    },
    /// Make, list and revoke API tokens for the order API.
    Tokens {
        #[command(subcommand)]
        command: tokens::TokensCommand,
    },
    /// Inspect a customer's orders and credit balance.
    Customers {
        #[command(subcommand)]
        command: customers::CustomersCommand,
    },
    /// List Stripe's events since the reconciler's cursor (or --since) and claim the ones
    /// never delivered, through the same path as a delivery.
    Reconcile(reconcile::ReconcileArgs),
    /// Send a test alert to every configured channel, or list open and recent alerts.
    Alerts {
        #[command(subcommand)]
        command: alerts::AlertsCommand,
    },
    /// Copy a SQLite database, consistently, while it is in use (PostgreSQL: use pg_dump).
    Backup {
        /// The file to write; it must not exist yet.
        #[arg(long = "to", value_name = "FILE")]
        to: std::path::PathBuf,
        #[command(flatten)]
        database: DatabaseArgs,
    },
    /// The rehearsal tools: the Stripe API simulator, simulated traffic, the demo and the
    /// benchmarks (left out of a build without the `rehearsal` feature).
    #[cfg(feature = "rehearsal")]
    #[command(flatten)]
    Rehearsal(claimcheck_sim::Command),
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }
}
