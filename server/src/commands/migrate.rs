//! `claimcheck migrate`: bring the schema up to date, or say where it stands.

use clap::Args;

use crate::commands::output::{Output, print, print_list};
use crate::config::flags::DatabaseArgs;
use crate::error::ServerError;

#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// List the migrations, applied and pending, and change nothing (with --json: as JSON).
    #[arg(long)]
    pub status: bool,
    #[command(flatten)]
    pub output: Output,
}

/// `claimcheck migrate`: brings the schema up to date and says what it did; with `--status`
/// lists every migration (applied, pending, or applied by a newer version) instead.
pub async fn run(args: &MigrateArgs) -> Result<(), ServerError> {
    let database = &args.database;
    let wrap = database.error();
    let store = database.connect().await?;
    if args.status {
        let rows = store.migrations().await.map_err(&wrap)?;
        store.close().await;
        print_list(
            &args.output,
            &rows,
            &["version", "migration", "state"],
            |row| {
                let state = match (&row.applied_on, row.known) {
                    (None, _) => "pending".to_owned(),
                    (Some(on), true) => format!("applied {on}"),
                    (Some(on), false) => format!("applied {on} by a newer version"),
                };
                vec![
                    format!("{:04}", row.version),
                    row.description.clone(),
                    state,
                ]
            },
        )?;
        if !args.output.json {
            let pending = rows.iter().filter(|r| r.applied_on.is_none()).count();
            print(&format!(
                "{} applied, {pending} pending",
                rows.len() - pending
            ));
        }
        return Ok(());
    }
    let before = store.migration_status().await.map_err(&wrap)?;
    store.migrate().await.map_err(&wrap)?;
    tracing::info!(
        database = %database.database_url,
        applied = before.missing.len(),
        total = before.expected,
        "migrations up to date"
    );
    store.close().await;
    Ok(())
}
