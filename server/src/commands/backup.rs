//! `claimcheck backup`: a consistent copy of a SQLite database while it serves.

use super::output::print;
use crate::config::flags::DatabaseArgs;
use crate::error::ServerError;

/// `claimcheck backup --to FILE`: a consistent copy of a SQLite database taken while it
/// serves (`VACUUM INTO`), and how to restore it.
pub async fn run(to: &std::path::Path, database: &DatabaseArgs) -> Result<(), ServerError> {
    if database.database_url.backend() == claimcheck_core::Backend::Postgres {
        return Err(ServerError::Command(
            "backups of PostgreSQL are taken with its own tools: pg_dump --format=custom \
             --file=claimcheck.dump \"$DATABASE_URL\" (restore with pg_restore --clean)"
                .into(),
        ));
    }
    if to.exists() {
        return Err(ServerError::Command(format!(
            "{} exists already; a backup never overwrites a file",
            to.display()
        )));
    }
    let target = to
        .to_str()
        .ok_or_else(|| ServerError::Command("the backup path is not valid UTF-8".into()))?;
    let store = database.connect().await?;
    store.backup_into(target).await.map_err(database.error())?;
    store.close().await;
    print(&format!(
        "backup written to {target}\nto restore: stop claimcheck, replace the database file \
         with a copy of it (and delete the database's -wal and -shm files), start claimcheck"
    ));
    Ok(())
}
