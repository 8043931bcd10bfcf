//! The production commands besides `serve`, one file per group. They use the same database
//! as the server (DATABASE_URL) and the operations in `claimcheck_core::ops`; what they print
//! is in [`output`].

pub mod alerts;
pub mod backup;
mod bulk_redrive;
pub mod claims;
pub mod customers;
pub mod healthcheck;
pub mod migrate;
pub mod operators;
pub mod orders;
mod output;
pub mod reconcile;
pub mod subscriptions;
pub mod tokens;

use claimcheck_core::Store;

use crate::config::flags::DatabaseArgs;
use crate::error::ServerError;

/// Opens the database the server uses, bringing its schema up to date.
async fn open(database: &DatabaseArgs) -> Result<Store, ServerError> {
    let store = database.connect().await?;
    store.migrate().await.map_err(database.error())?;
    Ok(store)
}
