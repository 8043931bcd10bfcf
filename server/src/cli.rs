//! The command line: every setting has a flag and an environment variable, and a default
//! that works out of the box.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use claimcheck_core::{DatabaseUrl, Store, StoreOptions};

use crate::error::ServerError;
use crate::startup::ServeConfig;

#[derive(Debug, Parser)]
#[command(name = "claimcheck", version, about = "Takes Stripe payments safely: every paid order fulfilled exactly once.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the Stripe webhook endpoint and the operator dashboard.
    Serve(ServeArgs),
    /// Apply the database migrations and exit.
    Migrate(DatabaseArgs),
}

#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Where claims, orders and the ledger live: sqlite://PATH or postgres://USER@HOST/DB.
    #[arg(
        long = "database-url",
        env = "DATABASE_URL",
        value_name = "DATABASE_URL",
        default_value = "sqlite://data/claimcheck.db"
    )]
    pub database_url: DatabaseUrl,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Address and port to listen on.
    #[arg(long, env = "CLAIMCHECK_BIND", value_name = "CLAIMCHECK_BIND", default_value = "127.0.0.1:3000")]
    pub bind: SocketAddr,
    /// Folder holding the built dashboard assets (pkg/claimcheck.js, .wasm, .css).
    #[arg(long, env = "LEPTOS_SITE_ROOT", value_name = "LEPTOS_SITE_ROOT", default_value = "target/site")]
    pub site_root: PathBuf,
}

impl ServeArgs {
    pub fn into_config(self) -> ServeConfig {
        ServeConfig {
            database_url: self.database.database_url,
            bind: self.bind,
            site_root: self.site_root,
        }
    }
}

/// `claimcheck migrate`: brings the schema up to date and says what it did.
pub async fn migrate(args: &DatabaseArgs) -> Result<(), ServerError> {
    let url = &args.database_url;
    let wrap = |source| ServerError::Store {
        url: url.to_string(),
        source,
    };
    let store = Store::connect(url, &StoreOptions::default()).await.map_err(wrap)?;
    let before = store.migration_status().await.map_err(wrap)?;
    store.migrate().await.map_err(wrap)?;
    tracing::info!(
        database = %url,
        applied = before.missing.len(),
        total = before.expected,
        "migrations up to date"
    );
    store.close().await;
    Ok(())
}
