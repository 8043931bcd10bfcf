//! The command line: `serve` and the production commands (and, with the `rehearsal`
//! feature, the simulator, demo and benches). The flags shared by several commands are in
//! `config::flags`.

use clap::{Parser, Subcommand};

use crate::commands::{
    alerts, claims, customers, operators, orders, reconcile, subscriptions, tokens,
};
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
    Migrate(crate::commands::migrate::MigrateArgs),
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
    /// Subscriptions as Stripe Billing's events left them, with each period's grants.
    Subscriptions {
        #[command(subcommand)]
        command: subscriptions::SubscriptionsCommand,
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
    /// Ask the server on this host whether it is ready (GET /readyz): exit 0 if it is, 1
    /// with its reason if not. A container image's HEALTHCHECK.
    Healthcheck(crate::commands::healthcheck::HealthcheckArgs),
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

    /// One row of the README's configuration table: variable, flag, default.
    struct Row {
        variable: String,
        flag: String,
        default: String,
    }

    /// The rows of the table under "## Configuration".
    fn readme_rows() -> Vec<Row> {
        const README: &str = include_str!("../../README.md");
        let section = README
            .split("\n## Configuration\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("the README has a Configuration section");
        section
            .lines()
            .filter(|line| line.starts_with("| `"))
            .map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let code = |cell: &str| cell.trim_matches('`').to_owned();
                Row {
                    variable: code(cells[1]),
                    flag: code(cells[2]),
                    default: cells[3].to_owned(),
                }
            })
            .collect()
    }

    /// What the README says of a default, as clap would print it: the value in backticks the
    /// cell starts with; `None` for `none` (nothing set, which clap may spell as no default
    /// or an empty one) and for a default written in words (computed at start-up).
    fn readme_default(cell: &str) -> Option<String> {
        match cell {
            "none" => None,
            "empty" => Some(String::new()),
            _ if cell.starts_with('`') => cell.split('`').nth(1).map(str::to_owned),
            _ => None,
        }
    }

    /// Every setting of `serve` (and the global ones) is a row of the README's table with the
    /// same variable, flag and default, and every row is a setting: the table is held to the
    /// command line.
    #[test]
    fn the_readme_configuration_table_is_the_command_line() {
        let cli = Cli::command();
        let serve = cli
            .find_subcommand("serve")
            .expect("the serve command")
            .clone();
        let rows = readme_rows();
        let mut seen = Vec::new();
        for arg in serve.get_arguments().chain(cli.get_arguments()) {
            let Some(env) = arg.get_env().and_then(|e| e.to_str()) else {
                continue;
            };
            let row = rows
                .iter()
                .find(|row| row.variable == env)
                .unwrap_or_else(|| panic!("{env} is not in the README's configuration table"));
            let flag = format!("--{}", arg.get_long().unwrap_or_default());
            assert_eq!(row.flag, flag, "the flag of {env}");
            let defaults: Vec<String> = arg
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let code_default = defaults
                .first()
                .cloned()
                .filter(|d| !d.is_empty() || row.default != "none");
            assert_eq!(
                code_default,
                readme_default(&row.default),
                "the default of {env} (README: {})",
                row.default
            );
            seen.push(env.to_owned());
        }
        for row in &rows {
            // RUST_LOG is read by the log filter, not by clap.
            if row.variable != "RUST_LOG" {
                assert!(
                    seen.contains(&row.variable),
                    "{} is in the README but no setting reads it",
                    row.variable
                );
            }
        }
    }
}
