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

impl StoreError {
    /// Whether the database was unreachable or busy rather than the query wrong: SQLite's
    /// write lock held too long, PostgreSQL restarting, failing over or refusing connections,
    /// a connection lost, the pool out of connections. Asking again later can succeed.
    pub fn is_transient(&self) -> bool {
        let error = match self {
            StoreError::Query(error) | StoreError::Connect(error) => error,
            StoreError::WriterStopped => return true,
            StoreError::CreateDir { .. } | StoreError::Migrate(_) | StoreError::Corrupt(_) => {
                return false;
            }
        };
        match error {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::Protocol(_) => true,
            sqlx::Error::Database(db) => {
                let code = db.code().unwrap_or_default();
                if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
                    // Connection exceptions (08), serialization failures and deadlocks (40),
                    // insufficient resources (53), operator intervention such as an
                    // administrator's shutdown or a server starting up (57P0x); and any
                    // error that ended the connection (FATAL: a database not accepting
                    // connections, say).
                    use sqlx::postgres::PgSeverity;
                    matches!(pg.severity(), PgSeverity::Fatal | PgSeverity::Panic)
                        || ["08", "40", "53", "57P0"]
                            .iter()
                            .any(|class| code.starts_with(class))
                } else {
                    // SQLite: SQLITE_BUSY (5) and SQLITE_LOCKED (6), extended codes included.
                    code.parse::<i32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
                }
            }
            _ => false,
        }
    }
}
