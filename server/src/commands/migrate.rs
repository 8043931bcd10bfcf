//! `claimcheck migrate`: bring the schema up to date.

use crate::config::flags::DatabaseArgs;
use crate::error::ServerError;

/// `claimcheck migrate`: brings the schema up to date and says what it did.
pub async fn run(args: &DatabaseArgs) -> Result<(), ServerError> {
    let wrap = args.error();
    let store = args.connect().await?;
    let before = store.migration_status().await.map_err(&wrap)?;
    store.migrate().await.map_err(&wrap)?;
    tracing::info!(
        database = %args.database_url,
        applied = before.missing.len(),
        total = before.expected,
        "migrations up to date"
    );
    store.close().await;
    Ok(())
}
