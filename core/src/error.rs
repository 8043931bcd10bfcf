//! The engine's storage error.

/// What went wrong talking to the database. Callers at the edge turn it into a response
/// (usually "unavailable, retry") and log it once, with its cause.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the folder for the SQLite file {path}")]
    CreateDir {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot connect to the database")]
    Connect(#[source] sqlx::Error),
    #[error("cannot apply the database migrations")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database query failed")]
    Query(#[from] sqlx::Error),
    #[error("the database writer has stopped")]
    WriterStopped,
    #[error("the database holds a value this version does not understand: {0}")]
    Corrupt(String),
}
